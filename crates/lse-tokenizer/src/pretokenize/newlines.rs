//! `[^\n]+|[\n]+`: runs of newlines and runs of everything else.

use super::Span;
use crate::unicode::Codepoints;

pub(crate) fn split(cp: &Codepoints, spans: &[Span]) -> Vec<Span> {
    let mut out = Vec::with_capacity(spans.len());
    for &(ini, end) in spans {
        let mut pos = ini;
        while pos < end {
            let nl = cp.cpts[pos] == '\n' as u32;
            let start = pos;
            while pos < end && (cp.cpts[pos] == '\n' as u32) == nl {
                pos += 1;
            }
            out.push((start, pos));
        }
    }
    out
}
