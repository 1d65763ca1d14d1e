//! Bracket expressions and the escapes that stand for sets (`\s`, `\d`, `\w`, `\p{..}`), over the
//! symbols llama.cpp's regular expressions run on: codepoints, or the one-byte stand-ins of the
//! "collapsed" text where every non-ASCII codepoint is replaced by a code for its category.

/// Stand-ins of the collapsed text for non-ASCII codepoints (llama.cpp's choice of bytes).
pub const COLLAPSED_NUMBER: u32 = 0xD1;
pub const COLLAPSED_LETTER: u32 = 0xD2;
pub const COLLAPSED_PUNCTUATION: u32 = 0xD3;
pub const COLLAPSED_MARK: u32 = 0xD4;
pub const COLLAPSED_SYMBOL: u32 = 0xD5;
pub const COLLAPSED_OTHER: u32 = 0xD0;
/// Non-ASCII whitespace, in both kinds of text: the vertical tab, which `\s` matches.
pub const WHITESPACE_STAND_IN: u32 = 0x0B;

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Range(u32, u32),
    Space,
    NotSpace,
    Digit,
    NotDigit,
    Word,
    NotWord,
}

/// A set of symbols: the union of its items, or its complement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Class {
    pub items: Vec<Item>,
    pub negated: bool,
}

/// `isspace` in the C locale.
#[inline]
fn is_space(s: u32) -> bool {
    s == 0x20 || (0x09..=0x0D).contains(&s)
}

#[inline]
fn is_word(s: u32) -> bool {
    s < 128 && ((s as u8).is_ascii_alphanumeric() || s == b'_' as u32)
}

impl Class {
    pub fn single(items: Vec<Item>, negated: bool) -> Class {
        Class { items, negated }
    }

    #[inline]
    pub fn matches(&self, s: u32) -> bool {
        let hit = self.items.iter().any(|it| match *it {
            Item::Range(lo, hi) => lo <= s && s <= hi,
            Item::Space => is_space(s),
            Item::NotSpace => !is_space(s),
            Item::Digit => (0x30..=0x39).contains(&s),
            Item::NotDigit => !(0x30..=0x39).contains(&s),
            Item::Word => is_word(s),
            Item::NotWord => !is_word(s),
        });
        hit != self.negated
    }
}

/// Whether a symbol counts as a word character for `\b`.
pub fn word_char(s: u32) -> bool {
    is_word(s)
}

/// The items `\p{name}` stands for in the collapsed text: the category's stand-in byte and its
/// ASCII members, as llama.cpp writes them into the expression. None for other names.
pub fn category_items(name: &str) -> Option<Vec<Item>> {
    let r = |a: u8, b: u8| Item::Range(a as u32, b as u32);
    let c = |a: u8| Item::Range(a as u32, a as u32);
    let code = |x: u32| Item::Range(x, x);
    Some(match name {
        "N" => vec![code(COLLAPSED_NUMBER), r(b'0', b'9')],
        "L" | "Lu" | "Ll" | "Lt" | "Lm" | "Lo" => {
            vec![code(COLLAPSED_LETTER), r(b'A', b'Z'), r(b'a', b'z')]
        }
        "P" => vec![
            code(COLLAPSED_PUNCTUATION),
            r(b'!', b'#'),
            r(b'%', b'*'),
            r(b',', b'/'),
            r(b':', b';'),
            r(b'?', b'@'),
            r(b'[', b']'),
            c(b'_'),
            c(b'{'),
            c(b'}'),
        ],
        "M" => vec![code(COLLAPSED_MARK)],
        "S" => vec![
            code(COLLAPSED_SYMBOL),
            c(b'$'),
            c(b'+'),
            r(b'<', b'>'),
            c(b'^'),
            c(b'`'),
            c(b'|'),
            c(b'~'),
        ],
        _ => return None,
    })
}
