//! Gemma 4 and Sarvam (SentencePiece-style BPE): runs of newlines and runs of everything else.

pub const EXPRESSIONS: &[&str] = &[
    "[^\\n]+|[\\n]+",
];
