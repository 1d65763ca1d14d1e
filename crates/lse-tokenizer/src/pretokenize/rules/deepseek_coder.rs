//! DeepSeek Coder: newlines, letter runs, punctuation runs, CJK runs, single digits.

pub const EXPRESSIONS: &[&str] = &[
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}",
];
