//! BPE over pre-tokenized words, as llama.cpp's BPE session does it: each byte of a word starts as
//! the symbol of its GPT-2 character (byte-level vocabularies) or each UTF-8 character as itself
//! (raw vocabularies such as Gemma 4's), and the adjacent pair with the lowest merge rank (ties:
//! leftmost) is merged until no ranked pair remains. A final symbol that is no token falls back
//! to byte tokens.
//!
//! Strings are interned: every token text and every string that appears in a merge gets an id
//! (token ids first), so a merge lookup is a hash of two integers.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::bytes::byte_to_char;
use crate::hash::FastMap;
use crate::vocab::Vocab;

const NONE: u32 = u32::MAX;

pub struct Bpe {
    /// (left, right) interned ids -> (rank, interned id of the concatenation or NONE).
    ranks: FastMap<(u32, u32), (u32, u32)>,
    /// Interned id of the GPT-2 character of each byte (NONE if it is neither a token nor in a merge).
    byte_sym: [u32; 256],
    /// For the rare symbol that is no token: the token of each byte's character when that
    /// character is a one-byte token (ASCII), as llama.cpp's byte-by-byte fallback finds.
    byte_fallback: [Option<u32>; 256],
    n_tokens: u32,
    /// Symbols are UTF-8 characters of the raw word, and the fallback is `<0xXX>` tokens.
    raw: bool,
    /// Raw mode: interned ids of the characters seen in token texts and merges.
    extra: FastMap<Vec<u8>, u32>,
    /// Words made only of newlines are looked up whole first (Gemma 4).
    newline_words: bool,
}

impl Bpe {
    pub fn new(vocab: &Vocab, merges: &[String], raw: bool, newline_words: bool) -> Bpe {
        let n_tokens = vocab.n_tokens() as u32;
        let mut extra: FastMap<Vec<u8>, u32> = FastMap::default();
        let intern = |s: &[u8], extra: &mut FastMap<Vec<u8>, u32>| -> u32 {
            if let Some(id) = vocab.lookup(s) {
                return id;
            }
            let next = n_tokens + extra.len() as u32;
            *extra.entry(s.to_vec()).or_insert(next)
        };
        let mut ranks: FastMap<(u32, u32), (u32, u32)> = FastMap::default();
        ranks.reserve(merges.len());
        for (rank, m) in merges.iter().enumerate() {
            // split at the first space after the first byte; no space: both halves empty
            let mb = m.as_bytes();
            let (first, second): (&[u8], &[u8]) = match mb.iter().skip(1).position(|&c| c == b' ') {
                Some(p) => (&mb[..p + 1], &mb[p + 2..]),
                None => (&[], &[]),
            };
            let l = intern(first, &mut extra);
            let r = intern(second, &mut extra);
            ranks.entry((l, r)).or_insert((rank as u32, NONE));
        }
        // the interned id of each merge's result, now that every merge string is known
        let keys: Vec<(u32, u32)> = ranks.keys().copied().collect();
        let text_of = |id: u32, extra_rev: &[Vec<u8>]| -> Vec<u8> {
            if id < n_tokens {
                vocab.texts[id as usize].as_bytes().to_vec()
            } else {
                extra_rev[(id - n_tokens) as usize].clone()
            }
        };
        let mut extra_rev = vec![Vec::new(); extra.len()];
        for (s, &id) in &extra {
            extra_rev[(id - n_tokens) as usize] = s.clone();
        }
        for k in keys {
            let mut cat = text_of(k.0, &extra_rev);
            cat.extend_from_slice(&text_of(k.1, &extra_rev));
            let id = vocab
                .lookup(&cat)
                .or_else(|| extra.get(&cat).copied())
                .unwrap_or(NONE);
            ranks.get_mut(&k).unwrap().1 = id;
        }
        let map = byte_to_char();
        let mut byte_sym = [NONE; 256];
        let mut byte_fallback = [None; 256];
        if raw {
            for (b, slot) in byte_fallback.iter_mut().enumerate() {
                *slot = vocab.lookup(format!("<0x{b:02X}>").as_bytes());
            }
        }
        for b in (0..=255usize).filter(|_| !raw) {
            let mut tmp = [0u8; 4];
            let s = map[b].encode_utf8(&mut tmp).as_bytes();
            byte_sym[b] = vocab
                .lookup(s)
                .or_else(|| extra.get(s).copied())
                .unwrap_or(NONE);
            if s.len() == 1 {
                byte_fallback[b] = vocab.lookup(s);
            }
        }
        Bpe {
            ranks,
            byte_sym,
            byte_fallback,
            n_tokens,
            raw,
            extra: if raw { extra } else { FastMap::default() },
            newline_words,
        }
    }

    /// Tokenizes one pre-tokenized word (raw bytes, before the GPT-2 byte mapping), remembering
    /// the ids of short words: a word's ids depend only on its bytes.
    pub fn tokenize_word(
        &self,
        vocab: &Vocab,
        word: &[u8],
        out: &mut Vec<u32>,
        scratch: &mut Scratch,
    ) {
        if word.len() > MAX_CACHED {
            return self.merge_word(vocab, word, out, scratch);
        }
        if let Some(&(at, n)) = scratch.seen.get(word) {
            out.extend_from_slice(&scratch.seen_ids[at as usize..(at + n) as usize]);
            return;
        }
        let before = out.len();
        self.merge_word(vocab, word, out, scratch);
        let at = scratch.seen_ids.len() as u32;
        scratch.seen_ids.extend_from_slice(&out[before..]);
        scratch
            .seen
            .insert(word.to_vec(), (at, (out.len() - before) as u32));
    }

    fn merge_word(&self, vocab: &Vocab, word: &[u8], out: &mut Vec<u32>, scratch: &mut Scratch) {
        if word.is_empty() {
            return;
        }
        if vocab.ignore_merges || (self.newline_words && word.iter().all(|&b| b == b'\n')) {
            let whole = if self.raw {
                vocab.lookup(word)
            } else {
                let map = byte_to_char();
                let enc = &mut scratch.encoded;
                enc.clear();
                for &b in word {
                    let mut tmp = [0u8; 4];
                    enc.extend_from_slice(map[b as usize].encode_utf8(&mut tmp).as_bytes());
                }
                vocab.lookup(enc)
            };
            if let Some(id) = whole {
                out.push(id);
                return;
            }
        }
        let syms = &mut scratch.symbols;
        syms.clear();
        let n = word.len();
        if self.raw {
            let mut i = 0;
            while i < n {
                let len = crate::spm::utf8_len(word[i]).min(n - i);
                let text = &word[i..i + len];
                let k = syms.len() as i32;
                syms.push(Sym {
                    id: vocab
                        .lookup(text)
                        .or_else(|| self.extra.get(text).copied())
                        .unwrap_or(NONE),
                    start: i as u32,
                    len: len as u32,
                    prev: k - 1,
                    next: if i + len == n { -1 } else { k + 1 },
                });
                i += len;
            }
        } else {
            for (i, &b) in word.iter().enumerate() {
                syms.push(Sym {
                    id: self.byte_sym[b as usize],
                    start: i as u32,
                    len: 1,
                    prev: i as i32 - 1,
                    next: if i + 1 == n { -1 } else { i as i32 + 1 },
                });
            }
        }
        let heap = &mut scratch.heap;
        heap.clear();
        for i in 1..syms.len() {
            self.push_pair(syms, heap, i as i32 - 1, i as i32);
        }
        while let Some(p) = heap.pop() {
            let (l, r) = (syms[p.left as usize], syms[p.right as usize]);
            if l.len == 0 || r.len == 0 || l.len + r.len != p.size {
                continue;
            }
            let li = p.left as usize;
            syms[li].len += r.len;
            syms[li].id = p.merged;
            syms[p.right as usize].len = 0;
            syms[li].next = r.next;
            if r.next >= 0 {
                syms[r.next as usize].prev = p.left as i32;
            }
            let (prev, next) = (syms[li].prev, syms[li].next);
            self.push_pair(syms, heap, prev, p.left as i32);
            self.push_pair(syms, heap, p.left as i32, next);
        }
        let mut i = 0i32;
        while i != -1 {
            let s = syms[i as usize];
            if s.id < self.n_tokens {
                out.push(s.id);
            } else {
                for &b in &word[s.start as usize..(s.start + s.len) as usize] {
                    if let Some(t) = self.byte_fallback[b as usize] {
                        out.push(t);
                    }
                }
            }
            i = s.next;
        }
    }

    #[inline]
    fn push_pair(&self, syms: &[Sym], heap: &mut BinaryHeap<Pair>, left: i32, right: i32) {
        if left < 0 || right < 0 {
            return;
        }
        let (l, r) = (syms[left as usize], syms[right as usize]);
        if l.id == NONE || r.id == NONE {
            return;
        }
        if let Some(&(rank, merged)) = self.ranks.get(&(l.id, r.id)) {
            heap.push(Pair {
                rank,
                left: left as u32,
                right: right as u32,
                size: l.len + r.len,
                merged,
            });
        }
    }
}

#[derive(Clone, Copy)]
struct Sym {
    id: u32,
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

struct Pair {
    rank: u32,
    left: u32,
    right: u32,
    size: u32,
    merged: u32,
}

impl PartialEq for Pair {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Pair {}
impl PartialOrd for Pair {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pair {
    /// Max-heap order: lowest rank first, then the leftmost pair.
    fn cmp(&self, o: &Self) -> Ordering {
        o.rank.cmp(&self.rank).then_with(|| o.left.cmp(&self.left))
    }
}

/// Buffers reused across the words of one text, and the ids of words already seen.
#[derive(Default)]
pub struct Scratch {
    symbols: Vec<Sym>,
    heap: BinaryHeap<Pair>,
    encoded: Vec<u8>,
    seen: FastMap<Vec<u8>, (u32, u32)>,
    seen_ids: Vec<u32>,
}

/// Words up to this many bytes are remembered.
const MAX_CACHED: usize = 64;
