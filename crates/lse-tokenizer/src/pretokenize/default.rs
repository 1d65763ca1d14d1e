//! llama.cpp's fallback rules for a BPE vocabulary whose pre-type is `default`, applied in turn:
//! runs of punctuation (`[\p{P}\$\+<=>\^~\|]+`), the GPT-2 rules, runs of numbers (`\p{N}+`),
//! then ASCII digit triples (`[0-9][0-9][0-9]`).

use super::{gpt2, regex_walk, Span};
use crate::unicode::{Codepoints, Flags};

fn is_punct_like(cpt: u32, f: Flags) -> bool {
    if cpt < 128 {
        f.is_punctuation()
            || matches!(
                char::from_u32(cpt),
                Some('$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
            )
    } else {
        !f.is_whitespace() && f.category() == Flags::PUNCTUATION
    }
}

pub(crate) fn split(cp: &Codepoints, spans: &[Span]) -> Vec<Span> {
    let run = |pred: &dyn Fn(usize) -> bool, pos: usize, end: usize| -> Option<usize> {
        if !pred(pos) {
            return None;
        }
        let mut e = pos + 1;
        while e < end && pred(e) {
            e += 1;
        }
        Some(e)
    };
    let punct = |i: usize| is_punct_like(cp.cpts[i], cp.flags[i]);
    let s = regex_walk(spans, |pos, (_, end)| run(&punct, pos, end));
    let s = gpt2::split(cp, &s);
    let number = |i: usize| cp.flags[i].is_number();
    let s = regex_walk(&s, |pos, (_, end)| run(&number, pos, end));
    let digit = |i: usize| (b'0' as u32..=b'9' as u32).contains(&cp.cpts[i]);
    regex_walk(&s, |pos, (_, end)| {
        (pos + 3 <= end && (pos..pos + 3).all(digit)).then_some(pos + 3)
    })
}
