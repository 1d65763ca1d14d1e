//! gpt-oss (llama.cpp's openai-moe): pre-norm layers (`attn_norm`, `post_attention_norm` before
//! the FFN) whose attention has q/k/v/output biases, rope NEOX with YaRN scaling, scale
//! 1/sqrt(n_rot), a learned sink logit per head (`attn_sinks`), and a sliding window on the layers
//! `attention.sliding_window_pattern` names (a period or per-layer flags; default 2: the even layers);
//! and whose FFN is a mixture of experts: router with bias, top `expert_used_count` of the logits,
//! softmax over the chosen ones, experts with biases and the clamped SwiGLU
//! `min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, ±7) + 1)`.

use super::{standard_attn, Architecture};
use crate::blocks::attention::{AttnLayer, AttnWeights};
use crate::blocks::ffn::Ffn;
use crate::blocks::moe::{ExpertAct, Gating, Moe, MoeConfig};
use crate::blocks::prenorm::{PreNormLayer, PreNormStack};
use crate::ops::rope::RopeKind;
use crate::{EngineError, Weights};

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let hp = &w.hp;
    let e = hp.n_embd;
    let meta = |m: String| EngineError::Metadata(m);
    let n_swa = w.key_u64("attention.sliding_window").ok_or_else(|| meta("missing key gpt-oss.attention.sliding_window".into()))? as usize;
    let is_swa = super::gemma3::swa_layers(w, 2)?;
    let moe = MoeConfig {
        gating: Gating::SoftmaxSelected,
        norm_weights: false,
        act: ExpertAct::SwigluOai { alpha: 1.702, limit: 7.0 },
        ..MoeConfig::from_keys(w)?
    };
    let layers = (0..hp.n_layer)
        .map(|il| {
            let mut cfg = standard_attn(w, il, RopeKind::Neox)?;
            cfg.kq_scale = 1.0 / (hp.n_rot as f32).sqrt();
            if n_swa > 0 && is_swa[il] {
                cfg.window = Some(n_swa);
            }
            cfg.sinks = Some(w.vector(&format!("blk.{il}.attn_sinks.weight"), hp.n_head)?);
            Ok(PreNormLayer {
                attn_norm: w.vector(&format!("blk.{il}.attn_norm.weight"), e)?,
                attn: AttnLayer { w: AttnWeights::load(w, il, e, &cfg)?, cfg },
                ffn_norm: w.vector(&format!("blk.{il}.post_attention_norm.weight"), e)?,
                mlp: Ffn::Moe(Box::new(Moe::load(w, il, moe)?)),
            })
        })
        .collect::<Result<_, EngineError>>()?;
    Ok(Box::new(PreNormStack { layers, eps: hp.eps }))
}
