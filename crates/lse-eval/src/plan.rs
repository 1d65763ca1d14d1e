//! Window plans: which tokens each fresh session sees and which targets it scores.
//!
//! A window covers `tokens[begin..end]`; inside it, targets at window indices
//! `first_target..len` are scored, each from the row at the index before it.

use crate::error::{EvalError, Result};

/// The scoring method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// llama.cpp's: non-overlapping chunks, second half scored.
    Chunks,
    /// Overlapping windows every `stride` tokens, each target scored once.
    Sliding,
    /// One window per prompt/response record, response tokens scored.
    Pairs,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Chunks => "chunks",
            Method::Sliding => "sliding",
            Method::Pairs => "pairs",
        }
    }

    /// Parses `chunks` or `sliding` (the values `--perplexity-method` takes).
    pub fn parse(s: &str) -> Result<Method> {
        match s {
            "chunks" => Ok(Method::Chunks),
            "sliding" => Ok(Method::Sliding),
            _ => Err(EvalError::InvalidOption(format!(
                "unknown --perplexity-method '{s}' (allowed: chunks, sliding)"
            ))),
        }
    }
}

/// One fresh session of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub index: usize,
    /// First token (index into the run's token array).
    pub begin: usize,
    /// One past the last token.
    pub end: usize,
    /// Window index of the first scored target (`>= 1`).
    pub first_target: usize,
    /// Replace the first input token by BOS (chunks/sliding when the vocabulary has `add_bos`).
    pub bos_replace: bool,
}

impl Window {
    pub fn len(&self) -> usize {
        self.end - self.begin
    }
    pub fn is_empty(&self) -> bool {
        self.end == self.begin
    }
    /// Number of scored targets.
    pub fn scored(&self) -> usize {
        self.len().saturating_sub(self.first_target)
    }
    /// Window positions whose rows are scored (each predicts the token after it).
    pub fn positions(&self) -> std::ops::Range<usize> {
        self.first_target - 1..self.len().max(self.first_target) - 1
    }
    /// The model input: the window's tokens, the first replaced by `bos` when asked.
    pub fn input(&self, tokens: &[u32], bos: Option<u32>) -> Vec<u32> {
        let mut v = tokens[self.begin..self.end].to_vec();
        if let (true, Some(b), Some(first)) = (self.bos_replace, bos, v.first_mut()) {
            *first = b;
        }
        v
    }
}

/// llama.cpp's chunks: `floor(n/ctx)` chunks (capped by `limit`), targets `ctx/2+1 .. ctx-1` of each.
pub fn plan_chunks(n_tokens: usize, ctx: usize, limit: Option<usize>, bos_replace: bool) -> Result<Vec<Window>> {
    if ctx < 2 {
        return Err(EvalError::InvalidOption(format!("--perplexity-ctx must be at least 2 for chunks, got {ctx}")));
    }
    if n_tokens < 2 * ctx {
        return Err(EvalError::TooShort(format!(
            "text too short: {n_tokens} tokens, but chunks of {ctx} need at least {} (two chunks)",
            2 * ctx
        )));
    }
    let mut n = n_tokens / ctx;
    if let Some(l) = limit {
        n = n.min(l);
    }
    Ok((0..n)
        .map(|k| Window { index: k, begin: k * ctx, end: k * ctx + ctx, first_target: ctx / 2 + 1, bos_replace })
        .collect())
}

/// SPEC §3.4 sliding windows: window `w` covers `[w*stride, w*stride+ctx)` clipped at the end; the last
/// window is the first one that reaches the end; each window scores only targets no earlier window scored.
/// Windows left with nothing to score (only possible at the end with `stride == ctx`) are dropped.
pub fn plan_sliding(
    n_tokens: usize,
    ctx: usize,
    stride: usize,
    limit: Option<usize>,
    bos_replace: bool,
) -> Result<Vec<Window>> {
    if ctx < 2 {
        return Err(EvalError::InvalidOption(format!("--perplexity-ctx must be at least 2, got {ctx}")));
    }
    if stride == 0 || stride > ctx {
        return Err(EvalError::InvalidOption(format!(
            "--perplexity-stride must be between 1 and the ctx ({ctx}), got {stride}"
        )));
    }
    if n_tokens < 2 {
        return Err(EvalError::TooShort(format!(
            "text too short: {n_tokens} tokens, but sliding windows need at least 2"
        )));
    }
    let mut out = Vec::new();
    let mut scored_up_to = 1; // next target (absolute index) not yet scored
    let mut w = 0;
    loop {
        let begin = w * stride;
        let end = (begin + ctx).min(n_tokens);
        let first_target = scored_up_to.max(begin + 1) - begin;
        if end > begin + first_target {
            out.push(Window { index: out.len(), begin, end, first_target, bos_replace });
            scored_up_to = end;
        }
        if end >= n_tokens || limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        w += 1;
    }
    Ok(out)
}

/// Pairs: record `i` is `tokens[offsets[i]..offsets[i+1]]` with `prompt_lens[i]` prompt tokens.
pub fn plan_pairs(lens: &[(usize, usize)], limit: Option<usize>) -> Vec<Window> {
    let mut out = Vec::new();
    let mut begin = 0;
    for (i, &(prompt, total)) in lens.iter().enumerate() {
        if limit.is_some_and(|l| i >= l) {
            break;
        }
        out.push(Window { index: i, begin, end: begin + total, first_target: prompt.max(1), bos_replace: false });
        begin += total;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_at_512() {
        let w = plan_chunks(2000, 512, None, true).unwrap();
        assert_eq!(w.len(), 3); // floor(2000/512)
        for (k, win) in w.iter().enumerate() {
            assert_eq!(win.begin, 512 * k);
            assert_eq!(win.end, 512 * k + 512);
            assert_eq!(win.first_target, 257);
            assert_eq!(win.scored(), 255);
            assert_eq!(win.positions(), 256..511); // rows 256..=510 predict 257..=511
        }
        assert_eq!(plan_chunks(2000, 512, Some(2), true).unwrap().len(), 2);
        assert_eq!(plan_chunks(2000, 512, Some(9), true).unwrap().len(), 3);
    }

    #[test]
    fn chunks_odd_ctx() {
        let w = plan_chunks(100, 7, None, false).unwrap();
        assert_eq!(w[0].first_target, 4);
        assert_eq!(w[0].scored(), 3); // 7 - 3 - 1
    }

    #[test]
    fn chunks_need_two() {
        let e = plan_chunks(1023, 512, None, false).unwrap_err().to_string();
        assert!(e.contains("1023") && e.contains("1024"), "{e}");
        assert!(plan_chunks(1024, 512, None, false).is_ok());
    }

    #[test]
    fn bos_replacement_keeps_length() {
        let toks: Vec<u32> = (10..30).collect();
        let w = plan_chunks(20, 10, None, true).unwrap();
        let inp = w[1].input(&toks, Some(1));
        assert_eq!(inp.len(), 10);
        assert_eq!(inp[0], 1);
        assert_eq!(&inp[1..], &toks[11..20]);
        let w = plan_chunks(20, 10, None, false).unwrap();
        assert_eq!(w[1].input(&toks, Some(1)), toks[10..20].to_vec());
    }

    #[allow(clippy::needless_range_loop)]
    fn check_cover(n: usize, ctx: usize, stride: usize) {
        let w = plan_sliding(n, ctx, stride, None, false).unwrap();
        let mut count = vec![0u32; n];
        for (i, win) in w.iter().enumerate() {
            assert_eq!(win.index, i);
            assert_eq!(win.begin, i * stride);
            assert_eq!(win.end, (i * stride + ctx).min(n));
            assert!(win.first_target >= 1);
            for t in win.begin + win.first_target..win.end {
                count[t] += 1;
                if i > 0 {
                    assert!(t - win.begin >= ctx - stride, "context of target {t}");
                }
            }
        }
        // the last window reaches the end (unless it would score nothing: stride == ctx, one token left)
        let last_end = w.last().unwrap().end;
        assert!(last_end == n || (stride == ctx && n % ctx == 1 && last_end == n - 1), "n={n}");
        if stride < ctx {
            assert_eq!(count[0], 0);
            assert!(count[1..].iter().all(|&c| c == 1), "n={n} ctx={ctx} stride={stride}");
        } else {
            for (t, &c) in count.iter().enumerate() {
                assert_eq!(c, if t % ctx == 0 { 0 } else { 1 }, "token {t}");
            }
        }
    }

    #[test]
    fn sliding_256_96_over_1000() {
        let w = plan_sliding(1000, 256, 96, None, false).unwrap();
        let scored: usize = w.iter().map(|w| w.scored()).sum();
        assert_eq!(scored, 999);
        assert_eq!(w.len(), 9);
        assert_eq!(w[0].first_target, 1);
        assert_eq!(w[1].first_target, 160);
        assert_eq!((w[8].begin, w[8].end, w[8].scored()), (768, 1000, 72));
        check_cover(1000, 256, 96);
    }

    #[test]
    fn sliding_cover_many() {
        for &(n, ctx, stride) in &[(1000, 256, 256), (1001, 256, 256), (1025, 256, 256), (10, 256, 3), (300, 17, 1), (300, 17, 16), (257, 256, 128)] {
            check_cover(n, ctx, stride);
        }
    }

    #[test]
    fn sliding_limit_and_errors() {
        assert_eq!(plan_sliding(1000, 256, 96, Some(3), false).unwrap().len(), 3);
        assert!(plan_sliding(1000, 256, 257, None, false).unwrap_err().to_string().contains("stride"));
        assert!(plan_sliding(1000, 256, 0, None, false).is_err());
    }

    #[test]
    fn pairs_plan() {
        let w = plan_pairs(&[(3, 5), (0, 4), (2, 2)], None);
        assert_eq!(w[0], Window { index: 0, begin: 0, end: 5, first_target: 3, bos_replace: false });
        assert_eq!(w[1].first_target, 1);
        assert_eq!((w[1].begin, w[1].end), (5, 9));
        assert_eq!(w[2].scored(), 0);
        assert_eq!(w[2].positions().len(), 0);
    }
}
