//! AVX2 bodies of the ternary formats against Q8_K activations: TQ2_0 (2-bit fields, value
//! q − 1: `Σ q·x − Σ x` with Σ x from the activation block sums) and TQ1_0 (base-3 digits
//! recovered per byte with a wrapping multiply and two unsigned compares). Exact integer block
//! sums, then the scalar's f32 steps: bit-identical to the scalar dots.

use super::*;
use crate::quant::{tq1_0, tq2_0};

/// Σ of the 16 i16 block sums of a Q8_K block at `xb` (= Σ of its 256 quants).
#[inline(always)]
unsafe fn q8k_sum(xb: *const u8) -> i32 {
    hsum_i32(_mm256_madd_epi16(ld(xb.add(260)), _mm256_set1_epi16(1)))
}

#[inline(always)]
pub(crate) unsafe fn tq2_0_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let m3 = _mm256_set1_epi8(3);
    let mut sumf = [0f32; NX];
    for b in 0..k / 256 {
        let wb = w.add(tq2_0::BLOCK_BYTES * b);
        let mut acc = [_mm256_setzero_si256(); NX];
        for c in 0..2 {
            let v = ld(wb.add(32 * c));
            let q = [
                _mm256_and_si256(v, m3),
                _mm256_and_si256(_mm256_srli_epi16::<2>(v), m3),
                _mm256_and_si256(_mm256_srli_epi16::<4>(v), m3),
                _mm256_and_si256(_mm256_srli_epi16::<6>(v), m3),
            ];
            for (l, &ql) in q.iter().enumerate() {
                for j in 0..NX {
                    let xv = ld(x.add(j * xs + 292 * b + 4 + 128 * c + 32 * l));
                    acc[j] = O::dot_us(acc[j], ql, xv);
                }
            }
        }
        let dw = h2f(wb.add(tq2_0::D));
        for j in 0..NX {
            let xb = x.add(j * xs + 292 * b);
            let sumi = hsum_i32(acc[j]) - q8k_sum(xb);
            sumf[j] += sumi as f32 * (rdf32(xb) * dw);
        }
    }
    out[..NX].copy_from_slice(&sumf);
}

/// `v·m mod 256` per byte.
#[inline(always)]
unsafe fn mul_u8(v: __m256i, m: __m256i) -> __m256i {
    let lo = _mm256_and_si256(_mm256_mullo_epi16(v, m), _mm256_set1_epi16(0x00ff));
    let hi = _mm256_mullo_epi16(
        _mm256_and_si256(v, _mm256_set1_epi16(0xff00u16 as i16)),
        _mm256_srli_epi16::<8>(m),
    );
    _mm256_or_si256(lo, hi)
}

/// The ternary value (−1, 0, 1) of fixed-point digit bytes q: ((q·3) >> 8) − 1, i.e. −1 for
/// q ≤ 85, 0 for 86..=170, 1 above.
#[inline(always)]
unsafe fn trit(q: __m256i) -> __m256i {
    let s = _mm256_xor_si256(q, _mm256_set1_epi8(0x80u8 as i8));
    let gt85 = _mm256_cmpgt_epi8(s, _mm256_set1_epi8((85u8 ^ 0x80) as i8));
    let gt170 = _mm256_cmpgt_epi8(s, _mm256_set1_epi8((170u8 ^ 0x80) as i8));
    _mm256_sub_epi8(_mm256_sub_epi8(_mm256_set1_epi8(-1), gt85), gt170)
}

#[inline(always)]
pub(crate) unsafe fn tq1_0_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let ones = _mm256_set1_epi8(1);
    let m = |a: i8, b: i8| _mm256_set_m128i(_mm_set1_epi8(b), _mm_set1_epi8(a));
    let qh_mul = _mm_setr_epi8(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    let mut sumf = [0f32; NX];
    for b in 0..k / 256 {
        let wb = w.add(tq1_0::BLOCK_BYTES * b);
        let q0 = ld(wb);
        let q1 = _mm_loadu_si128(wb.add(32) as *const __m128i);
        let q1x2 = _mm256_set_m128i(q1, q1);
        let qh = _mm_set1_epi32((wb.add(tq1_0::QH) as *const i32).read_unaligned());
        // element groups of 32, in order: qs[0..32]·3^l (l < 5), qs[32..48]·3^l (l < 4, two per
        // vector), qs[32..48]·81 with the qh digits
        let t = [
            trit(q0),
            trit(mul_u8(q0, _mm256_set1_epi8(3))),
            trit(mul_u8(q0, _mm256_set1_epi8(9))),
            trit(mul_u8(q0, _mm256_set1_epi8(27))),
            trit(mul_u8(q0, _mm256_set1_epi8(81))),
            trit(mul_u8(q1x2, m(1, 3))),
            trit(mul_u8(q1x2, m(9, 27))),
            trit(mul_u8(
                _mm256_set_m128i(qh, q1),
                _mm256_set_m128i(qh_mul, _mm_set1_epi8(81)),
            )),
        ];
        let mut acc = [_mm256_setzero_si256(); NX];
        for (g, &tg) in t.iter().enumerate() {
            for j in 0..NX {
                let xv = ld(x.add(j * xs + 292 * b + 4 + 32 * g));
                acc[j] = O::dot_us(acc[j], ones, _mm256_sign_epi8(xv, tg));
            }
        }
        let dw = h2f(wb.add(tq1_0::D));
        for j in 0..NX {
            let xb = x.add(j * xs + 292 * b);
            sumf[j] += hsum_i32(acc[j]) as f32 * (dw * rdf32(xb));
        }
    }
    out[..NX].copy_from_slice(&sumf);
}
