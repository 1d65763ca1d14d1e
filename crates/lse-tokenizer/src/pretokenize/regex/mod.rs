//! The general path of llama.cpp's `unicode_regex_split`: an expression without a hand-written
//! splitter runs as `std::regex` would run it, over the "collapsed" text (each non-ASCII
//! codepoint replaced by a byte for its category) when it uses `\p{..}` categories, else over the
//! codepoints (non-ASCII whitespace replaced by a vertical tab). Each span is split by walking the
//! matches as `std::regex_iterator` does, unmatched stretches becoming pieces of their own.

mod class;
mod parse;
mod vm;

use super::Span;
use crate::unicode::{Codepoints, Flags};
use class::*;

pub struct Regex {
    compiled: vm::Compiled,
    /// Runs on the collapsed text.
    pub collapsed: bool,
}

const CATEGORY_NAMES: [&str; 10] = [
    "\\p{N}", "\\p{L}", "\\p{P}", "\\p{M}", "\\p{S}", "\\p{Lu}", "\\p{Ll}", "\\p{Lt}", "\\p{Lm}",
    "\\p{Lo}",
];

impl Regex {
    /// Compiles one of llama.cpp's expressions; an error names what could not be read.
    pub fn new(src: &str) -> Result<Regex, String> {
        let collapsed = CATEGORY_NAMES.iter().any(|c| src.contains(c));
        if collapsed && !src.is_ascii() {
            return Err("categories and non-ASCII characters in one expression".into());
        }
        let node = parse::Parser::parse(src, collapsed)?;
        Ok(Regex {
            compiled: vm::Compiled::new(&node),
            collapsed,
        })
    }

    /// Splits each span at the matches of the expression (see the module notes). Spans may come
    /// out empty where the expression matches the empty string.
    pub fn split(&self, symbols: &[u32], spans: &[Span]) -> Vec<Span> {
        let mut out = Vec::with_capacity(spans.len());
        for &(ini, end) in spans {
            let mut gap = ini;
            let mut m = self.search(symbols, ini, end, ini, false);
            while let Some((s, e)) = m {
                if s > gap {
                    out.push((gap, s));
                }
                out.push((s, e));
                gap = e;
                m = if e > s {
                    self.search(symbols, ini, end, e, false)
                } else if e == end {
                    None
                } else {
                    match self.compiled.run(0, symbols, ini, end, e, true) {
                        Some(e2) => Some((e, e2)),
                        None => self.search(symbols, ini, end, e + 1, false),
                    }
                };
            }
            if end > gap {
                out.push((gap, end));
            }
        }
        out
    }

    /// The leftmost match starting at or after `from`.
    fn search(&self, symbols: &[u32], ini: usize, end: usize, from: usize, not_null: bool) -> Option<Span> {
        (from..=end).find_map(|s| self.compiled.run(0, symbols, ini, end, s, not_null).map(|e| (s, e)))
    }
}

/// The text as the collapsed-category expressions see it.
pub fn collapsed_symbols(cp: &Codepoints) -> Vec<u32> {
    cp.cpts
        .iter()
        .zip(&cp.flags)
        .map(|(&c, &f)| {
            if c < 128 {
                return c;
            }
            if f.is_whitespace() {
                return WHITESPACE_STAND_IN;
            }
            match f.category() {
                Flags::NUMBER => COLLAPSED_NUMBER,
                Flags::LETTER => COLLAPSED_LETTER,
                Flags::PUNCTUATION => COLLAPSED_PUNCTUATION,
                Flags::MARK => COLLAPSED_MARK,
                Flags::SYMBOL => COLLAPSED_SYMBOL,
                _ => COLLAPSED_OTHER,
            }
        })
        .collect()
}

/// The text as the plain (codepoint) expressions see it.
pub fn wide_symbols(cp: &Codepoints) -> Vec<u32> {
    cp.cpts
        .iter()
        .zip(&cp.flags)
        .map(|(&c, &f)| if c > 0x7F && f.is_whitespace() { WHITESPACE_STAND_IN } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(re: &str, text: &str) -> Vec<String> {
        let r = Regex::new(re).unwrap();
        let cp = Codepoints::new(text);
        let sym = if r.collapsed { collapsed_symbols(&cp) } else { wide_symbols(&cp) };
        r.split(&sym, &[(0, cp.len())])
            .into_iter()
            .map(|(a, b)| cp.cpts[a..b].iter().map(|&c| char::from_u32(c).unwrap()).collect())
            .collect()
    }

    #[test]
    fn alternation_and_gaps() {
        assert_eq!(pieces("[0-9][0-9][0-9]", "a12345b"), ["a", "123", "45b"]);
        assert_eq!(pieces("\\p{N}+", "ab12c٣"), ["ab", "12", "c", "٣"]);
        assert_eq!(pieces("\\s?\\p{L}+", "hi there"), ["hi", " there"]);
        assert_eq!(pieces("\\s+$", "a  "), ["a", "  "]);
    }

    #[test]
    fn lookahead_and_empty_matches() {
        assert_eq!(pieces("\\s+(?!\\S)", "a   b"), ["a", "  ", " b"]);
        // zero-width matches become empty pieces
        assert_eq!(pieces("(?=(\\d{3})+(?!\\d))", "1234567"), ["1", "", "234", "", "567"]);
    }

    #[test]
    fn tekken_letters() {
        let re = "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|\\p{N}";
        assert_eq!(pieces(re, "HelloWorld 42"), ["Hello", "World", " ", "4", "2"]);
    }
}
