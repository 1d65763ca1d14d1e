//! Binding weights by llama.cpp tensor name: matrices stay in the memory map in their stored
//! (possibly quantized) type; small tensors (norms, biases) are read as f32.

use crate::{EngineError, HParams};
use lse_gguf::{GgmlType, GgufFile, TensorInfo, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A 2-D weight `W[n][k]` (ggml dims `[k, n]`): `n` rows of `k` elements of type `ty`.
#[derive(Clone)]
pub struct Matrix {
    pub name: String,
    pub ty: GgmlType,
    /// Input width (elements per row).
    pub k: usize,
    /// Output width (rows).
    pub n: usize,
    file: Arc<GgufFile>,
    index: usize,
    /// Byte range `(start, len)` inside the tensor: one expert of a 3-D expert tensor; `None` = all of it.
    part: Option<(usize, usize)>,
    /// The weights repacked for the register-tiled kernels, made on first use (shared by clones).
    packed: Arc<std::sync::OnceLock<Option<lse_kernels::PackedMatrix>>>,
    /// Bytes of every packed copy made from this file (for the memory report and the decode bench).
    packed_total: Arc<PackedTally>,
    /// Rows looked up by decode steps whose mapped pages are not yet released (shared by clones).
    held: Arc<Mutex<HeldRows>>,
}

/// Looked-up rows waiting to have their pages dropped (see [`Matrix::release_rows`]).
struct HeldRows {
    ids: [u32; HELD_ROWS],
    len: usize,
}

impl Default for HeldRows {
    fn default() -> HeldRows {
        HeldRows { ids: [0; HELD_ROWS], len: 0 }
    }
}

// A lookup of fewer than `FEW_ROWS` rows (a decode step's) leaves its pages mapped until
// `HELD_ROWS` rows wait: dropping them is an `madvise` that makes the kernel flush the other
// cores' TLBs, and paid every step it cost a lone SmolLM2 session 65 µs of each 4.3 ms step
// (2-vCPU guest). Held rows keep at most `HELD_ROWS` × 64 KiB mapped.
const FEW_ROWS: usize = 16;
const HELD_ROWS: usize = 256;

impl Matrix {
    /// The stored bytes (`n` rows of `row_bytes()`).
    pub fn bytes(&self) -> &[u8] {
        let data = self.file.tensor_data(&self.file.tensors()[self.index]);
        match self.part {
            Some((start, len)) => &data[start..start + len],
            None => data,
        }
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.ty.row_bytes(self.k).unwrap_or(0)
    }

    /// Rows `r0 .. r0 + n` as a matrix of their own (a part of a fused tensor: phi3's `attn_qkv`,
    /// `ffn_up` holding gate and up); `None` when they are not all there.
    pub fn rows(&self, r0: usize, n: usize) -> Option<Matrix> {
        if r0 + n > self.n {
            return None;
        }
        let rb = self.row_bytes();
        let start = self.part.map_or(0, |(s, _)| s) + r0 * rb;
        Some(Matrix {
            name: format!("{}[{r0}..{}]", self.name, r0 + n),
            n,
            part: Some((start, n * rb)),
            packed: Default::default(),
            held: Default::default(),
            ..self.clone()
        })
    }

    /// The packed copy for the register-tiled matmul (made once, on `pool`), or `None` when the
    /// type or CPU has no packed kernels.
    pub fn packed(&self, pool: &lse_kernels::ThreadPool) -> Option<&lse_kernels::PackedMatrix> {
        self.packed
            .get_or_init(|| {
                // the packed copy replaces the mapped bytes for the matmul: hold the weights once,
                // dropping each chunk of mapped rows as soon as it is packed
                let (bytes, rb) = (self.bytes(), self.row_bytes());
                let release = |rows: std::ops::Range<usize>| self.file.release_pages(&bytes[rows.start * rb..rows.end * rb]);
                let p = lse_kernels::PackedMatrix::new_releasing(pool, self.ty, bytes, self.n, self.k, self.packed_total.pages(), &release);
                if let Some(p) = &p {
                    self.file.release_pages(bytes);
                    self.packed_total.packed.fetch_add(p.size_bytes(), Ordering::Relaxed);
                    self.packed_total.source.fetch_add(bytes.len(), Ordering::Relaxed);
                }
                p
            })
            .as_ref()
    }
}

impl Matrix {
    /// Drops the mapped pages that looking up `ids` brought in (an embedding table), a few rows'
    /// at a time only once [`HELD_ROWS`] of them wait.
    pub fn release_rows(&self, ids: &[u32]) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let len = held.len;
        if ids.len() < FEW_ROWS && len + ids.len() < HELD_ROWS {
            held.ids[len..len + ids.len()].copy_from_slice(ids);
            held.len += ids.len();
            return;
        }
        self.release_now(&held.ids[..len]);
        held.len = 0;
        self.release_now(ids);
    }

    /// Drops the mapped pages of rows `ids` now: a fault maps an aligned window of pages around
    /// the row (fault-around), so the whole window goes.
    fn release_now(&self, ids: &[u32]) {
        const WINDOW: usize = 64 << 10;
        let (bytes, rb) = (self.bytes(), self.row_bytes());
        let base = bytes.as_ptr() as usize;
        // the windows of all rows, merged, so a pass of thousands of tokens costs a few calls
        let mut spans: crate::StepList<(usize, usize)> = ids
            .iter()
            .map(|&id| (id as usize * rb, (id as usize + 1) * rb))
            .filter(|&(_, end)| end <= bytes.len())
            .map(|(start, end)| (((base + start) / WINDOW * WINDOW).max(base) - base, ((base + end).div_ceil(WINDOW) * WINDOW - base).min(bytes.len())))
            .collect();
        spans.sort_unstable();
        let mut merged: crate::StepList<(usize, usize)> = crate::StepList::with_capacity(spans.len());
        for (lo, hi) in spans {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        for (lo, hi) in merged {
            self.file.release_pages(&bytes[lo..hi]);
        }
    }
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Matrix({} {} [{} x {}])", self.name, self.ty.name(), self.n, self.k)
    }
}

/// Bytes of the packed copies made so far, and of the file's rows they were made from; with
/// huge pages, the arena the copies take their memory from.
#[derive(Default)]
struct PackedTally {
    packed: AtomicUsize,
    source: AtomicUsize,
    huge_pages: bool,
    arena: Option<Arc<lse_kernels::pages::HugeArena>>,
}

impl PackedTally {
    fn pages(&self) -> lse_kernels::pages::Pages<'_> {
        if self.huge_pages {
            lse_kernels::pages::Pages::Huge(self.arena.as_ref())
        } else {
            lse_kernels::pages::Pages::Small
        }
    }
}

/// The open model file (or the shards of a split model) and its common hyperparameters, for
/// binding tensors by name.
pub struct Weights {
    /// The file holding the metadata (a split model's first shard).
    pub file: Arc<GgufFile>,
    /// Every file holding tensors, `file` first.
    shards: Vec<Arc<GgufFile>>,
    pub hp: HParams,
    packed_total: Arc<PackedTally>,
    /// See [`Weights::fingerprint`] (worked out on first use).
    fingerprint: std::sync::OnceLock<u64>,
}

impl Weights {
    /// A [`crate::checksum`] of every tensor's name, type, shape and first 64 bytes: what tells
    /// two files of one architecture and vocabulary apart (another quantization or fine-tune)
    /// where a session file must match its model.
    pub fn fingerprint(&self) -> u64 {
        *self.fingerprint.get_or_init(|| {
            let mut h = 0u64;
            let mut eat = |b: &[u8]| h = crate::checksum::checksum(h, b);
            for f in &self.shards {
                for t in f.tensors() {
                    eat(t.name.as_bytes());
                    eat(t.ggml_type.name().as_bytes());
                    t.dims.iter().for_each(|d| eat(&d.to_le_bytes()));
                    let data = f.tensor_data(t);
                    eat(&data[..data.len().min(64)]);
                }
            }
            h
        })
    }

    /// Bytes of the packed weight copies made so far (they are made on first use).
    pub fn packed_bytes(&self) -> usize {
        self.packed_total.packed.load(Ordering::Relaxed)
    }

    /// The file's bytes of the matrices packed so far (what the packed copies replace).
    pub fn packed_source_bytes(&self) -> usize {
        self.packed_total.source.load(Ordering::Relaxed)
    }

    /// `shards`: the model's files in shard order (one for an unsplit model); the first holds
    /// the metadata. `huge_pages`: packed copies ask for huge pages.
    pub fn new(shards: Vec<Arc<GgufFile>>, hp: HParams, huge_pages: bool) -> Weights {
        // room for every matrix's copy (packed layouts hold at most 4/3 of the file's bytes);
        // address space only until a copy is made
        let file_bytes: usize = shards.iter().map(|f| f.bytes().len()).sum();
        let arena = huge_pages.then(|| lse_kernels::pages::HugeArena::new(file_bytes / 2 * 3)).flatten();
        let packed_total = Arc::new(PackedTally { huge_pages, arena, ..Default::default() });
        Weights { file: shards[0].clone(), shards, hp, packed_total, fingerprint: Default::default() }
    }

    /// The shard holding tensor `name`, the tensor's position in it, and its description.
    fn find(&self, name: &str) -> Option<(&Arc<GgufFile>, usize, &TensorInfo)> {
        self.shards.iter().find_map(|f| f.tensor_position(name).map(|i| (f, i, &f.tensors()[i])))
    }

    /// Whether the model has a tensor of this name.
    pub fn has(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    /// The description (type, dims) of tensor `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.find(name).map(|(_, _, t)| t)
    }

    /// Every tensor of the model, shard by shard.
    pub fn tensor_infos(&self) -> impl Iterator<Item = &TensorInfo> {
        self.shards.iter().flat_map(|f| f.tensors())
    }

    /// Bytes of the model's files.
    pub fn file_bytes(&self) -> usize {
        self.shards.iter().map(|f| f.bytes().len()).sum()
    }

    /// A required matrix of `n` rows by `k` columns (ggml dims `[k, n]`).
    pub fn matrix(&self, name: &str, k: usize, n: usize) -> Result<Matrix, EngineError> {
        self.opt_matrix(name, k, n)?.ok_or_else(|| EngineError::MissingTensor(name.to_string()))
    }

    /// An optional matrix; present with the wrong shape or type is an error.
    pub fn opt_matrix(&self, name: &str, k: usize, n: usize) -> Result<Option<Matrix>, EngineError> {
        let Some((file, index, t)) = self.find(name) else {
            return Ok(None);
        };
        let want = [k as u64, n as u64];
        if trim_dims(&t.dims) != trim_dims(&want) {
            return Err(EngineError::ShapeMismatch { name: name.to_string(), got: t.dims.clone(), want: want.to_vec() });
        }
        if !lse_kernels::supports(t.ggml_type) {
            return Err(EngineError::UnsupportedTensorType(name.to_string(), t.ggml_type.name()));
        }
        Ok(Some(Matrix { name: name.to_string(), ty: t.ggml_type, k, n, file: file.clone(), index, part: None, packed: Default::default(), packed_total: self.packed_total.clone(), held: Default::default() }))
    }

    /// The experts of a 3-D tensor (ggml dims `[k, n, n_expert]`) as `n_expert` matrices of `n`
    /// rows by `k`, each a view of its slice of the file; `None` when the tensor is absent.
    pub fn opt_expert_matrices(&self, name: &str, k: usize, n: usize, n_expert: usize) -> Result<Option<Vec<Matrix>>, EngineError> {
        let Some((file, index, t)) = self.find(name) else {
            return Ok(None);
        };
        let want = [k as u64, n as u64, n_expert as u64];
        if trim_dims(&t.dims) != trim_dims(&want) {
            return Err(EngineError::ShapeMismatch { name: name.to_string(), got: t.dims.clone(), want: want.to_vec() });
        }
        if !lse_kernels::supports(t.ggml_type) {
            return Err(EngineError::UnsupportedTensorType(name.to_string(), t.ggml_type.name()));
        }
        let per = t.ggml_type.row_bytes(k).ok_or_else(|| EngineError::UnsupportedTensorType(name.to_string(), t.ggml_type.name()))? * n;
        Ok(Some(
            (0..n_expert)
                .map(|x| Matrix {
                    name: format!("{name}[{x}]"),
                    ty: t.ggml_type,
                    k,
                    n,
                    file: file.clone(),
                    index,
                    part: Some((x * per, per)),
                    packed: Default::default(),
                    packed_total: self.packed_total.clone(),
                    held: Default::default(),
                })
                .collect(),
        ))
    }

    /// A required 1-D tensor of `len` elements, as f32.
    pub fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>, EngineError> {
        self.tensor_f32(name, &[len])
    }

    /// An optional 1-D tensor of `len` elements, as f32.
    pub fn opt_vector(&self, name: &str, len: usize) -> Result<Option<Vec<f32>>, EngineError> {
        if self.has(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A required tensor with ggml dims `dims` (trailing 1s ignored), dequantized to f32.
    pub fn tensor_f32(&self, name: &str, dims: &[usize]) -> Result<Vec<f32>, EngineError> {
        let (file, _, t) = self.find(name).ok_or_else(|| EngineError::MissingTensor(name.to_string()))?;
        let want: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        if trim_dims(&t.dims) != trim_dims(&want) {
            return Err(EngineError::ShapeMismatch { name: name.to_string(), got: t.dims.clone(), want });
        }
        if !lse_kernels::supports(t.ggml_type) {
            return Err(EngineError::UnsupportedTensorType(name.to_string(), t.ggml_type.name()));
        }
        let n: usize = dims.iter().product();
        let row = *dims.first().unwrap_or(&1);
        let rb = t.ggml_type.row_bytes(row).ok_or_else(|| EngineError::UnsupportedTensorType(name.to_string(), t.ggml_type.name()))?;
        let data = file.tensor_data(t);
        let mut out = vec![0f32; n];
        if row > 0 {
            for (src, dst) in data.chunks_exact(rb).zip(out.chunks_exact_mut(row)) {
                lse_kernels::dequantize_row(t.ggml_type, src, dst);
            }
        }
        Ok(out)
    }

    /// The metadata value `{arch}.{suffix}`.
    pub fn key(&self, suffix: &str) -> Option<&Value> {
        self.file.get(&format!("{}.{suffix}", self.hp.arch))
    }

    pub fn key_u64(&self, suffix: &str) -> Option<u64> {
        self.key(suffix).and_then(|v| v.as_u64())
    }

    pub fn key_f32(&self, suffix: &str) -> Option<f32> {
        self.key(suffix).and_then(|v| v.as_f32())
    }

    pub fn key_bool(&self, suffix: &str) -> Option<bool> {
        self.key(suffix).and_then(|v| v.as_bool())
    }
}

/// Dims without trailing 1s (ggml pads shapes with 1s).
fn trim_dims(d: &[u64]) -> Vec<u64> {
    let mut v = d.to_vec();
    while v.len() > 1 && v.last() == Some(&1) {
        v.pop();
    }
    v
}
