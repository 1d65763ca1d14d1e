//! The crate's error type: every variant displays as one readable line.

use std::path::Path;

/// Everything that can stop a perplexity run. `Display` is one line naming the cause.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A request option has a value outside what is allowed (the message names it and the allowed values).
    #[error("{0}")]
    InvalidOption(String),
    /// An input file (text, tokens, pairs) cannot be read or parsed.
    #[error("{0}")]
    Input(String),
    /// The text holds too few tokens for the plan.
    #[error("{0}")]
    TooShort(String),
    /// A window does not fit the KV capacity.
    #[error("{0}")]
    WindowTooLarge(String),
    /// A KL-divergence base is unreadable, corrupt, or for another run.
    #[error("{0}")]
    KldBase(String),
    /// An output file cannot be written.
    #[error("{0}")]
    Output(String),
    /// The engine failed, or produced a non-finite value.
    #[error("engine error: {0}")]
    Engine(String),
    /// The caller stopped waiting (see `Progress::cancelled`).
    #[error("the run was cancelled")]
    Cancelled,
}

impl EvalError {
    pub(crate) fn io(what: &str, path: &Path, e: &std::io::Error) -> String {
        format!("cannot {what} {}: {}", path.display(), io_reason(e))
    }
}

/// The OS reason of an I/O error without Rust's "(os error N)" suffix.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

pub type Result<T, E = EvalError> = std::result::Result<T, E>;
