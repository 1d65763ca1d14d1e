//! Engine options (SPEC §2) and the configuration a report records.

use lse_gguf::GgmlType;
use lse_kernels::Dialect;

/// KV cache element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvDtype {
    F32,
    F16,
    Bf16,
    Q8_0,
}

impl KvDtype {
    /// The option spelling: `f32`, `f16`, `bf16`, `q8_0`.
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
            KvDtype::Bf16 => "bf16",
            KvDtype::Q8_0 => "q8_0",
        }
    }

    /// Parses the option spelling.
    pub fn parse(s: &str) -> Option<KvDtype> {
        match s {
            "f32" => Some(KvDtype::F32),
            "f16" => Some(KvDtype::F16),
            "bf16" => Some(KvDtype::Bf16),
            "q8_0" => Some(KvDtype::Q8_0),
            _ => None,
        }
    }

    /// The ggml type the cache rows are stored in.
    pub fn ggml_type(self) -> GgmlType {
        match self {
            KvDtype::F32 => GgmlType::F32,
            KvDtype::F16 => GgmlType::F16,
            KvDtype::Bf16 => GgmlType::BF16,
            KvDtype::Q8_0 => GgmlType::Q8_0,
        }
    }
}

/// Parses the `--dialect` spelling: `simd` or `scalar`.
pub fn parse_dialect(s: &str) -> Option<Dialect> {
    match s {
        "simd" => Some(Dialect::Simd),
        "scalar" => Some(Dialect::Scalar),
        _ => None,
    }
}

/// Options shared by every mode.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineOptions {
    pub threads: usize,
    pub batch_size: usize,
    pub ubatch_size: usize,
    pub kv_dtype: KvDtype,
    /// KV capacity in tokens; `None` = the model's context length.
    pub kv_len: Option<usize>,
    /// Fused tiled attention with online softmax (`true`) or dense attention.
    pub flash_attention: bool,
    pub dialect: Dialect,
    /// The SIMD level `Dialect::Simd` runs at; `None` = the best this CPU has. One per process.
    pub simd: Option<crate::SimdLevel>,
    pub cpu_fallback_allowed: bool,
    /// Packed weights on huge pages (`lse_kernels::pages`): for decoding, which streams them
    /// every token; scoring gains nothing from them.
    pub huge_pages: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            threads: physical_cores(),
            batch_size: 2048,
            ubatch_size: 512,
            kv_dtype: KvDtype::F16,
            kv_len: None,
            flash_attention: true,
            dialect: Dialect::Simd,
            simd: None,
            cpu_fallback_allowed: true,
            huge_pages: false,
        }
    }
}

impl EngineOptions {
    /// Refuses zero sizes and `ubatch_size > batch_size`, naming the option.
    pub fn validate(&self) -> Result<(), crate::EngineError> {
        use crate::EngineError::InvalidOption;
        if self.threads == 0 {
            return Err(InvalidOption("--threads must be at least 1".into()));
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if self.threads > 4 * cpus.max(16) {
            return Err(InvalidOption(format!(
                "--threads {} is far more than the {cpus} CPUs of this machine (allowed: 1 to {})",
                self.threads,
                4 * cpus.max(16)
            )));
        }
        if self.batch_size == 0 {
            return Err(InvalidOption("--batch-size must be at least 1".into()));
        }
        if self.ubatch_size == 0 {
            return Err(InvalidOption("--ubatch-size must be at least 1".into()));
        }
        if self.ubatch_size > self.batch_size {
            return Err(InvalidOption(format!(
                "--ubatch-size ({}) must not exceed --batch-size ({}) (allowed: 1 to the batch size)",
                self.ubatch_size, self.batch_size
            )));
        }
        if self.kv_len == Some(0) {
            return Err(InvalidOption("--kv-len must be at least 1".into()));
        }
        // llama.cpp's context and batch sizes are 32-bit; beyond, sizes computed from them overflow
        for (flag, v) in [("--kv-len", self.kv_len.unwrap_or(0)), ("--batch-size", self.batch_size)] {
            if v > u32::MAX as usize {
                return Err(InvalidOption(format!("{flag} {v} is beyond any context (at most {})", u32::MAX)));
            }
        }
        Ok(())
    }
}

/// What a report records about the engine's setup (SPEC §4 `config`).
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    pub device_arch: String,
    pub prefill_attention: &'static str,
    pub prefill_attention_scale: f32,
    pub kv_cache_dtype: &'static str,
    pub kv_capacity: usize,
    pub batch_size: usize,
    pub ubatch_size: usize,
    pub head_rows: usize,
    pub cpu_fallback_allowed: bool,
}

/// Physical cores (Linux: distinct (physical id, core id) pairs), else the logical count.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return logical;
    };
    let mut cores = std::collections::HashSet::new();
    let (mut phys, mut core) = (None::<String>, None::<String>);
    for line in info.lines().chain(std::iter::once("")) {
        if line.trim().is_empty() {
            if let (Some(p), Some(c)) = (phys.take(), core.take()) {
                cores.insert((p, c));
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            match k.trim() {
                "physical id" => phys = Some(v.trim().to_string()),
                "core id" => core = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    if cores.is_empty() {
        logical
    } else {
        cores.len().min(logical).max(1)
    }
}
