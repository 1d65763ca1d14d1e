//! qwen3: llama layers with per-head RMS norms on Q and K (before rope) and rope NEOX.

use super::{require, standard_attn, Architecture};
use crate::blocks::prenorm::{PreNormLayer, PreNormStack};
use crate::ops::act::Act;
use crate::ops::rope::RopeKind;
use crate::{EngineError, Weights};

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let layers = (0..w.hp.n_layer)
        .map(|il| {
            require(w, &["q", "k"].map(|t| format!("blk.{il}.attn_{t}_norm.weight")))?;
            PreNormLayer::load(w, il, standard_attn(w, il, RopeKind::Neox)?, Act::Silu)
        })
        .collect::<Result<_, _>>()?;
    Ok(Box::new(PreNormStack { layers, eps: w.hp.eps }))
}
