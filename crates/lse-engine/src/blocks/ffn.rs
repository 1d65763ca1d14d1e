//! A layer's feed-forward block: the dense gated MLP or a mixture of experts.

use super::mlp::Mlp;
use super::moe::Moe;
use crate::ForwardCtx;

pub enum Ffn {
    Dense(Box<Mlp>),
    Moe(Box<Moe>),
}

impl Ffn {
    /// `out` (n × n_embd) = the block applied to the normed rows `h` (n × n_embd).
    pub fn forward(&self, cx: &ForwardCtx, h: &[f32], n: usize, out: &mut [f32]) {
        match self {
            Ffn::Dense(m) => m.forward(cx, h, n, out),
            Ffn::Moe(m) => m.forward(cx, h, n, out),
        }
    }
}
