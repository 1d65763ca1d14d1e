//! The Llama 3 family of splits:
//! `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! with Qwen2's single digits, and Qwen3.5's combining marks counted with letters.

use super::{whitespace_or_one, Cutter, Span, Window};
use crate::unicode::{ascii_lower, Codepoints, Flags};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Numbers in groups of up to three digits.
    Llama3,
    /// Every digit alone.
    Qwen2,
    /// Every digit alone; letters and combining marks form words together.
    Qwen35,
}

pub(crate) fn split(cp: &Codepoints, spans: &[Span], v: Variant) -> Vec<Span> {
    let mut out = Vec::with_capacity(spans.len() + cp.len() / 3);
    for &span in spans {
        split_span(&Window::new(cp, span), v, &mut out);
    }
    out
}

fn split_span(w: &Window, v: Variant, out: &mut Vec<Span>) {
    let marks = v == Variant::Qwen35;
    let wordish = |f: Flags| f.is_letter() || (marks && f.is_mark());
    let other = |f: Flags| !(f.is_whitespace() || wordish(f) || f.is_number());
    let cr = '\r' as u32;
    let lf = '\n' as u32;

    let mut cut = Cutter::new(out, w.ini);
    let mut pos = w.ini;
    while pos < w.end {
        let cpt = w.cpt(pos);
        let flags = w.flags(pos);

        // contractions, any case
        if cpt == '\'' as u32 && pos + 1 < w.end {
            let next = ascii_lower(w.cpt(pos + 1));
            if [b's', b't', b'm', b'd'].iter().any(|&c| next == c as u32) {
                pos += cut.cut(pos + 2);
                continue;
            }
            if pos + 2 < w.end {
                let next2 = ascii_lower(w.cpt(pos + 2));
                let pair = |a: u8, b: u8| next == a as u32 && next2 == b as u32;
                if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
                    pos += cut.cut(pos + 3);
                    continue;
                }
            }
        }

        // one optional leading character that is not CR/LF/number, then letters
        if !(cpt == cr || cpt == lf || flags.is_number())
            && (wordish(flags) || wordish(w.flags(pos + 1)))
        {
            pos += 1;
            while wordish(w.flags(pos)) {
                pos += 1;
            }
            cut.cut(pos);
            continue;
        }

        if flags.is_number() {
            match v {
                Variant::Llama3 => {
                    let mut ini = pos;
                    while w.flags(pos).is_number() {
                        pos += 1;
                        if pos - ini >= 3 {
                            cut.cut(pos);
                            ini = pos;
                        }
                    }
                    cut.cut(pos);
                }
                Variant::Qwen2 | Variant::Qwen35 => {
                    pos += 1;
                    cut.cut(pos);
                }
            }
            continue;
        }

        // optional space, other characters, then any CR/LF. The entry test looks at the flags of
        // the character after a space but requires the current character to have flags at all.
        let space = cpt == ' ' as u32;
        let mut f2 = if space { w.flags(pos + 1) } else { flags };
        if other(f2) && flags.any() {
            pos += space as usize;
            while other(f2) && f2.any() {
                pos += 1;
                f2 = w.flags(pos);
            }
            let mut c2 = w.cpt(pos);
            while c2 == cr || c2 == lf {
                pos += 1;
                c2 = w.cpt(pos);
            }
            cut.cut(pos);
            continue;
        }

        let mut n_ws = 0;
        let mut last_crlf_end = 0;
        while w.flags(pos + n_ws).is_whitespace() {
            let c2 = w.cpt(pos + n_ws);
            if c2 == cr || c2 == lf {
                last_crlf_end = pos + n_ws + 1;
            }
            n_ws += 1;
        }
        // whitespace up to and including the last CR/LF of the run
        if last_crlf_end > 0 {
            pos = last_crlf_end;
            cut.cut(pos);
            continue;
        }
        pos = whitespace_or_one(w, pos, n_ws, &mut cut);
    }
}
