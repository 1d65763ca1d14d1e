//! Gated activations: `gate = act(gate) * up`, with ggml's numerics (SiLU as `x / (1 + expf(-x))`,
//! GELU-tanh looked up through an f16-rounded input and output as ggml's CPU table does).

use half::f16;

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

/// GELU (tanh form) in f32.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh())
}

/// ggml CPU's GELU: 0 below -10, identity above 10, else the f16 table entry of f16(x).
#[inline]
pub fn gelu_tanh_ggml(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_table()[f16::from_f32(x).to_bits() as usize]
    }
}

/// The table `gelu_tanh_ggml` reads: for every f16 bit pattern h, f16(gelu_tanh(h)) as f32
/// (built once, 256 KiB).
fn gelu_table() -> &'static [f32; 65536] {
    static TABLE: std::sync::OnceLock<Box<[f32; 65536]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0f32; 65536]);
        for (h, v) in t.iter_mut().enumerate() {
            let x = f16::from_bits(h as u16).to_f32();
            *v = f16::from_f32(gelu_tanh(x)).to_f32();
        }
        t
    })
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
            for (g, u) in gate.iter_mut().zip(up) {
                *g = gelu_tanh_ggml(*g) * u;
            }
        }
    }
}

#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod gelu_table_tests {
    use super::*;

    #[test]
    fn table_equals_direct_f16_gelu() {
        let mut x = -10.5f32;
        while x < 10.5 {
            let direct = if x <= -10.0 {
                0.0
            } else if x >= 10.0 {
                x
            } else {
                f16::from_f32(gelu_tanh(f16::from_f32(x).to_f32())).to_f32()
            };
            assert_eq!(gelu_tanh_ggml(x).to_bits(), direct.to_bits(), "x = {x}");
            x += 0.000_731;
        }
    }
}
