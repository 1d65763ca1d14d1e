//! The model engine: architectures, weights, KV cache, sessions and the prefill pass plan.
//!
//! [`Engine::load`] opens a GGUF model; [`Engine::prefill`] runs a prompt through a fresh session
//! (batch/ubatch pass plan) and returns the final-normed hidden rows of the requested positions;
//! [`Engine::head_reduce`] runs the LM head over those rows 128 at a time and reduces every row
//! (max, sum of exponentials, picked logits, top-K, argmax). See ARCH.md for adding an architecture.

pub mod arch;
pub mod backend;
pub mod blocks;
mod checksum;
pub mod embedding;
mod engine;
mod error;
mod forward;
pub mod generation;
mod head;
pub mod hparams;
pub mod kv_cache;
mod model;
mod model_path;
pub mod ops;
mod open_options;
mod options;
mod session;
mod session_file;
pub mod spelling;
pub mod weights;

pub use embedding::{EmbedReport, EmbedRequest, Pooling};
pub use engine::Engine;
pub use error::{check_token_ids, EngineError};
pub use forward::{Batch, BatchRow};
pub use generation::{FinishReason, GenerateRequest, GenerationReport, Infill, InfillFile, LogitBias, Prompt, SamplingParams, Sequence};
pub use head::{head_slices, HEAD_ROWS};
pub use hparams::HParams;
pub use lse_kernels::simd::{parse_level as parse_simd_level, Level as SimdLevel};
pub use lse_kernels::Dialect;
pub use model_path::{model_files, open_model_metadata, resolve_model_path};
pub use open_options::OpenOptions;
pub use options::{parse_dialect, physical_cores, EngineConfig, EngineOptions, KvDtype};
pub use session::{common_prefix, Session};
pub use spelling::respell;
pub use weights::{Matrix, Weights};

/// Sessions (and rows) of a decode step whose lists stay off the heap: the batch's rows, each
/// layer's per-session slices and attention jobs, the step's outputs.
pub(crate) const STEP_INLINE: usize = 16;

/// One item per session or row of a pass, inline up to [`STEP_INLINE`] (a prefill's rows spill
/// to the heap, once per launch).
pub(crate) type StepList<T> = smallvec::SmallVec<[T; STEP_INLINE]>;

/// Free activation buffers, kept by the engine so that a decode step reuses the last step's
/// instead of allocating its own (their sizes follow the largest launch so far, at most
/// `--ubatch-size` rows).
pub(crate) type ScratchPool = std::sync::Mutex<Vec<Vec<f32>>>;

/// What a layer stack needs to compute: the backend (kernels, threads, attention kind) and the
/// engine's pool of scratch buffers, reused across layers, launches and requests.
pub struct ForwardCtx<'a> {
    pub backend: &'a dyn backend::Backend,
    pool: &'a ScratchPool,
}

impl<'a> ForwardCtx<'a> {
    pub(crate) fn new(backend: &'a dyn backend::Backend, pool: &'a ScratchPool) -> ForwardCtx<'a> {
        ForwardCtx { backend, pool }
    }

    /// A zeroed buffer of `len` floats, reusing a recycled allocation when one is free.
    pub fn buffer(&self, len: usize) -> Vec<f32> {
        let mut v = self.buffer_for_overwrite(len);
        v.fill(0.0);
        v
    }

    /// A buffer of `len` floats whose values are left from earlier use: for outputs that the
    /// next call writes whole (a matmul's, attention's, a copy), which then skip zeroing them.
    pub fn buffer_for_overwrite(&self, len: usize) -> Vec<f32> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        // best fit: the smallest buffer that holds `len`, else the largest (grown), so that small
        // requests do not grow every pooled buffer to the widest activation
        let fits = |v: &Vec<f32>| v.capacity() >= len;
        let pick = (0..pool.len())
            .filter(|&i| fits(&pool[i]))
            .min_by_key(|&i| pool[i].capacity())
            .or_else(|| (0..pool.len()).max_by_key(|&i| pool[i].capacity()));
        let mut v = pick.map(|i| pool.swap_remove(i)).unwrap_or_default();
        drop(pool);
        v.truncate(len);
        v.resize(len, 0.0);
        v
    }

    /// Returns a buffer for reuse.
    pub fn recycle(&self, v: Vec<f32>) {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(v);
    }
}

/// Final-normed hidden rows (`n_rows × n_embd`).
#[derive(Clone, Debug)]
pub struct HiddenRows {
    pub n_rows: usize,
    pub n_embd: usize,
    pub data: Vec<f32>,
}

/// What to reduce for one row.
#[derive(Clone, Copy, Debug)]
pub struct RowRequest<'a> {
    /// Logits to return (target first, then base ids).
    pub ids: &'a [u32],
    /// Top-K to return (0 = none).
    pub top_k: usize,
}

/// The per-row result of the LM head (one type from the kernels to the scorer).
pub use lse_kernels::reduce::RowReduce as RowReduction;
