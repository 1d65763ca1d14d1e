//! gemma2: gemma3's layer (embeddings x sqrt(n_embd), RMS norms before and after attention and
//! MLP, GELU-tanh gated MLP, Q pre-scaled after rope, softmax scale 1) without Q/K norms, plus
//! attention logit soft-capping (`attn_logit_softcapping`, default 50) and final logit
//! soft-capping (`final_logit_softcapping`, default 30 as in llama.cpp; applied by the model's head). Sliding window (`attention.sliding_window`, default 4096)
//! on layers `il % pattern < pattern - 1` (pattern 2 unless the file says otherwise: the even
//! layers); local layers rope with `rope.freq_base_swa` (default: the global base) and the same
//! scaling. Q scale 1/sqrt(head_dim), or 1/sqrt(n_embd / n_head) for the 46-layer (27B) model.

use super::gemma3::{swa_layers, Gemma3, Layer};
use super::{standard_attn, Architecture};
use crate::ops::rope::RopeKind;
use crate::{EngineError, Weights};

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let hp = &w.hp;
    let final_cap = w.key_f32("final_logit_softcapping").unwrap_or(30.0);
    if final_cap <= 0.0 {
        return Err(EngineError::Metadata(format!("gemma2.final_logit_softcapping {final_cap} is not positive")));
    }
    let cap = w.key_f32("attn_logit_softcapping").unwrap_or(50.0);
    if cap <= 0.0 {
        return Err(EngineError::Metadata(format!("gemma2.attn_logit_softcapping {cap} is not positive")));
    }
    let n_swa = w.key_u64("attention.sliding_window").unwrap_or(4096) as usize;
    let base_swa = w.key_f32("rope.freq_base_swa").unwrap_or(hp.rope_base);
    let q_scale = if hp.n_layer == 46 { 1.0 / ((hp.n_embd / hp.n_head) as f32).sqrt() } else { 1.0 / (hp.head_dim_k as f32).sqrt() };
    let layers = swa_layers(w, 2)?
        .into_iter()
        .enumerate()
        .map(|(il, swa)| {
            let mut cfg = standard_attn(w, il, RopeKind::Neox)?;
            cfg.q_scale = q_scale;
            cfg.kq_scale = 1.0;
            cfg.softcap = Some(cap);
            if swa && n_swa > 0 {
                cfg.window = Some(n_swa);
                cfg.rope.base = base_swa;
            }
            Layer::load(w, il, cfg)
        })
        .collect::<Result<_, _>>()?;
    Ok(Box::new(Gemma3::new(layers, hp.eps, hp.n_embd, Some(final_cap))))
}
