//! GPT-2 (and MPT, OLMo, Jais, ...): contractions, letter runs, number runs, other runs,
//! whitespace.

pub const EXPRESSIONS: &[&str] = &[
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
];
