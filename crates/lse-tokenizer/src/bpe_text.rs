//! One text fragment through a BPE vocabulary: pre-tokenize, then merge each word. The
//! `whitespace` tokenizer model first cuts the fragment at whitespace (and lower-cases it).

use crate::bpe::{Bpe, Scratch};
use crate::pretokenize::PreTokenizer;
use crate::unicode::{flags, to_lower};
use crate::vocab::Vocab;

pub fn tokenize(
    bpe: &Bpe,
    v: &Vocab,
    pre: PreTokenizer,
    text: &str,
    out: &mut Vec<u32>,
    scratch: &mut Scratch,
) {
    for (s, e) in pre.split(text) {
        bpe.tokenize_word(v, &text.as_bytes()[s..e], out, scratch);
    }
}

/// The non-whitespace runs of `text`, lower-cased by llama.cpp's table when `lowercase`.
pub fn whitespace_segments(text: &str, lowercase: bool) -> Vec<String> {
    let mut segs = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if flags(c as u32).is_whitespace() {
            if !cur.is_empty() {
                segs.push(std::mem::take(&mut cur));
            }
        } else {
            let l = if lowercase { to_lower(c as u32) } else { c as u32 };
            cur.push(char::from_u32(l).unwrap_or(c));
        }
    }
    if !cur.is_empty() {
        segs.push(cur);
    }
    segs
}
