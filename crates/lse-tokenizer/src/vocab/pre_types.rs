//! What each `tokenizer.ggml.pre` name means to llama.cpp: the splitting rules and the vocabulary
//! flags the name switches on or off (clean-up of spaces when detokenizing, whole-word lookups
//! before merging, BOS, SEP, `▁` for spaces).

use crate::pretokenize::PreTokenizer;
use crate::TokenizerError;

/// Settings a pre-type name implies for a BPE vocabulary.
#[derive(Clone, Copy, Debug)]
pub struct PreSettings {
    pub pre: PreTokenizer,
    /// Detokenization removes the space before punctuation and some contractions.
    pub clean_spaces: bool,
    pub ignore_merges: bool,
    /// Forces `add_bos` on (the file may still turn it off).
    pub add_bos: bool,
    /// Forces `add_sep` on (the file may still turn it off).
    pub add_sep: bool,
    /// The vocabulary has no BOS token by default.
    pub no_bos: bool,
    /// Spaces are written as `▁` and tokens are raw UTF-8 (no GPT-2 byte map).
    pub escape_whitespaces: bool,
}

impl PreSettings {
    fn new(pre: PreTokenizer) -> Self {
        PreSettings {
            pre,
            clean_spaces: true,
            ignore_merges: false,
            add_bos: false,
            add_sep: false,
            no_bos: false,
            escape_whitespaces: false,
        }
    }
    fn no_clean(mut self) -> Self {
        self.clean_spaces = false;
        self
    }
    fn whole_words(mut self) -> Self {
        self.ignore_merges = true;
        self
    }
    fn bos(mut self) -> Self {
        self.add_bos = true;
        self
    }
}

/// The settings of a pre-type name, or an error naming it when llama.cpp does not know it.
pub fn pre_settings(name: &str) -> Result<PreSettings, TokenizerError> {
    use PreTokenizer as P;
    let s = PreSettings::new;
    Ok(match name {
        "" | "default" => s(P::Default),
        "minicpm5" => s(P::MiniCpm5).whole_words(),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => s(P::Llama3).whole_words().bos(),
        "deepseek-llm" => s(P::DeepseekLlm).no_clean(),
        "deepseek-coder" => s(P::DeepseekCoder).no_clean(),
        "deepseek-v3" | "hunyuan-dense" | "hy_v4" | "joyai-llm" => s(P::Deepseek3).no_clean(),
        "spark2_5" => s(P::Spark25).no_clean(),
        "youtu" => s(P::Youtu).no_clean().whole_words(),
        "falcon" => s(P::Falcon),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais" | "exaone4" => s(P::Gpt2),
        "trillion" | "granite-docling" => s(P::Gpt2).no_clean(),
        "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => PreSettings {
            add_sep: true,
            ..s(P::Gpt2)
        },
        "jais-2" => s(P::Jais2),
        "gemma4" | "granite-embed-multi-311m" => PreSettings {
            escape_whitespaces: true,
            ..s(P::Newlines)
        },
        "sarvam-moe" => PreSettings {
            escape_whitespaces: true,
            ..s(P::Newlines)
        }
        .no_clean(),
        "whitespace" => s(P::Whitespace),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
            s(P::DigitsThenGpt2)
        }
        "command-r" | "smollm" => s(P::DigitsThenGpt2).no_clean(),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" | "grok-2" => {
            s(P::Qwen2).no_clean()
        }
        "stablelm2" | "megrez" => s(P::Qwen2),
        "qwen35" => s(P::Qwen35).no_clean(),
        "dbrx" | "smaug-bpe" => s(P::Llama3),
        "chatglm-bpe" => PreSettings {
            no_bos: true,
            ..s(P::Llama3)
        },
        "glm4" | "glm5" => PreSettings {
            no_bos: true,
            ..s(P::Llama3).whole_words()
        },
        "poro-chat" => s(P::Bloom).no_clean(),
        "bloom" | "gpt3-finnish" => s(P::Bloom),
        "viking" => s(P::Viking).no_clean(),
        "tekken" => s(P::Tekken).no_clean().whole_words().bos(),
        "exaone-moe" => s(P::ExaoneMoe),
        "chameleon" => s(P::Chameleon).no_clean().bos(),
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => s(P::Gpt4o).no_clean(),
        "granite-embed-multi-97m" => s(P::GraniteEmbMulti).no_clean().whole_words(),
        "tiny_aya" | "cohere2moe" => s(P::TinyAya).no_clean(),
        "superbpe" => s(P::SuperBpe).no_clean(),
        "bailingmoe" | "bailingmoe2" | "llada-moe" => s(P::BailingMoe).no_clean(),
        "seed-coder" => s(P::SeedCoder).no_clean(),
        "kimi-k2" => s(P::KimiK2).no_clean(),
        "ufakzeka" => s(P::Ufakzeka).no_clean(),
        "afmoe" => s(P::Afmoe).no_clean(),
        "laguna" => s(P::Laguna).no_clean(),
        _ => return Err(TokenizerError::UnknownPreType(name.to_string())),
    })
}
