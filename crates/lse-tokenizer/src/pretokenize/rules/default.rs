//! llama.cpp's fallback for pre-type `default`: punctuation runs, the GPT-2 rules, number runs,
//! ASCII digit triples.

pub const EXPRESSIONS: &[&str] = &[
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
];
