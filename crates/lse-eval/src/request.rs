//! The perplexity request (SPEC §7 fields) shared by the CLI, the C API and Python.

use crate::error::{EvalError, Result};
use crate::input::{pair_from_json, tokens_from_json, PairRecord};
use crate::kld::MAX_TOP_K;
use crate::plan::Method;
use serde_json::Value;
use std::path::PathBuf;

/// The perplexity flags and their fields in the request object (C API, Python, `/v1/perplexity`):
/// checks word their messages with the flags, and the JSON front ends respell them
/// ([`lse_engine::respell`]).
pub const REQUEST_FIELDS: &[(&str, &str)] = &[
    ("--perplexity-method", "method"),
    ("--perplexity-ctx", "ctx"),
    ("--perplexity-stride", "stride"),
    ("--perplexity-chunks", "chunks"),
    ("--perplexity-pairs", "pairs"),
    ("--perplexity-tokens", "tokens"),
    ("--perplexity-kld-base-out", "kld_base_out"),
    ("--perplexity-kld-top-k", "kld_top_k"),
    ("--perplexity-kld", "kld_base"),
    ("--perplexity-shard", "shard"),
    ("--perplexity-output", "shard_out"),
    ("--perplexity-merge", "shards"),
];

/// `msg` in the terms of a caller who gave a request object and engine options object (C API,
/// Python): the request's and the engine's flags named by their fields.
pub fn in_field_terms(msg: &str) -> String {
    lse_engine::respell(&lse_engine::respell(msg, REQUEST_FIELDS), lse_engine::spelling::ENGINE_FIELDS)
}

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
    /// Score only this shard's share of the windows and write a shard file (SPEC-extension, see
    /// `shard_file`) to `shard_out` instead of a report.
    pub shard: Option<ShardSpec>,
    pub shard_out: Option<PathBuf>,
    /// SHA-256 of the model file, recorded in a shard file's plan fingerprint (front ends fill it).
    pub model_sha256: Option<String>,
}

/// `--perplexity-shard I/N`: shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    pub index: usize,
    pub count: usize,
}

impl ShardSpec {
    /// Parses `I/N`, `auto` or `auto/N`. `auto` takes the index from a Slurm job array
    /// (`SLURM_ARRAY_TASK_ID` minus `SLURM_ARRAY_TASK_MIN`, count `SLURM_ARRAY_TASK_COUNT`) or a
    /// Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`, count from `auto/N`); `env` looks variables up.
    pub fn parse(s: &str, env: impl Fn(&str) -> Option<String>) -> Result<ShardSpec> {
        let bad = |m: String| Err(EvalError::InvalidOption(m));
        let num = |what: &str, v: &str| -> Result<usize> {
            v.trim().parse::<usize>().map_err(|_| EvalError::InvalidOption(format!("--perplexity-shard: {what} must be a non-negative integer, got '{v}'")))
        };
        let (head, count) = match s.split_once('/') {
            Some((h, n)) => (h, Some(num("the shard count N", n)?)),
            None => (s, None),
        };
        let spec = if head == "auto" {
            if let Some(id) = env("SLURM_ARRAY_TASK_ID") {
                let id = num("SLURM_ARRAY_TASK_ID", &id)?;
                let min = env("SLURM_ARRAY_TASK_MIN").map(|m| num("SLURM_ARRAY_TASK_MIN", &m)).transpose()?.unwrap_or(0);
                if let Some(step) = env("SLURM_ARRAY_TASK_STEP") {
                    if num("SLURM_ARRAY_TASK_STEP", &step)? != 1 {
                        return bad(format!("--perplexity-shard auto: the Slurm array has step {step}; use a contiguous array (--array=0-{{N-1}})"));
                    }
                }
                let slurm_count = env("SLURM_ARRAY_TASK_COUNT").map(|c| num("SLURM_ARRAY_TASK_COUNT", &c)).transpose()?;
                let count = match (count, slurm_count) {
                    (Some(n), Some(c)) if n != c => {
                        return bad(format!("--perplexity-shard auto/{n}: the Slurm array has {c} tasks (SLURM_ARRAY_TASK_COUNT)"))
                    }
                    (Some(n), _) | (None, Some(n)) => n,
                    (None, None) => return bad("--perplexity-shard auto: SLURM_ARRAY_TASK_COUNT is not set; give the count as auto/N".into()),
                };
                if id < min {
                    return bad(format!("--perplexity-shard auto: SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"));
                }
                ShardSpec { index: id - min, count }
            } else if let Some(i) = env("JOB_COMPLETION_INDEX") {
                let index = num("JOB_COMPLETION_INDEX", &i)?;
                match count {
                    Some(count) => ShardSpec { index, count },
                    None => return bad("--perplexity-shard auto: JOB_COMPLETION_INDEX gives the index but not the count; use auto/N (N = the Job's completions)".into()),
                }
            } else {
                return bad("--perplexity-shard auto: neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX is set (outside a Slurm job array or a Kubernetes Indexed Job, use I/N)".into());
            }
        } else {
            match count {
                Some(count) => ShardSpec { index: num("the shard index I", head)?, count },
                None => return bad(format!("--perplexity-shard must be I/N (0-based shard I of N), auto or auto/N, got '{s}'")),
            }
        };
        spec.check()?;
        Ok(spec)
    }

    pub fn check(&self) -> Result<()> {
        if self.count == 0 {
            return Err(EvalError::InvalidOption("--perplexity-shard: the shard count N must be at least 1".into()));
        }
        if self.index >= self.count {
            return Err(EvalError::InvalidOption(format!(
                "--perplexity-shard {}/{}: the index must be below the count (shards are numbered 0 to {})",
                self.index,
                self.count,
                self.count - 1
            )));
        }
        Ok(())
    }

    /// This shard's contiguous share `[first, end)` of `windows` planned windows.
    pub fn range(&self, windows: usize) -> (usize, usize) {
        (self.index * windows / self.count, (self.index + 1) * windows / self.count)
    }
}

/// `--perplexity-merge SHARD...`: shard files of one plan, merged into the report and the base.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MergeRequest {
    pub shards: Vec<PathBuf>,
    /// Where the merged KL base goes (default: the `--perplexity-kld-base-out` the shards were given).
    pub kld_base_out: Option<PathBuf>,
    pub include_windows: bool,
    pub include_token_ids: bool,
}

impl MergeRequest {
    pub fn validate(&self) -> Result<()> {
        if self.shards.is_empty() {
            return Err(EvalError::InvalidOption("--perplexity-merge needs at least one shard file".into()));
        }
        Ok(())
    }

    /// From JSON: `shards` (array of paths), `kld_base_out`, `include_windows`, `include_token_ids`.
    pub fn from_json(v: &Value) -> Result<MergeRequest> {
        let bad = |m: &str| EvalError::InvalidOption(m.to_string());
        let o = v.as_object().ok_or_else(|| bad("merge request must be a JSON object"))?;
        let mut r = MergeRequest::default();
        for (k, x) in o {
            match k.as_str() {
                "shards" => {
                    let arr = x.as_array().ok_or_else(|| bad("merge request field shards must be an array of paths"))?;
                    r.shards = arr
                        .iter()
                        .map(|p| p.as_str().map(PathBuf::from).ok_or_else(|| bad("merge request field shards must be an array of paths")))
                        .collect::<Result<_>>()?;
                }
                "kld_base_out" if x.is_null() => {}
                "kld_base_out" => {
                    r.kld_base_out = Some(PathBuf::from(x.as_str().ok_or_else(|| bad("merge request field kld_base_out must be a path"))?))
                }
                "include_windows" => r.include_windows = x.as_bool().ok_or_else(|| bad("include_windows must be true or false"))?,
                "include_token_ids" => r.include_token_ids = x.as_bool().ok_or_else(|| bad("include_token_ids must be true or false"))?,
                other => {
                    return Err(EvalError::InvalidOption(format!(
                        "unknown merge request field \"{other}\" (allowed: shards, kld_base_out, include_windows, include_token_ids)"
                    )))
                }
            }
        }
        r.validate()?;
        Ok(r)
    }
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
            shard: None,
            shard_out: None,
            model_sha256: None,
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
        for (flag, v) in [("--perplexity-ctx", self.ctx), ("--perplexity-stride", self.stride)] {
            if v.is_some_and(|v| v > u32::MAX as usize) {
                return bad(format!("{flag} {} is beyond any context (at most {}, as llama.cpp's n_ctx)", v.unwrap_or(0), u32::MAX));
            }
        }
        if let Some(k) = self.kld_top_k {
            if !(1..=MAX_TOP_K).contains(&k) {
                return bad(format!("--perplexity-kld-top-k must be between 1 and {MAX_TOP_K}, got {k}"));
            }
            if self.kld_base_out.is_none() {
                return bad("--perplexity-kld-top-k only applies when writing a KL base with --perplexity-kld-base-out PATH (it sets the ids kept per token there)".into());
            }
        }
        match (&self.shard, &self.shard_out) {
            (Some(s), Some(_)) => s.check()?,
            (Some(_), None) => return bad("--perplexity-shard needs --perplexity-output PATH: where the shard file goes".into()),
            (None, Some(_)) => return bad("a shard file path (shard_out) needs --perplexity-shard".into()),
            (None, None) => {}
        }
        if self.chunks == Some(0) {
            return bad("--perplexity-chunks must be at least 1".into());
        }
        // a shard file's model fingerprint: a wrong one would let shards of other models merge
        if let Some(h) = &self.model_sha256 {
            if h.len() != 64 || !h.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
                return bad(format!("model_sha256 must be 64 hex digits (the SHA-256 of the model's files), got {h:?}"));
            }
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
                "shard" => {
                    if !x.is_null() {
                        let so = x.as_object().ok_or_else(|| bad("request field shard must be {\"index\": I, \"count\": N}".into()))?;
                        if let Some(other) = so.keys().find(|f| *f != "index" && *f != "count") {
                            return Err(bad(format!("unknown field shard.{other} (allowed: index, count)")));
                        }
                        let field = |f: &str| {
                            so.get(f).and_then(Value::as_u64).map(|n| n as usize).ok_or_else(|| bad(format!("request field shard.{f} must be a non-negative integer")))
                        };
                        r.shard = Some(ShardSpec { index: field("index")?, count: field("count")? });
                    }
                }
                "shard_out" => r.shard_out = path(k, x)?,
                "model_sha256" => {
                    if !x.is_null() {
                        // hex as tools print it (PowerShell's Get-FileHash: upper case), kept in lower
                        r.model_sha256 = Some(x.as_str().ok_or_else(|| bad("request field model_sha256 must be a string".into()))?.to_ascii_lowercase());
                    }
                }
                other => {
                    return Err(bad(format!(
                        "unknown request field \"{other}\" (allowed: text, tokens, pairs, method, ctx, stride, chunks, kld_base_out, kld_top_k, kld_base, include_windows, include_token_ids, shard, shard_out, model_sha256)"
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
