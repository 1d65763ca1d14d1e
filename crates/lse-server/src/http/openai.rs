//! Pieces of OpenAI response bodies shared by the completion routes: ids, timestamps, usage,
//! token strings and the completions `logprobs` object.

use super::generate::Outcome;
use super::scoring::PromptLogprob;
use lse_engine::Engine;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A response id such as `cmpl-1a2b…`.
pub fn response_id(prefix: &str) -> String {
    let n = NEXT_ID.fetch_add(1, Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{prefix}-{:x}{:04x}", t, n)
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// OpenAI's usage object of `outs`, `n` choices per prompt in a row: a prompt counts once (with
/// its most kept tokens among its choices, OpenAI's `prompt_tokens_details.cached_tokens`), every
/// choice's completion counts.
pub fn usage_of(outs: &[Outcome], n: usize) -> Value {
    let prompts = || outs.chunks(n.max(1));
    let prompt: usize = prompts().map(|c| c[0].end.prompt_tokens).sum();
    let cached: usize = prompts().map(|c| c.iter().map(|o| o.end.cached_tokens).max().unwrap_or(0)).sum();
    let completion: usize = outs.iter().map(|o| o.end.completion_tokens).sum();
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
           "prompt_tokens_details": {"cached_tokens": cached}})
}

/// llama-server's `timings` added to OpenAI's answer (or a stream's last chunk) where it has one
/// generation (its routes take one; several choices' times have no one sum, and an answer of
/// the prompt alone none).
pub fn add_timings(v: &mut Value, outs: &[Outcome]) {
    if let [o] = outs {
        if o.end.finish.is_some() {
            v["timings"] = o.end.timings();
        }
    }
}

/// A token's text as llama.cpp's token-to-piece renders it (special tokens shown), lossy UTF-8.
pub fn piece(engine: &Engine, id: u32) -> String {
    String::from_utf8_lossy(&engine.tokenizer().token_to_piece(id, true)).into_owned()
}

/// `{token text: log-prob}`, best first; a text seen twice keeps its first (larger) value.
pub fn top_dict(engine: &Engine, top: &[(u32, f64)]) -> Value {
    let mut m = Map::new();
    for &(id, lp) in top {
        m.entry(piece(engine, id)).or_insert(json!(lp));
    }
    Value::Object(m)
}

/// The completions `logprobs` object, built token by token. `text_offset` counts characters
/// (OpenAI's, vLLM's) of the text the tokens render (special tokens as nothing): a token that
/// ends inside a character leaves it to the next, so offsets never go backwards.
#[derive(Default)]
pub struct LogprobsObject {
    tokens: Vec<Value>,
    token_logprobs: Vec<Value>,
    top_logprobs: Vec<Value>,
    text_offset: Vec<Value>,
    cursor: TextCursor,
}

/// Where the next token starts: characters so far, and the bytes of a character not yet whole.
#[derive(Clone, Debug, Default)]
pub struct TextCursor {
    chars: usize,
    partial: Vec<u8>,
}

impl TextCursor {
    /// At `chars` characters.
    pub fn at(chars: usize) -> TextCursor {
        TextCursor { chars, partial: Vec::new() }
    }

    /// Moves past `bytes`; an invalid sequence counts as the one U+FFFD lossy decoding makes.
    fn advance(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let mut done = 0;
        loop {
            match std::str::from_utf8(&self.partial[done..]) {
                Ok(s) => {
                    self.chars += s.chars().count();
                    done = self.partial.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    self.chars += std::str::from_utf8(&self.partial[done..done + valid]).map_or(0, |s| s.chars().count());
                    done += valid;
                    match e.error_len() {
                        Some(bad) => {
                            self.chars += 1;
                            done += bad;
                        }
                        None => break,
                    }
                }
            }
        }
        self.partial.drain(..done);
    }
}

impl LogprobsObject {
    /// Starts text offsets at `cursor`.
    pub fn at(cursor: TextCursor) -> LogprobsObject {
        LogprobsObject { cursor, ..Default::default() }
    }

    fn push(&mut self, engine: &Engine, id: u32, lp: Option<f64>, top: Option<&[(u32, f64)]>) {
        self.text_offset.push(json!(self.cursor.chars));
        self.cursor.advance(engine.tokenizer().piece(id, false));
        self.push_entry(engine, id, lp, top);
    }

    fn push_entry(&mut self, engine: &Engine, id: u32, lp: Option<f64>, top: Option<&[(u32, f64)]>) {
        self.tokens.push(json!(piece(engine, id)));
        self.token_logprobs.push(lp.map_or(Value::Null, |x| json!(x)));
        self.top_logprobs.push(top.map_or(Value::Null, |t| top_dict(engine, t)));
    }

    /// Where the next token's offset starts (a stream's next chunk resumes there).
    pub fn cursor(&self) -> TextCursor {
        self.cursor.clone()
    }

    /// The echoed prompt: the first token has no log-prob; offsets into `text`, the echo, which
    /// the tokens' text need not spell exactly (see [`prompt_offsets`]). The completion's
    /// offsets go on after it.
    pub fn prompt(&mut self, engine: &Engine, ids: &[u32], text: &str, lps: &[PromptLogprob]) {
        for (i, (&id, at)) in ids.iter().zip(prompt_offsets(engine.tokenizer(), ids, text)).enumerate() {
            self.text_offset.push(json!(self.cursor.chars + at));
            match i.checked_sub(1).and_then(|j| lps.get(j)) {
                Some(l) => self.push_entry(engine, id, Some(l.logprob), Some(&l.top)),
                None => self.push_entry(engine, id, None, None),
            }
        }
        self.cursor = TextCursor::at(self.cursor.chars + text.chars().count());
    }

    /// Generated tokens (an end-of-generation token is listed too, as it was sampled).
    pub fn steps(&mut self, engine: &Engine, steps: &[lse_engine::generation::StepToken]) {
        for s in steps {
            self.push(engine, s.id, Some(s.logprob), Some(&s.top));
        }
    }

    pub fn json(self) -> Value {
        json!({
            "tokens": self.tokens,
            "token_logprobs": self.token_logprobs,
            "top_logprobs": self.top_logprobs,
            "text_offset": self.text_offset,
        })
    }
}

/// Where each prompt token starts in `text`, the prompt it was tokenized from (or detokenized
/// into), in characters: the token's bytes (a special token's text shown) where the text holds
/// them, a SentencePiece word's leading space where the text starts without it; a special token
/// the text does not hold (the BOS the vocabulary adds) takes no room, any other token its
/// bytes' worth (the text's U+FFFD for a split character). Never past the text's end.
fn prompt_offsets(tk: &lse_tokenizer::Tokenizer, ids: &[u32], text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let (mut at, mut chars) = (0, 0);
    let mut whole = text.char_indices().peekable();
    let mut out = Vec::with_capacity(ids.len());
    for &id in ids {
        // the characters wholly before byte `at`
        while let Some(&(i, c)) = whole.peek() {
            if i + c.len_utf8() > at {
                break;
            }
            chars += 1;
            whole.next();
        }
        out.push(chars);
        let (piece, rest) = (tk.piece(id, true), &bytes[at..]);
        let special = tk.piece(id, false).is_empty();
        at += if rest.starts_with(piece) {
            piece.len()
        } else if piece.first() == Some(&b' ') && rest.starts_with(&piece[1..]) {
            piece.len() - 1
        } else if special {
            0
        } else {
            piece.len().min(rest.len())
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::TextCursor;

    #[test]
    fn the_cursor_counts_whole_characters_and_one_per_invalid_sequence() {
        let mut c = TextCursor::at(3);
        // "漢" = e6 bc a2 over two tokens, then "a": the character counts once it is whole
        for (bytes, chars) in [(&[0xe6u8, 0xbc][..], 3), (&[0xa2, b'a'][..], 5), (&[0xff, b'b'][..], 7), (&[0xf0, 0x9f][..], 7), (&[0x99, 0x82][..], 8)] {
            c.advance(bytes);
            assert_eq!(c.chars, chars, "after {bytes:x?}");
        }
        assert!(c.partial.is_empty());
    }
}

#[cfg(test)]
mod offset_tests {
    use super::prompt_offsets;
    use lse_tokenizer::Tokenizer;

    fn vocab(name: &str) -> Tokenizer {
        let f = lse_gguf::GgufFile::open(&lse_testdata::shared(&format!("data/vocab/ggml-vocab-{name}.gguf"))).unwrap();
        Tokenizer::from_gguf(&f).unwrap()
    }

    /// Each token's text is where its offset says in the prompt it came from: a SentencePiece
    /// vocabulary (an added BOS, a first word's leading space the text lacks, byte tokens of
    /// characters it does not hold), a byte-level BPE one (tokens that split a character), and
    /// special-token text written in the prompt.
    #[test]
    fn prompt_offsets_point_into_the_prompt_text() {
        for (name, text) in [("llama-spm", "Hello world, 漢字 🙂 done."), ("qwen2", "Hello world, 漢字 🙂 done."), ("qwen2", "<|im_start|>user\nHi<|im_end|>")] {
            let tk = vocab(name);
            let ids = tk.tokenize(text, true, true);
            let at = prompt_offsets(&tk, &ids, text);
            let chars: Vec<char> = text.chars().collect();
            assert!(at.windows(2).all(|w| w[0] <= w[1]) && *at.last().unwrap() <= chars.len(), "{name}: {at:?}");
            let mut whole = 0;
            for (i, (&id, &a)) in ids.iter().zip(&at).enumerate() {
                let Ok(piece) = std::str::from_utf8(tk.piece(id, true)) else { continue };
                let piece = if a == 0 && i <= 1 { piece.strip_prefix(' ').unwrap_or(piece) } else { piece };
                if piece.is_empty() || !text.contains(piece) {
                    continue; // an added BOS
                }
                let p: Vec<char> = piece.chars().collect();
                assert_eq!(chars[a..a + p.len()], p[..], "{name}: token {i} {piece:?} at {a}");
                whole += 1;
            }
            assert!(whole >= 3, "{name}: {whole} tokens checked");
        }
    }
}
