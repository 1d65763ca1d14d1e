//! Gated activations on f32 rows.

use crate::Dialect;

/// `gate[i] = silu(gate[i]) · up[i]` with `silu(x) = x / (1 + e^-x)`. Scalar: libm `expf`;
/// Simd (AVX2+FMA): the vector exp of `reduce` (within about 1 ulp of libm), 8 lanes at a time.
pub fn swiglu(d: Dialect, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu: gate and up lengths differ");
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn swiglu_avx2(gate: &mut [f32], up: &[f32]) {
    use core::arch::x86_64::*;
    let n = gate.len();
    let (pg, pu) = (gate.as_mut_ptr(), up.as_ptr());
    let one = _mm256_set1_ps(1.0);
    let zero = _mm256_setzero_ps();
    let mut i = 0;
    while i + 8 <= n {
        let x = _mm256_loadu_ps(pg.add(i));
        let e = crate::vexp::exp8(_mm256_sub_ps(zero, x));
        let s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(pg.add(i), _mm256_mul_ps(s, _mm256_loadu_ps(pu.add(i))));
        i += 8;
    }
    if i < n {
        // the tail goes through the same vector exp (zero-padded lanes), so an element's result
        // does not depend on where it sits in the slice (batch invariance)
        let (mut xg, mut xu) = ([0f32; 8], [0f32; 8]);
        xg[..n - i].copy_from_slice(&gate[i..]);
        xu[..n - i].copy_from_slice(&up[i..]);
        let x = _mm256_loadu_ps(xg.as_ptr());
        let e = crate::vexp::exp8(_mm256_sub_ps(zero, x));
        let s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(xg.as_mut_ptr(), _mm256_mul_ps(s, _mm256_loadu_ps(xu.as_ptr())));
        gate[i..].copy_from_slice(&xg[..n - i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
