//! The shard file of `--perplexity-shard I/N`: one shard's plan fingerprint, token ids, per-window
//! records and its part of a KL base being recorded. Little-endian:
//! ```text
//! bytes 0..8   magic "LSESHD01"
//! u32          H = length of the JSON header; H bytes of JSON (the fingerprint and run facts)
//! u64 T, T x u32          the run's token ids
//! u64 W, W x record       the shard's windows, in window order (see `put_record`)
//! u64 C, u64 K, C x (8 + 8K) bytes   its KL-base records (C = 0, K = 0 when not recording)
//! 32 bytes     SHA-256 of everything before it
//! ```
//! Floats are stored as their bits, so a merge reads back exactly what the shard computed.

use crate::atomic::AtomicFile;
use crate::error::{io_reason, EvalError, Result};
use crate::kld::{BaseRecords, RunIdentity};
use crate::plan::Method;
use crate::stats::Moments;
use crate::summary::{RunMeta, WindowKld, WindowRecord};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

pub const SHARD_MAGIC: &[u8; 8] = b"LSESHD01";
pub const SHARD_FORMAT_VERSION: u64 = 1;
/// The LSE version that writes (and alone reads) shard files.
pub const LSE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// One shard, as written by a shard run and read by a merge.
#[derive(Debug, Clone)]
pub struct ShardFile {
    pub lse_version: String,
    pub index: usize,
    pub count: usize,
    /// The shard's windows `[first_window, end_window)` of the plan.
    pub first_window: usize,
    pub end_window: usize,
    pub meta: RunMeta,
    pub model_sha256: Option<String>,
    pub kld_base_sha256: Option<String>,
    /// The `--perplexity-kld-base-out` the shard was given (where a merge writes the base by default).
    pub kld_base_out: Option<String>,
    pub include_windows: bool,
    pub include_token_ids: bool,
    pub elapsed_seconds: f64,
    pub prefill_tokens: usize,
    pub token_ids: Vec<u32>,
    pub records: Vec<WindowRecord>,
    pub base: Option<BaseRecords>,
}

/// SHA-256 (hex) of a file's bytes, read in 1 MiB blocks.
pub fn file_sha256(path: &Path, what: &str) -> Result<String> {
    files_sha256(&[path.to_path_buf()], what)
}

/// SHA-256 of the model at `model` (a file or folder as `--model` takes it), recorded in a
/// shard file's plan: its files' bytes one after another (a split model's shards, in order).
pub fn model_sha256(model: &Path) -> Result<String> {
    let files = lse_engine::model_files(model).map_err(|e| EvalError::Input(e.to_string()))?;
    files_sha256(&files, "model")
}

/// SHA-256 of the files' bytes one after another.
fn files_sha256(paths: &[std::path::PathBuf], what: &str) -> Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for path in paths {
        let err = |e: std::io::Error| EvalError::Input(format!("cannot read {what} {}: {}", path.display(), io_reason(&e)));
        let mut f = std::fs::File::open(path).map_err(err)?;
        loop {
            let n = f.read(&mut buf).map_err(err)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
    }
    Ok(hex(&h.finalize()))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl ShardFile {
    /// The JSON header: every field a merge compares, then this shard's own facts.
    fn header(&self) -> Value {
        let r = &self.meta.run;
        json!({
            "format": "lse.perplexity-shard",
            "version": SHARD_FORMAT_VERSION,
            "lse_version": self.lse_version,
            "token_ids_sha256": r.token_ids_sha256,
            "tokens": r.tokens,
            "method": r.method.name(),
            "ctx": r.ctx,
            "stride": r.stride,
            "chunks": r.chunks,
            "windows": r.windows,
            "scored_tokens": r.scored_tokens,
            "n_vocab": r.n_vocab,
            "model_sha256": self.model_sha256,
            "model": self.meta.model,
            "config": self.meta.config,
            "kld_base": self.meta.kld_base.as_ref().map(|(n, _)| n),
            "kld_base_top_k": self.meta.kld_base.as_ref().map(|(_, k)| k),
            "kld_base_sha256": self.kld_base_sha256,
            "kld_base_out": self.kld_base_out,
            "kld_base_out_top_k": self.meta.base_top_k,
            "include_windows": self.include_windows,
            "include_token_ids": self.include_token_ids,
            "shard_count": self.count,
            "shard_index": self.index,
            "first_window": self.first_window,
            "end_window": self.end_window,
            "elapsed_seconds": self.elapsed_seconds,
            "prefill_tokens": self.prefill_tokens,
        })
    }

    /// The header fields that must agree across the shards of one plan, in the order they are checked.
    pub const PLAN_FIELDS: &'static [&'static str] = &[
        "lse_version", "model_sha256", "model", "token_ids_sha256", "tokens", "method", "ctx", "stride", "chunks", "windows",
        "scored_tokens", "n_vocab", "kld_base", "kld_base_top_k", "kld_base_sha256", "kld_base_out", "kld_base_out_top_k",
        "config", "shard_count",
    ];

    /// Serializes the shard (header, body, checksum).
    pub fn to_bytes(&self) -> Vec<u8> {
        let h = serde_json::to_vec(&self.header()).expect("JSON");
        let mut b = Vec::with_capacity(64 + h.len() + 4 * self.token_ids.len() + self.base.as_ref().map_or(0, |x| x.bytes.len()));
        b.extend_from_slice(SHARD_MAGIC);
        b.extend_from_slice(&(h.len() as u32).to_le_bytes());
        b.extend_from_slice(&h);
        put_u64(&mut b, self.token_ids.len());
        for &t in &self.token_ids {
            b.extend_from_slice(&t.to_le_bytes());
        }
        put_u64(&mut b, self.records.len());
        for r in &self.records {
            put_record(&mut b, r);
        }
        match &self.base {
            Some(base) => {
                put_u64(&mut b, base.count);
                put_u64(&mut b, base.top_k);
                b.extend_from_slice(&base.bytes);
            }
            None => {
                put_u64(&mut b, 0);
                put_u64(&mut b, 0);
            }
        }
        let sum = Sha256::digest(&b);
        b.extend_from_slice(&sum);
        b
    }

    /// Writes the shard atomically to `out`.
    pub fn write(&self, out: AtomicFile) -> Result<()> {
        out.commit(&self.to_bytes())
    }

    /// The header JSON of a shard file (for comparing plans), and the shard.
    pub fn read(path: &Path) -> Result<(Value, ShardFile)> {
        let bytes = crate::input::read_input(path).map_err(|reason| EvalError::Input(format!("cannot read shard file {}: {reason}", path.display())))?;
        ShardFile::from_bytes(&bytes, path)
    }

    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<(Value, ShardFile)> {
        let corrupt = |why: &str| EvalError::Input(format!("shard file {} is truncated or corrupt: {why}", path.display()));
        if bytes.len() < 8 || &bytes[..8] != SHARD_MAGIC {
            return Err(EvalError::Input(format!("{} is not a shard file (no LSESHD01 magic at its start)", path.display())));
        }
        if bytes.len() < 8 + 4 + 32 {
            return Err(corrupt("shorter than the smallest shard file"));
        }
        let (body, sum) = bytes.split_at(bytes.len() - 32);
        if Sha256::digest(body).as_slice() != sum {
            return Err(corrupt("its SHA-256 checksum does not match its contents"));
        }
        let mut c = Cursor { b: body, at: 8 };
        let bad = |c: &Cursor, what: &str| corrupt(&format!("{what} at byte {}", c.at));
        let h_len = c.u32().ok_or_else(|| bad(&c, "header length missing"))? as usize;
        let hb = c.take(h_len).ok_or_else(|| bad(&c, "header runs past the end"))?;
        let header: Value = serde_json::from_slice(hb).map_err(|e| corrupt(&format!("header is not JSON ({e})")))?;
        let mut shard = parse_header(&header).map_err(|m| corrupt(&m))?;
        let n_tok = c.len_of(4).ok_or_else(|| bad(&c, "token ids run past the end"))?;
        shard.token_ids = (0..n_tok).map(|_| c.u32().unwrap()).collect();
        let n_rec = c.u64().ok_or_else(|| bad(&c, "window count missing"))? as usize;
        if n_rec > body.len() {
            return Err(bad(&c, "window count out of range"));
        }
        let kld = shard.meta.kld_base.is_some();
        for _ in 0..n_rec {
            let r = get_record(&mut c, kld).ok_or_else(|| bad(&c, "window record runs past the end"))?;
            shard.records.push(r);
        }
        let count = c.u64().ok_or_else(|| bad(&c, "KL base record count missing"))? as usize;
        let top_k = c.u64().ok_or_else(|| bad(&c, "KL base K missing"))? as usize;
        if top_k != shard.meta.base_top_k || (top_k == 0 && count != 0) {
            return Err(bad(&c, "KL base K differs from the header's"));
        }
        if top_k > 0 {
            let size = BaseRecords::record_size(top_k);
            let bytes = count.checked_mul(size).and_then(|n| c.take(n)).ok_or_else(|| bad(&c, "KL base records run past the end"))?;
            shard.base = Some(BaseRecords { top_k, bytes: bytes.to_vec(), count });
        }
        if c.at != body.len() {
            return Err(bad(&c, "unexpected bytes after the last section"));
        }
        Ok((header, shard))
    }
}

fn parse_header(h: &Value) -> std::result::Result<ShardFile, String> {
    let o = h.as_object().ok_or("header is not a JSON object")?;
    let u = |k: &str| o.get(k).and_then(Value::as_u64).map(|x| x as usize).ok_or(format!("header field {k} missing or not an integer"));
    let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string).ok_or(format!("header field {k} missing or not a string"));
    let os = |k: &str| match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(x)) => Ok(Some(x.clone())),
        _ => Err(format!("header field {k} is not a string or null")),
    };
    let ou = |k: &str| match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(|x| Some(x as usize)).ok_or(format!("header field {k} is not an integer or null")),
    };
    let b = |k: &str| o.get(k).and_then(Value::as_bool).ok_or(format!("header field {k} missing or not a boolean"));
    if s("format")? != "lse.perplexity-shard" {
        return Err("header format is not lse.perplexity-shard".into());
    }
    if u("version")? as u64 != SHARD_FORMAT_VERSION {
        return Err(format!("shard format version {} is not supported (expected {SHARD_FORMAT_VERSION})", u("version")?));
    }
    let method = match s("method")?.as_str() {
        "chunks" => Method::Chunks,
        "sliding" => Method::Sliding,
        "pairs" => Method::Pairs,
        m => return Err(format!("header method {m:?} is unknown")),
    };
    let kld_base = match (os("kld_base")?, ou("kld_base_top_k")?) {
        (Some(n), Some(k)) => Some((n, k)),
        (None, None) => None,
        _ => return Err("header fields kld_base and kld_base_top_k disagree".into()),
    };
    let elapsed = o.get("elapsed_seconds").and_then(Value::as_f64).ok_or("header field elapsed_seconds missing")?;
    Ok(ShardFile {
        lse_version: s("lse_version")?,
        index: u("shard_index")?,
        count: u("shard_count")?,
        first_window: u("first_window")?,
        end_window: u("end_window")?,
        meta: RunMeta {
            run: RunIdentity {
                token_ids_sha256: s("token_ids_sha256")?,
                tokens: u("tokens")?,
                method,
                ctx: u("ctx")?,
                stride: u("stride")?,
                chunks: ou("chunks")?,
                windows: u("windows")?,
                scored_tokens: u("scored_tokens")?,
                n_vocab: u("n_vocab")?,
            },
            model: o.get("model").cloned().unwrap_or(Value::Null),
            config: o.get("config").cloned().unwrap_or(Value::Null),
            kld_base,
            base_top_k: u("kld_base_out_top_k")?,
        },
        model_sha256: os("model_sha256")?,
        kld_base_sha256: os("kld_base_sha256")?,
        kld_base_out: os("kld_base_out")?,
        include_windows: b("include_windows")?,
        include_token_ids: b("include_token_ids")?,
        elapsed_seconds: elapsed,
        prefill_tokens: u("prefill_tokens")?,
        token_ids: Vec::new(),
        records: Vec::new(),
        base: None,
    })
}

fn put_u64(b: &mut Vec<u8>, x: usize) {
    b.extend_from_slice(&(x as u64).to_le_bytes());
}

fn put_f64(b: &mut Vec<u8>, x: f64) {
    b.extend_from_slice(&x.to_le_bytes());
}

fn put_moments(b: &mut Vec<u8>, m: &Moments) {
    put_u64(b, m.n);
    put_f64(b, m.sum);
    put_f64(b, m.sum_sq);
}

/// index, begin, end, first_target (u64); NLL moments (u64 n, f64 sum, f64 sum of squares); f64
/// seconds; then with a compared base: base-NLL, log-ratio, KLD and delta-p moments, f64 kld_max,
/// u64 same_top, f64 top_mass, and the window's KLD values (u64 count, f64 each).
fn put_record(b: &mut Vec<u8>, r: &WindowRecord) {
    for x in [r.index, r.begin, r.end, r.first_target] {
        put_u64(b, x);
    }
    put_moments(b, &r.nll);
    put_f64(b, r.seconds);
    if let Some(k) = &r.kld {
        for m in [&k.base_nll, &k.log_ratio, &k.kld, &k.delta_p] {
            put_moments(b, m);
        }
        put_f64(b, k.kld_max);
        put_u64(b, k.same_top);
        put_f64(b, k.top_mass);
        put_u64(b, k.klds.len());
        for &x in &k.klds {
            put_f64(b, x);
        }
    }
}

fn get_record(c: &mut Cursor, kld: bool) -> Option<WindowRecord> {
    let (index, begin, end, first_target) = (c.u64()? as usize, c.u64()? as usize, c.u64()? as usize, c.u64()? as usize);
    let nll = c.moments()?;
    let seconds = c.f64()?;
    let kld = if kld {
        let (base_nll, log_ratio, k, delta_p) = (c.moments()?, c.moments()?, c.moments()?, c.moments()?);
        let kld_max = c.f64()?;
        let same_top = c.u64()? as usize;
        let top_mass = c.f64()?;
        let n = c.len_of(8)?;
        let klds = (0..n).map(|_| c.f64().unwrap()).collect();
        Some(WindowKld { base_nll, log_ratio, kld: k, klds, kld_max, same_top, delta_p, top_mass })
    } else {
        None
    };
    Some(WindowRecord { index, begin, end, first_target, nll, seconds, kld })
}

struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn moments(&mut self) -> Option<Moments> {
        Some(Moments { n: self.u64()? as usize, sum: self.f64()?, sum_sq: self.f64()? })
    }
    /// A u64 count of items of `size` bytes that must all fit in what is left.
    fn len_of(&mut self, size: usize) -> Option<usize> {
        let n = self.u64()? as usize;
        (n.checked_mul(size)? <= self.b.len() - self.at).then_some(n)
    }
}
