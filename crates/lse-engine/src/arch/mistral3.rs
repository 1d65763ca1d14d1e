//! mistral3 (Ministral 3): llama layers (rope NORM, GQA, SwiGLU, optional `attn_output.bias`) with
//! YaRN read in full (`rope.scaling.yarn_beta_fast/slow`, `yarn_log_multiplier`) and llama 4's
//! attention temperature: with `attention.temperature_scale` s, Q at position p (after rope) is
//! multiplied by `ln(floor(p / n_orig) + 1) * s + 1`, n_orig the YaRN original context length.

use super::{refuse_ffn_biases, standard_attn, Architecture};
use crate::blocks::attention::AttnTemp;
use crate::blocks::prenorm::{PreNormLayer, PreNormStack};
use crate::ops::act::Act;
use crate::ops::rope::{RopeKind, Yarn};
use crate::{EngineError, Weights};

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let hp = &w.hp;
    let meta = |m: String| EngineError::Metadata(m);
    if w.key_u64("expert_count").is_some_and(|n| n > 0) {
        return Err(meta("mistral3.expert_count: the mixture-of-experts variant is not supported".into()));
    }
    let n_orig = w.key_u64("rope.scaling.original_context_length").map_or(hp.n_ctx_train, |v| v as usize);
    let yarn = hp.rope_yarn.map(|(orig, attn)| {
        let betas = [w.key_f32("rope.scaling.yarn_beta_fast").unwrap_or(32.0), w.key_f32("rope.scaling.yarn_beta_slow").unwrap_or(1.0)];
        let log_mul = w.key_f32("rope.scaling.yarn_log_multiplier").unwrap_or(0.0);
        Yarn::with(hp.n_rot, orig, hp.rope_base, hp.rope_freq_scale, attn, betas, log_mul)
    });
    let temp = match w.key_f32("attention.temperature_scale").filter(|&s| s != 0.0) {
        Some(_) if n_orig == 0 => return Err(meta("mistral3.attention.temperature_scale needs rope.scaling.original_context_length or context_length".into())),
        Some(scale) => Some(AttnTemp { scale, floor_scale: n_orig as f32 }),
        None => None,
    };
    let layers = (0..hp.n_layer)
        .map(|il| {
            refuse_ffn_biases(w, il)?;
            let mut cfg = standard_attn(w, il, RopeKind::Norm)?;
            cfg.rope.yarn = yarn;
            cfg.temp = temp;
            PreNormLayer::load(w, il, cfg, Act::Silu)
        })
        .collect::<Result<_, _>>()?;
    Ok(Box::new(PreNormStack { layers, eps: hp.eps }))
}
