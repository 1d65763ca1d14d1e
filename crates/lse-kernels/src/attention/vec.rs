//! Small f32 vector helpers for the attention kernels: dot product and `acc += a * v`,
//! a portable scalar version and an AVX2+FMA version chosen once per call site.

/// Which implementation the helpers use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VecIsa {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl VecIsa {
    pub(crate) fn pick(d: crate::Dialect) -> VecIsa {
        #[cfg(target_arch = "x86_64")]
        if d == crate::Dialect::Simd && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return VecIsa::Avx2;
        }
        let _ = d;
        VecIsa::Scalar
    }

    #[inline(always)]
    pub(crate) fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            VecIsa::Scalar => dot_scalar(a, b),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2 is only picked when the CPU has AVX2 and FMA.
            VecIsa::Avx2 => unsafe { avx2::dot(a, b) },
        }
    }

    /// `acc[i] += a * v[i]`
    #[inline(always)]
    pub(crate) fn axpy(self, acc: &mut [f32], a: f32, v: &[f32]) {
        match self {
            VecIsa::Scalar => {
                for (y, x) in acc.iter_mut().zip(v) {
                    *y += a * x;
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2 is only picked when the CPU has AVX2 and FMA.
            VecIsa::Avx2 => unsafe { avx2::axpy(acc, a, v) },
        }
    }

    /// `acc[i] *= a`
    #[inline(always)]
    pub(crate) fn scale(self, acc: &mut [f32], a: f32) {
        for y in acc.iter_mut() {
            *y *= a;
        }
    }
}

fn dot_scalar(a: &[f32], b: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        s += x * y;
    }
    s
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut s0 = _mm256_setzero_ps();
        let mut s1 = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8)), s1);
            i += 16;
        }
        while i + 8 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
            i += 8;
        }
        let s = _mm256_add_ps(s0, s1);
        let h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_shuffle_ps::<1>(h, h));
        let mut r = _mm_cvtss_f32(h);
        while i < n {
            r += a[i] * b[i];
            i += 1;
        }
        r
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn axpy(acc: &mut [f32], a: f32, v: &[f32]) {
        let n = acc.len().min(v.len());
        let (py, px) = (acc.as_mut_ptr(), v.as_ptr());
        let va = _mm256_set1_ps(a);
        let mut i = 0;
        while i + 8 <= n {
            _mm256_storeu_ps(py.add(i), _mm256_fmadd_ps(va, _mm256_loadu_ps(px.add(i)), _mm256_loadu_ps(py.add(i))));
            i += 8;
        }
        while i < n {
            acc[i] += a * v[i];
            i += 1;
        }
    }
}
