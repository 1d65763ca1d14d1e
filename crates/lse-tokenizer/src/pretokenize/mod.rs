//! Pre-tokenizers: split a text into the words BPE merges inside, exactly as llama.cpp's
//! `unicode_regex_split` does for each `tokenizer.ggml.pre` family. Each family is the list of
//! expressions llama.cpp applies in turn (`rules/`); an expression llama.cpp runs through a
//! hand-written splitter runs through the same one here (GPT-2, Llama 3, Qwen2, Qwen 3.5, Kimi K2,
//! digit groups, newlines), every other one through a `std::regex`-compatible matcher (`regex/`).

mod digit_groups;
mod gpt2;
mod kimi;
mod llama3;
mod newlines;
mod regex;
mod rules;

use std::sync::OnceLock;

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

/// Number of [`PreTokenizer`] variants.
const N_FAMILIES: usize = 31;

/// A splitter llama.cpp writes by hand for one exact expression.
type Custom = fn(&Codepoints, &[Span]) -> Vec<Span>;

fn custom(expr: &str) -> Option<Custom> {
    Some(if expr == rules::gpt2::EXPRESSIONS[0] {
        gpt2::split
    } else if expr == rules::llama3::EXPRESSIONS[0] || expr == LLAMA3_ORIGINAL {
        |cp, s| llama3::split(cp, s, llama3::Variant::Llama3)
    } else if expr == rules::qwen2::EXPRESSIONS[0] {
        |cp, s| llama3::split(cp, s, llama3::Variant::Qwen2)
    } else if expr == rules::qwen35::EXPRESSIONS[0] {
        |cp, s| llama3::split(cp, s, llama3::Variant::Qwen35)
    } else if expr == rules::kimi_k2::EXPRESSIONS[0] {
        kimi::split
    } else if expr == rules::afmoe::EXPRESSIONS[0] || expr == rules::tiny_aya::EXPRESSIONS[0] {
        digit_groups::split
    } else if expr == rules::newlines::EXPRESSIONS[0] {
        newlines::split
    } else {
        return None;
    })
}

/// Llama 3's expression as written in tokenizer.json (llama.cpp maps it to the same splitter).
const LLAMA3_ORIGINAL: &str = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/// One step of a family's split.
enum Step {
    Custom(Custom),
    Regex(regex::Regex),
    /// An expression the matcher cannot read (a bug; covered by a test): no split.
    Broken,
}

impl PreTokenizer {
    /// Whether this crate has the splitting rules (all of llama.cpp's families).
    pub fn implemented(self) -> bool {
        true
    }

    /// Whether words are mapped to GPT-2 byte characters before merging (false for the
    /// SentencePiece-style BPE of Gemma 4 and Sarvam, and for the `whitespace` tokenizer).
    pub fn byte_encoded(self) -> bool {
        !matches!(self, PreTokenizer::Newlines | PreTokenizer::Whitespace)
    }

    /// The expressions llama.cpp applies, in order.
    pub fn expressions(self) -> &'static [&'static str] {
        use PreTokenizer::*;
        match self {
            Gpt2 => rules::gpt2::EXPRESSIONS,
            Llama3 => rules::llama3::EXPRESSIONS,
            Qwen2 => rules::qwen2::EXPRESSIONS,
            Qwen35 => rules::qwen35::EXPRESSIONS,
            DigitsThenGpt2 => rules::starcoder::EXPRESSIONS,
            Default => rules::default::EXPRESSIONS,
            Jais2 => rules::jais2::EXPRESSIONS,
            DeepseekLlm => rules::deepseek_llm::EXPRESSIONS,
            DeepseekCoder => rules::deepseek_coder::EXPRESSIONS,
            Deepseek3 => rules::deepseek3::EXPRESSIONS,
            Spark25 => rules::spark25::EXPRESSIONS,
            Youtu => rules::youtu::EXPRESSIONS,
            Falcon => rules::falcon::EXPRESSIONS,
            Bloom => rules::bloom::EXPRESSIONS,
            Viking => rules::viking::EXPRESSIONS,
            Tekken => rules::tekken::EXPRESSIONS,
            Chameleon => rules::chameleon::EXPRESSIONS,
            Gpt4o => rules::gpt4o::EXPRESSIONS,
            GraniteEmbMulti => rules::granite_emb_multi::EXPRESSIONS,
            TinyAya => rules::tiny_aya::EXPRESSIONS,
            KimiK2 => rules::kimi_k2::EXPRESSIONS,
            SuperBpe => rules::superbpe::EXPRESSIONS,
            BailingMoe => rules::bailingmoe::EXPRESSIONS,
            SeedCoder => rules::seed_coder::EXPRESSIONS,
            Ufakzeka => rules::ufakzeka::EXPRESSIONS,
            Afmoe => rules::afmoe::EXPRESSIONS,
            Laguna => rules::laguna::EXPRESSIONS,
            ExaoneMoe => rules::exaone_moe::EXPRESSIONS,
            MiniCpm5 => rules::minicpm5::EXPRESSIONS,
            Newlines => rules::newlines::EXPRESSIONS,
            Whitespace => rules::whitespace::EXPRESSIONS,
        }
    }

    /// The compiled steps, built once per family.
    fn steps(self) -> &'static [Step] {
        static STEPS: [OnceLock<Vec<Step>>; N_FAMILIES] = [const { OnceLock::new() }; N_FAMILIES];
        STEPS[self as usize].get_or_init(|| {
            self.expressions()
                .iter()
                .map(|e| match custom(e) {
                    Some(f) => Step::Custom(f),
                    None => regex::Regex::new(e).map(Step::Regex).unwrap_or(Step::Broken),
                })
                .collect()
        })
    }

    /// Splits `text` into words; returns their byte ranges, in order, covering the whole text.
    /// A range may be empty where an expression matches the empty string (llama.cpp keeps those
    /// as empty words, which produce no tokens).
    pub fn split(self, text: &str) -> Vec<(usize, usize)> {
        let cp = Codepoints::new(text);
        if cp.is_empty() {
            return Vec::new();
        }
        let mut spans = vec![(0, cp.len())];
        let mut collapsed: Option<Vec<u32>> = None;
        let mut wide: Option<Vec<u32>> = None;
        for step in self.steps() {
            spans = match step {
                Step::Custom(f) => f(&cp, &spans),
                Step::Regex(re) => {
                    let symbols = if re.collapsed {
                        collapsed.get_or_insert_with(|| regex::collapsed_symbols(&cp))
                    } else {
                        wide.get_or_insert_with(|| regex::wide_symbols(&cp))
                    };
                    re.split(symbols, &spans)
                }
                Step::Broken => spans,
            };
        }
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
