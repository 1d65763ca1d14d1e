//! KL-divergence bases: LSE's top-K format (SPEC §5.1) and llama.cpp's `_logits_` format
//! (reference §4), and the checks that a base belongs to this run.

use crate::atomic::AtomicFile;
use crate::error::{io_reason, EvalError, Result};
use crate::plan::Method;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const LSE_MAGIC: &[u8; 8] = b"LSEKLD01";
pub const LLAMA_MAGIC: &[u8; 8] = b"_logits_";
/// Largest `--perplexity-kld-top-k`.
pub const MAX_TOP_K: usize = 32;

fn pad8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// The identity of a run that a base must match.
#[derive(Debug, Clone)]
pub struct RunIdentity {
    pub token_ids_sha256: String,
    pub tokens: usize,
    pub method: Method,
    pub ctx: usize,
    pub stride: usize,
    pub chunks: Option<usize>,
    pub windows: usize,
    pub scored_tokens: usize,
    pub n_vocab: usize,
}

/// The header of an LSE base.
#[derive(Debug, Clone)]
pub struct LseBaseHeader {
    pub json: Value,
    pub token_ids_sha256: String,
    pub tokens: usize,
    pub method: String,
    pub ctx: usize,
    pub stride: usize,
    pub chunks: Option<usize>,
    pub windows: usize,
    pub scored_tokens: usize,
    pub top_k: usize,
    pub n_vocab: usize,
    pub perplexity: f64,
}

/// An opened base of either format, header checked against the file size.
pub enum KldBase {
    Lse(LseBase),
    Llama(LlamaBase),
}

pub struct LseBase {
    pub path: PathBuf,
    pub header: LseBaseHeader,
    reader: BufReader<File>,
    buf: Vec<u8>,
    /// A record's ids sorted (the duplicate check's scratch).
    sorted: Vec<u32>,
    /// Records read or skipped so far (the next one's index).
    at: u64,
}

/// One LSE base record.
#[derive(Debug, Clone, Default)]
pub struct LseRecord {
    pub nll: f64,
    pub ids: Vec<u32>,
    pub logp: Vec<f32>,
}

pub struct LlamaBase {
    pub path: PathBuf,
    pub ctx: usize,
    pub n_vocab: usize,
    pub n_chunk: usize,
    pub tokens: Vec<u32>,
    reader: BufReader<File>,
    buf: Vec<u8>,
}

/// One dequantized llama.cpp base row: `log p_i = scale * q_i + min_log_prob`.
#[derive(Debug, Clone, Default)]
pub struct LlamaRow {
    pub scale: f32,
    pub min_log_prob: f32,
    pub q: Vec<u16>,
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> EvalError {
    EvalError::KldBase(format!("KLD base {} is truncated or corrupt: {why}", path.display()))
}

fn mismatch(path: &Path, field: &str, base: impl std::fmt::Display, here: impl std::fmt::Display) -> EvalError {
    EvalError::KldBase(format!(
        "KLD base {} does not match this run: {field} is {base} in the base but {here} here",
        path.display()
    ))
}

fn opt(v: Option<usize>) -> String {
    v.map_or("null".to_string(), |x| x.to_string())
}

impl KldBase {
    /// Opens a base, detects its format by magic, reads and checks the header against the file size.
    pub fn open(path: &Path) -> Result<KldBase> {
        // a directory, a FIFO (whose open would wait for a writer) or a device is no base
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => return Err(EvalError::KldBase(format!("KLD base {} is not a regular file", path.display()))),
            _ => {}
        }
        let file = File::open(path)
            .map_err(|e| EvalError::KldBase(format!("cannot open KLD base {}: {}", path.display(), io_reason(&e))))?;
        let size = file
            .metadata()
            .map_err(|e| EvalError::KldBase(format!("cannot read KLD base {}: {}", path.display(), io_reason(&e))))?
            .len();
        if size >= 1 << 62 {
            return Err(corrupt(path, "file too large"));
        }
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut magic = [0u8; 8];
        if size < 8 || reader.read_exact(&mut magic).is_err() {
            return Err(not_a_base(path));
        }
        match &magic {
            m if m == LSE_MAGIC => LseBase::open_rest(path, reader, size).map(KldBase::Lse),
            m if m == LLAMA_MAGIC => LlamaBase::open_rest(path, reader, size).map(KldBase::Llama),
            _ => Err(not_a_base(path)),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            KldBase::Lse(b) => &b.path,
            KldBase::Llama(b) => &b.path,
        }
    }

    /// Skips the records (rows) of `n` scored tokens.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        match self {
            KldBase::Lse(b) => b.skip(n),
            KldBase::Llama(b) => b.skip(n),
        }
    }

    /// The report's `kld.base` (the path as given) and `kld.top_k`.
    pub fn name_and_top_k(&self) -> (String, usize) {
        match self {
            KldBase::Lse(l) => (l.path.display().to_string(), l.header.top_k),
            KldBase::Llama(l) => (l.path.display().to_string(), l.n_vocab),
        }
    }

    /// Checks what is known before tokenization: method, ctx (when known), stride (when known), chunks.
    pub fn check_settings(&self, method: Method, ctx: Option<usize>, stride: Option<usize>, chunks: Option<usize>) -> Result<()> {
        match self {
            KldBase::Lse(b) => {
                let h = &b.header;
                if h.method != method.name() {
                    return Err(mismatch(&b.path, "method", &h.method, method.name()));
                }
                if let Some(c) = ctx {
                    if h.ctx != c {
                        return Err(mismatch(&b.path, "ctx", h.ctx, c));
                    }
                }
                if let Some(s) = stride {
                    if h.stride != s {
                        return Err(mismatch(&b.path, "stride", h.stride, s));
                    }
                }
                if h.chunks != chunks {
                    return Err(mismatch(&b.path, "chunks", opt(h.chunks), opt(chunks)));
                }
                Ok(())
            }
            KldBase::Llama(b) => {
                if method != Method::Chunks {
                    return Err(mismatch(&b.path, "method", "chunks (llama.cpp base)", method.name()));
                }
                if let Some(c) = ctx {
                    if b.ctx != c {
                        return Err(mismatch(&b.path, "ctx", b.ctx, c));
                    }
                }
                if let Some(n) = chunks {
                    if n != b.n_chunk {
                        return Err(mismatch(&b.path, "chunks", b.n_chunk, n));
                    }
                }
                Ok(())
            }
        }
    }
}

fn not_a_base(path: &Path) -> EvalError {
    EvalError::KldBase(format!(
        "{} is not a KLD base (no LSEKLD01 or _logits_ magic at its start)",
        path.display()
    ))
}

impl LseBase {
    fn open_rest(path: &Path, mut reader: BufReader<File>, size: u64) -> Result<LseBase> {
        let mut hl = [0u8; 4];
        reader.read_exact(&mut hl).map_err(|_| corrupt(path, "header length missing"))?;
        let h_len = u32::from_le_bytes(hl) as u64;
        if 12 + h_len > size {
            return Err(corrupt(path, format!("header of {h_len} bytes runs past the end of the {size}-byte file")));
        }
        let mut hb = vec![0u8; h_len as usize];
        reader.read_exact(&mut hb).map_err(|e| corrupt(path, io_reason(&e)))?;
        let json: Value = serde_json::from_slice(&hb).map_err(|e| corrupt(path, format!("header is not JSON ({e})")))?;
        let header = parse_header(json).map_err(|m| corrupt(path, m))?;
        let records_start = pad8(12 + h_len);
        let rec = 8 + 8 * header.top_k as u64;
        let want = (header.scored_tokens as u64).checked_mul(rec).and_then(|r| r.checked_add(records_start));
        if want != Some(size) {
            return Err(corrupt(
                path,
                format!(
                    "{size} bytes, but the header ({} scored tokens, top_k {}) needs {}",
                    header.scored_tokens,
                    header.top_k,
                    want.map_or("more than u64".into(), |w| w.to_string())
                ),
            ));
        }
        reader.seek(SeekFrom::Start(records_start)).map_err(|e| corrupt(path, io_reason(&e)))?;
        Ok(LseBase { path: path.to_path_buf(), header, reader, buf: vec![0; rec as usize], sorted: Vec::new(), at: 0 })
    }

    /// Checks the whole run identity (after tokenization and planning).
    pub fn check_run(&self, run: &RunIdentity) -> Result<()> {
        let h = &self.header;
        let p = &self.path;
        if h.method != run.method.name() {
            return Err(mismatch(p, "method", &h.method, run.method.name()));
        }
        if h.ctx != run.ctx {
            return Err(mismatch(p, "ctx", h.ctx, run.ctx));
        }
        if h.stride != run.stride {
            return Err(mismatch(p, "stride", h.stride, run.stride));
        }
        if h.chunks != run.chunks {
            return Err(mismatch(p, "chunks", opt(h.chunks), opt(run.chunks)));
        }
        if h.tokens != run.tokens {
            return Err(mismatch(p, "tokens", h.tokens, run.tokens));
        }
        if h.token_ids_sha256 != run.token_ids_sha256 {
            return Err(mismatch(p, "token_ids_sha256", &h.token_ids_sha256, &run.token_ids_sha256));
        }
        if h.windows != run.windows {
            return Err(mismatch(p, "windows", h.windows, run.windows));
        }
        if h.scored_tokens != run.scored_tokens {
            return Err(mismatch(p, "scored_tokens", h.scored_tokens, run.scored_tokens));
        }
        if h.n_vocab != run.n_vocab {
            return Err(mismatch(p, "n_vocab", h.n_vocab, run.n_vocab));
        }
        Ok(())
    }

    /// Skips `n` records (a shard starts at its first window's records).
    pub fn skip(&mut self, n: usize) -> Result<()> {
        let bytes = (n as u64).checked_mul(self.buf.len() as u64).and_then(|b| i64::try_from(b).ok());
        let bytes = bytes.ok_or_else(|| corrupt(&self.path, "skip past the end"))?;
        self.reader.seek_relative(bytes).map_err(|e| corrupt(&self.path, io_reason(&e)))?;
        self.at += n as u64;
        Ok(())
    }

    /// Reads the next record into `rec`; an NLL or log-probability no softmax gives (NaN,
    /// infinite or negative NLL, positive log-probability: the file was edited or damaged) is
    /// refused, naming the scored token and its `window` (chunk, window or pairs record).
    pub fn next(&mut self, rec: &mut LseRecord, window: usize) -> Result<()> {
        self.read(rec)?;
        // a little slack: the writer's log-softmax rounds
        const SLACK: f64 = 1e-3;
        let i = self.at;
        self.at += 1;
        let bad = |what: String| {
            EvalError::KldBase(format!("KLD base {} is corrupt: scored token {i} (in window {window}) {what}", self.path.display()))
        };
        if !(rec.nll.is_finite() && rec.nll >= -SLACK) {
            return Err(bad(format!("has an NLL of {} (an NLL is −log p: finite, not negative)", rec.nll)));
        }
        if let Some(lp) = rec.logp.iter().find(|&&lp| lp.is_nan() || lp as f64 > SLACK) {
            return Err(bad(format!("has a log-probability of {lp} (log p is at most 0)")));
        }
        let n_vocab = self.header.n_vocab;
        if let Some(id) = rec.ids.iter().find(|&&id| id as u64 >= n_vocab as u64) {
            return Err(bad(format!("lists token id {id} among its top {}, outside the vocabulary of {n_vocab}", rec.ids.len())));
        }
        // a token listed twice among its top-K would count its probability twice
        self.sorted.clear();
        self.sorted.extend_from_slice(&rec.ids);
        self.sorted.sort_unstable();
        if let Some(w) = self.sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(bad(format!("lists token id {} twice among its top {}", w[0], rec.ids.len())));
        }
        Ok(())
    }

    fn read(&mut self, rec: &mut LseRecord) -> Result<()> {
        self.reader.read_exact(&mut self.buf).map_err(|e| corrupt(&self.path, io_reason(&e)))?;
        let b = &self.buf;
        rec.nll = f64::from_le_bytes(b[0..8].try_into().unwrap());
        rec.ids.clear();
        rec.logp.clear();
        for i in 0..self.header.top_k {
            let o = 8 + 8 * i;
            rec.ids.push(u32::from_le_bytes(b[o..o + 4].try_into().unwrap()));
            rec.logp.push(f32::from_le_bytes(b[o + 4..o + 8].try_into().unwrap()));
        }
        Ok(())
    }
}

fn parse_header(json: Value) -> std::result::Result<LseBaseHeader, String> {
    let o = json.as_object().ok_or("header is not a JSON object")?;
    let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string).ok_or(format!("header field {k} missing or not a string"));
    let u = |k: &str| {
        o.get(k).and_then(Value::as_u64).map(|x| x as usize).ok_or(format!("header field {k} missing or not an integer"))
    };
    if s("format")? != "lse.kld-base" {
        return Err(format!("header format is {:?}, expected \"lse.kld-base\"", s("format")?));
    }
    if u("version")? != 1 {
        return Err(format!("header version {} is not supported (expected 1)", u("version")?));
    }
    let chunks = match o.get("chunks") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or("header field chunks is not an integer or null")? as usize),
    };
    let top_k = u("top_k")?;
    if top_k == 0 || top_k > 1 << 24 {
        return Err(format!("header top_k {top_k} is out of range"));
    }
    let perplexity = o.get("perplexity").and_then(Value::as_f64).ok_or("header field perplexity missing")?;
    Ok(LseBaseHeader {
        token_ids_sha256: s("token_ids_sha256")?,
        tokens: u("tokens")?,
        method: s("method")?,
        ctx: u("ctx")?,
        stride: u("stride")?,
        chunks,
        windows: u("windows")?,
        scored_tokens: u("scored_tokens")?,
        top_k,
        n_vocab: u("n_vocab")?,
        perplexity,
        json,
    })
}

impl LlamaBase {
    fn open_rest(path: &Path, mut reader: BufReader<File>, size: u64) -> Result<LlamaBase> {
        let mut h = [0u8; 12];
        reader.read_exact(&mut h).map_err(|_| corrupt(path, "header shorter than 20 bytes"))?;
        let ctx = i32::from_le_bytes(h[0..4].try_into().unwrap());
        let n_vocab = i32::from_le_bytes(h[4..8].try_into().unwrap());
        let n_chunk = i32::from_le_bytes(h[8..12].try_into().unwrap());
        if ctx < 2 || n_vocab < 1 || n_chunk < 1 {
            return Err(corrupt(path, format!("header ctx {ctx}, n_vocab {n_vocab}, chunks {n_chunk}")));
        }
        let (ctx, n_vocab, n_chunk) = (ctx as usize, n_vocab as usize, n_chunk as usize);
        let rows = ctx - 1 - ctx / 2;
        let row_bytes = 4 * n_vocab.div_ceil(2) + 8;
        let want = (n_chunk as u128) * (ctx as u128) * 4 + (n_chunk as u128) * (rows as u128) * (row_bytes as u128) + 20;
        if want != size as u128 {
            return Err(corrupt(
                path,
                format!("{size} bytes, but a llama.cpp base of {n_chunk} chunks of {ctx} with {n_vocab} logits per row needs {want}"),
            ));
        }
        let mut tb = vec![0u8; 4 * n_chunk * ctx];
        reader.read_exact(&mut tb).map_err(|e| corrupt(path, io_reason(&e)))?;
        let tokens = tb.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        Ok(LlamaBase { path: path.to_path_buf(), ctx, n_vocab, n_chunk, tokens, reader, buf: vec![0; row_bytes] })
    }

    /// Rows per chunk (`ctx - 1 - ctx/2`).
    pub fn rows_per_chunk(&self) -> usize {
        self.ctx - 1 - self.ctx / 2
    }

    /// Checks vocabulary size and that the base's ids are the first `n_chunk * ctx` ids of this run.
    pub fn check_run(&self, tokens: &[u32], n_vocab: usize) -> Result<()> {
        let p = &self.path;
        if self.n_vocab != n_vocab {
            return Err(mismatch(p, "n_vocab", self.n_vocab, n_vocab));
        }
        let need = self.n_chunk * self.ctx;
        if tokens.len() < need {
            return Err(mismatch(p, "tokens", format!("at least {need}"), tokens.len()));
        }
        if let Some(i) = (0..need).find(|&i| self.tokens[i] != tokens[i]) {
            return Err(mismatch(p, &format!("token id at index {i}"), self.tokens[i], tokens[i]));
        }
        Ok(())
    }

    /// Skips `n` rows (a shard starts at its first chunk's rows).
    pub fn skip(&mut self, n: usize) -> Result<()> {
        let bytes = (n as u64).checked_mul(self.buf.len() as u64).and_then(|b| i64::try_from(b).ok());
        let bytes = bytes.ok_or_else(|| corrupt(&self.path, "skip past the end"))?;
        self.reader.seek_relative(bytes).map_err(|e| corrupt(&self.path, io_reason(&e)))
    }

    /// Reads the next row into `row`.
    pub fn next(&mut self, row: &mut LlamaRow) -> Result<()> {
        self.reader.read_exact(&mut self.buf).map_err(|e| corrupt(&self.path, io_reason(&e)))?;
        let b = &self.buf;
        row.scale = f32::from_le_bytes(b[0..4].try_into().unwrap());
        row.min_log_prob = f32::from_le_bytes(b[4..8].try_into().unwrap());
        row.q.clear();
        row.q.extend(b[8..8 + 2 * self.n_vocab].chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])));
        Ok(())
    }
}

/// Per-token llama.cpp KLD (reference §5.1) from this run's full logits row and a base row.
/// Returns (kld, base_nll, base_argmax, base_mass_above_-16).
pub fn llama_kld(logits: &[f32], row: &LlamaRow, target: usize) -> (f64, f64, usize, f64) {
    let mut m = f32::NEG_INFINITY;
    for &l in logits {
        if l > m {
            m = l;
        }
    }
    let s: f64 = logits.iter().map(|&l| ((l - m).exp()) as f64).sum();
    let z = m + (s.ln() as f32);
    let mut kld = 0.0f64;
    let mut mass = 0.0f64;
    let mut best = f32::NEG_INFINITY;
    let mut ib = 0;
    for (i, (&q, &l)) in row.q.iter().zip(logits).enumerate() {
        let b = row.scale * q as f32 + row.min_log_prob;
        if b > best {
            best = b;
            ib = i;
        }
        if b > -16.0 {
            let p = b.exp();
            kld += (p * ((b - l) + z)) as f64;
            mass += p as f64;
        }
    }
    let bt = row.scale * row.q[target] as f32 + row.min_log_prob;
    (kld, -(bt as f64), ib, mass)
}

/// An LSE base's records in memory (8 + 8K bytes per scored token), in scoring order. A run
/// fills one and writes it with [`LseBaseWriter`]; a shard keeps its part in its shard file.
#[derive(Debug, Clone, Default)]
pub struct BaseRecords {
    pub top_k: usize,
    pub bytes: Vec<u8>,
    pub count: usize,
}

impl BaseRecords {
    pub fn new(top_k: usize) -> BaseRecords {
        BaseRecords { top_k, bytes: Vec::new(), count: 0 }
    }

    /// Bytes per record.
    pub fn record_size(top_k: usize) -> usize {
        8 + 8 * top_k
    }

    /// Appends one record; `top` holds up to K (id, log-prob) pairs, best first (missing ones are
    /// written as id 0, log-prob -inf).
    pub fn push(&mut self, nll: f64, top: impl Iterator<Item = (u32, f32)>) {
        self.bytes.extend_from_slice(&nll.to_le_bytes());
        let mut n = 0;
        for (id, lp) in top.take(self.top_k) {
            self.bytes.extend_from_slice(&id.to_le_bytes());
            self.bytes.extend_from_slice(&lp.to_le_bytes());
            n += 1;
        }
        for _ in n..self.top_k {
            self.bytes.extend_from_slice(&0u32.to_le_bytes());
            self.bytes.extend_from_slice(&f32::NEG_INFINITY.to_le_bytes());
        }
        self.count += 1;
    }

    /// Appends another part's records (same K).
    pub fn extend(&mut self, other: &BaseRecords) {
        self.bytes.extend_from_slice(&other.bytes);
        self.count += other.count;
    }
}

/// Writes an LSE base: the header (known at the end, with the perplexity) and the records, then
/// renames the file into place.
pub struct LseBaseWriter {
    file: AtomicFile,
}

impl LseBaseWriter {
    /// Creates the temporary file now (proving the path writable).
    pub fn create(path: &Path) -> Result<LseBaseWriter> {
        Ok(LseBaseWriter { file: AtomicFile::create(path, "KLD base")? })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The header JSON of SPEC §5.1.
    pub fn header(run: &RunIdentity, top_k: usize, perplexity: f64, model: Value, config: Value) -> Value {
        json!({
            "format": "lse.kld-base",
            "version": 1,
            "token_ids_sha256": run.token_ids_sha256,
            "tokens": run.tokens,
            "method": run.method.name(),
            "ctx": run.ctx,
            "stride": run.stride,
            "chunks": run.chunks,
            "windows": run.windows,
            "scored_tokens": run.scored_tokens,
            "top_k": top_k,
            "n_vocab": run.n_vocab,
            "perplexity": perplexity,
            "model": model,
            "config": config,
        })
    }

    /// Writes header + records and renames the file into place.
    pub fn finish(mut self, header: &Value, records: &BaseRecords) -> Result<()> {
        let h = serde_json::to_vec(header).expect("JSON");
        let pad = (pad8(12 + h.len() as u64) - (12 + h.len() as u64)) as usize;
        self.file.commit_with(|w| {
            w.write_all(LSE_MAGIC)?;
            w.write_all(&(h.len() as u32).to_le_bytes())?;
            w.write_all(&h)?;
            w.write_all(&[0u8; 8][..pad])?;
            w.write_all(&records.bytes)
        })
    }
}
