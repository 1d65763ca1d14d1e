//! The vocabulary as llama.cpp loads it from GGUF metadata: token texts, scores and attributes,
//! special-token ids, the add-BOS/EOS and space-prefix flags (defaults per model and pre-type,
//! then the file's overrides), and the attribute fix-ups llama.cpp applies by token text.

use lse_gguf::{GgufFile, Value};

use crate::hash::FastMap;
use crate::pretokenize::PreTokenizer;
use crate::TokenizerError;

/// Token attributes (llama.cpp's `llama_token_attr` bits).
pub mod attr {
    pub const UNKNOWN: u32 = 1 << 0;
    pub const UNUSED: u32 = 1 << 1;
    pub const NORMAL: u32 = 1 << 2;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
}

/// Which tokenizer the vocabulary drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// SentencePiece-style (`tokenizer.ggml.model` = `llama`).
    Spm,
    /// Byte-level BPE (`tokenizer.ggml.model` = `gpt2`) with a pre-tokenizer.
    Bpe(PreTokenizer),
}

pub struct Vocab {
    pub kind: ModelKind,
    pub texts: Vec<String>,
    pub scores: Vec<f32>,
    pub attrs: Vec<u32>,
    pub token_to_id: FastMap<Vec<u8>, u32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unk: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    /// BPE: a whole pre-tokenized word that is itself a token is emitted without merging.
    pub ignore_merges: bool,
    /// Ids of CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first.
    pub special_by_length: Vec<u32>,
}

const K_MODEL: &str = "tokenizer.ggml.model";
const K_PRE: &str = "tokenizer.ggml.pre";
const K_TOKENS: &str = "tokenizer.ggml.tokens";
const K_SCORES: &str = "tokenizer.ggml.scores";
const K_TYPES: &str = "tokenizer.ggml.token_type";
const K_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const K_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const K_ADD_SEP: &str = "tokenizer.ggml.add_sep_token";
const K_ADD_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
const K_BOS: &str = "tokenizer.ggml.bos_token_id";
const K_EOS: &str = "tokenizer.ggml.eos_token_id";
const K_SEP: &str = "tokenizer.ggml.seperator_token_id";

/// Settings a pre-type name implies.
struct PreSettings {
    pre: PreTokenizer,
    add_bos: bool,
    ignore_merges: bool,
    no_bos: bool,
}

fn pre_settings(name: &str) -> Result<PreSettings, TokenizerError> {
    use PreTokenizer::*;
    let s = |pre| PreSettings {
        pre,
        add_bos: false,
        ignore_merges: false,
        no_bos: false,
    };
    Ok(match name {
        "" | "default" => s(Default),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => PreSettings {
            pre: Llama3,
            add_bos: true,
            ignore_merges: true,
            no_bos: false,
        },
        "dbrx" | "smaug-bpe" => s(Llama3),
        "chatglm-bpe" => PreSettings {
            pre: Llama3,
            add_bos: false,
            ignore_merges: false,
            no_bos: true,
        },
        "glm4" | "glm5" => PreSettings {
            pre: Llama3,
            add_bos: false,
            ignore_merges: true,
            no_bos: true,
        },
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" | "mpt" | "olmo" | "jais"
        | "trillion" | "granite-docling" => s(Gpt2),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" | "stablelm2" | "hunyuan"
        | "solar-open" => s(Qwen2),
        "qwen35" => s(Qwen35),
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b"
        | "mellum2" => s(DigitsThenGpt2),
        // Known to llama.cpp, with splitting rules not implemented here.
        "minicpm5"
        | "deepseek-llm"
        | "deepseek-coder"
        | "deepseek-v3"
        | "spark2_5"
        | "youtu"
        | "falcon"
        | "jais-2"
        | "gemma4"
        | "granite-embed-multi-311m"
        | "sarvam-moe"
        | "jina-v1-en"
        | "jina-v2-code"
        | "roberta-bpe"
        | "whitespace"
        | "poro-chat"
        | "viking"
        | "tekken"
        | "bloom"
        | "gpt3-finnish"
        | "exaone-moe"
        | "chameleon"
        | "gpt-4o"
        | "llama4"
        | "kanana2"
        | "talkie"
        | "granite-embed-multi-97m"
        | "tiny_aya"
        | "cohere2moe"
        | "superbpe"
        | "bailingmoe"
        | "bailingmoe2"
        | "llada-moe"
        | "seed-coder"
        | "hunyuan-dense"
        | "hy_v4"
        | "joyai-llm"
        | "kimi-k2"
        | "ufakzeka"
        | "grok-2"
        | "afmoe"
        | "laguna"
        | "minimax-m2" => return Err(TokenizerError::UnsupportedPreType(name.to_string())),
        _ => return Err(TokenizerError::UnknownPreType(name.to_string())),
    })
}

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

impl Vocab {
    /// Loads the vocabulary; also returns the BPE merges (empty for SPM).
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

        let mut merges = Vec::new();
        let (kind, mut bos, mut eos, mut unk, mut add_bos, mut add_space_prefix, ignore_merges);
        match model {
            "llama" => {
                // SentencePiece ignores the pre-type.
                kind = ModelKind::Spm;
                (bos, eos, unk) = (Some(1), Some(2), Some(0));
                add_bos = true;
                add_space_prefix = true;
                ignore_merges = false;
            }
            "gpt2" => {
                let settings = pre_settings(pre_name)?;
                let m = string_array(f, "tokenizer.ggml.merges")?
                    .ok_or(TokenizerError::MissingKey("tokenizer.ggml.merges"))?;
                merges = m.into_iter().map(str::to_string).collect();
                kind = ModelKind::Bpe(settings.pre);
                (bos, eos, unk) = (Some(11), Some(11), None);
                if settings.no_bos {
                    bos = None;
                }
                add_bos = settings.add_bos;
                add_space_prefix = false;
                ignore_merges = settings.ignore_merges;
            }
            other => return Err(TokenizerError::UnknownModel(other.to_string())),
        }
        let mut add_eos = false;
        if let Some(v) = get_bool(f, K_ADD_PREFIX)? {
            add_space_prefix = v;
        }

        // tokens, scores, types
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
        let mut texts = Vec::with_capacity(n);
        let mut token_to_id: FastMap<Vec<u8>, u32> = FastMap::default();
        token_to_id.reserve(n);
        for (i, t) in tokens.iter().enumerate() {
            let text = if t.is_empty() {
                format!("[EMPTY_{i}]")
            } else {
                t.to_string()
            };
            if let Some(&first) = token_to_id.get(text.as_bytes()) {
                return Err(TokenizerError::DuplicateToken {
                    text,
                    first,
                    second: i as u32,
                });
            }
            token_to_id.insert(text.as_bytes().to_vec(), i as u32);
            texts.push(text);
        }

        // special token ids: defaults out of range are dropped; file ids out of range are ignored
        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        let from_file = |key: &str, default: Option<u32>| -> Option<u32> {
            match f.get(key).and_then(Value::as_u64) {
                Some(id) if (id as usize) < n => Some(id as u32),
                _ => default,
            }
        };
        bos = from_file(K_BOS, in_range(bos));
        eos = from_file(K_EOS, in_range(eos));
        unk = from_file("tokenizer.ggml.unknown_token_id", in_range(unk));
        let sep = from_file(K_SEP, None);
        let eot = from_file("tokenizer.ggml.eot_token_id", None);
        let eom = from_file("tokenizer.ggml.eom_token_id", None);
        let fim_ids = [
            from_file(
                "tokenizer.ggml.fim_pre_token_id",
                from_file("tokenizer.ggml.prefix_token_id", None),
            ),
            from_file(
                "tokenizer.ggml.fim_suf_token_id",
                from_file("tokenizer.ggml.suffix_token_id", None),
            ),
            from_file(
                "tokenizer.ggml.fim_mid_token_id",
                from_file("tokenizer.ggml.middle_token_id", None),
            ),
            from_file("tokenizer.ggml.fim_pad_token_id", None),
            from_file("tokenizer.ggml.fim_rep_token_id", None),
            from_file("tokenizer.ggml.fim_sep_token_id", None),
        ];

        if let Some(v) = get_bool(f, K_ADD_BOS)? {
            add_bos = v;
        }
        if let Some(v) = get_bool(f, K_ADD_EOS)? {
            add_eos = v;
        }
        let add_sep = get_bool(f, K_ADD_SEP)?.unwrap_or(false);
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
        if add_sep && sep.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: K_ADD_SEP,
                id_key: K_SEP,
            });
        }

        let mut vocab = Vocab {
            kind,
            texts,
            scores,
            attrs,
            token_to_id,
            bos,
            eos,
            unk,
            add_bos,
            add_eos,
            add_space_prefix,
            ignore_merges,
            special_by_length: Vec::new(),
        };
        vocab.fix_attributes(eot.is_some(), eom.is_some(), &fim_ids);
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
        Ok((vocab, merges))
    }

    pub fn n_tokens(&self) -> usize {
        self.texts.len()
    }

    #[inline]
    pub fn lookup(&self, text: &[u8]) -> Option<u32> {
        self.token_to_id.get(text).copied()
    }

    fn id_of(&self, text: &str) -> Option<u32> {
        self.lookup(text.as_bytes())
    }

    fn set_control(&mut self, id: u32) {
        self.attrs[id as usize] |= attr::CONTROL;
    }

    /// llama.cpp marks tokens as control (or user-defined, or normal) by their text, whatever the
    /// file says; these marks decide which tokens special-token splitting looks for.
    fn fix_attributes(&mut self, eot_set: bool, eom_set: bool, fim_ids: &[Option<u32>; 6]) {
        const EOT: &[&str] = &[
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "<|end_of_text|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "<｜end▁of▁sentence｜>",
            "<end_of_utterance>",
        ];
        const FIM: [&[&str]; 6] = [
            &[
                "<|fim_prefix|>",
                "<fim-prefix>",
                "<fim_prefix>",
                "<｜fim▁begin｜>",
                "<PRE>",
                "▁<PRE>",
                "<|code_prefix|>",
                "<|prefix|>",
            ],
            &[
                "<|fim_suffix|>",
                "<fim-suffix>",
                "<fim_suffix>",
                "<｜fim▁hole｜>",
                "<SUF>",
                "▁<SUF>",
                "<|code_suffix|>",
                "<|suffix|>",
            ],
            &[
                "<|fim_middle|>",
                "<fim-middle>",
                "<fim_middle>",
                "<｜fim▁end｜>",
                "<MID>",
                "▁<MID>",
                "<|code_middle|>",
                "<|middle|>",
            ],
            &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
            &[
                "<|fim_repo|>",
                "<|repo_name|>",
                "<fim-repo>",
                "<REPO>",
                "<reponame>",
            ],
            &["<|file_sep|>"],
        ];
        const EOG: &[&str] = &[
            "<|eot_id|>",
            "<|im_end|>",
            "<|end|>",
            "<|return|>",
            "<|call|>",
            "<|flush|>",
            "<|calls|>",
            "<end_of_turn>",
            "<|endoftext|>",
            "</s>",
            "<|eom_id|>",
            "<EOT>",
            "_<EOT>",
            "[EOT]",
            "[EOS]",
            "<|end_of_text|>",
            "<end_of_utterance>",
            "<eos>",
            "<turn|>",
            "<|tool_response>",
            "<｜end▁of▁sentence｜>",
            "[e~[",
        ];
        // llama.cpp takes the first match it meets in hash order; with several candidates present
        // this takes the lowest id.
        let first_of = |v: &Vocab, names: &[&str]| names.iter().filter_map(|t| v.id_of(t)).min();
        if !eot_set {
            if let Some(id) = first_of(self, EOT) {
                self.set_control(id);
            }
        }
        if !eom_set {
            if let Some(id) = self.id_of("<|eom_id|>") {
                self.set_control(id);
            }
        }
        for (names, set) in FIM.iter().zip(fim_ids) {
            if set.is_none() {
                if let Some(id) = first_of(self, names) {
                    self.set_control(id);
                }
            }
        }
        let mut eog: Vec<u32> = EOG.iter().filter_map(|t| self.id_of(t)).collect();
        for &id in &eog {
            self.set_control(id);
        }
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = self.id_of(t) {
                self.attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        eog.extend(self.eos);
        let has = |v: &Vocab, eog: &[u32], t: &str| v.id_of(t).filter(|id| eog.contains(id));
        let (ret, call, calls, flush, end) = (
            has(self, &eog, "<|return|>"),
            has(self, &eog, "<|call|>"),
            has(self, &eog, "<|calls|>"),
            has(self, &eog, "<|flush|>"),
            has(self, &eog, "<|end|>"),
        );
        let has_call = call.is_some() || calls.is_some();
        if let Some(end) = end {
            if has_call && (ret.is_some() || flush.is_some()) {
                self.attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        let marker =
            has(self, &eog, "<|tool_response>").or_else(|| has(self, &eog, "<|plamo:eos|>"));
        if let (Some(_), Some(s)) = (marker, has(self, &eog, "</s>")) {
            self.attrs[s as usize] = attr::NORMAL;
        }
    }
}
