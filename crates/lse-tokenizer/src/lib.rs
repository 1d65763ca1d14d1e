//! llama.cpp-exact tokenizers (SentencePiece, BPE with pre-tokenizers, WordPiece, Unigram, RWKV)
//! built from a GGUF vocabulary.
//!
//! [`Tokenizer::from_gguf`] reads the vocabulary the way llama.cpp does (defaults per tokenizer
//! model and pre-type, then the file's overrides) and refuses a tokenizer model or pre-tokenizer
//! type it does not know rather than guessing. [`Tokenizer::tokenize`] reproduces
//! `llama_tokenize`: special-token splitting first, then the model's tokenizer per text fragment.
//! [`Tokenizer::token_to_piece`] and [`Tokenizer::detokenize`] reproduce `llama_token_to_piece`
//! and `llama_detokenize`.

mod bpe;
mod bpe_text;
mod bytes;
mod detokenize;
mod error;
mod hash;
mod piece;
pub mod pretokenize;
mod rwkv;
mod special;
mod spm;
mod texts;
mod token_index;
mod trie;
mod ugm;
mod wpm;
pub mod unicode;
mod vocab;

use lse_gguf::GgufFile;

pub use error::TokenizerError;
pub use vocab::{attr, VOCAB_ARRAY_KEYS};

use special::Fragment;
use vocab::{ModelKind, Vocab};

/// A vocabulary's fill-in-the-middle tokens: prefix, suffix and middle markers, and the padding,
/// repository-name and file-separator tokens of repository-level prompts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FimTokens {
    pub pre: Option<u32>,
    pub suf: Option<u32>,
    pub mid: Option<u32>,
    pub pad: Option<u32>,
    pub rep: Option<u32>,
    pub sep: Option<u32>,
}

/// A vocabulary and the tokenizer it drives.
pub struct Tokenizer {
    vocab: Vocab,
    bpe: Option<bpe::Bpe>,
    spm_byte_tokens: [Option<u32>; 256],
    /// SentencePiece: where fragments may be merged in separate segments (see `spm::cut_rule`).
    spm_cut: Option<Vec<Vec<u8>>>,
    rwkv: Option<rwkv::Rwkv>,
    wpm: Option<wpm::Wpm>,
    ugm: Option<ugm::Ugm>,
    /// Decoded bytes of every token (see [`Tokenizer::token_bytes`]).
    pieces: Vec<Vec<u8>>,
    /// Token ids by the first byte of their piece (see [`Tokenizer::ids_by_first_byte`]).
    by_first_byte: std::sync::OnceLock<Vec<Vec<u32>>>,
    /// See [`Tokenizer::json_string_chars`].
    string_chars: std::sync::OnceLock<Vec<u16>>,
}

/// [`Tokenizer::json_string_chars`] of a token that cannot stand as it is inside a JSON string.
pub const NOT_STRING_SAFE: u16 = u16::MAX;

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(f: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let (vocab, merges) = Vocab::from_gguf(f)?;
        let bpe = match vocab.kind {
            ModelKind::Bpe(pre) => Some(bpe::Bpe::new(
                &vocab,
                &merges,
                !pre.byte_encoded(),
                vocab.newline_words,
            )),
            _ => None,
        };
        let rwkv = (vocab.kind == ModelKind::Rwkv).then(|| rwkv::Rwkv::new(&vocab));
        let wpm = (vocab.kind == ModelKind::Wpm).then(|| wpm::Wpm::new(&vocab));
        let ugm = (vocab.kind == ModelKind::Ugm).then(|| ugm::Ugm::new(&vocab));
        let spm_byte_tokens = spm::byte_tokens(&vocab);
        let spm_cut = if vocab.kind == ModelKind::Spm {
            spm::cut_rule(&vocab)
        } else {
            None
        };
        let pieces = (0..vocab.n_tokens() as u32)
            .map(|id| piece::render(&vocab, id))
            .collect();
        Ok(Tokenizer {
            vocab,
            bpe,
            spm_byte_tokens,
            spm_cut,
            rwkv,
            wpm,
            ugm,
            pieces,
            by_first_byte: std::sync::OnceLock::new(),
            string_chars: std::sync::OnceLock::new(),
        })
    }

    /// Token ids of `text`, as `llama_tokenize(text, add_special, parse_special)` returns them.
    /// `add_special` adds BOS/EOS as the vocabulary asks; `parse_special` lets the text of CONTROL
    /// tokens (`<s>`, `<|im_start|>`, ...) become those tokens. USER_DEFINED tokens are always
    /// matched.
    pub fn tokenize(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let v = &self.vocab;
        let fragments = special::partition(v, text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        // WordPiece always frames the text with BOS (CLS) and SEP; RWKV adds nothing
        let (bos, eos) = match v.kind {
            ModelKind::Wpm => (true, false),
            ModelKind::Rwkv => (false, false),
            _ => (v.add_bos, v.add_eos),
        };
        if add_special && bos {
            out.extend(v.bos);
        }
        match v.kind {
            ModelKind::Spm => {
                let mut buf = Vec::new();
                let mut scratch = spm::Scratch::default();
                let mut prev_special = true;
                for frag in fragments {
                    match frag {
                        Fragment::Text(a, b) => {
                            spm::escape_spaces(
                                &text[a..b],
                                v.add_space_prefix && prev_special,
                                &mut buf,
                            );
                            spm::tokenize(
                                v,
                                &self.spm_byte_tokens,
                                self.spm_cut.as_deref(),
                                &buf,
                                &mut out,
                                &mut scratch,
                            );
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            ModelKind::Bpe(pre) => {
                let bpe = self.bpe.as_ref().expect("BPE vocabulary has merges");
                let mut scratch = bpe::Scratch::default();
                for frag in fragments {
                    match frag {
                        Fragment::Text(a, b) => {
                            let piece = &text[a..b];
                            if v.whitespace_model {
                                for seg in bpe_text::whitespace_segments(piece, v.lowercase) {
                                    bpe_text::tokenize(bpe, v, pre, &seg, &mut out, &mut scratch);
                                }
                            } else if v.escape_whitespaces {
                                let escaped = piece.replace(' ', "\u{2581}");
                                bpe_text::tokenize(bpe, v, pre, &escaped, &mut out, &mut scratch);
                            } else {
                                bpe_text::tokenize(bpe, v, pre, piece, &mut out, &mut scratch);
                            }
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            ModelKind::Rwkv => {
                let rwkv = self.rwkv.as_ref().expect("RWKV trie");
                for frag in fragments {
                    match frag {
                        Fragment::Text(a, b) => rwkv.tokenize(v, &text.as_bytes()[a..b], &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            ModelKind::Wpm => {
                let wpm = self.wpm.as_ref().expect("WordPiece");
                for frag in fragments {
                    match frag {
                        Fragment::Text(a, b) => wpm.tokenize(v, &text[a..b], &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            ModelKind::Ugm => {
                let ugm = self.ugm.as_ref().expect("Unigram");
                for frag in fragments {
                    match frag {
                        Fragment::Text(a, b) => ugm.tokenize(v, &text[a..b], &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && eos {
            out.extend(v.eos);
        }
        if add_special && v.kind == ModelKind::Wpm {
            out.extend(v.sep);
        }
        out
    }

    /// Number of tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.vocab.n_tokens()
    }

    /// Whether tokenizing with `add_special` puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }

    /// Whether tokenizing with `add_special` puts EOS last.
    pub fn add_eos(&self) -> bool {
        self.vocab.add_eos
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.vocab.bos
    }

    /// What loading set aside (special token ids outside the vocabulary), one line each.
    pub fn load_notes(&self) -> &[String] {
        &self.vocab.load_notes
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.vocab.eos
    }

    /// End of turn (from the file, else found by its text, e.g. `<|eot_id|>`, `<|im_end|>`).
    pub fn eot_id(&self) -> Option<u32> {
        self.vocab.eot
    }

    /// End of message (`<|eom_id|>`).
    pub fn eom_id(&self) -> Option<u32> {
        self.vocab.eom
    }

    pub fn pad_id(&self) -> Option<u32> {
        self.vocab.pad
    }

    pub fn sep_id(&self) -> Option<u32> {
        self.vocab.sep
    }

    pub fn unk_id(&self) -> Option<u32> {
        self.vocab.unk
    }

    pub fn mask_id(&self) -> Option<u32> {
        self.vocab.mask
    }

    /// The fill-in-the-middle tokens (from the file, else found by their text as llama.cpp finds them).
    pub fn fim(&self) -> FimTokens {
        let [pre, suf, mid, pad, rep, sep] = self.vocab.fim;
        FimTokens { pre, suf, mid, pad, rep, sep }
    }

    /// Whether tokenizing with `add_special` puts SEP last (WordPiece and some BPE vocabularies).
    pub fn add_sep(&self) -> bool {
        self.vocab.add_sep
    }

    /// The tokens that end generation (llama.cpp's EOG set: EOS, EOT, EOM, FIM pad/repo/separator
    /// and the end-of-turn texts it knows), ascending.
    pub fn eog_ids(&self) -> &[u32] {
        &self.vocab.eog
    }

    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool {
        self.vocab.eog.binary_search(&id).is_ok()
    }

    /// `llama_token_to_piece(id, lstrip = 0, special)`: the bytes a token renders as. With
    /// `special` false, CONTROL and UNKNOWN tokens render as nothing. A piece may be part of a
    /// UTF-8 character. Ids out of range give nothing.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Vec<u8> {
        self.piece(id, special).to_vec()
    }

    /// [`Tokenizer::token_to_piece`] without a copy (JSON mode tries every token's piece).
    pub fn piece(&self, id: u32, special: bool) -> &[u8] {
        detokenize::piece_of(&self.vocab, &self.pieces, id, special)
    }

    /// The token ids whose piece (`special` false) starts with byte `b`, at index `b`, ascending;
    /// tokens that render as nothing are in none. Built on first use.
    pub fn ids_by_first_byte(&self) -> &[Vec<u32>] {
        self.by_first_byte.get_or_init(|| {
            let mut groups = vec![Vec::new(); 256];
            for id in 0..self.pieces.len() as u32 {
                if let Some(&b) = self.piece(id, false).first() {
                    groups[b as usize].push(id);
                }
            }
            groups
        })
    }

    /// Per token id, when its piece (`special` false) is not empty and holds no `"`, `\` or
    /// control byte (it can stand as it is anywhere inside a JSON string), its characters: the
    /// bytes that are not UTF-8 continuations, at most `u16::MAX - 1`; [`NOT_STRING_SAFE`] for
    /// the other tokens. Built on first use.
    pub fn json_string_chars(&self) -> &[u16] {
        self.string_chars.get_or_init(|| {
            (0..self.pieces.len() as u32)
                .map(|id| {
                    let p = self.piece(id, false);
                    if p.is_empty() || p.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
                        return NOT_STRING_SAFE;
                    }
                    p.iter().filter(|&&b| b & 0xC0 != 0x80).count().min(NOT_STRING_SAFE as usize - 1) as u16
                })
                .collect()
        })
    }

    /// `llama_detokenize(ids, remove_special, unparse_special)`: the pieces joined, the space
    /// prefix of SentencePiece-style vocabularies removed from the first one, BOS/EOS the
    /// vocabulary adds dropped when `remove_special`, CONTROL/UNKNOWN tokens rendered only when
    /// `unparse_special`, then llama.cpp's space clean-up for vocabularies that use it.
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        detokenize::detokenize(&self.vocab, &self.pieces, ids, remove_special, unparse_special)
    }

    /// The bytes a token stands for, as `token_to_piece(id, special = true)` renders it, without
    /// a copy: byte-level BPE characters and SentencePiece `▁`/`<0xXX>` tokens decoded; CONTROL,
    /// USER_DEFINED and UNKNOWN tokens as their text; unused or undefined tokens as nothing. Ids
    /// out of range give an empty slice.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.pieces
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The token's text as stored in the vocabulary.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.texts.get(id as usize)
    }

    /// The token's attributes (bits of [`attr`]).
    pub fn token_attr(&self, id: u32) -> u32 {
        self.vocab.attrs.get(id as usize).copied().unwrap_or(0)
    }

    /// The pre-tokenizer of a BPE vocabulary (None for other models).
    pub fn pre_tokenizer(&self) -> Option<pretokenize::PreTokenizer> {
        match self.vocab.kind {
            ModelKind::Bpe(p) => Some(p),
            _ => None,
        }
    }
}
