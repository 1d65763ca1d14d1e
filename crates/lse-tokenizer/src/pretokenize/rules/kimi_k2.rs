//! Kimi K2: one expression standing for its hand-written splitter (Han runs, then GPT-4o-style
//! words without Han).

pub const EXPRESSIONS: &[&str] = &[
    "\\p{Han}+",
];
