//! Special-token splitting: before a text is tokenized, every occurrence of a special token's
//! text becomes that token, and the text between occurrences is tokenized piece by piece.
//!
//! The order matches llama.cpp: tokens are taken longest first; each one claims its occurrences
//! left to right inside the text not yet claimed, never across a claimed stretch. With
//! `parse_special` false only USER_DEFINED tokens are looked for (CONTROL and UNKNOWN are not).
//! A token with the LSTRIP (RSTRIP) attribute also swallows the ASCII whitespace before (after)
//! it, up to the nearest token already placed.

use crate::vocab::{attr, Vocab};

/// A piece of the text after special-token splitting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment {
    Token(u32),
    /// A byte range of the text.
    Text(usize, usize),
}

const FREE: u32 = u32::MAX;

pub fn partition(vocab: &Vocab, text: &str, parse_special: bool) -> Vec<Fragment> {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return Vec::new();
    }
    // owner[i] = index into `claims` of the claim covering byte i, or FREE.
    let mut owner: Vec<u32> = Vec::new();
    let mut claims: Vec<(usize, usize, u32)> = Vec::new();
    // Positions of each first byte, built on demand.
    let mut by_first: Vec<Option<Vec<u32>>> = vec![None; 256];

    for &id in &vocab.special_by_length {
        let a = vocab.attrs[id as usize];
        if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            continue;
        }
        let pat = vocab.texts[id as usize].as_bytes();
        if pat.is_empty() || pat.len() > bytes.len() {
            continue;
        }
        let positions = by_first[pat[0] as usize].get_or_insert_with(|| memchr_all(pat[0], bytes));
        let mut next_allowed = 0usize;
        for &p in positions.iter() {
            let p = p as usize;
            if p < next_allowed {
                continue;
            }
            let end = p + pat.len();
            if end > bytes.len() {
                break;
            }
            if &bytes[p..end] != pat {
                continue;
            }
            if !owner.is_empty() && owner[p..end].iter().any(|&o| o != FREE) {
                continue;
            }
            if owner.is_empty() {
                owner = vec![FREE; bytes.len()];
            }
            let free_space = |i: usize| owner[i] == FREE && (bytes[i].is_ascii_whitespace() || bytes[i] == 0x0B);
            let mut start = p;
            if a & attr::LSTRIP != 0 {
                while start > 0 && free_space(start - 1) {
                    start -= 1;
                }
            }
            let mut stop = end;
            if a & attr::RSTRIP != 0 {
                while stop < bytes.len() && free_space(stop) {
                    stop += 1;
                }
            }
            let ci = claims.len() as u32;
            claims.push((start, stop, id));
            owner[start..stop].fill(ci);
            next_allowed = stop;
        }
    }

    if claims.is_empty() {
        return vec![Fragment::Text(0, bytes.len())];
    }
    claims.sort_unstable_by_key(|c| c.0);
    let mut out = Vec::with_capacity(claims.len() * 2 + 1);
    let mut pos = 0;
    for (s, e, id) in claims {
        if s > pos {
            out.push(Fragment::Text(pos, s));
        }
        out.push(Fragment::Token(id));
        pos = e;
    }
    if pos < bytes.len() {
        out.push(Fragment::Text(pos, bytes.len()));
    }
    out
}

fn memchr_all(b: u8, hay: &[u8]) -> Vec<u32> {
    hay.iter()
        .enumerate()
        .filter(|(_, &c)| c == b)
        .map(|(i, _)| i as u32)
        .collect()
}
