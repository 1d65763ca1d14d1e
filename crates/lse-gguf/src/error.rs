//! The crate's error type: every message is one line starting with "gguf:".

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("gguf: cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("gguf: not a GGUF file (the first bytes are {found:?}, expected \"GGUF\")")]
    BadMagic { found: Vec<u8> },

    #[error("gguf: unsupported GGUF version {0} (versions 2 and 3 are supported)")]
    UnsupportedVersion(u32),

    #[error("gguf: truncated file: {what} needs {need} bytes at offset {offset} but the file has {file_len}")]
    Truncated {
        what: String,
        need: u64,
        offset: u64,
        file_len: u64,
    },

    #[error("gguf: truncated or corrupt file: {what} count {count} at offset {offset} needs at least {need} bytes but only {remaining} remain")]
    CountTooLarge {
        what: String,
        count: u64,
        offset: u64,
        need: u128,
        remaining: u64,
    },

    #[error("gguf: metadata key '{key}' has unknown value type id {id}")]
    UnknownValueType { key: String, id: u32 },

    #[error("gguf: metadata key '{key}': arrays nested deeper than {max_depth} levels")]
    NestingTooDeep { key: String, max_depth: usize },

    #[error("gguf: duplicate metadata key '{0}'")]
    DuplicateKey(String),

    #[error("gguf: metadata key '{key}': {reason}")]
    BadMetadata { key: String, reason: String },

    #[error("gguf: tensor '{tensor}' has unknown type id {id}")]
    UnknownTensorType { tensor: String, id: u32 },

    #[error("gguf: tensor '{tensor}' has invalid shape: {reason}")]
    BadShape { tensor: String, reason: String },

    #[error("gguf: tensor '{tensor}' has invalid data offset: {reason}")]
    BadOffset { tensor: String, reason: String },

    #[error("gguf: duplicate tensor name '{0}'")]
    DuplicateTensor(String),

    #[error("gguf: split model: {0}")]
    Split(String),

    #[error("gguf writer: {0}")]
    Writer(String),
}
