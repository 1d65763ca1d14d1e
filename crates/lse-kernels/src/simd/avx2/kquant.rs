//! AVX2 bodies of the k-quants (Q2_K … Q6_K) against Q8_K activations: each 32-element group is
//! `vpmaddubsw` (u8 quants × i8 activations) then a multiply-accumulate with the i16 sub-block
//! scales; mins / quant offsets come back through the activation block sums (`bsums`).

use super::*;
use crate::quant::{q3_k, q4_k};

/// One 32-element group of unsigned weight quants `q` with i16 scales `sc` (per pair lane)
/// against group `g` of each activation row's current Q8_K block.
/// Two accumulators per row (even / odd groups) keep the `vpdpwssd` dependency chains short.
#[inline(always)]
unsafe fn kq_group<O: Ops, const NX: usize>(
    q: __m256i,
    sc: __m256i,
    xq: *const u8,
    xs: usize,
    g: usize,
    sumi: &mut [[__m256i; 2]; NX],
) {
    for j in 0..NX {
        let p = _mm256_maddubs_epi16(q, ld(xq.add(j * xs + 4 + 32 * g)));
        sumi[j][g & 1] = O::madd_acc(sumi[j][g & 1], p, sc);
    }
}

#[inline(always)]
unsafe fn sum2(s: [__m256i; 2]) -> __m256i {
    _mm256_add_epi32(s[0], s[1])
}

/// Adds `d·dx·Σ sumi − dmin·dx·Σ_g bsum_g·min_g` of each activation row's block at `xq` to its
/// accumulator (`mins`: 16 i16 lanes, the min of 16-sum g in lane g).
#[inline(always)]
unsafe fn acc_with_mins<const NX: usize>(
    acc: &mut [__m256; NX],
    sumi: &[[__m256i; 2]; NX],
    xq: *const u8,
    xs: usize,
    d: f32,
    dmin: f32,
    mins: __m256i,
) {
    for j in 0..NX {
        let p = xq.add(j * xs);
        let dx = rdf32(p);
        let m = _mm256_madd_epi16(ld(p.add(260)), mins);
        acc[j] = _mm256_fmadd_ps(
            _mm256_set1_ps(d * dx),
            _mm256_cvtepi32_ps(sum2(sumi[j])),
            acc[j],
        );
        acc[j] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dx), _mm256_cvtepi32_ps(m), acc[j]);
    }
}

/// Adds `d·dx·(Σ sumi − Σ_g bsum_g·corr_g)` of each activation row's block at `xq` to its
/// accumulator (`corr`: the quant offset times the scale of 16-sum g, in i16 lane g).
#[inline(always)]
unsafe fn acc_with_offset<const NX: usize>(
    acc: &mut [__m256; NX],
    sumi: &[[__m256i; 2]; NX],
    xq: *const u8,
    xs: usize,
    d: f32,
    corr: __m256i,
) {
    for j in 0..NX {
        let p = xq.add(j * xs);
        let s = _mm256_sub_epi32(sum2(sumi[j]), _mm256_madd_epi16(ld(p.add(260)), corr));
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * rdf32(p)), _mm256_cvtepi32_ps(s), acc[j]);
    }
}

#[inline(always)]
pub(crate) unsafe fn q4_k_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    q45_k_body::<O, NX, false>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q5_k_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    q45_k_body::<O, NX, true>(k, w, x, xs, out)
}

/// Q4_K, or with `Q5` Q5_K (same layout plus `qh[32]` before the nibbles, whose bit 2c / 2c+1
/// is the 5th bit of sub-block 2c / 2c+1).
#[inline(always)]
unsafe fn q45_k_body<O: Ops, const NX: usize, const Q5: bool>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let (block_bytes, qs) = if Q5 { (176, 48) } else { (144, 16) };
    let mut acc = [_mm256_setzero_ps(); NX];
    let m4 = _mm256_set1_epi8(0x0f);
    let b16 = _mm256_set1_epi8(0x10);
    for b in 0..k / 256 {
        let wb = w.add(block_bytes * b);
        let xq = x.add(292 * b);
        let (sc, mn) = q4_k::scales_mins(core::slice::from_raw_parts(wb.add(4), 12));
        let hb = if Q5 {
            ld(wb.add(16))
        } else {
            _mm256_setzero_si256()
        };
        let mut bit = _mm256_set1_epi8(1);
        let mut sumi = [[_mm256_setzero_si256(); 2]; NX];
        for c in 0..4 {
            let raw = ld(wb.add(qs + 32 * c));
            let mut lo = _mm256_and_si256(raw, m4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m4);
            if Q5 {
                let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit), b16);
                bit = _mm256_add_epi8(bit, bit);
                let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit), b16);
                bit = _mm256_add_epi8(bit, bit);
                lo = _mm256_or_si256(lo, h0);
                hi = _mm256_or_si256(hi, h1);
            }
            let (s0, s1) = (sc[2 * c] as i16, sc[2 * c + 1] as i16);
            kq_group::<O, NX>(lo, _mm256_set1_epi16(s0), xq, xs, 2 * c, &mut sumi);
            kq_group::<O, NX>(hi, _mm256_set1_epi16(s1), xq, xs, 2 * c + 1, &mut sumi);
        }
        let mins = mins16_pairs(&mn);
        acc_with_mins(&mut acc, &sumi, xq, xs, h2f(wb), h2f(wb.add(2)), mins);
    }
    finish(&acc, out);
}

/// 16 i16 lanes: min g/2 in lane g (a 32-element sub-block covers two 16-sums).
#[inline(always)]
unsafe fn mins16_pairs(mn: &[u8; 8]) -> __m256i {
    let m = _mm_loadl_epi64(mn.as_ptr() as *const __m128i);
    let m = _mm_unpacklo_epi8(m, m); // each byte twice
    _mm256_cvtepu8_epi16(m)
}

#[inline(always)]
pub(crate) unsafe fn q6_k_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let mut acc = [_mm256_setzero_ps(); NX];
    let m4 = _mm256_set1_epi8(0x0f);
    let m2 = _mm256_set1_epi8(0x03);
    for b in 0..k / 256 {
        let wb = w.add(210 * b);
        let xq = x.add(292 * b);
        let scp = wb.add(192) as *const i8;
        let sc = |i: usize| *scp.add(i) as i16;
        let mut sumi = [[_mm256_setzero_si256(); 2]; NX];
        for h in 0..2 {
            let ql0 = ld(wb.add(64 * h));
            let ql1 = ld(wb.add(64 * h + 32));
            let qh = ld(wb.add(128 + 32 * h));
            let hbits = [
                _mm256_and_si256(qh, m2),
                _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m2),
                _mm256_and_si256(_mm256_srli_epi16::<4>(qh), m2),
                _mm256_and_si256(_mm256_srli_epi16::<6>(qh), m2),
            ];
            let lows = [
                _mm256_and_si256(ql0, m4),
                _mm256_and_si256(ql1, m4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
            ];
            for t in 0..4 {
                let q = _mm256_or_si256(lows[t], _mm256_slli_epi16::<4>(hbits[t]));
                let g = 4 * h + t;
                kq_group::<O, NX>(
                    q,
                    two_scales(sc(2 * g), sc(2 * g + 1)),
                    xq,
                    xs,
                    g,
                    &mut sumi,
                );
            }
        }
        // Σ sc·(q − 32)·x = Σ sc·q·x − 32·Σ_g sc_g·bsum_g
        let corr =
            _mm256_slli_epi16::<5>(_mm256_cvtepi8_epi16(_mm_loadu_si128(scp as *const __m128i)));
        acc_with_offset(&mut acc, &sumi, xq, xs, h2f(wb.add(208)), corr);
    }
    finish(&acc, out);
}

#[inline(always)]
pub(crate) unsafe fn q2_k_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let mut acc = [_mm256_setzero_ps(); NX];
    let m2 = _mm256_set1_epi8(0x03);
    for b in 0..k / 256 {
        let wb = w.add(84 * b);
        let xq = x.add(292 * b);
        let sc = |i: usize| (*wb.add(i) & 0x0f) as i16;
        let mut sumi = [[_mm256_setzero_si256(); 2]; NX];
        for h in 0..2 {
            let raw = ld(wb.add(16 + 32 * h));
            let qs = [
                _mm256_and_si256(raw, m2),
                _mm256_and_si256(_mm256_srli_epi16::<2>(raw), m2),
                _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m2),
                _mm256_and_si256(_mm256_srli_epi16::<6>(raw), m2),
            ];
            for t in 0..4 {
                let g = 4 * h + t;
                kq_group::<O, NX>(
                    qs[t],
                    two_scales(sc(2 * g), sc(2 * g + 1)),
                    xq,
                    xs,
                    g,
                    &mut sumi,
                );
            }
        }
        let s16 = _mm_loadu_si128(wb as *const __m128i);
        let mins =
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(s16), _mm_set1_epi8(0x0f)));
        acc_with_mins(
            &mut acc,
            &sumi,
            xq,
            xs,
            h2f(wb.add(80)),
            h2f(wb.add(82)),
            mins,
        );
    }
    finish(&acc, out);
}

#[inline(always)]
pub(crate) unsafe fn q3_k_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let mut acc = [_mm256_setzero_ps(); NX];
    let m2 = _mm256_set1_epi8(0x03);
    let b4 = _mm256_set1_epi8(0x04);
    for b in 0..k / 256 {
        let wb = w.add(110 * b);
        let xq = x.add(292 * b);
        let sc = q3_k::scales(core::slice::from_raw_parts(wb.add(96), 12));
        let hm = ld(wb);
        let mut bit = _mm256_set1_epi8(1);
        let mut sumi = [[_mm256_setzero_si256(); 2]; NX];
        for h in 0..2 {
            let raw = ld(wb.add(32 + 32 * h));
            let lows = [
                _mm256_and_si256(raw, m2),
                _mm256_and_si256(_mm256_srli_epi16::<2>(raw), m2),
                _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m2),
                _mm256_and_si256(_mm256_srli_epi16::<6>(raw), m2),
            ];
            for t in 0..4 {
                // u = low2 + 4·hbit in 0..8; the true quant is u − 4.
                let hi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), b4);
                bit = _mm256_add_epi8(bit, bit);
                let g = 4 * h + t;
                kq_group::<O, NX>(
                    _mm256_or_si256(lows[t], hi),
                    two_scales(sc[2 * g] as i16, sc[2 * g + 1] as i16),
                    xq,
                    xs,
                    g,
                    &mut sumi,
                );
            }
        }
        // Σ sc·(u − 4)·x = Σ sc·u·x − 4·Σ_g sc_g·bsum_g
        let corr = _mm256_slli_epi16::<2>(_mm256_cvtepi8_epi16(_mm_loadu_si128(
            sc.as_ptr() as *const __m128i
        )));
        acc_with_offset(&mut acc, &sumi, xq, xs, h2f(wb.add(108)), corr);
    }
    finish(&acc, out);
}
