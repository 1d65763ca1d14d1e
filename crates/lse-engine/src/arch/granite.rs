//! granite: llama layers (rope NORM, GQA, SwiGLU, optional `attn_output.bias`) with multipliers:
//! embeddings x `embedding_scale`, each attention and FFN output x `residual_scale` before it joins
//! the residual, softmax scale `attention.scale` (else 1/sqrt(head_dim)), and logits divided by
//! `logit_scale` (required; applied by the model's head through `Architecture::logit_scale`).
//! `rope.scaling.finetuned` false turns rope off on every layer, as in llama.cpp.

use super::{refuse_ffn_biases, standard_attn, Architecture, SeqRows, SessionState};
use crate::blocks::prenorm::PreNormLayer;
use crate::ops::act::Act;
use crate::ops::rope::RopeKind;
use crate::{EngineError, ForwardCtx, KvDtype, Weights};
use lse_gguf::Value;

pub struct Granite {
    layers: Vec<PreNormLayer>,
    eps: f32,
    embd_scale: Option<f32>,
    residual_scale: Option<f32>,
    logit_scale: f32,
}

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let hp = &w.hp;
    let meta = |m: String| EngineError::Metadata(m);
    let logit_scale = w.key_f32("logit_scale").ok_or_else(|| meta("missing or non-numeric key granite.logit_scale".into()))?;
    if logit_scale == 0.0 || !logit_scale.is_finite() {
        return Err(meta(format!("granite.logit_scale {logit_scale} cannot divide the logits")));
    }
    if w.key_u64("expert_count").is_some_and(|n| n > 0) {
        return Err(meta("granite.expert_count: the mixture-of-experts variant (granitemoe) is not supported".into()));
    }
    if let Some(Value::Array(a)) = w.key("deepstack_mapping") {
        if a.iter().any(|x| x.as_f32().is_some_and(|v| v >= 0.0)) {
            return Err(meta("granite.deepstack_mapping: vision deepstack inputs are not supported".into()));
        }
    }
    let rope = w.key_bool("rope.scaling.finetuned").unwrap_or(true);
    let attn_scale = w.key_f32("attention.scale").filter(|&s| s != 0.0);
    let layers = (0..hp.n_layer)
        .map(|il| {
            refuse_ffn_biases(w, il)?;
            let mut cfg = standard_attn(w, il, RopeKind::Norm)?;
            if !rope {
                cfg.rope.n_rot = 0;
            }
            if let Some(s) = attn_scale {
                cfg.kq_scale = s;
            }
            PreNormLayer::load(w, il, cfg, Act::Silu)
        })
        .collect::<Result<_, _>>()?;
    let nonzero = |k: &str| w.key_f32(k).filter(|&s| s != 0.0);
    Ok(Box::new(Granite { layers, eps: hp.eps, embd_scale: nonzero("embedding_scale"), residual_scale: nonzero("residual_scale"), logit_scale }))
}

impl Architecture for Granite {
    fn attention_scale(&self) -> f32 {
        crate::blocks::attention::stack_scale(self.layers.iter().map(|l| &l.attn))
    }

    fn logit_scale(&self) -> Option<f32> {
        Some(self.logit_scale)
    }

    fn new_session(&self, capacity: usize, kv: KvDtype) -> Result<SessionState, EngineError> {
        crate::blocks::attention::kv_session(self.layers.iter().map(|l| &l.attn), kv, capacity)
    }

    fn forward(&self, cx: &ForwardCtx, seqs: &mut [SeqRows], x: &mut [f32], n: usize) -> Result<(), EngineError> {
        let b = cx.backend;
        let e = x.len() / n.max(1);
        if let Some(s) = self.embd_scale {
            b.scale(x, s);
        }
        let mut h = cx.buffer(x.len());
        let mut o = cx.buffer(x.len());
        for (il, l) in self.layers.iter().enumerate() {
            h.copy_from_slice(x);
            b.rms_norm(&mut h, e, &l.attn_norm, self.eps);
            l.attn.forward(cx, il, seqs, &h, n, &mut o)?;
            if let Some(s) = self.residual_scale {
                b.scale(&mut o, s);
            }
            b.add(x, &o);
            h.copy_from_slice(x);
            b.rms_norm(&mut h, e, &l.ffn_norm, self.eps);
            l.mlp.forward(cx, &h, n, &mut o);
            if let Some(s) = self.residual_scale {
                b.scale(&mut o, s);
            }
            b.add(x, &o);
        }
        cx.recycle(h);
        cx.recycle(o);
        Ok(())
    }
}
