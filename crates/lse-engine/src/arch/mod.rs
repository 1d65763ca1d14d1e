//! Architectures: the trait each model file implements, the per-request session state, and
//! the registry that maps `general.architecture` to a loader. See ARCH.md.

pub mod gemma2;
pub mod gemma3;
pub mod gpt_oss;
pub mod granite;
pub mod llama;
pub mod mistral3;
pub mod phi3;
pub mod qwen2;
pub mod qwen3;
pub mod qwen35;
pub mod qwen35moe;
pub mod qwen3moe;
pub mod smollm3;

use crate::blocks::attention::AttnConfig;
use crate::kv_cache::LayerKv;
use crate::ops::rope::{RopeKind, RopeParams, Yarn};
use crate::{EngineError, ForwardCtx, KvDtype, Weights};
use std::any::Any;

/// Per-request state: one cache per attention layer (None for layers without one) and whatever
/// else an architecture carries between ubatches (recurrent states).
pub struct SessionState {
    pub kv: Vec<Option<LayerKv>>,
    pub extra: Option<Box<dyn RecurrentState>>,
}

impl Clone for SessionState {
    fn clone(&self) -> SessionState {
        SessionState { kv: self.kv.clone(), extra: self.extra.as_ref().map(|r| r.clone_box()) }
    }
}

/// Recurrent state an architecture carries between passes (conv histories, delta-rule states).
pub trait RecurrentState: Any + Send {
    /// Back to the state before the first token.
    fn reset(&mut self);
    /// Bytes held.
    fn bytes(&self) -> usize;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// A copy (a session fork).
    fn clone_box(&self) -> Box<dyn RecurrentState>;
    /// Its values, in a fixed order (a session file's), and the same to write into.
    fn buffers(&self) -> Vec<&[f32]>;
    fn buffers_mut(&mut self) -> Vec<&mut [f32]>;
}

impl SessionState {
    pub(crate) fn reset_recurrent(&mut self) {
        if let Some(r) = self.extra.as_mut() {
            r.reset();
        }
    }

    /// Bytes held by the caches and the recurrent state.
    pub fn bytes(&self) -> usize {
        self.kv.iter().flatten().map(|c| c.bytes()).sum::<usize>() + self.extra.as_ref().map_or(0, |r| r.bytes())
    }
}

/// One session's rows inside a ubatch: rows `r0 .. r0 + n` of the ubatch, at positions
/// `pos0 .. pos0 + n` of the session whose state is `state`.
pub struct SeqRows<'a> {
    pub state: &'a mut SessionState,
    pub r0: usize,
    pub n: usize,
    pub pos0: usize,
}

/// One model architecture's layer stack.
pub trait Architecture: Send + Sync {
    /// The softmax scale Q·K sees (reported as `prefill_attention_scale`).
    fn attention_scale(&self) -> f32;
    /// Divisor of the logits (granite's `logit_scale`), applied by the head; None for most models.
    fn logit_scale(&self) -> Option<f32> {
        None
    }
    /// Final logit soft-capping `cap * tanh(logit / cap)` (gemma2 / gemma3), applied by the head
    /// after the logit scale; None for models whose llama.cpp graph has none.
    fn final_softcap(&self) -> Option<f32> {
        None
    }
    /// Fresh state for a request of at most `capacity` tokens.
    fn new_session(&self, capacity: usize, kv: KvDtype) -> Result<SessionState, EngineError>;
    /// Runs one ubatch of rows from one or more sessions. `x`: `n` rows of n_embd, the unscaled
    /// token embeddings on entry, the residual stream after the last layer on exit. `seqs` cover
    /// the rows in order, one contiguous run per session. Row-wise work (matmuls, norms) sees all
    /// rows at once; attention, rope, KV writes and recurrent updates run per session.
    fn forward(&self, cx: &ForwardCtx, seqs: &mut [SeqRows], x: &mut [f32], n: usize) -> Result<(), EngineError>;
}

/// Architectures this engine runs.
pub const SUPPORTED: &[&str] = &["llama", "qwen2", "qwen3", "gemma3", "qwen35", "qwen3moe", "qwen35moe", "gpt-oss", "smollm3", "mistral3", "gemma2", "phi3", "granite"];

/// Loads the architecture named by the file's `general.architecture`.
pub fn load_architecture(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    match w.hp.arch.as_str() {
        "llama" => llama::load(w),
        "qwen2" => qwen2::load(w),
        "qwen3" => qwen3::load(w),
        "gemma3" => gemma3::load(w),
        "qwen35" => qwen35::load(w),
        "qwen3moe" => qwen3moe::load(w),
        "qwen35moe" => qwen35moe::load(w),
        "gpt-oss" => gpt_oss::load(w),
        "smollm3" => smollm3::load(w),
        "mistral3" => mistral3::load(w),
        "gemma2" => gemma2::load(w),
        "phi3" => phi3::load(w),
        "granite" => granite::load(w),
        other => Err(EngineError::UnsupportedArchitecture(other.to_string())),
    }
}

/// Refuses feed-forward bias tensors in layer `il` (architectures whose MLP has none in this engine).
pub fn refuse_ffn_biases(w: &Weights, il: usize) -> Result<(), EngineError> {
    for t in ["gate", "up", "down"] {
        let name = format!("blk.{il}.ffn_{t}.bias");
        if w.has(&name) {
            return Err(EngineError::Metadata(format!("tensor {name}: feed-forward biases are not supported")));
        }
    }
    Ok(())
}

/// The attention config most models use for layer `il`: heads and sizes from the common keys,
/// rope over `n_rot` dims with the file's base and linear scaling (+ `rope_freqs.weight` when
/// present), scale 1/sqrt(head_dim_k), full causal attention.
pub fn standard_attn(w: &Weights, il: usize, kind: RopeKind) -> Result<AttnConfig, EngineError> {
    let hp = &w.hp;
    let n_head_kv = hp.n_head_kv(il);
    if n_head_kv == 0 || !hp.n_head.is_multiple_of(n_head_kv) {
        return Err(EngineError::Metadata(format!("layer {il}: {} query heads cannot share {n_head_kv} kv heads", hp.n_head)));
    }
    let freq_factors = w.opt_vector("rope_freqs.weight", hp.n_rot / 2)?;
    Ok(AttnConfig {
        n_head: hp.n_head,
        n_head_kv,
        head_dim_k: hp.head_dim_k,
        head_dim_v: hp.head_dim_v,
        rope: RopeParams {
            kind,
            n_rot: hp.n_rot,
            base: hp.rope_base,
            freq_scale: hp.rope_freq_scale,
            freq_factors,
            yarn: hp.rope_yarn.map(|(orig, attn)| Yarn::new(hp.n_rot, orig, hp.rope_base, hp.rope_freq_scale, attn)),
        },
        q_scale: 1.0,
        kq_scale: 1.0 / (hp.head_dim_k as f32).sqrt(),
        temp: None,
        softcap: None,
        window: None,
        q_gate: false,
        sinks: None,
        eps: hp.eps,
    })
}

/// Fails with `MissingTensor` unless every name is present.
pub fn require(w: &Weights, names: &[String]) -> Result<(), EngineError> {
    match names.iter().find(|n| !w.has(n)) {
        Some(n) => Err(EngineError::MissingTensor(n.clone())),
        None => Ok(()),
    }
}
