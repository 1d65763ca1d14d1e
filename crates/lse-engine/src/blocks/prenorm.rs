//! The pre-norm decoder layer of llama-style models:
//! `x += attn(rms(x) * attn_norm)`, then `x += mlp(rms(x) * ffn_norm)`.

use super::attention::{AttnConfig, AttnLayer, AttnWeights};
use super::ffn::Ffn;
use super::mlp::Mlp;
use crate::arch::{SeqRows, SessionState};
use crate::ops::act::Act;
use crate::{EngineError, ForwardCtx, Weights};

pub struct PreNormLayer {
    pub attn_norm: Vec<f32>,
    pub attn: AttnLayer,
    pub ffn_norm: Vec<f32>,
    pub mlp: Ffn,
}

impl PreNormLayer {
    pub fn load(w: &Weights, il: usize, cfg: AttnConfig, act: Act) -> Result<PreNormLayer, EngineError> {
        let mlp = Ffn::Dense(Box::new(Mlp::load(w, il, w.hp.n_embd, act)?));
        Self::load_with_ffn(w, il, cfg, mlp)
    }

    /// The layer with an FFN the caller bound (e.g. a mixture of experts).
    pub fn load_with_ffn(w: &Weights, il: usize, cfg: AttnConfig, mlp: Ffn) -> Result<PreNormLayer, EngineError> {
        let e = w.hp.n_embd;
        Ok(PreNormLayer {
            attn_norm: w.vector(&format!("blk.{il}.attn_norm.weight"), e)?,
            attn: AttnLayer { w: AttnWeights::load(w, il, e, &cfg)?, cfg },
            ffn_norm: w.vector(&format!("blk.{il}.ffn_norm.weight"), e)?,
            mlp,
        })
    }

    pub fn forward(&self, cx: &ForwardCtx, il: usize, seqs: &mut [SeqRows], x: &mut [f32], n: usize, eps: f32) -> Result<(), EngineError> {
        let b = cx.backend;
        let e = x.len() / n.max(1);
        let mut h = cx.buffer_for_overwrite(x.len());
        h.copy_from_slice(x);
        b.rms_norm(&mut h, e, &self.attn_norm, eps);
        let mut o = cx.buffer_for_overwrite(x.len());
        self.attn.forward(cx, il, seqs, &h, n, &mut o)?;
        b.add(x, &o);
        h.copy_from_slice(x);
        b.rms_norm(&mut h, e, &self.ffn_norm, eps);
        self.mlp.forward(cx, &h, n, &mut o);
        b.add(x, &o);
        cx.recycle(h);
        cx.recycle(o);
        Ok(())
    }
}

/// A stack of pre-norm layers (llama, qwen2, qwen3): the whole `Architecture` of those models.
pub struct PreNormStack {
    pub layers: Vec<PreNormLayer>,
    pub eps: f32,
}

impl crate::arch::Architecture for PreNormStack {
    fn attention_scale(&self) -> f32 {
        crate::blocks::attention::stack_scale(self.layers.iter().map(|l| &l.attn))
    }

    fn new_session(&self, capacity: usize, kv: crate::KvDtype) -> Result<SessionState, EngineError> {
        crate::blocks::attention::kv_session(self.layers.iter().map(|l| &l.attn), kv, capacity)
    }

    fn forward(&self, cx: &ForwardCtx, seqs: &mut [SeqRows], x: &mut [f32], n: usize) -> Result<(), EngineError> {
        for (il, layer) in self.layers.iter().enumerate() {
            layer.forward(cx, il, seqs, x, n, self.eps)?;
        }
        Ok(())
    }
}
