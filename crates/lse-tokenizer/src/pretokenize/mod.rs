//! Pre-tokenizers: split a text into the words BPE merges inside, exactly as llama.cpp's
//! `unicode_regex_split` does for each `tokenizer.ggml.pre` family. Each family is a hand-written
//! matcher with the same leftmost-first semantics as the regular expressions it stands for.

mod default;
mod digits;
mod gpt2;
mod llama3;

use crate::unicode::Codepoints;

pub use llama3::Variant as Llama3Variant;

/// The splitting rules of one family of pre-tokenizer types (llama.cpp's `LLAMA_VOCAB_PRE_TYPE_*`;
/// types whose rules are the same expressions share a variant).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PreTokenizer {
    /// GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`.
    Gpt2,
    /// Llama 3 and its relatives (contractions, letters, numbers of 1-3 digits, ...).
    Llama3,
    /// Qwen2: the Llama 3 rules with single digits.
    Qwen2,
    /// Qwen3.5: the Qwen2 rules with combining marks joined to letters.
    Qwen35,
    /// StarCoder / SmolLM: every digit alone, then the GPT-2 rules.
    DigitsThenGpt2,
    /// llama.cpp's fallback rules for a BPE vocabulary with pre-type `default`.
    Default,
    /// Jais 2: Llama 3 with whitespace runs cut in powers of two.
    Jais2,
    DeepseekLlm,
    DeepseekCoder,
    /// DeepSeek V3, Hunyuan dense, JoyAI, HY v4.
    Deepseek3,
    Spark25,
    Youtu,
    Falcon,
    /// BLOOM, Poro, GPT-3 Finnish.
    Bloom,
    Viking,
    Tekken,
    Chameleon,
    /// GPT-4o, Llama 4, MiniMax M2.
    Gpt4o,
    GraniteEmbMulti,
    TinyAya,
    KimiK2,
    SuperBpe,
    BailingMoe,
    SeedCoder,
    Ufakzeka,
    Afmoe,
    Laguna,
    ExaoneMoe,
    MiniCpm5,
    /// Gemma 4, Sarvam: runs of newlines and runs of everything else.
    Newlines,
    /// `\S+` (the `whitespace` tokenizer model).
    Whitespace,
}

/// A half-open range of codepoint indices.
pub(crate) type Span = (usize, usize);

impl PreTokenizer {
    /// Whether this crate has the splitting rules.
    pub fn implemented(self) -> bool {
        use PreTokenizer::*;
        matches!(self, Gpt2 | Llama3 | Qwen2 | Qwen35 | DigitsThenGpt2 | Default)
    }

    /// Splits `text` into words; returns their byte ranges, in order, covering the whole text.
    pub fn split(self, text: &str) -> Vec<(usize, usize)> {
        let cp = Codepoints::new(text);
        if cp.is_empty() {
            return Vec::new();
        }
        let whole = vec![(0, cp.len())];
        let spans = match self {
            PreTokenizer::Gpt2 => gpt2::split(&cp, &whole),
            PreTokenizer::Llama3 => llama3::split(&cp, &whole, llama3::Variant::Llama3),
            PreTokenizer::Qwen2 => llama3::split(&cp, &whole, llama3::Variant::Qwen2),
            PreTokenizer::Qwen35 => llama3::split(&cp, &whole, llama3::Variant::Qwen35),
            PreTokenizer::DigitsThenGpt2 => {
                let s = digits::each_number(&cp, &whole);
                gpt2::split(&cp, &s)
            }
            PreTokenizer::Default => default::split(&cp, &whole),
            _ => whole,
        };
        spans
            .into_iter()
            .map(|(a, b)| (cp.byte_offsets[a], cp.byte_offsets[b]))
            .collect()
    }
}

/// Codepoint access limited to one span, as the splitters see it: positions outside the span read
/// as "nothing" (no codepoint, no flags).
pub(crate) struct Window<'a> {
    cp: &'a Codepoints,
    pub ini: usize,
    pub end: usize,
}

pub(crate) const OUT_OF_RANGE: u32 = u32::MAX;

impl<'a> Window<'a> {
    pub fn new(cp: &'a Codepoints, span: Span) -> Self {
        Window {
            cp,
            ini: span.0,
            end: span.1,
        }
    }
    #[inline]
    pub fn cpt(&self, pos: usize) -> u32 {
        if pos >= self.ini && pos < self.end {
            self.cp.cpts[pos]
        } else {
            OUT_OF_RANGE
        }
    }
    #[inline]
    pub fn flags(&self, pos: usize) -> crate::unicode::Flags {
        if pos >= self.ini && pos < self.end {
            self.cp.flags[pos]
        } else {
            crate::unicode::Flags::NONE
        }
    }
}

/// Collects the pieces of one span: each `cut(end)` closes the piece that began at the previous cut.
pub(crate) struct Cutter<'a> {
    out: &'a mut Vec<Span>,
    prev: usize,
}

impl<'a> Cutter<'a> {
    pub fn new(out: &'a mut Vec<Span>, start: usize) -> Self {
        Cutter { out, prev: start }
    }
    /// Ends the current piece at `end`; returns its length (0 when nothing was pending).
    #[inline]
    pub fn cut(&mut self, end: usize) -> usize {
        let len = end - self.prev;
        if len > 0 {
            self.out.push((self.prev, end));
        }
        self.prev = end;
        len
    }
}

/// The last alternatives of the GPT-2 and Llama 3 expressions, `\s+(?!\S)|\s+` and then any one
/// codepoint: a run of `n_ws` whitespace codepoints at `pos` keeps its last one for the next word
/// when one follows. Cuts the piece and returns where it ends.
pub(crate) fn whitespace_or_one(w: &Window, pos: usize, n_ws: usize, cut: &mut Cutter) -> usize {
    let end = if n_ws > 1 && w.cpt(pos + n_ws) != OUT_OF_RANGE {
        pos + n_ws - 1
    } else if n_ws > 0 {
        pos + n_ws
    } else {
        pos + 1
    };
    cut.cut(end);
    end
}

/// Applies a "regular expression" in the way `std::regex_iterator` walks a span: at each point the
/// leftmost match is taken (`matcher(pos)` returns its end), the unmatched text before it becomes
/// a piece of its own, and so does any unmatched tail.
pub(crate) fn regex_walk(
    spans: &[Span],
    matcher: impl Fn(usize, Span) -> Option<usize>,
) -> Vec<Span> {
    let mut out = Vec::with_capacity(spans.len());
    for &span in spans {
        let (ini, end) = span;
        let mut gap_start = ini;
        let mut pos = ini;
        while pos < end {
            match matcher(pos, span) {
                Some(m_end) if m_end > pos => {
                    if pos > gap_start {
                        out.push((gap_start, pos));
                    }
                    out.push((pos, m_end));
                    pos = m_end;
                    gap_start = pos;
                }
                _ => pos += 1,
            }
        }
        if end > gap_start {
            out.push((gap_start, end));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(p: PreTokenizer, text: &str) -> Vec<&str> {
        p.split(text)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect()
    }

    #[test]
    fn gpt2_basic() {
        assert_eq!(
            words(PreTokenizer::Gpt2, "Hello world's  42!"),
            vec!["Hello", " world", "'s", " ", " 42", "!"]
        );
        assert_eq!(
            words(PreTokenizer::Gpt2, "a\n\nb"),
            vec!["a", "\n", "\n", "b"]
        );
        assert_eq!(words(PreTokenizer::Gpt2, "x   "), vec!["x", "   "]);
    }

    #[test]
    fn llama3_basic() {
        assert_eq!(
            words(PreTokenizer::Llama3, "Hello 12345 I'M\r\n\r\nok"),
            vec!["Hello", " ", "123", "45", " I", "'M", "\r\n\r\n", "ok"]
        );
        assert_eq!(words(PreTokenizer::Llama3, "x  y"), vec!["x", " ", " y"]);
    }

    #[test]
    fn qwen2_digits() {
        assert_eq!(words(PreTokenizer::Qwen2, "a123"), vec!["a", "1", "2", "3"]);
    }

    #[test]
    fn smollm_digits() {
        assert_eq!(
            words(PreTokenizer::DigitsThenGpt2, "ab 12c"),
            vec!["ab", " ", "1", "2", "c"]
        );
    }
}
