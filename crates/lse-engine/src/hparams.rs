//! Hyperparameters every architecture shares, read once from the `{arch}.*` GGUF keys
//! with llama.cpp's defaults.

use crate::EngineError;
use lse_gguf::{GgufFile, Value};

#[derive(Clone, Debug)]
pub struct HParams {
    pub arch: String,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    n_head_kv: Vec<usize>,
    /// Head size of Q and K (`attention.key_length`, default n_embd / n_head).
    pub head_dim_k: usize,
    /// Head size of V (`attention.value_length`, default head_dim_k).
    pub head_dim_v: usize,
    /// Rotated dims per head (`rope.dimension_count`, default head_dim_k).
    pub n_rot: usize,
    pub eps: f32,
    /// `rope.freq_base` (default 10000).
    pub rope_base: f32,
    /// 1 / `rope.scaling.factor` (linear scaling), 1 when absent.
    pub rope_freq_scale: f32,
    /// `rope.scaling.type` yarn: (`rope.scaling.original_context_length` or `context_length`,
    /// `rope.scaling.attn_factor` or 1).
    pub rope_yarn: Option<(usize, f32)>,
    /// `context_length` (0 when absent).
    pub n_ctx_train: usize,
    n_ff: Vec<usize>,
}

/// What an `{arch}.*` key's value must be.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    /// One integer, or one per layer.
    Ints,
    /// A finite number.
    Float,
    /// A finite number above 0.
    Positive,
    /// A finite number, 0 or above (0: the feature is off).
    NonNegative,
    Bool,
    Str,
}

/// The `{arch}.*` keys the architectures read and what each must hold. A key present with
/// another type or value is a corrupt file (llama.cpp refuses a key of the wrong type too);
/// reading the default in its place would run a different model without a word.
const KEYS: &[(&str, Kind)] = &[
    ("context_length", Kind::Int),
    ("embedding_length", Kind::Int),
    ("block_count", Kind::Int),
    ("feed_forward_length", Kind::Ints),
    ("attention.head_count", Kind::Ints),
    ("attention.head_count_kv", Kind::Ints),
    ("attention.key_length", Kind::Int),
    ("attention.value_length", Kind::Int),
    ("attention.layer_norm_rms_epsilon", Kind::NonNegative),
    ("attention.sliding_window", Kind::Int),
    ("attention.query_pre_attn_scalar", Kind::Positive),
    ("attention.scale", Kind::Float),
    ("attention.temperature_scale", Kind::Float),
    ("rope.dimension_count", Kind::Int),
    ("rope.freq_base", Kind::Positive),
    ("rope.freq_base_swa", Kind::Positive),
    ("rope.scaling.type", Kind::Str),
    ("rope.scaling.factor", Kind::NonNegative),
    ("rope.scale_linear", Kind::NonNegative),
    ("rope.scaling.attn_factor", Kind::Positive),
    ("rope.scaling.original_context_length", Kind::Int),
    ("rope.scaling.yarn_log_multiplier", Kind::Float),
    ("rope.scaling.yarn_beta_fast", Kind::Float),
    ("rope.scaling.yarn_beta_slow", Kind::Float),
    ("rope.scaling.finetuned", Kind::Bool),
    ("final_logit_softcapping", Kind::NonNegative),
    ("attn_logit_softcapping", Kind::NonNegative),
    ("logit_scale", Kind::Positive),
    ("expert_count", Kind::Int),
    ("expert_used_count", Kind::Int),
    ("expert_weights_scale", Kind::Float),
    ("expert_weights_norm", Kind::Bool),
    ("pooling_type", Kind::Int),
    ("full_attention_interval", Kind::Int),
    ("nextn_predict_layers", Kind::Int),
];

/// Refuses an `{arch}.*` key of [`KEYS`] whose value is not what it must be.
fn check_keys(f: &GgufFile, arch: &str) -> Result<(), EngineError> {
    for &(suffix, kind) in KEYS {
        let key = format!("{arch}.{suffix}");
        let Some(v) = f.get(&key) else { continue };
        // as the architectures read it: an f64 beyond f32's range is an infinity
        let number = v.as_f32().map(f64::from).filter(|x| x.is_finite());
        let (ok, want) = match kind {
            Kind::Int => (v.as_u64().is_some(), "a non-negative integer"),
            Kind::Ints => {
                let int = |x: &Value| x.as_u64().is_some();
                (int(v) || matches!(v, Value::Array(a) if a.iter().all(int)), "a non-negative integer or one per layer")
            }
            Kind::Float => (number.is_some(), "a finite number"),
            Kind::Positive => (number.is_some_and(|x| x > 0.0), "a positive number"),
            Kind::NonNegative => (number.is_some_and(|x| x >= 0.0), "a number, 0 or above"),
            Kind::Bool => (v.as_bool().is_some(), "a bool"),
            Kind::Str => (matches!(v, Value::String(_)), "a string"),
        };
        if !ok {
            return Err(EngineError::Metadata(format!("{key} must be {want}, not {}", shown(v))));
        }
    }
    Ok(())
}

/// A metadata value for a message: its type, and the value when it is a scalar.
fn shown(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("an array of {}", a.len()),
        Value::String(s) => format!("the string {s:?}"),
        other => match other.as_f64() {
            Some(x) => format!("{} {x}", other.type_name()),
            None => other.type_name().to_string(),
        },
    }
}

/// `general.architecture`: absent, or present as something other than a string, is refused.
pub(crate) fn architecture(f: &GgufFile) -> Result<&str, EngineError> {
    match f.get("general.architecture") {
        None => Err(EngineError::NoArchitecture),
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(EngineError::Metadata(format!("general.architecture must be a string, not {}", shown(v)))),
    }
}

impl HParams {
    /// `f`: the file with the metadata; `n_tensors`: the model's tensors over all its files (a
    /// split model's first shard may hold none).
    pub fn read(f: &GgufFile, n_tensors: usize) -> Result<HParams, EngineError> {
        let arch = architecture(f)?.to_string();
        check_keys(f, &arch)?;
        let k = |s: &str| format!("{arch}.{s}");
        let req = |s: &str| -> Result<usize, EngineError> {
            f.get_u64(&k(s)).map(|v| v as usize).ok_or_else(|| EngineError::Metadata(format!("missing or non-integer key {}", k(s))))
        };
        let n_layer = req("block_count")?;
        // every block has tensors: a larger count is a corrupt file, not a model to size arrays by
        if n_layer > n_tensors {
            return Err(EngineError::Metadata(format!("{}: {n_layer} blocks but only {n_tensors} tensors in the model", k("block_count"))));
        }
        let n_embd = req("embedding_length")?;
        let n_head_arr = per_layer(f, &k("attention.head_count"), n_layer)?
            .ok_or_else(|| EngineError::Metadata(format!("missing key {}", k("attention.head_count"))))?;
        let n_head = n_head_arr.iter().copied().max().unwrap_or(0);
        if n_layer == 0 || n_embd == 0 || n_head == 0 {
            return Err(EngineError::Metadata(format!("{arch}: block_count, embedding_length and head_count must be positive")));
        }
        let n_head_kv = per_layer(f, &k("attention.head_count_kv"), n_layer)?.unwrap_or_else(|| vec![n_head; n_layer]);
        let head_dim_k = f.get_u64(&k("attention.key_length")).map(|v| v as usize).unwrap_or(n_embd / n_head);
        let head_dim_v = f.get_u64(&k("attention.value_length")).map(|v| v as usize).unwrap_or(head_dim_k);
        let n_rot = f.get_u64(&k("rope.dimension_count")).map(|v| v as usize).unwrap_or(head_dim_k);
        let eps = f
            .get_f32(&k("attention.layer_norm_rms_epsilon"))
            .ok_or_else(|| EngineError::Metadata(format!("missing key {}", k("attention.layer_norm_rms_epsilon"))))?;
        let rope_base = f.get_f32(&k("rope.freq_base")).unwrap_or(10000.0);
        if n_rot == 0 || n_rot > head_dim_k {
            return Err(EngineError::Metadata(format!("{} {n_rot} must be between 1 and the head size {head_dim_k}", k("rope.dimension_count"))));
        }
        if let Some(t) = f.get_str(&k("rope.scaling.type")) {
            if t != "none" && t != "linear" && t != "yarn" {
                return Err(EngineError::Metadata(format!("rope scaling type '{t}' is not supported")));
            }
        }
        let factor = f.get_f32(&k("rope.scaling.factor")).or_else(|| f.get_f32(&k("rope.scale_linear"))).unwrap_or(0.0);
        let rope_freq_scale = if factor == 0.0 { 1.0 } else { 1.0 / factor };
        let n_ctx_train = f.get_u64(&k("context_length")).unwrap_or(0) as usize;
        let rope_yarn = match f.get_str(&k("rope.scaling.type")) {
            Some("yarn") => {
                // mistral3 reads it (and the yarn betas) itself
                if arch != "mistral3" && f.get(&k("rope.scaling.yarn_log_multiplier")).is_some_and(|v| v.as_f32() != Some(0.0)) {
                    return Err(EngineError::Metadata(format!("{arch}: rope.scaling.yarn_log_multiplier is not supported")));
                }
                let orig = f.get_u64(&k("rope.scaling.original_context_length")).map_or(n_ctx_train, |v| v as usize);
                Some((orig, f.get_f32(&k("rope.scaling.attn_factor")).unwrap_or(1.0)))
            }
            _ => None,
        };
        let n_ff = per_layer(f, &k("feed_forward_length"), n_layer)?.unwrap_or_default();
        if head_dim_k == 0 || n_rot > head_dim_k || !n_rot.is_multiple_of(2) {
            return Err(EngineError::Metadata(format!("{arch}: rope dims {n_rot} do not fit head size {head_dim_k}")));
        }
        Ok(HParams { arch, n_layer, n_embd, n_head, n_head_kv, head_dim_k, head_dim_v, n_rot, eps, rope_base, rope_freq_scale, rope_yarn, n_ctx_train, n_ff })
    }

    /// KV heads of layer `il` (0 for a layer without attention when the file says so).
    pub fn n_head_kv(&self, il: usize) -> usize {
        self.n_head_kv.get(il).copied().unwrap_or(self.n_head)
    }

    /// Feed-forward width of layer `il` (0 when the file does not say).
    pub fn n_ff(&self, il: usize) -> usize {
        self.n_ff.get(il).copied().unwrap_or(0)
    }
}

/// A key that is either one integer or one integer per layer.
fn per_layer(f: &GgufFile, key: &str, n_layer: usize) -> Result<Option<Vec<usize>>, EngineError> {
    match f.get(key) {
        None => Ok(None),
        Some(Value::Array(a)) => {
            let v: Option<Vec<usize>> = a.iter().map(|x| x.as_u64().map(|u| u as usize)).collect();
            match v {
                Some(v) if v.len() == n_layer => Ok(Some(v)),
                _ => Err(EngineError::Metadata(format!("{key} must hold {n_layer} integers"))),
            }
        }
        Some(x) => x
            .as_u64()
            .map(|u| Some(vec![u as usize; n_layer]))
            .ok_or_else(|| EngineError::Metadata(format!("{key} is not an integer"))),
    }
}
