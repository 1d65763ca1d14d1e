//! StarCoder and relatives (Refact, Command-R, SmolLM, ...): every digit alone, then the GPT-2
//! rules.

pub const EXPRESSIONS: &[&str] = &[
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
];
