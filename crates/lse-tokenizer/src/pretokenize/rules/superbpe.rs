//! SuperBPE: number runs, cut before every group of three digits from the right.

pub const EXPRESSIONS: &[&str] = &[
    "\\p{N}+",
    "(?=(\\d{3})+(?!\\d))",
];
