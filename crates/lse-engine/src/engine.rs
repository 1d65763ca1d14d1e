//! `Engine`: a loaded model, its tokenizer, the backend and the options in force.

use crate::backend::{Backend, CpuBackend};
use crate::head::HEAD_ROWS;
use crate::model::Model;
use crate::{resolve_model_path, EngineConfig, EngineError, EngineOptions, Weights};
use lse_gguf::{GgufFile, GgufSplit};
use lse_tokenizer::Tokenizer;
use std::path::Path;
use std::sync::Arc;

pub struct Engine {
    pub(crate) model: Model,
    pub(crate) backend: Box<dyn Backend>,
    pub(crate) opts: EngineOptions,
    pub(crate) kv_capacity: usize,
    tokenizer: Tokenizer,
    name: String,
    /// Activation buffers kept from one forward to the next (see [`crate::ScratchPool`]).
    pub(crate) scratch: crate::ScratchPool,
}

/// Returns the heap pages freed so far to the system (the parsed vocabulary arrays: one small
/// allocation per token, which would otherwise stay in the process as free heap).
fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns wholly free heap pages; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Default KV capacity when the model states no context length.
const FALLBACK_CTX: usize = 4096;

impl Engine {
    /// Loads a `.gguf` file, or the single model `.gguf` in a folder; a split model from any of
    /// its shards (the others are found beside it by name) or its folder.
    pub fn load(model: &Path, mut opts: EngineOptions) -> Result<Engine, EngineError> {
        opts.validate()?;
        // SPEC §2: the environment's way of saying --no-cpu-fallback
        if std::env::var("LSE_REQUIRE_DEVICE_KERNELS").is_ok_and(|v| v == "1") {
            opts.cpu_fallback_allowed = false;
        }
        if let Some(level) = opts.simd {
            lse_kernels::simd::cap_level(level).map_err(|e| EngineError::InvalidOption(format!("--simd {}: {e}", level.short_name())))?;
        }
        let path = resolve_model_path(model)?;
        let mut shards = GgufSplit::open(&path)?.into_files();
        let n_tensors = shards.iter().map(|f| f.tensors().len()).sum();
        let file = &mut shards[0];
        let arch = crate::hparams::architecture(file)?;
        if !crate::arch::SUPPORTED.contains(&arch) {
            return Err(EngineError::UnsupportedArchitecture(arch.to_string()));
        }
        let hp = crate::HParams::read(file, n_tensors)?;
        let tokenizer = Tokenizer::from_gguf(file).map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        file.forget(lse_tokenizer::VOCAB_ARRAY_KEYS);
        release_freed_heap();
        let shards: Vec<Arc<GgufFile>> = shards.into_iter().map(Arc::new).collect();
        let file = shards[0].clone();
        let weights = Weights::new(shards, hp, opts.huge_pages);
        let kv_capacity = opts.kv_len.unwrap_or(if weights.hp.n_ctx_train > 0 { weights.hp.n_ctx_train } else { FALLBACK_CTX });
        let model = Model::load(weights)?;
        // llama.cpp sizes the embedding table by the vocabulary: another row count is a corrupt file
        if tokenizer.n_vocab() != model.n_vocab {
            return Err(EngineError::Metadata(format!(
                "the tokenizer has {} tokens but token_embd.weight has {} rows",
                tokenizer.n_vocab(),
                model.n_vocab
            )));
        }
        // refuse a cache dtype the heads cannot be stored in before any request runs
        model.arch.new_session(0, opts.kv_dtype)?;
        let name = file
            .get_str("general.name")
            .map(str::to_string)
            .unwrap_or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default());
        let backend: Box<dyn Backend> = Box::new(CpuBackend::new(opts.dialect, opts.threads, opts.flash_attention));
        Ok(Engine { model, backend, opts, kv_capacity, tokenizer, name, scratch: Default::default() })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn n_vocab(&self) -> usize {
        self.model.n_vocab
    }

    pub fn n_embd(&self) -> usize {
        self.model.n_embd
    }

    pub fn architecture(&self) -> &str {
        &self.model.w.hp.arch
    }

    pub fn model_name(&self) -> &str {
        &self.name
    }

    pub fn kv_capacity(&self) -> usize {
        self.kv_capacity
    }

    /// Memory held: (model file bytes, packed weight copies made so far).
    pub fn weight_bytes(&self) -> (usize, usize) {
        (self.model.w.file_bytes(), self.model.w.packed_bytes())
    }

    /// The file's bytes of the matrices packed so far (the packed copies' own bytes are
    /// [`Engine::weight_bytes`]'s second).
    pub fn packed_source_bytes(&self) -> usize {
        self.model.w.packed_source_bytes()
    }

    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    pub fn config(&self) -> EngineConfig {
        EngineConfig {
            device_arch: self.backend.device_arch(),
            prefill_attention: if self.opts.flash_attention { "flashprefill-v2" } else { "dense" },
            prefill_attention_scale: self.model.arch.attention_scale(),
            kv_cache_dtype: self.opts.kv_dtype.name(),
            kv_capacity: self.kv_capacity,
            batch_size: self.opts.batch_size,
            ubatch_size: self.opts.ubatch_size,
            head_rows: HEAD_ROWS,
            cpu_fallback_allowed: self.opts.cpu_fallback_allowed,
        }
    }
}

