//! qwen3moe: qwen3 layers (q/k norms, rope NEOX) whose FFN is a mixture of experts: softmax
//! router, top `expert_used_count`, weights renormalised to sum 1, SwiGLU experts.

use super::{require, standard_attn, Architecture};
use crate::blocks::ffn::Ffn;
use crate::blocks::moe::{Moe, MoeConfig};
use crate::blocks::prenorm::{PreNormLayer, PreNormStack};
use crate::ops::rope::RopeKind;
use crate::{EngineError, Weights};

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let moe = MoeConfig { norm_weights: true, ..MoeConfig::from_keys(w)? };
    let layers = (0..w.hp.n_layer)
        .map(|il| {
            require(w, &["q", "k"].map(|t| format!("blk.{il}.attn_{t}_norm.weight")))?;
            let ffn = Ffn::Moe(Box::new(Moe::load(w, il, moe)?));
            PreNormLayer::load_with_ffn(w, il, standard_attn(w, il, RopeKind::Neox)?, ffn)
        })
        .collect::<Result<_, _>>()?;
    Ok(Box::new(PreNormStack { layers, eps: w.hp.eps }))
}
