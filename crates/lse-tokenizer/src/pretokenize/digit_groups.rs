//! AFMoE's digit split (llama.cpp also uses it for Tiny Aya's `\d{1,3}(?=(?:\d{3})*\b)`): a run of
//! number codepoints is cut into groups of three from the right. As in llama.cpp, the text before
//! a run is not cut off on its own: it joins the run's first group.

use super::{Cutter, Span, Window};
use crate::unicode::Codepoints;

pub(crate) fn split(cp: &Codepoints, spans: &[Span]) -> Vec<Span> {
    let mut out = Vec::with_capacity(spans.len());
    for &span in spans {
        let w = Window::new(cp, span);
        let mut cut = Cutter::new(&mut out, w.ini);
        let mut pos = w.ini;
        let mut last = w.ini;
        while pos < w.end {
            if !w.flags(pos).is_number() {
                pos += 1;
                continue;
            }
            let start = pos;
            while pos < w.end && w.flags(pos).is_number() {
                pos += 1;
            }
            let count = pos - start;
            let mut at = start;
            if !count.is_multiple_of(3) {
                at += count % 3;
                cut.cut(at);
            }
            while at < start + count {
                at += 3;
                cut.cut(at);
            }
            last = at;
        }
        if last < w.end {
            cut.cut(w.end);
        }
    }
    out
}
