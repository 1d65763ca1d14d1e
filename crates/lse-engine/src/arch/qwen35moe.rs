//! qwen35moe (Qwen3.5 MoE): the qwen35 hybrid stack (gated delta net + gated attention layers,
//! MTP blocks skipped) whose FFNs are mixtures of experts: softmax router, top
//! `expert_used_count`, weights renormalised, SwiGLU experts (`ffn_gate_up_exps` fused or split),
//! plus a shared expert scaled by `sigmoid(ffn_gate_inp_shexp · h)`.

use super::Architecture;
use crate::blocks::ffn::Ffn;
use crate::blocks::moe::{Moe, MoeConfig};
use crate::{EngineError, Weights};

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    let moe = MoeConfig { norm_weights: true, ..MoeConfig::from_keys(w)? };
    super::qwen35::load_with(w, &|w, il| Ok(Ffn::Moe(Box::new(Moe::load(w, il, moe)?))))
}
