//! Flash attention tiled over queries and keys (AVX-512F): a micro-tile of [`RM`] query rows
//! (query position × head of one KV group) against panels of 16 keys. K is stored transposed per
//! panel (`kt[panel][d][16]`), so the 16 scores of a row are one vector of FMAs with the query
//! element broadcast; `P·V` adds each key's V row scaled by the broadcast probability into the
//! rows' accumulators. Online softmax per row as in `flash.rs`: running max `m`, sum `l` (f64),
//! accumulator rescaled by `exp(m_old − m_new)` when the max grows, masked keys contribute 0.

#![allow(clippy::needless_range_loop)] // register tiles index several parallel arrays

use core::arch::x86_64::*;

/// Query rows per micro-tile.
pub(crate) const RM: usize = 4;
/// Keys per panel (one 512-bit vector of f32 scores).
pub(crate) const KP: usize = 16;

/// How the kernel reads 16 consecutive K-panel or V values: f32 as stored, or f16 bits widened
/// as they load (exact: the same f32 values a conversion beforehand would give).
pub(crate) trait Lanes: Copy + Sync {
    /// # Safety
    /// `p` must point at 16 readable values; the CPU must have AVX-512F.
    unsafe fn load16(p: *const Self) -> __m512;
}

impl Lanes for f32 {
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> __m512 {
        _mm512_loadu_ps(p)
    }
}

impl Lanes for u16 {
    #[inline(always)]
    unsafe fn load16(p: *const u16) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    }
}

/// One micro-tile's rows.
pub(crate) struct Rows<'a> {
    /// Query rows (dk floats each).
    pub q: [&'a [f32]; RM],
    /// Last visible key of each row (absolute position) and the first (window), as indices
    /// into the panel arrays (i.e. minus the call's first key `lo`).
    pub last: [usize; RM],
    pub first: [usize; RM],
    pub n: usize,
}

/// Runs the micro-tile: `kt` the transposed K panels of this KV head (`dk·16` values each),
/// `v` its V rows (`dv` values each, rows up to a whole number of panels), writes row `r`'s
/// output to `out[r]` (dv floats). `acc` is scratch of at least `RM·dv` floats.
///
/// # Safety
/// The CPU must have AVX-512F; `dk` and `dv` multiples of 16; the panels must cover
/// `max(last) + 1` keys.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn micro_tile<E: Lanes>(
    rows: &Rows,
    kt: &[E],
    v: &[E],
    dk: usize,
    dv: usize,
    scale: f32,
    acc: &mut [f32],
    out: &mut [&mut [f32]; RM],
) {
    let n = rows.n;
    let acc = &mut acc[..RM * dv];
    acc.fill(0.0);
    let mut m = [f32::NEG_INFINITY; RM];
    let mut l = [0f64; RM];
    let lmax = rows.last[..n].iter().copied().max().unwrap_or(0);
    let fmin = rows.first[..n].iter().copied().min().unwrap_or(0);
    let (p0, p1) = (fmin / KP, lmax / KP + 1);
    let lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let vscale = _mm512_set1_ps(scale);
    let mut pbuf = [[0f32; KP]; RM];
    for p in p0..p1 {
        let kp = kt.as_ptr().add(p * dk * KP);
        // scores
        let mut s = [_mm512_setzero_ps(); RM];
        for d in 0..dk {
            let kv = E::load16(kp.add(d * KP));
            for r in 0..RM {
                if r < n {
                    s[r] = _mm512_fmadd_ps(_mm512_set1_ps(*rows.q[r].get_unchecked(d)), kv, s[r]);
                }
            }
        }
        let key = _mm512_add_epi32(lane, _mm512_set1_epi32((p * KP) as i32));
        let mut live = [false; RM];
        for r in 0..n {
            // visible: first[r] <= key <= last[r]
            let vis = _mm512_cmple_epi32_mask(key, _mm512_set1_epi32(rows.last[r] as i32))
                & _mm512_cmpge_epi32_mask(key, _mm512_set1_epi32(rows.first[r] as i32));
            if vis == 0 {
                pbuf[r] = [0.0; KP];
                continue;
            }
            live[r] = true;
            let sc = _mm512_mask_mov_ps(
                _mm512_set1_ps(f32::NEG_INFINITY),
                vis,
                _mm512_mul_ps(s[r], vscale),
            );
            let mx = _mm512_reduce_max_ps(sc);
            if mx > m[r] {
                if l[r] > 0.0 {
                    let alpha = (m[r] - mx).exp();
                    l[r] *= alpha as f64;
                    let va = _mm512_set1_ps(alpha);
                    let a = acc.as_mut_ptr().add(r * dv);
                    for c in (0..dv).step_by(16) {
                        _mm512_storeu_ps(a.add(c), _mm512_mul_ps(_mm512_loadu_ps(a.add(c)), va));
                    }
                }
                m[r] = mx;
            }
            let e = crate::vexp::exp16(_mm512_sub_ps(sc, _mm512_set1_ps(m[r])));
            // f64 sum of the 16 probabilities
            let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
            let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(e))));
            l[r] += _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
            _mm512_storeu_ps(pbuf[r].as_mut_ptr(), e);
        }
        if !live.iter().any(|&x| x) {
            continue;
        }
        // acc[r] += Σ_j P[r][j] · V[p·16 + j], 64 columns at a time
        let vp = v.as_ptr().add(p * KP * dv);
        let mut c = 0;
        while c + 64 <= dv {
            let mut a = [[_mm512_setzero_ps(); 4]; RM];
            for r in 0..n {
                let ap = acc.as_ptr().add(r * dv + c);
                for u in 0..4 {
                    a[r][u] = _mm512_loadu_ps(ap.add(16 * u));
                }
            }
            for j in 0..KP {
                let vr = vp.add(j * dv + c);
                let v4 = [E::load16(vr), E::load16(vr.add(16)), E::load16(vr.add(32)), E::load16(vr.add(48))];
                for r in 0..RM {
                    if r < n {
                        let pj = _mm512_set1_ps(pbuf[r][j]);
                        for u in 0..4 {
                            a[r][u] = _mm512_fmadd_ps(pj, v4[u], a[r][u]);
                        }
                    }
                }
            }
            for r in 0..n {
                let ap = acc.as_mut_ptr().add(r * dv + c);
                for u in 0..4 {
                    _mm512_storeu_ps(ap.add(16 * u), a[r][u]);
                }
            }
            c += 64;
        }
        while c < dv {
            let mut a = [_mm512_setzero_ps(); RM];
            for r in 0..n {
                a[r] = _mm512_loadu_ps(acc.as_ptr().add(r * dv + c));
            }
            for j in 0..KP {
                let vv = E::load16(vp.add(j * dv + c));
                for r in 0..RM {
                    if r < n {
                        a[r] = _mm512_fmadd_ps(_mm512_set1_ps(pbuf[r][j]), vv, a[r]);
                    }
                }
            }
            for r in 0..n {
                _mm512_storeu_ps(acc.as_mut_ptr().add(r * dv + c), a[r]);
            }
            c += 16;
        }
    }
    for r in 0..n {
        let inv = if l[r] > 0.0 { (1.0 / l[r]) as f32 } else { 0.0 };
        let vi = _mm512_set1_ps(inv);
        let a = acc.as_ptr().add(r * dv);
        let o = out[r].as_mut_ptr();
        for c in (0..dv).step_by(16) {
            _mm512_storeu_ps(o.add(c), _mm512_mul_ps(_mm512_loadu_ps(a.add(c)), vi));
        }
    }
}
