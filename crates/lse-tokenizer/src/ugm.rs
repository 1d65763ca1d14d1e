//! Unigram (T5), as llama.cpp's UGM session does it: normalize the text (user-defined tokens kept
//! as they are, SentencePiece's precompiled character map, spaces as `▁`, optional space prefix
//! and whitespace merging), then pick the segmentation with the highest total score by dynamic
//! programming over byte positions, codepoints without a token scoring as the unknown token.

use crate::spm::utf8_len;
use crate::trie::{ByteTrie, ROOT};
use crate::vocab::{attr, Vocab};

pub struct Ugm {
    tokens: ByteTrie,
    user_defined: ByteTrie,
    unknown_score: f64,
    /// The precompiled map: XOR-compressed double array entries, then NUL-terminated replacements.
    xcda: Vec<u32>,
    replacements: Vec<u8>,
}

const UNKNOWN_PENALTY: f32 = 10.0;

impl Ugm {
    pub fn new(v: &Vocab) -> Ugm {
        let mut tokens = ByteTrie::new();
        let mut user_defined = ByteTrie::new();
        let mut min_score = f32::MAX;
        for (id, text) in v.texts.iter().enumerate() {
            let a = v.attrs[id];
            if a & attr::NORMAL != 0 {
                min_score = min_score.min(v.scores[id]);
            }
            if a & (attr::NORMAL | attr::USER_DEFINED | attr::UNUSED) != 0 {
                tokens.insert(text.as_bytes(), id as u32);
            }
            if a & attr::USER_DEFINED != 0 {
                user_defined.insert(text.as_bytes(), id as u32);
            }
        }
        let (mut xcda, mut replacements) = (Vec::new(), Vec::new());
        let m = &v.precompiled_charsmap;
        if m.len() >= 4 {
            let blob = u32::from_le_bytes(m[..4].try_into().unwrap()) as usize;
            let end = (4 + blob).min(m.len());
            xcda = m[4..end]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            replacements = m[end..].to_vec();
        }
        Ugm {
            tokens,
            user_defined,
            unknown_score: (min_score - UNKNOWN_PENALTY) as f64,
            xcda,
            replacements,
        }
    }

    pub fn tokenize(&self, v: &Vocab, text: &str, out: &mut Vec<u32>) {
        let norm = self.normalize(v, text.as_bytes());
        let n = norm.len();
        if n == 0 {
            return;
        }
        // best[i] = (token or None for unknown, start, score) of the best segmentation of norm[..i]
        let mut best: Vec<(Option<u32>, usize, f64)> = vec![(v.unk, 0, -f64::MAX); n + 1];
        best[0] = (v.unk, 0, 0.0);
        let mut at = 0;
        while at < n {
            let cp_len = utf8_len(norm[at]).min(n - at);
            let base = best[at].2;
            let mut whole_cp = false;
            let mut node = self.tokens.child(ROOT, norm[at]);
            let mut p = at + 1;
            while let Some(nd) = node {
                if let Some(id) = self.tokens.value(nd) {
                    if p - at == cp_len {
                        whole_cp = true;
                    }
                    let s = if v.attrs[id as usize] & attr::USER_DEFINED != 0 {
                        0.0
                    } else {
                        v.scores[id as usize] as f64
                    };
                    if base + s > best[p].2 {
                        best[p] = (Some(id), at, base + s);
                    }
                }
                if p >= n {
                    break;
                }
                node = self.tokens.child(nd, norm[p]);
                p += 1;
            }
            if !whole_cp {
                let p = at + cp_len;
                let s = base + self.unknown_score;
                if s > best[p].2 {
                    best[p] = (v.unk, at, s);
                }
            }
            at += cp_len;
        }
        // walk back, runs of unknown tokens becoming one
        let start = out.len();
        let mut i = n;
        let mut prev_unknown = false;
        loop {
            let (id, from, _) = best[i];
            let unknown = id == v.unk;
            if !(prev_unknown && unknown) {
                out.extend(id);
            }
            if from == 0 || from >= i {
                break;
            }
            prev_unknown = unknown;
            i = from;
        }
        out[start..].reverse();
    }

    fn normalize(&self, v: &Vocab, input: &[u8]) -> Vec<u8> {
        let space: &[u8] = if v.escape_whitespaces {
            "\u{2581}".as_bytes()
        } else {
            b" "
        };
        let prepend = v.add_space_prefix;
        let merge = v.remove_extra_whitespaces;
        let mut out = Vec::with_capacity(input.len() * 3);
        let mut prepended = false;
        let mut in_word = false;
        let mut at = 0;
        while at < input.len() {
            let (repl, used) = self.normalize_prefix(input, at);
            for &c in repl.iter() {
                if c != b' ' {
                    if !in_word {
                        in_word = true;
                        if (prepend && !prepended) || merge {
                            out.extend_from_slice(space);
                            prepended = true;
                        }
                    }
                    out.push(c);
                } else {
                    in_word = false;
                    if !merge {
                        out.extend_from_slice(space);
                    }
                }
            }
            at += used.max(1);
        }
        out
    }

    /// The normalized form of the longest prefix at `at` that normalizes as a unit, and how many
    /// input bytes it covers.
    fn normalize_prefix<'a>(&'a self, input: &'a [u8], at: usize) -> (&'a [u8], usize) {
        let rest = &input[at..];
        let ud = self.user_defined.longest_prefix(rest);
        if ud > 0 {
            return (&rest[..ud], ud);
        }
        if let Some((len, off)) = self.charsmap_match(rest) {
            let r = &self.replacements[off..];
            if let Some(z) = r.iter().position(|&b| b == 0) {
                return (&r[..z], len);
            }
        }
        let n = utf8_len(rest[0]).min(rest.len());
        (&rest[..n], n)
    }

    /// Walks the double array: the longest input prefix with a replacement, and where the
    /// replacement starts. Malformed arrays end the walk.
    fn charsmap_match(&self, s: &[u8]) -> Option<(usize, usize)> {
        let node_at = |i: u32| self.xcda.get(i as usize).copied();
        let base = |x: u32| (x >> 10) << ((x & (1 << 9)) >> 6);
        let mut node = base(node_at(0)?);
        let mut found = None;
        for (i, &c) in s.iter().enumerate() {
            if c == 0 {
                break;
            }
            node ^= c as u32;
            let packed = node_at(node)?;
            if packed & ((1 << 31) | 0xFF) != c as u32 {
                break;
            }
            let leaf = (packed >> 8) & 1 == 1;
            node ^= base(packed);
            if leaf {
                let value = node_at(node)? & ((1 << 31) - 1);
                found = Some((i + 1, value as usize));
            }
        }
        found.filter(|&(_, off)| off < self.replacements.len())
    }
}
