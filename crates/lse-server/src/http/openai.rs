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
    let prompt: usize = prompts().map(|c| c[0].prompt_tokens).sum();
    let cached: usize = prompts().map(|c| c.iter().map(|o| o.cached_tokens).max().unwrap_or(0)).sum();
    let completion: usize = outs.iter().map(|o| o.completion_tokens).sum();
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
           "prompt_tokens_details": {"cached_tokens": cached}})
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

/// The completions `logprobs` object, built token by token.
#[derive(Default)]
pub struct LogprobsObject {
    tokens: Vec<Value>,
    token_logprobs: Vec<Value>,
    top_logprobs: Vec<Value>,
    text_offset: Vec<Value>,
    offset: usize,
}

impl LogprobsObject {
    /// Starts text offsets at `offset` bytes.
    pub fn at(offset: usize) -> LogprobsObject {
        LogprobsObject { offset, ..Default::default() }
    }

    fn push(&mut self, engine: &Engine, id: u32, lp: Option<f64>, top: Option<&[(u32, f64)]>) {
        let p = piece(engine, id);
        self.text_offset.push(json!(self.offset));
        self.offset += p.len();
        self.tokens.push(json!(p));
        self.token_logprobs.push(lp.map_or(Value::Null, |x| json!(x)));
        self.top_logprobs.push(top.map_or(Value::Null, |t| top_dict(engine, t)));
    }

    /// Continues with text offsets from `offset` (the echoed text may differ from the pieces).
    pub fn with_offset(mut self, offset: usize) -> LogprobsObject {
        self.offset = offset;
        self
    }

    /// The echoed prompt: the first token has no log-prob.
    pub fn prompt(&mut self, engine: &Engine, ids: &[u32], lps: &[PromptLogprob]) {
        for (i, &id) in ids.iter().enumerate() {
            match i.checked_sub(1).and_then(|j| lps.get(j)) {
                Some(l) => self.push(engine, id, Some(l.logprob), Some(&l.top)),
                None => self.push(engine, id, None, None),
            }
        }
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
