//! gemma3: embeddings x sqrt(n_embd); RMS norms before and after attention and MLP; Q/K norms;
//! Q pre-scaled by 1/sqrt(head_dim) (softmax scale 1); GELU-tanh gated MLP; interleaved
//! sliding-window layers (llama.cpp: `il % pattern < pattern - 1` is local, pattern 6 unless the
//! file says otherwise) whose rope uses `rope.freq_base_swa` (10000) without scaling, while global
//! layers use `rope.freq_base` with the linear `rope.scaling.factor`.

use super::{require, standard_attn, Architecture, SeqRows, SessionState};
use crate::blocks::attention::{AttnConfig, AttnLayer, AttnWeights};
use crate::blocks::mlp::Mlp;
use crate::ops::act::Act;
use crate::ops::rope::RopeKind;
use crate::{EngineError, ForwardCtx, KvDtype, Weights};
use lse_gguf::Value;

pub(crate) struct Layer {
    attn_norm: Vec<f32>,
    attn: AttnLayer,
    post_attn_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    mlp: Mlp,
    post_ffw_norm: Vec<f32>,
}

pub struct Gemma3 {
    layers: Vec<Layer>,
    eps: f32,
    embd_scale: f32,
    final_softcap: Option<f32>,
}

/// Which layers use the sliding window: an explicit per-layer bool array, or a period `p` (the
/// last layer of every `p` is global; 0: every layer slides, as llama.cpp's `set_swa_pattern`)
/// (`default`: 6 for gemma3, 2 for gemma2 and gpt-oss).
pub(crate) fn swa_layers(w: &Weights, default: usize) -> Result<Vec<bool>, EngineError> {
    let n = w.hp.n_layer;
    match w.key("attention.sliding_window_pattern") {
        Some(Value::Array(a)) => {
            let v: Option<Vec<bool>> = a.iter().map(|x| x.as_bool().or_else(|| x.as_u64().map(|u| u != 0))).collect();
            match v {
                Some(v) if v.len() == n => Ok(v),
                _ => Err(EngineError::Metadata(format!("{}.attention.sliding_window_pattern must hold {n} flags", w.hp.arch))),
            }
        }
        Some(x) => {
            let p = x.as_u64().ok_or_else(|| EngineError::Metadata(format!("{}.attention.sliding_window_pattern is not an integer", w.hp.arch)))? as usize;
            Ok((0..n).map(|il| p == 0 || il % p < p - 1).collect())
        }
        None => Ok((0..n).map(|il| il % default < default - 1).collect()),
    }
}

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let hp = &w.hp;
    let e = hp.n_embd;
    let n_swa = w.key_u64("attention.sliding_window").unwrap_or(0) as usize;
    let is_swa = swa_layers(w, 6)?;
    let base_swa = w.key_f32("rope.freq_base_swa").unwrap_or(10000.0);
    let q_scale = match w.key_f32("attention.query_pre_attn_scalar") {
        Some(s) if s > 0.0 => 1.0 / s.sqrt(),
        _ if hp.n_layer == 62 => 1.0 / ((e / hp.n_head) as f32).sqrt(),
        _ => 1.0 / (hp.head_dim_k as f32).sqrt(),
    };
    let mut layers = Vec::with_capacity(hp.n_layer);
    for (il, &swa) in is_swa.iter().enumerate() {
        let p = |s: &str| format!("blk.{il}.{s}");
        require(w, &[p("attn_q_norm.weight"), p("attn_k_norm.weight")])?;
        let mut cfg = standard_attn(w, il, RopeKind::Neox)?;
        cfg.q_scale = q_scale;
        cfg.kq_scale = 1.0;
        if swa && n_swa > 0 {
            cfg.window = Some(n_swa);
            cfg.rope.base = base_swa;
            cfg.rope.freq_scale = 1.0;
        }
        layers.push(Layer::load(w, il, cfg)?);
    }
    // llama.cpp's gemma3: soft-capping only when the file gives a non-zero `final_logit_softcapping`
    let cap = w.key_f32("final_logit_softcapping").filter(|&c| c != 0.0);
    Ok(Box::new(Gemma3::new(layers, hp.eps, e, cap)))
}

impl Layer {
    /// Binds layer `il`: norms before and after attention and MLP, the GELU-tanh gated MLP.
    pub(crate) fn load(w: &Weights, il: usize, cfg: AttnConfig) -> Result<Layer, EngineError> {
        let e = w.hp.n_embd;
        let p = |s: &str| format!("blk.{il}.{s}");
        Ok(Layer {
            attn_norm: w.vector(&p("attn_norm.weight"), e)?,
            attn: AttnLayer { w: AttnWeights::load(w, il, e, &cfg)?, cfg },
            post_attn_norm: w.vector(&p("post_attention_norm.weight"), e)?,
            ffn_norm: w.vector(&p("ffn_norm.weight"), e)?,
            mlp: Mlp::load(w, il, e, Act::GeluTanh)?,
            post_ffw_norm: w.vector(&p("post_ffw_norm.weight"), e)?,
        })
    }
}

impl Gemma3 {
    /// The stack (also gemma2's): embeddings scaled by sqrtf(n_embd) on entry; `final_softcap`
    /// for the head.
    pub(crate) fn new(layers: Vec<Layer>, eps: f32, n_embd: usize, final_softcap: Option<f32>) -> Gemma3 {
        Gemma3 { layers, eps, embd_scale: (n_embd as f32).sqrt(), final_softcap }
    }
}

impl Architecture for Gemma3 {
    fn attention_scale(&self) -> f32 {
        crate::blocks::attention::stack_scale(self.layers.iter().map(|l| &l.attn))
    }

    fn final_softcap(&self) -> Option<f32> {
        self.final_softcap
    }

    fn new_session(&self, capacity: usize, kv: KvDtype) -> Result<SessionState, EngineError> {
        crate::blocks::attention::kv_session(self.layers.iter().map(|l| &l.attn), kv, capacity)
    }

    fn forward(&self, cx: &ForwardCtx, seqs: &mut [SeqRows], x: &mut [f32], n: usize) -> Result<(), EngineError> {
        let b = cx.backend;
        let e = x.len() / n.max(1);
        b.scale(x, self.embd_scale);
        let mut h = cx.buffer(x.len());
        let mut o = cx.buffer(x.len());
        for (il, l) in self.layers.iter().enumerate() {
            h.copy_from_slice(x);
            b.rms_norm(&mut h, e, &l.attn_norm, self.eps);
            l.attn.forward(cx, il, seqs, &h, n, &mut o)?;
            b.rms_norm(&mut o, e, &l.post_attn_norm, self.eps);
            b.add(x, &o);
            h.copy_from_slice(x);
            b.rms_norm(&mut h, e, &l.ffn_norm, self.eps);
            l.mlp.forward(cx, &h, n, &mut o);
            b.rms_norm(&mut o, e, &l.post_ffw_norm, self.eps);
            b.add(x, &o);
        }
        cx.recycle(h);
        cx.recycle(o);
        Ok(())
    }
}
