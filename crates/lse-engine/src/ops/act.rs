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
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
                let n = gate.len().min(up.len());
                // SAFETY: AVX2 and F16C checked above; both slices hold `n` values.
                unsafe { geglu_avx2(gelu_table(), &mut gate[..n], &up[..n]) };
                return;
            }
            for (g, u) in gate.iter_mut().zip(up) {
                *g = gelu_tanh_ggml(*g) * u;
            }
        }
    }
}

/// The GeGLU loop eight values at a time: the same f16 rounding of the input (`vcvtps2ph`, the
/// instruction `half` uses per value), the same table entries (gathered), the same clamps and
/// product, so the bits equal [`gelu_tanh_ggml`]`(g) · u` for every value.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn geglu_avx2(table: &[f32; 65536], gate: &mut [f32], up: &[f32]) {
    use std::arch::x86_64::*;
    let n8 = gate.len() / 8 * 8;
    let (lo, hi) = (_mm256_set1_ps(-10.0), _mm256_set1_ps(10.0));
    for i in (0..n8).step_by(8) {
        let x = _mm256_loadu_ps(gate.as_ptr().add(i));
        let h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x));
        let t = _mm256_i32gather_ps::<4>(table.as_ptr(), h);
        // x <= -10: 0; x >= 10: x; else the table entry (NaN compares false both ways)
        let y = _mm256_blendv_ps(t, x, _mm256_cmp_ps::<_CMP_GE_OQ>(x, hi));
        let y = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(x, lo), y);
        _mm256_storeu_ps(gate.as_mut_ptr().add(i), _mm256_mul_ps(y, _mm256_loadu_ps(up.as_ptr().add(i))));
    }
    for i in n8..gate.len() {
        gate[i] = gelu_tanh_ggml(gate[i]) * up[i];
    }
}

#[inline]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod gelu_table_tests {
    use super::*;

    /// The vector GeGLU gives the per-value function's bits: values around the clamps, ties of
    /// the f16 rounding, subnormals, infinities, NaN, random bit patterns; a length with a tail.
    #[test]
    fn geglu_equals_per_value_gelu() {
        let mut seed = 0x9e37_79b9_u32;
        let mut g: Vec<f32> = (0..4001)
            .map(|i| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                if i % 2 == 0 { f32::from_bits(seed) } else { (seed >> 8) as f32 / (1u32 << 24) as f32 * 24.0 - 12.0 }
            })
            .collect();
        g.extend([-10.0, 10.0, -10.000001, 9.999999, 1.0 + 2f32.powi(-11), 0.0, -0.0, 1e-40, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        let up: Vec<f32> = (0..g.len()).map(|i| 0.5 + (i % 5) as f32).collect();
        let mut v = g.clone();
        glu(Act::GeluTanh, &mut v, &up);
        for i in 0..g.len() {
            let want = gelu_tanh_ggml(g[i]) * up[i];
            assert!(v[i].to_bits() == want.to_bits() || (v[i].is_nan() && want.is_nan()), "x = {:e}: {} vs {}", g[i], v[i], want);
        }
    }

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
