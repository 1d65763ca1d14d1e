//! Gated activations on f32 rows.

use crate::Dialect;
use half::f16;

/// `gate[i] = silu(gate[i]) · up[i]` with `silu(x) = x / (1 + e^-x)`. Scalar: libm `expf`;
/// Simd (AVX2+FMA): the vector exp of `reduce` (within about 1 ulp of libm), 8 lanes at a time.
pub fn swiglu(d: Dialect, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu: gate and up lengths differ");
    #[cfg(target_arch = "x86_64")]
    if d == Dialect::Simd && crate::simd::level() == crate::simd::Level::Avx512 {
        // SAFETY: the level is only Avx512 when the CPU has AVX-512F; lengths are equal.
        unsafe { swiglu_avx512(gate, up) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if d == Dialect::Simd && crate::reduce::avx2::available() {
        // SAFETY: the CPU has AVX2 and FMA (checked); lengths are equal.
        unsafe { swiglu_avx2(gate, up) };
        return;
    }
    let _ = d;
    for (g, u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

/// `x / (1 + e^-x) · u` on 8 lanes, the vector exp of `vexp`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn silu_mul8(x: core::arch::x86_64::__m256, u: core::arch::x86_64::__m256) -> core::arch::x86_64::__m256 {
    use core::arch::x86_64::*;
    let e = crate::vexp::exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), e)), u)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn swiglu_avx2(gate: &mut [f32], up: &[f32]) {
    use core::arch::x86_64::*;
    let n = gate.len();
    let (pg, pu) = (gate.as_mut_ptr(), up.as_ptr());
    let mut i = 0;
    while i + 8 <= n {
        _mm256_storeu_ps(pg.add(i), silu_mul8(_mm256_loadu_ps(pg.add(i)), _mm256_loadu_ps(pu.add(i))));
        i += 8;
    }
    if i < n {
        // the tail goes through the same vector exp (masked lanes load as zero), so an element's
        // result does not depend on where it sits in the slice (batch invariance)
        let m = _mm256_cmpgt_epi32(_mm256_set1_epi32((n - i) as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        let y = silu_mul8(_mm256_maskload_ps(pg.add(i), m), _mm256_maskload_ps(pu.add(i), m));
        _mm256_maskstore_ps(pg.add(i), m, y);
    }
}

/// [`swiglu_avx2`] on 16 lanes: the same operations per lane (the exponentials of `vexp` agree
/// lane for lane), so the same bits; the tail goes through the vector path, masked lanes zero.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn swiglu_avx512(gate: &mut [f32], up: &[f32]) {
    use core::arch::x86_64::*;
    let n = gate.len();
    let (pg, pu) = (gate.as_mut_ptr(), up.as_ptr());
    let one = _mm512_set1_ps(1.0);
    let mut i = 0;
    while i < n {
        let mask: __mmask16 = if n - i >= 16 { 0xffff } else { ((1u32 << (n - i)) - 1) as u16 };
        let x = _mm512_maskz_loadu_ps(mask, pg.add(i));
        let e = crate::vexp::exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        let s = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(pg.add(i), mask, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(mask, pu.add(i))));
        i += 16;
    }
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

/// `gate[i] = gelu_tanh_ggml(gate[i]) · up[i]`. Simd (AVX2 + F16C): eight values at a time, the
/// same bits (the input rounded by `vcvtps2ph`, the instruction `half` uses per value, the table
/// entries gathered, the same clamps and product).
pub fn geglu(d: Dialect, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "geglu: gate and up lengths differ");
    #[cfg(target_arch = "x86_64")]
    if d == Dialect::Simd && crate::simd::avx2::available() {
        // SAFETY: the CPU has AVX2 and F16C (checked); lengths are equal.
        unsafe { geglu_avx2(gelu_table(), gate, up) };
        return;
    }
    let _ = d;
    for (g, u) in gate.iter_mut().zip(up) {
        *g = gelu_tanh_ggml(*g) * u;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn geglu_avx2(table: &[f32; 65536], gate: &mut [f32], up: &[f32]) {
    use core::arch::x86_64::*;
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

#[cfg(test)]
mod tests {
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

    /// The vector GeGLU gives the per-value function's bits: values around the clamps, ties of
    /// the f16 rounding, subnormals, infinities, NaN, random bit patterns; a length with a tail.
    #[test]
    fn geglu_equals_per_value_gelu() {
        let mut rng = crate::test_rng::Rng::new(0x9e37_79b9);
        let mut g: Vec<f32> =
            (0..4001).map(|i| if i % 2 == 0 { f32::from_bits((rng.next() >> 32) as u32) } else { rng.unit() * 24.0 - 12.0 }).collect();
        g.extend([-10.0, 10.0, -10.000001, 9.999999, 1.0 + 2f32.powi(-11), 0.0, -0.0, 1e-40, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        let up: Vec<f32> = (0..g.len()).map(|i| 0.5 + (i % 5) as f32).collect();
        let mut v = g.clone();
        geglu(Dialect::Simd, &mut v, &up);
        for i in 0..g.len() {
            let want = gelu_tanh_ggml(g[i]) * up[i];
            assert!(v[i].to_bits() == want.to_bits() || (v[i].is_nan() && want.is_nan()), "x = {:e}: {} vs {}", g[i], v[i], want);
        }
    }

    /// Both vector paths give the same bits, tails included (lengths 1..=40 and 1003).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_swiglu_is_avx2s_bit_for_bit() {
        if !(crate::simd::avx512::available() && crate::reduce::avx2::available()) {
            eprintln!("skipped: this CPU lacks AVX-512F");
            return;
        }
        let g0: Vec<f32> = (0..1003).map(|i| (i as f32 - 500.0) * 0.173).chain([-100.0, 100.0, 0.0, -87.4, 88.5, -1e-30]).collect();
        let up: Vec<f32> = (0..g0.len()).map(|i| 0.5 + (i % 11) as f32 * 0.37).collect();
        for n in (1..=40).chain([g0.len()]) {
            let (mut a, mut b) = (g0[..n].to_vec(), g0[..n].to_vec());
            // SAFETY: both instruction sets checked above; equal lengths.
            unsafe {
                super::swiglu_avx2(&mut a, &up[..n]);
                super::swiglu_avx512(&mut b, &up[..n]);
            }
            assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "length {n}");
        }
    }

    #[test]
    fn simd_swiglu_matches_libm_within_ulps() {
        let n = 1003;
        let g0: Vec<f32> = (0..n).map(|i| (i as f32 - 500.0) * 0.037).chain([-100.0, 100.0, 0.0, -90.0, 95.0]).collect();
        let up: Vec<f32> = (0..g0.len()).map(|i| 1.0 + (i % 7) as f32 * 0.25).collect();
        let mut a = g0.clone();
        let mut b = g0.clone();
        swiglu(Dialect::Scalar, &mut a, &up);
        swiglu(Dialect::Simd, &mut b, &up);
        // an element's value does not depend on its place in the slice
        for start in [0, 1, 5, 999] {
            let mut c = g0[start..].to_vec();
            swiglu(Dialect::Simd, &mut c, &up[start..]);
            assert!(c.iter().zip(&b[start..]).all(|(x, y)| x.to_bits() == y.to_bits()), "offset {start}");
        }
        for i in 0..a.len() {
            let tol = 4.0 * f32::EPSILON * a[i].abs() + 1e-30;
            assert!((a[i] - b[i]).abs() <= tol, "x = {}: libm {} simd {}", g0[i], a[i], b[i]);
        }
    }
}
