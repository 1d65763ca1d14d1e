//! Codepoint classes as llama.cpp's pre-tokenizers see them: one category per codepoint (from the
//! same range data llama.cpp ships) plus a whitespace flag.

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
