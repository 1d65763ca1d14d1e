//! Viking: the BLOOM rule, then single digits.

pub const EXPRESSIONS: &[&str] = &[
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    "\\p{N}",
];
