//! Gated activations: `gate = act(gate) * up`, with ggml's numerics (SiLU as `x / (1 + expf(-x))`,
//! GELU-tanh looked up through an f16-rounded input and output as ggml's CPU table does: the
//! table and its vector loop live in `lse_kernels::act`).

/// The activation of a gated MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// SwiGLU: silu(gate) * up.
    Silu,
    /// GeGLU with the tanh approximation of GELU.
    GeluTanh,
}

#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `gate[i] = act(gate[i]) * up[i]`.
pub fn glu(act: Act, gate: &mut [f32], up: &[f32]) {
    match act {
        Act::Silu => {
            for (g, u) in gate.iter_mut().zip(up) {
                *g = silu(*g) * u;
            }
        }
        Act::GeluTanh => {
            let n = gate.len().min(up.len());
            lse_kernels::act::geglu(lse_kernels::Dialect::Scalar, &mut gate[..n], &up[..n]);
        }
    }
}

#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}
