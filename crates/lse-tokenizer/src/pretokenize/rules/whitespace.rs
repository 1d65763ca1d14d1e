//! The `whitespace` tokenizer: runs of non-whitespace.

pub const EXPRESSIONS: &[&str] = &[
    "\\S+",
];
