//! The engine's error type: one readable line per cause.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error("cannot read model: {0}")]
    Gguf(#[from] lse_gguf::GgufError),
    #[error("model path {0}: {1}")]
    ModelPath(String, String),
    #[error("unsupported architecture '{0}' (supported: {list})", list = crate::arch::SUPPORTED.join(", "))]
    UnsupportedArchitecture(String),
    #[error("model file has no general.architecture key")]
    NoArchitecture,
    #[error("model is missing tensor '{0}'")]
    MissingTensor(String),
    #[error("tensor '{name}' has shape {got:?}, expected {want:?}")]
    ShapeMismatch { name: String, got: Vec<u64>, want: Vec<u64> },
    #[error("tensor '{0}' has type {1}, which has no kernel")]
    UnsupportedTensorType(String, &'static str),
    #[error("model metadata: {0}")]
    Metadata(String),
    #[error("invalid option: {0}")]
    InvalidOption(String),
    #[error("window of {tokens} tokens does not fit the KV capacity of {capacity} (--kv-len)")]
    WindowTooLong { tokens: usize, capacity: usize },
    #[error("the prompt has {tokens} tokens; the context holds {capacity} (--kv-len), leaving no room to generate")]
    PromptTooLong { tokens: usize, capacity: usize },
    #[error("token id {id} at index {index} is outside the vocabulary of {n_vocab}")]
    InvalidToken { id: u32, index: usize, n_vocab: usize },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("numerical error: {0}")]
    NonFinite(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("kernel: {0}")]
    Kernel(String),
    #[error("session file {0}: {1}")]
    SessionFile(String, String),
    #[error("stopped: nobody waits for the answer")]
    Cancelled,
}

/// [`EngineError::InvalidToken`] for the first of `ids` outside a vocabulary of `n_vocab` tokens:
/// the check of prompts, stop ids, embedding inputs, row requests, the server's id fields,
/// scoring input and Python's logits (each caller says whose ids they are).
pub fn check_token_ids(ids: &[u32], n_vocab: usize) -> Result<(), EngineError> {
    match ids.iter().position(|&id| id as usize >= n_vocab) {
        None => Ok(()),
        Some(index) => Err(EngineError::InvalidToken { id: ids[index], index, n_vocab }),
    }
}
