//! `\p{N}` as a standalone split: every number codepoint becomes a word of its own, and the text
//! between them is kept as it is.

use super::{regex_walk, Span};
use crate::unicode::Codepoints;

pub(crate) fn each_number(cp: &Codepoints, spans: &[Span]) -> Vec<Span> {
    regex_walk(spans, |pos, _| cp.flags[pos].is_number().then_some(pos + 1))
}
