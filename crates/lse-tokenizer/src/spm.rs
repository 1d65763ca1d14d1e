//! SentencePiece-style tokenization of one fragment, as llama.cpp's SPM session does it: start
//! from UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is the token with
//! the highest score (ties: leftmost), then emit each symbol as its token or, failing that, as
//! byte tokens `<0xXX>`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::hash::FastMap;
use crate::vocab::Vocab;

#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

struct Bigram {
    score: f32,
    left: u32,
    right: u32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost pair.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .partial_cmp(&o.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| o.left.cmp(&self.left))
    }
}

/// UTF-8 sequence length from a lead byte (continuation bytes count as 1, as in llama.cpp).
#[inline]
pub(crate) fn utf8_len(b: u8) -> usize {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(b >> 4) as usize]
}

/// Buffers reused across the fragments of one text, and the ids of segments already seen (a
/// segment's ids depend only on its bytes; running text repeats most of its words).
#[derive(Default)]
pub struct Scratch {
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Bigram>,
    seen: FastMap<Vec<u8>, (u32, u32)>,
    seen_ids: Vec<u32>,
}

/// Segments up to this many bytes are remembered.
const MAX_CACHED: usize = 64;

fn tokenize_cached(
    vocab: &Vocab,
    byte_tokens: &[Option<u32>; 256],
    text: &[u8],
    out: &mut Vec<u32>,
    scratch: &mut Scratch,
) {
    if text.len() > MAX_CACHED {
        return tokenize_segment(vocab, byte_tokens, text, out, scratch);
    }
    if let Some(&(at, n)) = scratch.seen.get(text) {
        out.extend_from_slice(&scratch.seen_ids[at as usize..(at + n) as usize]);
        return;
    }
    let before = out.len();
    tokenize_segment(vocab, byte_tokens, text, out, scratch);
    let at = scratch.seen_ids.len() as u32;
    scratch.seen_ids.extend_from_slice(&out[before..]);
    scratch
        .seen
        .insert(text.to_vec(), (at, (out.len() - before) as u32));
}

const SPACE: &[u8] = "\u{2581}".as_bytes();

/// Where a fragment may be cut into independently merged segments (the result is the same, but
/// the heap stays small). A cut goes before a "▁" that follows another character, unless some
/// token has a "▁" right after the text just before the cut: every text that precedes an inner
/// "▁" (one not after another "▁") in some token is listed, and a cut after any of them is skipped.
/// None when too many tokens have such an inner "▁" to make this worthwhile.
pub fn cut_rule(vocab: &Vocab) -> Option<Vec<Vec<u8>>> {
    let mut before = Vec::new();
    for t in vocab.texts.iter() {
        let b = t.as_bytes();
        for j in 1..b.len().saturating_sub(2) {
            if &b[j..j + 3] == SPACE && !(j >= 3 && &b[j - 3..j] == SPACE) {
                before.push(b[..j].to_vec());
                if before.len() > 64 {
                    return None;
                }
            }
        }
    }
    Some(before)
}

/// Tokenizes `text` (spaces already escaped to U+2581) and appends the ids to `out`.
pub fn tokenize(
    vocab: &Vocab,
    byte_tokens: &[Option<u32>; 256],
    cut_rule: Option<&[Vec<u8>]>,
    text: &[u8],
    out: &mut Vec<u32>,
    scratch: &mut Scratch,
) {
    let Some(keep) = cut_rule else {
        return tokenize_segment(vocab, byte_tokens, text, out, scratch);
    };
    let mut start = 0;
    let mut i = 3;
    while i + 3 <= text.len() {
        if &text[i..i + 3] == SPACE
            && &text[i - 3..i] != SPACE
            && !keep.iter().any(|k| text[..i].ends_with(k))
        {
            tokenize_cached(vocab, byte_tokens, &text[start..i], out, scratch);
            start = i;
            i += 3;
        } else {
            i += 1;
        }
    }
    tokenize_cached(vocab, byte_tokens, &text[start..], out, scratch);
}

fn tokenize_segment(
    vocab: &Vocab,
    byte_tokens: &[Option<u32>; 256],
    text: &[u8],
    out: &mut Vec<u32>,
    scratch: &mut Scratch,
) {
    if text.is_empty() {
        return;
    }
    let symbols = &mut scratch.symbols;
    symbols.clear();
    let mut offs = 0usize;
    while offs < text.len() {
        let len = utf8_len(text[offs]).min(text.len() - offs);
        let i = symbols.len() as i32;
        symbols.push(Symbol {
            start: offs as u32,
            len: len as u32,
            prev: i - 1,
            next: if offs + len == text.len() { -1 } else { i + 1 },
        });
        offs += len;
    }

    let heap = &mut scratch.heap;
    heap.clear();
    let try_add = |symbols: &[Symbol], heap: &mut BinaryHeap<Bigram>, left: i32, right: i32| {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (symbols[left as usize], symbols[right as usize]);
        let s = l.start as usize;
        let e = s + (l.len + r.len) as usize;
        if let Some(id) = vocab.lookup(&text[s..e]) {
            heap.push(Bigram {
                score: vocab.scores[id as usize],
                left: left as u32,
                right: right as u32,
                size: (e - s) as u32,
            });
        }
    };
    for i in 1..symbols.len() as i32 {
        try_add(symbols, heap, i - 1, i);
    }
    while let Some(b) = heap.pop() {
        let (l, r) = (symbols[b.left as usize], symbols[b.right as usize]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        symbols[b.left as usize].len += r.len;
        symbols[b.right as usize].len = 0;
        symbols[b.left as usize].next = r.next;
        if r.next >= 0 {
            symbols[r.next as usize].prev = b.left as i32;
        }
        let prev = symbols[b.left as usize].prev;
        let next = symbols[b.left as usize].next;
        try_add(symbols, heap, prev, b.left as i32);
        try_add(symbols, heap, b.left as i32, next);
    }

    let mut i = 0i32;
    while i != -1 {
        let s = symbols[i as usize];
        let piece = &text[s.start as usize..(s.start + s.len) as usize];
        match vocab.lookup(piece) {
            Some(id) => out.push(id),
            None => {
                for &byte in piece {
                    // llama.cpp aborts when a byte has no token; we fall back to UNK, or drop it.
                    if let Some(id) = byte_tokens[byte as usize].or(vocab.unk) {
                        out.push(id);
                    }
                }
            }
        }
        i = s.next;
    }
}

/// The byte-fallback token of each byte: `<0xXX>`, else the byte itself as a one-byte token.
pub fn byte_tokens(vocab: &Vocab) -> [Option<u32>; 256] {
    let mut t = [None; 256];
    for b in 0..=255u8 {
        let hex = format!("<0x{b:02X}>");
        t[b as usize] = vocab.lookup(hex.as_bytes()).or_else(|| vocab.lookup(&[b]));
    }
    t
}

/// Replaces each space with U+2581 ("▁").
pub fn escape_spaces(text: &str, prefix_space: bool, out: &mut Vec<u8>) {
    out.clear();
    if prefix_space {
        out.extend_from_slice("\u{2581}".as_bytes());
    }
    for &b in text.as_bytes() {
        if b == b' ' {
            out.extend_from_slice("\u{2581}".as_bytes());
        } else {
            out.push(b);
        }
    }
}
