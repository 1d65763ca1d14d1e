//! The perplexity request (SPEC §7 fields) shared by the CLI, the C API and Python.

use crate::error::{EvalError, Result};
use crate::input::{pair_from_json, tokens_from_json, PairRecord};
use crate::kld::MAX_TOP_K;
use crate::plan::Method;
use serde_json::Value;
use std::path::PathBuf;

/// What to score.
#[derive(Debug, Clone, PartialEq)]
pub enum PerplexityInput {
    /// Text, tokenized once as a prompt (used as given: `read_text_file` applies the CLI's
    /// one-trailing-newline rule).
    Text(String),
    /// Token ids, scored as given.
    Tokens(Vec<u32>),
    /// Prompt/response records (`method` pairs).
    Pairs(Vec<PairRecord>),
}

/// A perplexity run. `None` fields take the SPEC defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PerplexityRequest {
    pub input: PerplexityInput,
    /// `chunks` (default) or `sliding`; pairs input implies `pairs`.
    pub method: Option<Method>,
    /// Tokens per chunk or window (default 512; pairs: the longest record).
    pub ctx: Option<usize>,
    /// `sliding` only: tokens between window starts (default: the ctx).
    pub stride: Option<usize>,
    /// Score only the first N chunks/windows/records.
    pub chunks: Option<usize>,
    /// Record an LSE KL base here.
    pub kld_base_out: Option<PathBuf>,
    /// Ids per token in that base (1..=32, default 32).
    pub kld_top_k: Option<usize>,
    /// Compare against this base (LSE or llama.cpp format).
    pub kld_base: Option<PathBuf>,
    pub include_windows: bool,
    pub include_token_ids: bool,
}

impl Default for PerplexityRequest {
    fn default() -> Self {
        PerplexityRequest {
            input: PerplexityInput::Text(String::new()),
            method: None,
            ctx: None,
            stride: None,
            chunks: None,
            kld_base_out: None,
            kld_top_k: None,
            kld_base: None,
            include_windows: false,
            include_token_ids: false,
        }
    }
}

pub const DEFAULT_CTX: usize = 512;

impl PerplexityRequest {
    /// The method in force.
    pub fn method(&self) -> Method {
        match (&self.input, self.method) {
            (PerplexityInput::Pairs(_), _) => Method::Pairs,
            (_, Some(m)) => m,
            (_, None) => Method::Chunks,
        }
    }

    pub fn top_k(&self) -> usize {
        self.kld_top_k.unwrap_or(MAX_TOP_K)
    }

    /// Checks the options alone (no model, no files). Messages name the CLI option and the allowed values.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(EvalError::InvalidOption(m));
        let pairs = matches!(self.input, PerplexityInput::Pairs(_));
        if pairs && matches!(self.method, Some(Method::Sliding)) {
            return bad("--perplexity-method sliding cannot be used with --perplexity-pairs".into());
        }
        if !pairs && matches!(self.method, Some(Method::Pairs)) {
            return bad("method pairs needs prompt/response pairs (--perplexity-pairs)".into());
        }
        if let Some(k) = self.kld_top_k {
            if !(1..=MAX_TOP_K).contains(&k) {
                return bad(format!("--perplexity-kld-top-k must be between 1 and {MAX_TOP_K}, got {k}"));
            }
        }
        if self.chunks == Some(0) {
            return bad("--perplexity-chunks must be at least 1".into());
        }
        if pairs {
            return Ok(());
        }
        let ctx = self.ctx.unwrap_or(DEFAULT_CTX);
        if ctx < 2 {
            return bad(format!("--perplexity-ctx must be at least 2, got {ctx}"));
        }
        match (self.method(), self.stride) {
            (Method::Chunks, Some(s)) if s != ctx => {
                bad(format!("--perplexity-stride applies to --perplexity-method sliding only (chunks use stride = ctx = {ctx}), got {s}"))
            }
            (Method::Sliding, Some(s)) if s == 0 || s > ctx => {
                bad(format!("--perplexity-stride must be between 1 and --perplexity-ctx ({ctx}), got {s}"))
            }
            _ => Ok(()),
        }
    }

    /// A request from the JSON object of SPEC §7 (C API, Python): `text` or `tokens` or `pairs`
    /// (array of `{"prompt","response"}`), `method`, `ctx`, `stride`, `chunks`, `kld_base_out`,
    /// `kld_top_k`, `kld_base`, `include_windows`, `include_token_ids`. Unknown fields are refused.
    pub fn from_json(v: &Value) -> Result<PerplexityRequest> {
        let bad = |m: String| EvalError::InvalidOption(m);
        let o = v.as_object().ok_or_else(|| bad("request must be a JSON object".into()))?;
        let mut r = PerplexityRequest::default();
        let mut inputs = 0;
        let uint = |k: &str, x: &Value| -> Result<Option<usize>> {
            if x.is_null() {
                return Ok(None);
            }
            x.as_u64().map(|n| Some(n as usize)).ok_or_else(|| bad(format!("request field {k} must be a non-negative integer")))
        };
        let path = |k: &str, x: &Value| -> Result<Option<PathBuf>> {
            if x.is_null() {
                return Ok(None);
            }
            x.as_str().map(|s| Some(PathBuf::from(s))).ok_or_else(|| bad(format!("request field {k} must be a string path")))
        };
        let flag = |k: &str, x: &Value| -> Result<bool> {
            if x.is_null() {
                return Ok(false);
            }
            x.as_bool().ok_or_else(|| bad(format!("request field {k} must be true or false")))
        };
        for (k, x) in o {
            match k.as_str() {
                "text" => {
                    inputs += 1;
                    r.input = PerplexityInput::Text(
                        x.as_str().ok_or_else(|| bad("request field text must be a string".into()))?.to_string(),
                    );
                }
                "tokens" => {
                    inputs += 1;
                    r.input = PerplexityInput::Tokens(tokens_from_json(x).map_err(|m| bad(format!("request field tokens: {m}")))?);
                }
                "pairs" => {
                    inputs += 1;
                    let arr = x.as_array().ok_or_else(|| bad("request field pairs must be an array of {prompt, response}".into()))?;
                    let recs = arr
                        .iter()
                        .enumerate()
                        .map(|(i, p)| pair_from_json(p, i + 1).map_err(|m| bad(format!("request pairs record {}: {m}", i + 1))))
                        .collect::<Result<Vec<_>>>()?;
                    if recs.is_empty() {
                        return Err(bad("request field pairs is empty".into()));
                    }
                    r.input = PerplexityInput::Pairs(recs);
                }
                "method" => {
                    if !x.is_null() {
                        let s = x.as_str().ok_or_else(|| bad("request field method must be a string".into()))?;
                        r.method = Some(if s == "pairs" { Method::Pairs } else { Method::parse(s)? });
                    }
                }
                "ctx" => r.ctx = uint(k, x)?,
                "stride" => r.stride = uint(k, x)?,
                "chunks" => r.chunks = uint(k, x)?,
                "kld_top_k" => r.kld_top_k = uint(k, x)?,
                "kld_base_out" => r.kld_base_out = path(k, x)?,
                "kld_base" => r.kld_base = path(k, x)?,
                "include_windows" => r.include_windows = flag(k, x)?,
                "include_token_ids" => r.include_token_ids = flag(k, x)?,
                other => {
                    return Err(bad(format!(
                        "unknown request field \"{other}\" (allowed: text, tokens, pairs, method, ctx, stride, chunks, kld_base_out, kld_top_k, kld_base, include_windows, include_token_ids)"
                    )))
                }
            }
        }
        if inputs != 1 {
            return Err(bad("request needs exactly one of text, tokens, pairs".into()));
        }
        r.validate()?;
        Ok(r)
    }
}
