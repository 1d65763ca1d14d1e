//! BLOOM (and Poro, GPT-3 Finnish): an optional space and a run of anything but whitespace and
//! sentence punctuation.

pub const EXPRESSIONS: &[&str] = &[
    " ?[^(\\s|.,!?…。，、।۔،)]+",
];
