//! Activations with ggml's numerics: SiLU as `x / (1 + expf(-x))`, the sigmoid; the gated forms
//! (`gate = act(gate) * up`, GELU-tanh through ggml's f16 table) run in `lse_kernels::act`,
//! chosen by `Backend::glu`.

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

#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}
