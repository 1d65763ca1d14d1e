//! phi3: pre-norm layers with a fused `attn_qkv` (or separate q/k/v), rope NEOX over
//! `rope.dimension_count` dims, Q scaled by 1/sqrt(head_dim) after rope (softmax scale 1), and a
//! fused `ffn_up` (gate rows, then up rows) into SwiGLU. `attention.sliding_window` is ignored,
//! as llama.cpp does. LongRoPE: the per-pair divisors `rope_factors_short` (contexts up to
//! `rope.scaling.original_context_length`, the only ones llama.cpp and this engine agree on:
//! a longer session is refused when `rope_factors_long` differs) and `rope.scaling.attn_factor`
//! scaling cos/sin.

use super::{standard_attn, Architecture, SeqRows, SessionState};
use crate::blocks::attention::{AttnLayer, AttnWeights};
use crate::blocks::ffn::Ffn;
use crate::blocks::mlp::Mlp;
use crate::blocks::prenorm::{PreNormLayer, PreNormStack};
use crate::ops::act::Act;
use crate::ops::rope::{RopeKind, Yarn};
use crate::{EngineError, ForwardCtx, KvDtype, Weights};

pub struct Phi3 {
    stack: PreNormStack,
    /// Longest session the short rope factors serve (None: no limit).
    max_ctx: Option<usize>,
}

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let hp = &w.hp;
    let e = hp.n_embd;
    if w.key_u64("expert_count").is_some_and(|n| n > 0) {
        return Err(EngineError::Metadata("phi3.expert_count: the mixture-of-experts variant is not supported".into()));
    }
    let short = w.opt_vector("rope_factors_short.weight", hp.n_rot / 2)?;
    let long = w.opt_vector("rope_factors_long.weight", hp.n_rot / 2)?;
    let n_orig = w.key_u64("rope.scaling.original_context_length").map_or(hp.n_ctx_train, |v| v as usize);
    let max_ctx = match (&short, &long) {
        (_, Some(l)) if short.as_ref() != Some(l) => Some(n_orig),
        _ => None,
    };
    let attn_factor = w.key_f32("rope.scaling.attn_factor").unwrap_or(1.0);
    let layers = (0..hp.n_layer)
        .map(|il| {
            let mut cfg = standard_attn(w, il, RopeKind::Neox)?;
            cfg.q_scale = 1.0 / (hp.head_dim_k as f32).sqrt();
            cfg.kq_scale = 1.0;
            if cfg.rope.freq_factors.is_none() {
                cfg.rope.freq_factors = short.clone();
            }
            if attn_factor != 1.0 && cfg.rope.yarn.is_none() {
                // ggml's rope with ext_factor 0: cos/sin times attn_factor
                cfg.rope.yarn = Some(Yarn { ext_factor: 0.0, attn_factor, corr_dims: [0.0, 0.0] });
            }
            Ok(PreNormLayer {
                attn_norm: w.vector(&format!("blk.{il}.attn_norm.weight"), e)?,
                attn: AttnLayer { w: AttnWeights::load(w, il, e, &cfg)?, cfg },
                ffn_norm: w.vector(&format!("blk.{il}.ffn_norm.weight"), e)?,
                mlp: Ffn::Dense(Box::new(Mlp::load_fused_up(w, il, e, Act::Silu)?)),
            })
        })
        .collect::<Result<_, EngineError>>()?;
    Ok(Box::new(Phi3 { stack: PreNormStack { layers, eps: hp.eps }, max_ctx }))
}

impl Architecture for Phi3 {
    fn attention_scale(&self) -> f32 {
        self.stack.attention_scale()
    }

    fn new_session(&self, capacity: usize, kv: KvDtype) -> Result<SessionState, EngineError> {
        if let Some(max) = self.max_ctx.filter(|&m| capacity > m) {
            return Err(EngineError::InvalidRequest(format!(
                "phi3: a session of {capacity} tokens needs rope_factors_long (beyond rope.scaling.original_context_length {max}), which is not supported; use --kv-len {max} or less"
            )));
        }
        self.stack.new_session(capacity, kv)
    }

    fn forward(&self, cx: &ForwardCtx, seqs: &mut [SeqRows], x: &mut [f32], n: usize) -> Result<(), EngineError> {
        self.stack.forward(cx, seqs, x, n)
    }
}
