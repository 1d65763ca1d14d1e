//! Codepoint classes as llama.cpp's pre-tokenizers see them: one category per codepoint (from the
//! same range data llama.cpp ships) plus a whitespace flag.

mod case_tables;
mod tables;

use std::sync::OnceLock;

/// Category and whitespace flags of one codepoint, with llama.cpp's bit layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(pub u16);

impl Flags {
    pub const UNDEFINED: u16 = 0x0001;
    pub const NUMBER: u16 = 0x0002;
    pub const LETTER: u16 = 0x0004;
    pub const SEPARATOR: u16 = 0x0008;
    pub const MARK: u16 = 0x0010;
    pub const PUNCTUATION: u16 = 0x0020;
    pub const SYMBOL: u16 = 0x0040;
    pub const CONTROL: u16 = 0x0080;
    pub const CATEGORIES: u16 = 0x00FF;
    pub const WHITESPACE: u16 = 0x0100;

    /// The flags of a position outside the text being split: nothing set.
    pub const NONE: Flags = Flags(0);

    #[inline]
    pub fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    #[inline]
    pub fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    #[inline]
    pub fn is_mark(self) -> bool {
        self.0 & Self::MARK != 0
    }
    #[inline]
    pub fn is_punctuation(self) -> bool {
        self.0 & Self::PUNCTUATION != 0
    }
    #[inline]
    pub fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }
    /// True when any flag is set (false only for positions outside the text).
    #[inline]
    pub fn any(self) -> bool {
        self.0 != 0
    }
    #[inline]
    pub fn category(self) -> u16 {
        self.0 & Self::CATEGORIES
    }
}

const N_CODEPOINTS: usize = 0x11_0000;

fn table() -> &'static [u16] {
    static TABLE: OnceLock<Box<[u16]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![Flags::UNDEFINED; N_CODEPOINTS].into_boxed_slice();
        for w in tables::CATEGORY_RANGES.windows(2) {
            let (start, flags) = w[0];
            let end = (w[1].0 as usize).min(N_CODEPOINTS);
            t[start as usize..end].fill(flags);
        }
        for &c in tables::WHITESPACE {
            t[c as usize] |= Flags::WHITESPACE;
        }
        t
    })
}

/// Flags of a codepoint; codepoints past U+10FFFF are undefined.
#[inline]
pub fn flags(cpt: u32) -> Flags {
    let t = table();
    match t.get(cpt as usize) {
        Some(&f) => Flags(f),
        None => Flags(Flags::UNDEFINED),
    }
}

/// Lower-case for the ASCII letters; the contraction rules only ever compare against ASCII
/// letters, and no non-ASCII codepoint lower-cases to one of those.
#[inline]
pub fn ascii_lower(cpt: u32) -> u32 {
    if (b'A' as u32..=b'Z' as u32).contains(&cpt) {
        cpt + 32
    } else {
        cpt
    }
}

/// Lower-case of a codepoint by llama.cpp's table (`unicode_tolower`); unchanged when it has none.
pub fn to_lower(cpt: u32) -> u32 {
    match case_tables::LOWERCASE.binary_search_by_key(&cpt, |p| p.0) {
        Ok(i) => case_tables::LOWERCASE[i].1,
        Err(_) => cpt,
    }
}

/// The first codepoint of a codepoint's canonical decomposition, as llama.cpp's
/// `unicode_cpts_normalize_nfd` computes it per codepoint.
pub fn nfd_first(cpt: u32) -> u32 {
    let t = case_tables::NFD_RANGES;
    let i = t.partition_point(|r| r.0 <= cpt);
    if i > 0 {
        let r = t[i - 1];
        if r.0 <= cpt && cpt <= r.1 {
            return r.2;
        }
    }
    cpt
}

/// Decodes UTF-8 as llama.cpp does: each invalid sequence becomes U+FFFD and skips one byte.
pub fn cpts_lossy(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match decode_one(&bytes[i..]) {
            Some((c, n)) => {
                out.push(c);
                i += n;
            }
            None => {
                out.push(0xFFFD);
                i += 1;
            }
        }
    }
    out
}

/// One codepoint from the start of `b` by llama.cpp's rules (lead byte decides the length; the
/// continuation bytes must be 10xxxxxx; no check for overlong forms or surrogates).
fn decode_one(b: &[u8]) -> Option<(u32, usize)> {
    let c0 = b[0] as u32;
    let cont = |k: usize| b.get(k).filter(|&&x| x & 0xC0 == 0x80).map(|&x| (x & 0x3F) as u32);
    if c0 & 0x80 == 0 {
        Some((c0, 1))
    } else if c0 & 0x40 == 0 {
        None
    } else if c0 & 0x20 == 0 {
        Some((((c0 & 0x1F) << 6) | cont(1)?, 2))
    } else if c0 & 0x10 == 0 {
        Some((((c0 & 0x0F) << 12) | (cont(1)? << 6) | cont(2)?, 3))
    } else if c0 & 0x08 == 0 {
        Some((((c0 & 0x07) << 18) | (cont(1)? << 12) | (cont(2)? << 6) | cont(3)?, 4))
    } else {
        None
    }
}

/// UTF-8 of a codepoint (any value up to U+10FFFF, surrogates included, as llama.cpp writes it).
pub fn push_utf8(cpt: u32, out: &mut Vec<u8>) {
    match cpt {
        0..=0x7F => out.push(cpt as u8),
        0x80..=0x7FF => out.extend([0xC0 | (cpt >> 6) as u8, 0x80 | (cpt & 0x3F) as u8]),
        0x800..=0xFFFF => out.extend([
            0xE0 | (cpt >> 12) as u8,
            0x80 | ((cpt >> 6) & 0x3F) as u8,
            0x80 | (cpt & 0x3F) as u8,
        ]),
        _ => out.extend([
            0xF0 | ((cpt >> 18) & 0x07) as u8,
            0x80 | ((cpt >> 12) & 0x3F) as u8,
            0x80 | ((cpt >> 6) & 0x3F) as u8,
            0x80 | (cpt & 0x3F) as u8,
        ]),
    }
}

/// A text decoded to codepoints, with the byte offset of each codepoint (and one past the end).
pub struct Codepoints {
    pub cpts: Vec<u32>,
    pub flags: Vec<Flags>,
    pub byte_offsets: Vec<usize>,
}

impl Codepoints {
    pub fn new(text: &str) -> Codepoints {
        let n = text.len();
        let mut cpts = Vec::with_capacity(n);
        let mut flags_v = Vec::with_capacity(n);
        let mut byte_offsets = Vec::with_capacity(n + 1);
        let t = table();
        for (i, c) in text.char_indices() {
            let c = c as u32;
            cpts.push(c);
            flags_v.push(Flags(t[c as usize]));
            byte_offsets.push(i);
        }
        byte_offsets.push(n);
        Codepoints {
            cpts,
            flags: flags_v,
            byte_offsets,
        }
    }

    pub fn len(&self) -> usize {
        self.cpts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cpts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_classes() {
        assert!(flags('a' as u32).is_letter());
        assert!(flags('7' as u32).is_number());
        assert!(flags(' ' as u32).is_whitespace());
        assert!(flags('\n' as u32).is_whitespace());
        assert!(!flags(0x1C).is_whitespace());
        assert!(flags('!' as u32).is_punctuation());
        assert!(flags(0x301).is_mark());
        assert!(flags(0x3000).is_whitespace());
        assert_eq!(flags(0x11_0000), Flags(Flags::UNDEFINED));
    }
}
