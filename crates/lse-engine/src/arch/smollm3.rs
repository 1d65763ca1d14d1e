//! smollm3: llama layers (rope NORM, GQA, SwiGLU) where every 4th layer (`(il + 1) % 4 == 0`,
//! llama.cpp's fixed `n_no_rope_layer_step`) skips rope (NoPE).

use super::{standard_attn, Architecture};
use crate::blocks::prenorm::{PreNormLayer, PreNormStack};
use crate::ops::act::Act;
use crate::ops::rope::RopeKind;
use crate::{EngineError, Weights};

/// Layers `il` with `(il + 1) % NO_ROPE_STEP == 0` have no rope.
const NO_ROPE_STEP: usize = 4;

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let layers = (0..w.hp.n_layer)
        .map(|il| {
            let mut cfg = standard_attn(w, il, RopeKind::Norm)?;
            if (il + 1) % NO_ROPE_STEP == 0 {
                cfg.rope.n_rot = 0;
            }
            PreNormLayer::load(w, il, cfg, Act::Silu)
        })
        .collect::<Result<_, _>>()?;
    Ok(Box::new(PreNormStack { layers, eps: w.hp.eps }))
}
