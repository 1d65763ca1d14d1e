//! Llama 3 and the types sharing its expression (DBRX, Smaug, ChatGLM 4): contractions, letters
//! with one leading non-letter, numbers of 1-3 digits, punctuation runs, newlines, whitespace.

pub const EXPRESSIONS: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
