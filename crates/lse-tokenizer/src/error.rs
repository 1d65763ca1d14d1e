//! The crate's error type: every message is one line starting with "tokenizer:".

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("tokenizer: the GGUF has no '{0}' (not a vocabulary?)")]
    MissingKey(&'static str),

    #[error("tokenizer: metadata key '{key}' {reason}")]
    BadKey { key: &'static str, reason: String },

    #[error("tokenizer: unknown tokenizer model '{0}' (tokenizer.ggml.model); refusing to guess how to tokenize")]
    UnknownModel(String),

    #[error("tokenizer: tokenizer model '{0}' is known to llama.cpp but not implemented here")]
    UnsupportedModel(String),

    #[error("tokenizer: unknown pre-tokenizer type '{0}' (tokenizer.ggml.pre); refusing to guess how to split text")]
    UnknownPreType(String),

    #[error("tokenizer: pre-tokenizer type '{0}' is known to llama.cpp but not implemented here")]
    UnsupportedPreType(String),

    #[error("tokenizer: duplicate token in vocabulary: '{text}' has ids {first} and {second}")]
    DuplicateToken {
        text: String,
        first: u32,
        second: u32,
    },

    #[error("tokenizer: {flag} is true, but {id_key} is not set")]
    MissingSpecialToken {
        flag: &'static str,
        id_key: &'static str,
    },
}
