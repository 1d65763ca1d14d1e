//! GPT-2's split: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.

use super::{whitespace_or_one, Cutter, Span, Window};
use crate::unicode::{Codepoints, Flags};

/// Splits each span with the GPT-2 rules.
pub(crate) fn split(cp: &Codepoints, spans: &[Span]) -> Vec<Span> {
    let mut out = Vec::with_capacity(spans.len() + cp.len() / 3);
    for &span in spans {
        split_span(&Window::new(cp, span), &mut out);
    }
    out
}

/// A class of "other" characters: neither whitespace, letter nor number, and inside the span.
#[inline]
fn is_other(f: Flags) -> bool {
    !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.any()
}

fn split_span(w: &Window, out: &mut Vec<Span>) {
    let mut cut = Cutter::new(out, w.ini);
    let mut pos = w.ini;
    while pos < w.end {
        let cpt = w.cpt(pos);
        let flags = w.flags(pos);

        // contractions (lower-case only)
        if cpt == '\'' as u32 && pos + 1 < w.end {
            let next = w.cpt(pos + 1);
            if [b's', b't', b'm', b'd'].iter().any(|&c| next == c as u32) {
                pos += cut.cut(pos + 2);
                continue;
            }
            if pos + 2 < w.end {
                let next2 = w.cpt(pos + 2);
                let pair = |a: u8, b: u8| next == a as u32 && next2 == b as u32;
                if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                    pos += cut.cut(pos + 3);
                    continue;
                }
            }
        }

        let space = cpt == ' ' as u32;
        let mut f2 = if space { w.flags(pos + 1) } else { flags };
        // optional space, then letters
        if f2.is_letter() {
            pos += space as usize;
            while f2.is_letter() {
                pos += 1;
                f2 = w.flags(pos);
            }
            cut.cut(pos);
            continue;
        }
        // optional space, then numbers
        if f2.is_number() {
            pos += space as usize;
            while f2.is_number() {
                pos += 1;
                f2 = w.flags(pos);
            }
            cut.cut(pos);
            continue;
        }
        // optional space, then other characters
        if is_other(f2) {
            pos += space as usize;
            while is_other(f2) {
                pos += 1;
                f2 = w.flags(pos);
            }
            cut.cut(pos);
            continue;
        }

        let mut n_ws = 0;
        while w.flags(pos + n_ws).is_whitespace() {
            n_ws += 1;
        }
        pos = whitespace_or_one(w, pos, n_ws, &mut cut);
    }
}
