//! f32 vector helpers for the attention kernels: tile scores, exp, weighted sums of V rows,
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

    /// `out[j] = dot(q, k_j) * scale` for the `out.len()` rows of `k` (`dk` apart).
    #[inline(always)]
    pub(crate) fn scores(self, q: &[f32], k: &[f32], dk: usize, scale: f32, out: &mut [f32]) {
        match self {
            VecIsa::Scalar => {
                for (j, o) in out.iter_mut().enumerate() {
                    *o = dot_scalar(q, &k[j * dk..(j + 1) * dk]) * scale;
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2 is only picked when the CPU has AVX2 and FMA.
            VecIsa::Avx2 => unsafe { avx2::scores(q, k, dk, scale, out) },
        }
    }

    /// `acc += sum_j p[j] * v_j` over the `p.len()` rows of `v` (`acc.len()` apart).
    #[inline(always)]
    pub(crate) fn weighted_sum(self, acc: &mut [f32], p: &[f32], v: &[f32]) {
        let dv = acc.len();
        match self {
            VecIsa::Scalar => {
                for (j, &pj) in p.iter().enumerate() {
                    for (y, x) in acc.iter_mut().zip(&v[j * dv..(j + 1) * dv]) {
                        *y += pj * x;
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2 is only picked when the CPU has AVX2 and FMA.
            VecIsa::Avx2 => unsafe { avx2::weighted_sum(acc, p, v) },
        }
    }

    /// `s[i] = exp(s[i] - m)` in place; returns the sum of the new values in f64.
    #[inline(always)]
    pub(crate) fn exp_sub(self, s: &mut [f32], m: f32) -> f64 {
        match self {
            VecIsa::Scalar => {
                let mut sum = 0.0f64;
                for x in s.iter_mut() {
                    *x = (*x - m).exp();
                    sum += *x as f64;
                }
                sum
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2 is only picked when the CPU has AVX2 and FMA.
            VecIsa::Avx2 => unsafe { avx2::exp_sub(s, m) },
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
    unsafe fn hsum(s: __m256) -> f32 {
        let h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_shuffle_ps::<1>(h, h));
        _mm_cvtss_f32(h)
    }

    /// Four keys at a time, each with its own accumulator.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scores(q: &[f32], k: &[f32], dk: usize, scale: f32, out: &mut [f32]) {
        let n = out.len();
        let d8 = dk / 8 * 8;
        let (pq, pk) = (q.as_ptr(), k.as_ptr());
        let mut j = 0;
        while j + 4 <= n {
            let (k0, k1, k2, k3) = (pk.add(j * dk), pk.add((j + 1) * dk), pk.add((j + 2) * dk), pk.add((j + 3) * dk));
            let mut s0 = _mm256_setzero_ps();
            let mut s1 = _mm256_setzero_ps();
            let mut s2 = _mm256_setzero_ps();
            let mut s3 = _mm256_setzero_ps();
            let mut d = 0;
            while d < d8 {
                let vq = _mm256_loadu_ps(pq.add(d));
                s0 = _mm256_fmadd_ps(vq, _mm256_loadu_ps(k0.add(d)), s0);
                s1 = _mm256_fmadd_ps(vq, _mm256_loadu_ps(k1.add(d)), s1);
                s2 = _mm256_fmadd_ps(vq, _mm256_loadu_ps(k2.add(d)), s2);
                s3 = _mm256_fmadd_ps(vq, _mm256_loadu_ps(k3.add(d)), s3);
                d += 8;
            }
            let mut r = [hsum(s0), hsum(s1), hsum(s2), hsum(s3)];
            for (t, rt) in r.iter_mut().enumerate() {
                for dd in d8..dk {
                    *rt += q[dd] * k[(j + t) * dk + dd];
                }
                out[j + t] = *rt * scale;
            }
            j += 4;
        }
        while j < n {
            out[j] = dot(q, &k[j * dk..(j + 1) * dk]) * scale;
            j += 1;
        }
    }

    /// 32 output values (4 registers) at a time, streaming over the keys.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn weighted_sum(acc: &mut [f32], p: &[f32], v: &[f32]) {
        let dv = acc.len();
        let n = p.len();
        let (pa, pv) = (acc.as_mut_ptr(), v.as_ptr());
        let mut d = 0;
        while d + 32 <= dv {
            let mut a0 = _mm256_loadu_ps(pa.add(d));
            let mut a1 = _mm256_loadu_ps(pa.add(d + 8));
            let mut a2 = _mm256_loadu_ps(pa.add(d + 16));
            let mut a3 = _mm256_loadu_ps(pa.add(d + 24));
            for (j, &pj) in p.iter().enumerate() {
                let w = _mm256_set1_ps(pj);
                let r = pv.add(j * dv + d);
                a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r), a0);
                a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(8)), a1);
                a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(16)), a2);
                a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(24)), a3);
            }
            _mm256_storeu_ps(pa.add(d), a0);
            _mm256_storeu_ps(pa.add(d + 8), a1);
            _mm256_storeu_ps(pa.add(d + 16), a2);
            _mm256_storeu_ps(pa.add(d + 24), a3);
            d += 32;
        }
        while d + 8 <= dv {
            let mut a0 = _mm256_loadu_ps(pa.add(d));
            for (j, &pj) in p.iter().enumerate() {
                a0 = _mm256_fmadd_ps(_mm256_set1_ps(pj), _mm256_loadu_ps(pv.add(j * dv + d)), a0);
            }
            _mm256_storeu_ps(pa.add(d), a0);
            d += 8;
        }
        while d < dv {
            for j in 0..n {
                acc[d] += p[j] * v[j * dv + d];
            }
            d += 1;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_sub(s: &mut [f32], m: f32) -> f64 {
        let n = s.len();
        let p = s.as_mut_ptr();
        let vm = _mm256_set1_ps(m);
        let mut a0 = _mm256_setzero_pd();
        let mut a1 = _mm256_setzero_pd();
        let mut i = 0;
        while i + 8 <= n {
            let e = crate::vexp::exp8(_mm256_sub_ps(_mm256_loadu_ps(p.add(i)), vm));
            _mm256_storeu_ps(p.add(i), e);
            a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
            a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(e)));
            i += 8;
        }
        let mut lanes = [0f64; 4];
        _mm256_storeu_pd(lanes.as_mut_ptr(), _mm256_add_pd(a0, a1));
        let mut sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
        while i < n {
            s[i] = (s[i] - m).exp();
            sum += s[i] as f64;
            i += 1;
        }
        sum
    }
}
