//! llama.cpp-exact tokenizers (BPE with pre-tokenizers, SentencePiece) built from a GGUF vocabulary.
//!
//! [`Tokenizer::from_gguf`] reads the vocabulary the way llama.cpp does (defaults per tokenizer
//! model and pre-type, then the file's overrides) and refuses a pre-tokenizer type it does not
//! know rather than guessing. [`Tokenizer::tokenize`] reproduces `llama_tokenize`: special-token
//! splitting first, then SentencePiece or byte-level BPE per text fragment.

mod bpe;
mod bytes;
mod error;
mod hash;
pub mod pretokenize;
mod special;
mod spm;
pub mod unicode;
mod vocab;

use lse_gguf::GgufFile;

pub use error::TokenizerError;
pub use vocab::attr;

use special::Fragment;
use vocab::{ModelKind, Vocab};

/// A vocabulary and the tokenizer it drives.
pub struct Tokenizer {
    vocab: Vocab,
    bpe: Option<bpe::Bpe>,
    spm_byte_tokens: [Option<u32>; 256],
    /// SentencePiece: where fragments may be merged in separate segments (see `spm::cut_rule`).
    spm_cut: Option<Vec<Vec<u8>>>,
    /// Decoded bytes of every token (see [`Tokenizer::token_bytes`]).
    pieces: Vec<Vec<u8>>,
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(f: &GgufFile) -> Result<Tokenizer, TokenizerError> {
        let (vocab, merges) = Vocab::from_gguf(f)?;
        let bpe = match vocab.kind {
            ModelKind::Bpe(_) => Some(bpe::Bpe::new(&vocab, &merges)),
            ModelKind::Spm => None,
        };
        let spm_byte_tokens = spm::byte_tokens(&vocab);
        let spm_cut = if vocab.kind == ModelKind::Spm {
            spm::cut_rule(&vocab)
        } else {
            None
        };
        let pieces = (0..vocab.n_tokens())
            .map(|id| decode_piece(&vocab, id))
            .collect();
        Ok(Tokenizer {
            vocab,
            bpe,
            spm_byte_tokens,
            spm_cut,
            pieces,
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
        if add_special && v.add_bos {
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
                            for (s, e) in pre.split(piece) {
                                bpe.tokenize_word(
                                    v,
                                    &piece.as_bytes()[s..e],
                                    &mut out,
                                    &mut scratch,
                                );
                            }
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && v.add_eos {
            out.extend(v.eos);
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

    pub fn eos_id(&self) -> Option<u32> {
        self.vocab.eos
    }

    /// The bytes a token stands for: byte-level BPE characters and SentencePiece `▁`/`<0xXX>`
    /// tokens decoded; CONTROL, USER_DEFINED and UNKNOWN tokens as their text; unused or
    /// undefined tokens as nothing. Ids out of range give an empty slice.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.pieces
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The token's text as stored in the vocabulary.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.texts.get(id as usize).map(String::as_str)
    }

    /// The token's attributes (bits of [`attr`]).
    pub fn token_attr(&self, id: u32) -> u32 {
        self.vocab.attrs.get(id as usize).copied().unwrap_or(0)
    }

    /// The pre-tokenizer of a BPE vocabulary (None for SentencePiece).
    pub fn pre_tokenizer(&self) -> Option<pretokenize::PreTokenizer> {
        match self.vocab.kind {
            ModelKind::Bpe(p) => Some(p),
            ModelKind::Spm => None,
        }
    }
}

/// What `llama_token_to_piece(id, special = true)` writes for a token.
fn decode_piece(v: &Vocab, id: usize) -> Vec<u8> {
    let a = v.attrs[id];
    let text = &v.texts[id];
    if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
        return text.as_bytes().to_vec();
    }
    if a & attr::NORMAL != 0 {
        return match v.kind {
            ModelKind::Spm => text.replace('\u{2581}', " ").into_bytes(),
            ModelKind::Bpe(_) => bytes::decode(text),
        };
    }
    if a & attr::BYTE != 0 {
        let hex = text.get(3..5).and_then(|h| u8::from_str_radix(h, 16).ok());
        return hex.map(|b| vec![b]).unwrap_or_default();
    }
    Vec::new()
}
