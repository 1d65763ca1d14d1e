//! llama (and SmolLM2): pre-norm layers, rope NORM (adjacent pairs), GQA, SwiGLU.

use super::{standard_attn, Architecture};
use crate::blocks::prenorm::{PreNormLayer, PreNormStack};
use crate::ops::act::Act;
use crate::ops::rope::RopeKind;
use crate::{EngineError, Weights};

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let layers = (0..w.hp.n_layer)
        .map(|il| PreNormLayer::load(w, il, standard_attn(w, il, RopeKind::Norm)?, Act::Silu))
        .collect::<Result<_, _>>()?;
    Ok(Box::new(PreNormStack { layers, eps: w.hp.eps }))
}
