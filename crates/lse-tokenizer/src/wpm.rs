//! WordPiece (BERT), as llama.cpp's WPM session does it: normalize (optionally strip accents via
//! decomposition and lower-case), cut at whitespace and around punctuation and CJK characters,
//! then cover each word, prefixed with `▁`, by the longest tokens from left to right; a word that
//! cannot be covered becomes the unknown token.

use crate::unicode::{flags, nfd_first, push_utf8, to_lower, Flags};
use crate::vocab::Vocab;

pub struct Wpm {
    /// Longest token text, in bytes.
    max_len: usize,
}

impl Wpm {
    pub fn new(v: &Vocab) -> Wpm {
        Wpm {
            max_len: v.texts.iter().map(str::len).max().unwrap_or(0),
        }
    }

    pub fn tokenize(&self, v: &Vocab, text: &str, out: &mut Vec<u32>) {
        for word in words(v, text) {
            if word.is_empty() {
                continue;
            }
            let mut w = "\u{2581}".as_bytes().to_vec();
            w.extend_from_slice(&word);
            let n = w.len();
            let before = out.len();
            let mut i = 0;
            while i < n {
                let top = n.min(i + self.max_len + 1);
                match (i + 1..=top).rev().find_map(|j| v.lookup(&w[i..j]).map(|id| (id, j))) {
                    Some((id, j)) => {
                        out.push(id);
                        i = j;
                    }
                    None => {
                        out.truncate(before);
                        break;
                    }
                }
            }
            if out.len() == before {
                out.extend(v.unk);
            }
        }
    }
}

fn is_chinese(c: u32) -> bool {
    matches!(c,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// The normalized words of `text` (UTF-8 bytes; a lone surrogate from the tables stays bytes).
fn words(v: &Vocab, text: &str) -> Vec<Vec<u8>> {
    let mut words: Vec<Vec<u8>> = vec![Vec::new()];
    for c in text.chars() {
        let mut cpt = c as u32;
        if v.strip_accents {
            cpt = nfd_first(cpt);
        }
        let f = flags(cpt);
        if f.is_whitespace() {
            if !words.last().unwrap().is_empty() {
                words.push(Vec::new());
            }
            continue;
        }
        if cpt == 0 || cpt == 0xFFFD || f.category() == Flags::CONTROL {
            continue;
        }
        if v.strip_accents && f.is_mark() {
            continue;
        }
        let mut s = Vec::with_capacity(4);
        push_utf8(if v.lowercase { to_lower(cpt) } else { cpt }, &mut s);
        let alone = f.is_punctuation()
            || (cpt < 0x7F && f.category() == Flags::SYMBOL)
            || is_chinese(cpt);
        if alone {
            if !words.last().unwrap().is_empty() {
                words.push(Vec::new());
            }
            *words.last_mut().unwrap() = s;
            words.push(Vec::new());
        } else {
            words.last_mut().unwrap().extend_from_slice(&s);
        }
    }
    if words.last().is_some_and(|w| w.is_empty()) {
        words.pop();
    }
    words
}
