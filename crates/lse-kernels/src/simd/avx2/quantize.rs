//! AVX2 activation quantizers.
//!
//! Vector versions of the quantizers in `quant::q8_0/q8_1/q8_k` and the f16 rounding: the same
//! single-rounding arithmetic (one multiply, round to nearest even, saturating narrow), so
//! the bytes are identical to the scalar ones (tested).

use super::*;

/// The largest lane of `v`'s vectors.
#[inline(always)]
unsafe fn max8(v: &[__m256]) -> f32 {
    let mut m = v[0];
    for &vi in &v[1..] {
        m = _mm256_max_ps(m, vi);
    }
    let h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
    let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    let h = _mm_max_ss(h, _mm_movehdup_ps(h));
    _mm_cvtss_f32(h)
}

/// 4 × 8 i32 → 32 saturated i8 in element order.
#[inline(always)]
unsafe fn pack32(i: [__m256i; 4]) -> __m256i {
    let a = _mm256_packs_epi32(i[0], i[1]);
    let b = _mm256_packs_epi32(i[2], i[3]);
    let c = _mm256_packs_epi16(a, b);
    _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// Q8_0 (`SUM = false`) or Q8_1 (`SUM = true`) rows, as `quant::q8_0::quantize` / `q8_1`,
/// written in ggml's layout or (`SPLIT`) in `ActLayout::Split32`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8_32<const SUM: bool, const SPLIT: bool>(x: &[f32], dst: &mut [u8]) {
    let bb = if SUM { 36 } else { 34 };
    let k = x.len();
    let nb = k / 32;
    assert!(dst.len() >= if SPLIT { k + 8 * nb } else { nb * bb });
    let o = dst.as_mut_ptr();
    // 8 blocks at a time: their scales, conversions and sums as vectors
    let nb8 = nb / 8 * 8;
    for b0 in (0..nb8).step_by(8) {
        eight_blocks::<SUM, SPLIT>(x.as_ptr().add(32 * b0), o, b0, k, bb);
    }
    for b in nb8..nb {
        let p = x.as_ptr().add(32 * b);
        let v = [
            _mm256_loadu_ps(p),
            _mm256_loadu_ps(p.add(8)),
            _mm256_loadu_ps(p.add(16)),
            _mm256_loadu_ps(p.add(24)),
        ];
        let amax = max8(&v.map(|x| _mm256_andnot_ps(_mm256_set1_ps(-0.0), x)));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let m = _mm256_set1_ps(id);
        let i = [
            _mm256_cvtps_epi32(_mm256_mul_ps(v[0], m)),
            _mm256_cvtps_epi32(_mm256_mul_ps(v[1], m)),
            _mm256_cvtps_epi32(_mm256_mul_ps(v[2], m)),
            _mm256_cvtps_epi32(_mm256_mul_ps(v[3], m)),
        ];
        // block scales through F16C directly (`half`'s per-value call was 2.1 → 1.6 % of an 8-session
        // step's calling thread when replaced)
        let dh = f32_to_f16_bits(d);
        let sum = if SUM || SPLIT {
            hsum_i32(_mm256_add_epi32(
                _mm256_add_epi32(i[0], i[1]),
                _mm256_add_epi32(i[2], i[3]),
            ))
        } else {
            0
        };
        let sh = f32_to_f16_bits(d * sum as f32);
        let q = pack32(i);
        if SPLIT {
            _mm256_storeu_si256(o.add(32 * b) as *mut __m256i, q);
            (o.add(k + 4 * b) as *mut f32).write_unaligned(f16_bits_to_f32(dh));
            let extra = if SUM {
                f16_bits_to_f32(sh).to_bits()
            } else {
                sum as u32
            };
            (o.add(k + 4 * nb + 4 * b) as *mut u32).write_unaligned(extra);
        } else {
            let ob = o.add(bb * b);
            (ob as *mut u16).write_unaligned(dh);
            if SUM {
                (ob.add(2) as *mut u16).write_unaligned(sh);
            }
            _mm256_storeu_si256(ob.add(bb - 32) as *mut __m256i, q);
        }
    }
}

/// The largest lane of each of 8 vectors, as lanes 0..8 (a transposed reduction; max is exact in
/// any order).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn lane_max8(m: [__m256; 8]) -> __m256 {
    let t = |a: __m256, b: __m256| _mm256_max_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    let (t0, t1, t2, t3) = (t(m[0], m[1]), t(m[2], m[3]), t(m[4], m[5]), t(m[6], m[7]));
    let u = |a: __m256, b: __m256| _mm256_max_ps(_mm256_shuffle_ps::<0x44>(a, b), _mm256_shuffle_ps::<0xEE>(a, b));
    let (u0, u1) = (u(t0, t1), u(t2, t3));
    _mm256_max_ps(_mm256_permute2f128_ps::<0x20>(u0, u1), _mm256_permute2f128_ps::<0x31>(u0, u1))
}

/// The sum of each of 8 vectors' lanes, as lanes 0..8.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn lane_sum8(s: [__m256i; 8]) -> __m256i {
    let h = |a: __m256i, b: __m256i| _mm256_hadd_epi32(a, b);
    let (h0, h1) = (h(h(s[0], s[1]), h(s[2], s[3])), h(h(s[4], s[5]), h(s[6], s[7])));
    _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(h0, h1), _mm256_permute2x128_si256::<0x31>(h0, h1))
}

/// Blocks `b0..b0 + 8` of [`quantize_q8_32`] from `p` (their first element) into the row at
/// `o`: the per-block arithmetic of the one-block loop, the scalar steps done 8 blocks at once.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn eight_blocks<const SUM: bool, const SPLIT: bool>(p: *const f32, o: *mut u8, b0: usize, k: usize, bb: usize) {
    let nb = k / 32;
    let sign = _mm256_set1_ps(-0.0);
    let v = |i: usize, t: usize| _mm256_loadu_ps(p.add(32 * i + 8 * t));
    let amax = lane_max8(core::array::from_fn(|i| {
        let a = |t: usize| _mm256_andnot_ps(sign, v(i, t));
        _mm256_max_ps(_mm256_max_ps(a(0), a(1)), _mm256_max_ps(a(2), a(3)))
    }));
    let d = _mm256_div_ps(amax, _mm256_set1_ps(127.0));
    let nonzero = _mm256_cmp_ps::<_CMP_NEQ_UQ>(amax, _mm256_setzero_ps());
    let id = _mm256_and_ps(nonzero, _mm256_div_ps(_mm256_set1_ps(127.0), amax));
    let mut ids = [0f32; 8];
    _mm256_storeu_ps(ids.as_mut_ptr(), id);
    let mut sums = [_mm256_setzero_si256(); 8];
    for (i, sum) in sums.iter_mut().enumerate() {
        let m = _mm256_set1_ps(ids[i]);
        let q: [__m256i; 4] = core::array::from_fn(|t| _mm256_cvtps_epi32(_mm256_mul_ps(v(i, t), m)));
        if SUM || SPLIT {
            *sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        }
        let dst = if SPLIT { o.add(32 * (b0 + i)) } else { o.add(bb * (b0 + i) + bb - 32) };
        _mm256_storeu_si256(dst as *mut __m256i, pack32(q));
    }
    let dh = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(d);
    let sum = if SUM || SPLIT { lane_sum8(sums) } else { _mm256_setzero_si256() };
    let sh = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sum)));
    if SPLIT {
        _mm256_storeu_ps(o.add(k + 4 * b0) as *mut f32, _mm256_cvtph_ps(dh));
        let extra = if SUM { _mm256_castps_si256(_mm256_cvtph_ps(sh)) } else { sum };
        _mm256_storeu_si256(o.add(k + 4 * nb + 4 * b0) as *mut __m256i, extra);
    } else {
        let (mut dhs, mut shs) = ([0u16; 8], [0u16; 8]);
        _mm_storeu_si128(dhs.as_mut_ptr() as *mut __m128i, dh);
        _mm_storeu_si128(shs.as_mut_ptr() as *mut __m128i, sh);
        for i in 0..8 {
            let ob = o.add(bb * (b0 + i));
            (ob as *mut u16).write_unaligned(dhs[i]);
            if SUM {
                (ob.add(2) as *mut u16).write_unaligned(shs[i]);
            }
        }
    }
}

/// One Q8_K super-block at `p`: `None` when all 256 values are zero, else its `iscale`, each of its
/// 8 groups' 32 quants (4 × 8 i32, element order) handed to `group(g, q)`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q8k_block(p: *const f32, mut group: impl FnMut(usize, [__m256i; 4])) -> Option<f32> {
    let sign = _mm256_set1_ps(-0.0);
    // 32 vectors do not fit the registers: read them where they are (an array of them was
    // copied to the stack, a `memcpy` per super-block)
    let v = |i: usize| _mm256_loadu_ps(p.add(8 * i));
    let (top, bottom) = {
        let (mut hi, mut lo) = ([v(0), v(1), v(2), v(3)], [v(0), v(1), v(2), v(3)]);
        for i in 4..32 {
            hi[i % 4] = _mm256_max_ps(hi[i % 4], v(i));
            lo[i % 4] = _mm256_min_ps(lo[i % 4], v(i));
        }
        let lo = lo.map(|l| _mm256_xor_ps(l, sign));
        (max8(&hi), -max8(&lo))
    };
    let amax = top.max(-bottom);
    if amax == 0.0 {
        return None;
    }
    // The first element of largest magnitude gives the sign. Only when both +amax and −amax
    // occur does that take a search (the search every block took ran 16 iterations on average,
    // a mispredicted exit each).
    let signed = if top != -bottom {
        if top > -bottom { top } else { bottom }
    } else {
        let am = _mm256_set1_ps(amax);
        let mut first = 0;
        for i in 0..32 {
            let mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_andnot_ps(sign, v(i)), am));
            if mask != 0 {
                first = 8 * i + mask.trailing_zeros() as usize;
                break;
            }
        }
        *p.add(first)
    };
    let iscale = -127.0 / signed;
    let m = _mm256_set1_ps(iscale);
    let c127 = _mm256_set1_epi32(127);
    for g in 0..8 {
        group(g, core::array::from_fn(|t| _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v(4 * g + t), m)), c127)));
    }
    Some(iscale)
}

/// Q8_K rows, as `quant::q8_k::quantize`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8_k(x: &[f32], dst: &mut [u8]) {
    let nb = x.len() / 256;
    assert!(dst.len() >= nb * 292);
    for b in 0..nb {
        let o = dst.as_mut_ptr().add(292 * b);
        let group = |g: usize, i: [__m256i; 4]| {
            _mm256_storeu_si256(o.add(4 + 32 * g) as *mut __m256i, pack32(i));
            let s0 = hsum_i32(_mm256_add_epi32(i[0], i[1]));
            let s1 = hsum_i32(_mm256_add_epi32(i[2], i[3]));
            (o.add(260 + 4 * g) as *mut i16).write_unaligned(s0 as i16);
            (o.add(262 + 4 * g) as *mut i16).write_unaligned(s1 as i16);
        };
        match q8k_block(x.as_ptr().add(256 * b), group) {
            Some(iscale) => (o as *mut f32).write_unaligned(1.0 / iscale),
            None => core::ptr::write_bytes(o, 0, 292),
        }
    }
}

/// Q8_K rows written straight in the packed tiles' Split32 layout, the bytes
/// `matmul::quantize_rows_q8k_split` makes of `quantize_q8_k`'s: the quants, `d` per 32-element
/// block, then per block its two 16-element sums as i32 (`sub16`) or `d·Σq` as f32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8_k_split32(x: &[f32], dst: &mut [u8], sub16: bool) {
    let k = x.len();
    let nb = k / 32;
    assert!(dst.len() >= k + 4 * nb + if sub16 { 8 * nb } else { 4 * nb });
    let o = dst.as_mut_ptr();
    for sb in 0..k / 256 {
        let (mut s0, mut s1) = ([_mm256_setzero_si256(); 8], [_mm256_setzero_si256(); 8]);
        let group = |g: usize, i: [__m256i; 4]| {
            _mm256_storeu_si256(o.add(256 * sb + 32 * g) as *mut __m256i, pack32(i));
            s0[g] = _mm256_add_epi32(i[0], i[1]);
            s1[g] = _mm256_add_epi32(i[2], i[3]);
        };
        let d = match q8k_block(x.as_ptr().add(256 * sb), group) {
            Some(iscale) => 1.0 / iscale,
            None => {
                core::ptr::write_bytes(o.add(256 * sb), 0, 256);
                0.0
            }
        };
        // blocks 8·sb .. 8·sb + 8
        _mm256_storeu_ps(o.add(k + 32 * sb) as *mut f32, _mm256_set1_ps(d));
        let (a, b) = (lane_sum8(s0), lane_sum8(s1));
        if sub16 {
            let (lo, hi) = (_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
            let at = o.add(k + 4 * nb + 64 * sb);
            _mm256_storeu_si256(at as *mut __m256i, _mm256_permute2x128_si256::<0x20>(lo, hi));
            _mm256_storeu_si256(at.add(32) as *mut __m256i, _mm256_permute2x128_si256::<0x31>(lo, hi));
        } else {
            let sums = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(a, b)));
            _mm256_storeu_ps(o.add(k + 4 * nb + 32 * sb) as *mut f32, sums);
        }
    }
}

/// f16 rows (round to nearest even), as `quant::float::quantize_f16`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_f16(x: &[f32], dst: &mut [u8]) {
    assert!(dst.len() >= 2 * x.len());
    let n8 = x.len() / 8 * 8;
    for i in (0..n8).step_by(8) {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(x.as_ptr().add(i)));
        _mm_storeu_si128(dst.as_mut_ptr().add(2 * i) as *mut __m128i, h);
    }
    crate::quant::float::quantize_f16(&x[n8..], &mut dst[2 * n8..]);
}
