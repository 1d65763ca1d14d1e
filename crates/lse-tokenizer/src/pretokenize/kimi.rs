//! Kimi K2's hand-written split (llama.cpp's stand-in for an expression `std::regex` cannot run):
//! Han runs; words of letters other than Han with an optional leading non-letter and an optional
//! contraction; numbers of 1-3 digits; an optional space and a run of other characters with
//! trailing newlines; whitespace ending in a newline; whitespace runs.

use super::{Cutter, Span, Window, OUT_OF_RANGE};
use crate::unicode::{ascii_lower, Codepoints, Flags};

/// The Han ranges llama.cpp checks.
pub fn is_han(c: u32) -> bool {
    matches!(c,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0x2CEB0..=0x2EBEF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

pub(crate) fn split(cp: &Codepoints, spans: &[Span]) -> Vec<Span> {
    let mut out = Vec::with_capacity(spans.len() + cp.len() / 3);
    for &span in spans {
        split_span(&Window::new(cp, span), &mut out);
    }
    out
}

fn split_span(w: &Window, out: &mut Vec<Span>) {
    let mut cut = Cutter::new(out, w.ini);
    let letter = |p: usize| w.flags(p).is_letter() && !is_han(w.cpt(p));
    let mut pos = w.ini;
    while pos < w.end {
        let cpt = w.cpt(pos);
        let flags = w.flags(pos);

        if is_han(cpt) {
            while is_han(w.cpt(pos)) {
                pos += 1;
            }
            cut.cut(pos);
            continue;
        }

        let leading_ok =
            !(cpt == '\r' as u32 || cpt == '\n' as u32 || flags.is_letter() || flags.is_number());
        if letter(pos) || (leading_ok && letter(pos + 1)) {
            let lead = leading_ok;
            if lead {
                pos += 1;
            }
            let mut has_letters = false;
            while letter(pos) {
                has_letters = true;
                pos += 1;
            }
            if has_letters || (!lead && letter(pos)) {
                if !has_letters {
                    pos += 1;
                }
                while letter(pos) {
                    pos += 1;
                }
                if w.cpt(pos) == '\'' as u32 && pos + 1 < w.end {
                    let n1 = ascii_lower(w.cpt(pos + 1));
                    if [b's', b't', b'm', b'd'].iter().any(|&c| n1 == c as u32) {
                        pos += 2;
                    } else if pos + 2 < w.end {
                        let n2 = ascii_lower(w.cpt(pos + 2));
                        let pair = |a: u8, b: u8| n1 == a as u32 && n2 == b as u32;
                        if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                            pos += 3;
                        }
                    }
                }
                cut.cut(pos);
                continue;
            } else if lead {
                pos -= 1;
            }
        }

        if flags.is_number() {
            let mut ini = pos;
            while w.flags(pos).is_number() {
                pos += 1;
                if pos - ini >= 3 {
                    cut.cut(pos);
                    ini = pos;
                }
            }
            cut.cut(pos);
            continue;
        }

        let other = |f: Flags| !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.any();
        let space = cpt == ' ' as u32;
        let mut f2 = if space { w.flags(pos + 1) } else { flags };
        if other(f2) {
            pos += space as usize;
            while other(f2) {
                pos += 1;
                f2 = w.flags(pos);
            }
            while w.cpt(pos) == '\r' as u32 || w.cpt(pos) == '\n' as u32 {
                pos += 1;
            }
            cut.cut(pos);
            continue;
        }

        let mut n_ws = 0;
        let mut last_newline_end = 0;
        while w.flags(pos + n_ws).is_whitespace() {
            let c = w.cpt(pos + n_ws);
            if c == '\r' as u32 || c == '\n' as u32 {
                last_newline_end = pos + n_ws + 1;
            }
            n_ws += 1;
        }
        if last_newline_end > 0 {
            pos = last_newline_end;
            cut.cut(pos);
            continue;
        }
        if n_ws > 1 && w.cpt(pos + n_ws) != OUT_OF_RANGE {
            pos += n_ws - 1;
            cut.cut(pos);
            continue;
        }
        if n_ws > 0 {
            pos += n_ws;
            cut.cut(pos);
            continue;
        }
        pos += 1;
        cut.cut(pos);
    }
}
