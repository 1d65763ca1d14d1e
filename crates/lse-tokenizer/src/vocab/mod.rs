//! The vocabulary as llama.cpp loads it from GGUF metadata: token texts, scores and attributes,
//! special-token ids, and the flags (defaults per tokenizer model and pre-type, then the file's
//! overrides) that steer tokenizing and detokenizing.

mod pre_types;
mod specials;

use lse_gguf::{GgufFile, Value};

use crate::texts::Texts;
use crate::token_index::TokenIndex;
use crate::pretokenize::PreTokenizer;
use crate::TokenizerError;

pub use pre_types::pre_settings;

/// Token attributes (llama.cpp's `llama_token_attr` bits).
pub mod attr {
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
    pub const NORMALIZED: u32 = 1 << 6;
    /// Special-token matching also swallows the whitespace before the token.
    pub const LSTRIP: u32 = 1 << 7;
    /// Special-token matching also swallows the whitespace after the token.
    pub const RSTRIP: u32 = 1 << 8;
    pub const SINGLE_WORD: u32 = 1 << 9;
}

/// Which tokenizer the vocabulary drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// SentencePiece-style (`tokenizer.ggml.model` = `llama`).
    Spm,
    /// BPE (`gpt2`, `gemma4`, `whitespace`) with a pre-tokenizer.
    Bpe(PreTokenizer),
    /// WordPiece (`bert`).
    Wpm,
    /// Unigram (`t5`).
    Ugm,
    /// RWKV's greedy trie tokenizer (`rwkv`).
    Rwkv,
}

pub struct Vocab {
    pub kind: ModelKind,
    pub texts: Texts,
    pub scores: Vec<f32>,
    pub attrs: Vec<u32>,
    token_index: TokenIndex,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    /// FIM prefix, suffix, middle, pad, repo and file-separator tokens.
    pub fim: [Option<u32>; 6],
    /// Tokens that end generation, ascending.
    pub eog: Vec<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_sep: bool,
    pub add_space_prefix: bool,
    pub remove_extra_whitespaces: bool,
    /// Detokenizing removes spaces before `?!.,` and some contractions.
    pub clean_spaces: bool,
    /// BPE: spaces are `▁` and tokens raw UTF-8 (Gemma 4 style) instead of GPT-2 byte characters.
    pub escape_whitespaces: bool,
    /// BPE: a whole pre-tokenized word that is itself a token is emitted without merging.
    pub ignore_merges: bool,
    /// BPE: a word made only of newlines is looked up whole first (Gemma 4).
    pub newline_words: bool,
    /// BPE (`whitespace` model): the text is cut at whitespace, and lower-cased when `lowercase`,
    /// before pre-tokenizing.
    pub whitespace_model: bool,
    /// WordPiece normalizer: lower-case, strip accents.
    pub lowercase: bool,
    pub strip_accents: bool,
    /// Unigram: SentencePiece's precompiled normalization map, as stored.
    pub precompiled_charsmap: Vec<u8>,
    /// Ids of CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first.
    pub special_by_length: Vec<u32>,
    /// What loading set aside (special token ids outside the vocabulary), one line each, for the
    /// front ends to show as llama.cpp warns of them.
    pub load_notes: Vec<String>,
}

/// The vocabulary-sized metadata arrays a tokenizer copies what it needs from: a loader may drop
/// their parsed values once the tokenizer is built.
pub const VOCAB_ARRAY_KEYS: &[&str] = &[K_TOKENS, K_SCORES, K_TYPES, K_MERGES, K_CHARSMAP];

const K_MODEL: &str = "tokenizer.ggml.model";
const K_MERGES: &str = "tokenizer.ggml.merges";
const K_PRE: &str = "tokenizer.ggml.pre";
const K_TOKENS: &str = "tokenizer.ggml.tokens";
const K_SCORES: &str = "tokenizer.ggml.scores";
const K_TYPES: &str = "tokenizer.ggml.token_type";
const K_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const K_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const K_ADD_SEP: &str = "tokenizer.ggml.add_sep_token";
const K_ADD_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
const K_REMOVE_WS: &str = "tokenizer.ggml.remove_extra_whitespaces";
const K_CHARSMAP: &str = "tokenizer.ggml.precompiled_charsmap";
const K_BOS: &str = "tokenizer.ggml.bos_token_id";
const K_EOS: &str = "tokenizer.ggml.eos_token_id";
const K_SEP: &str = "tokenizer.ggml.seperator_token_id";

fn bad(key: &'static str, reason: impl Into<String>) -> TokenizerError {
    TokenizerError::BadKey {
        key,
        reason: reason.into(),
    }
}

fn get_bool(f: &GgufFile, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match f.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_bool()
            .map(Some)
            .ok_or_else(|| bad(key, "is not a boolean")),
    }
}

fn string_array<'a>(
    f: &'a GgufFile,
    key: &'static str,
) -> Result<Option<Vec<&'a str>>, TokenizerError> {
    let Some(v) = f.get(key) else { return Ok(None) };
    let arr = v.as_array().ok_or_else(|| bad(key, "is not an array"))?;
    arr.iter()
        .map(|x| {
            x.as_str()
                .ok_or_else(|| bad(key, "is not an array of strings"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The model-dependent defaults, before the file's overrides.
struct Defaults {
    kind: ModelKind,
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    sep: Option<u32>,
    pad: Option<u32>,
    mask: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_sep: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
    escape_whitespaces: bool,
    ignore_merges: bool,
    lowercase: bool,
    /// Gemma 4: BOS is added whatever the file says, and newline runs are looked up whole.
    force_bos: bool,
}

fn defaults(model: &str, pre_name: &str) -> Result<Defaults, TokenizerError> {
    let base = |kind| Defaults {
        kind,
        bos: None,
        eos: None,
        unk: None,
        sep: None,
        pad: None,
        mask: None,
        add_bos: false,
        add_eos: false,
        add_sep: false,
        add_space_prefix: false,
        clean_spaces: false,
        escape_whitespaces: true,
        ignore_merges: false,
        lowercase: true,
        force_bos: false,
    };
    Ok(match model {
        "llama" => Defaults {
            bos: Some(1),
            eos: Some(2),
            unk: Some(0),
            add_bos: true,
            add_space_prefix: true,
            ..base(ModelKind::Spm)
        },
        "bert" => Defaults {
            bos: Some(101),
            unk: Some(100),
            sep: Some(102),
            pad: Some(0),
            mask: Some(103),
            add_bos: true,
            add_sep: true,
            clean_spaces: true,
            ..base(ModelKind::Wpm)
        },
        "gpt2" | "gemma4" | "whitespace" => {
            // the gemma4 model always uses the gemma4 rules, whatever the pre-type says
            let pre_name = if model == "gemma4" { "gemma4" } else { pre_name };
            let s = pre_settings(pre_name)?;
            if !s.pre.implemented() {
                return Err(TokenizerError::UnsupportedPreType(pre_name.to_string()));
            }
            let gemma = model == "gemma4";
            Defaults {
                bos: if s.no_bos || gemma { None } else { Some(11) },
                eos: if gemma { None } else { Some(11) },
                add_bos: s.add_bos,
                add_sep: s.add_sep,
                add_space_prefix: false,
                clean_spaces: s.clean_spaces,
                escape_whitespaces: s.escape_whitespaces,
                ignore_merges: s.ignore_merges,
                lowercase: pre_name != "whitespace",
                force_bos: matches!(pre_name, "gemma4" | "granite-embed-multi-311m"),
                ..base(ModelKind::Bpe(s.pre))
            }
        }
        "t5" => Defaults {
            eos: Some(1),
            unk: Some(2),
            pad: Some(0),
            add_eos: true,
            ..base(ModelKind::Ugm)
        },
        "rwkv" => base(ModelKind::Rwkv),
        "no_vocab" | "none" | "test" | "plamo2" | "hybriddna" => {
            return Err(TokenizerError::UnsupportedModel(model.to_string()))
        }
        other => return Err(TokenizerError::UnknownModel(other.to_string())),
    })
}

impl Vocab {
    /// Loads the vocabulary; also returns the BPE merges (empty for other models).
    pub fn from_gguf(f: &GgufFile) -> Result<(Vocab, Vec<String>), TokenizerError> {
        let model = f
            .get(K_MODEL)
            .ok_or(TokenizerError::MissingKey(K_MODEL))?
            .as_str()
            .ok_or_else(|| bad(K_MODEL, "is not a string"))?;
        let pre_name = match f.get(K_PRE) {
            None => "",
            Some(v) => v.as_str().ok_or_else(|| bad(K_PRE, "is not a string"))?,
        };
        let d = defaults(model, pre_name)?;

        let merges = if let ModelKind::Bpe(_) = d.kind {
            string_array(f, K_MERGES)?
                .ok_or(TokenizerError::MissingKey(K_MERGES))?
                .into_iter()
                .map(str::to_string)
                .collect()
        } else {
            Vec::new()
        };
        let add_space_prefix = get_bool(f, K_ADD_PREFIX)?.unwrap_or(d.add_space_prefix);
        let remove_extra_whitespaces = get_bool(f, K_REMOVE_WS)?.unwrap_or(false);
        let precompiled_charsmap = if d.kind == ModelKind::Ugm {
            read_charsmap(f)?
        } else {
            Vec::new()
        };

        let (texts, scores, attrs, token_index) = read_tokens(f)?;
        let n = texts.len();

        // special token ids: defaults out of range are dropped; file ids out of range are ignored
        // (noted, as llama.cpp warns of them)
        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        let notes = std::cell::RefCell::new(Vec::new());
        let from_file = |key: &str, default: Option<u32>| -> Option<u32> {
            match f.get(key).and_then(Value::as_u64) {
                Some(id) if (id as usize) < n => Some(id as u32),
                Some(id) => {
                    let instead = default.map_or("none".to_string(), |d| format!("token {d}"));
                    notes.borrow_mut().push(format!("{key} = {id} is outside the vocabulary of {n} tokens; using {instead}"));
                    default
                }
                None => default,
            }
        };
        let bos = from_file(K_BOS, in_range(d.bos));
        let eos = from_file(K_EOS, in_range(d.eos));
        let unk = from_file("tokenizer.ggml.unknown_token_id", in_range(d.unk));
        let sep = from_file(K_SEP, in_range(d.sep));
        let pad = from_file("tokenizer.ggml.padding_token_id", in_range(d.pad));
        let mask = from_file("tokenizer.ggml.mask_token_id", in_range(d.mask));
        let eot = from_file("tokenizer.ggml.eot_token_id", None);
        let eom = from_file("tokenizer.ggml.eom_token_id", None);
        // the deprecated keys are read after the current ones and win
        let fim = [
            from_file(
                "tokenizer.ggml.prefix_token_id",
                from_file("tokenizer.ggml.fim_pre_token_id", None),
            ),
            from_file(
                "tokenizer.ggml.suffix_token_id",
                from_file("tokenizer.ggml.fim_suf_token_id", None),
            ),
            from_file(
                "tokenizer.ggml.middle_token_id",
                from_file("tokenizer.ggml.fim_mid_token_id", None),
            ),
            from_file("tokenizer.ggml.fim_pad_token_id", None),
            from_file("tokenizer.ggml.fim_rep_token_id", None),
            from_file("tokenizer.ggml.fim_sep_token_id", None),
        ];

        let add_bos = get_bool(f, K_ADD_BOS)?.unwrap_or(d.add_bos) || d.force_bos;
        let add_eos = get_bool(f, K_ADD_EOS)?.unwrap_or(d.add_eos);
        let add_sep = get_bool(f, K_ADD_SEP)?.unwrap_or(d.add_sep);
        let lowercase = match f.get("tokenizer.ggml.normalizer.lowercase") {
            Some(v) => v.as_bool().unwrap_or(d.lowercase),
            None => d.lowercase,
        };
        let strip_accents = match f.get("tokenizer.ggml.normalizer.strip_accents") {
            Some(v) => v.as_bool().unwrap_or(lowercase),
            None => lowercase,
        };
        // tokenizing with add_special would need these
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: K_ADD_BOS,
                id_key: K_BOS,
            });
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: K_ADD_EOS,
                id_key: K_EOS,
            });
        }
        if add_sep && sep.is_none() && d.kind == ModelKind::Wpm {
            return Err(TokenizerError::MissingSpecialToken {
                flag: K_ADD_SEP,
                id_key: K_SEP,
            });
        }

        let mut vocab = Vocab {
            kind: d.kind,
            texts,
            scores,
            attrs,
            token_index,
            bos,
            eos,
            eot,
            eom,
            unk,
            sep,
            pad,
            mask,
            fim,
            eog: Vec::new(),
            add_bos,
            add_eos,
            add_sep,
            add_space_prefix,
            remove_extra_whitespaces,
            clean_spaces: d.clean_spaces,
            escape_whitespaces: d.escape_whitespaces,
            ignore_merges: d.ignore_merges,
            newline_words: d.force_bos,
            whitespace_model: model == "whitespace",
            lowercase,
            strip_accents,
            precompiled_charsmap,
            special_by_length: Vec::new(),
            load_notes: notes.into_inner(),
        };
        vocab.find_specials();
        vocab.special_by_length = (0..n as u32)
            .filter(|&id| {
                vocab.attrs[id as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            })
            .collect();
        vocab.special_by_length.sort_by(|&a, &b| {
            vocab.texts[b as usize]
                .len()
                .cmp(&vocab.texts[a as usize].len())
                .then(a.cmp(&b))
        });
        vocab.set_strip_attributes(f);
        Ok((vocab, merges))
    }

    pub fn n_tokens(&self) -> usize {
        self.texts.len()
    }

    #[inline]
    pub fn lookup(&self, text: &[u8]) -> Option<u32> {
        self.token_index.get(&self.texts, text)
    }

    pub(crate) fn id_of(&self, text: &str) -> Option<u32> {
        self.lookup(text.as_bytes())
    }

    /// The byte a BYTE token stands for, read as llama.cpp does: the hex digits at offset 3.
    pub fn token_byte(&self, id: u32) -> u8 {
        let t = self.texts[id as usize].as_bytes();
        let digits = t.get(3..t.len().min(5)).unwrap_or(&[]);
        let mut v: u32 = 0;
        for &c in digits {
            match (c as char).to_digit(16) {
                Some(d) => v = v * 16 + d,
                None => break,
            }
        }
        v as u8
    }
}

type Tokens = (Texts, Vec<f32>, Vec<u32>, TokenIndex);

fn read_tokens(f: &GgufFile) -> Result<Tokens, TokenizerError> {
    let tokens = string_array(f, K_TOKENS)?.ok_or(TokenizerError::MissingKey(K_TOKENS))?;
    let n = tokens.len();
    let scores: Vec<f32> = match f.get(K_SCORES) {
        None => vec![0.0; n],
        Some(v) => {
            let arr = v
                .as_array()
                .ok_or_else(|| bad(K_SCORES, "is not an array"))?;
            if arr.len() < n {
                return Err(bad(
                    K_SCORES,
                    format!("has {} entries for {} tokens", arr.len(), n),
                ));
            }
            arr[..n]
                .iter()
                .map(|x| match x {
                    Value::F32(s) => Ok(*s),
                    Value::I32(s) => Ok(*s as f32),
                    _ => Err(bad(K_SCORES, "is not an array of f32 or i32")),
                })
                .collect::<Result<_, _>>()?
        }
    };
    let attrs: Vec<u32> = match f.get(K_TYPES) {
        None => vec![attr::NORMAL; n],
        Some(v) => {
            let arr = v
                .as_array()
                .ok_or_else(|| bad(K_TYPES, "is not an array"))?;
            if arr.len() < n {
                return Err(bad(
                    K_TYPES,
                    format!("has {} entries for {} tokens", arr.len(), n),
                ));
            }
            arr[..n]
                .iter()
                .map(|x| match x {
                    Value::I32(t) => Ok(match t {
                        1 => attr::NORMAL,
                        2 => attr::UNKNOWN,
                        3 => attr::CONTROL,
                        4 => attr::USER_DEFINED,
                        5 => attr::UNUSED,
                        6 => attr::BYTE,
                        _ => 0,
                    }),
                    _ => Err(bad(K_TYPES, "is not an array of i32")),
                })
                .collect::<Result<_, _>>()?
        }
    };
    let texts: Texts = tokens.iter().enumerate().map(|(i, t)| if t.is_empty() { std::borrow::Cow::Owned(format!("[EMPTY_{i}]")) } else { std::borrow::Cow::Borrowed(*t) }).collect();
    let mut token_index = TokenIndex::with_capacity(n);
    for i in 0..n as u32 {
        if let Some(first) = token_index.insert(&texts, i) {
            return Err(TokenizerError::DuplicateToken { text: texts[i as usize].to_string(), first, second: i });
        }
    }
    Ok((texts, scores, attrs, token_index))
}

fn read_charsmap(f: &GgufFile) -> Result<Vec<u8>, TokenizerError> {
    let Some(v) = f.get(K_CHARSMAP) else {
        return Ok(Vec::new());
    };
    let arr = v
        .as_array()
        .ok_or_else(|| bad(K_CHARSMAP, "is not an array"))?;
    let bytes = arr
        .iter()
        .map(|x| match x {
            Value::U8(b) => Ok(*b),
            Value::I8(b) => Ok(*b as u8),
            _ => Err(bad(K_CHARSMAP, "is not an array of bytes")),
        })
        .collect::<Result<Vec<u8>, _>>()?;
    if bytes.len() < 4 {
        return Err(bad(K_CHARSMAP, "is too small for its header"));
    }
    let blob = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    if blob.saturating_add(4) >= bytes.len() {
        return Err(bad(K_CHARSMAP, "has a trie larger than itself"));
    }
    Ok(bytes)
}
