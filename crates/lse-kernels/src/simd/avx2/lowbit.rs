//! AVX2 bodies of Q1_0 (sign bits, 128-element blocks) and Q2_0 (2-bit fields, value q − 1,
//! 64-element blocks) against Split32 Q8_0 activation rows. Per activation block the integer
//! sum is exact; the scalar's f32 steps follow (`sumi += dy·s` per activation block, then
//! `sumf += d·sumi`), so results are bit-identical to the scalar dots.

use super::exact::*;
use super::*;

#[inline(always)]
pub(crate) unsafe fn q1_0_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let ones = _mm256_set1_epi8(1);
    let mut sumf = [0f32; NX];
    for b in 0..k / 128 {
        let wb = w.add(18 * b);
        let mut sg = [_mm256_setzero_si256(); 4];
        for (q, s) in sg.iter_mut().enumerate() {
            // +1 where the bit is set, −1 where not
            let set = mask32((wb.add(2 + 4 * q) as *const u32).read_unaligned());
            *s = _mm256_or_si256(_mm256_cmpeq_epi8(set, _mm256_setzero_si256()), ones);
        }
        let d = h2f(wb);
        for j in 0..NX {
            let xq = x.add(j * xs);
            let mut sumi = 0f32;
            for (q, &s) in sg.iter().enumerate() {
                let xv = ld(xq.add(128 * b + 32 * q));
                let si = hsum_i32(O::dot_us(_mm256_setzero_si256(), ones, _mm256_sign_epi8(xv, s)));
                sumi += rdf32(xq.add(k + 4 * (4 * b + q))) * si as f32;
            }
            sumf[j] += d * sumi;
        }
    }
    out[..NX].copy_from_slice(&sumf);
}

/// The 32 two-bit fields of 8 bytes at `p` (field t of byte i → byte 4i + t), as bytes 0..4.
#[inline(always)]
unsafe fn fields2(p: *const u8) -> __m256i {
    let v = _mm256_set1_epi64x((p as *const i64).read_unaligned());
    let rep = _mm256_setr_epi8(
        0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7,
        7, 7,
    );
    let r = _mm256_shuffle_epi8(v, rep);
    let m = |t: u32| _mm256_set1_epi32((3u32 << (8 * t)) as i32);
    let f0 = _mm256_and_si256(r, m(0));
    let f1 = _mm256_and_si256(_mm256_srli_epi32::<2>(r), m(1));
    let f2 = _mm256_and_si256(_mm256_srli_epi32::<4>(r), m(2));
    let f3 = _mm256_and_si256(_mm256_srli_epi32::<6>(r), m(3));
    _mm256_or_si256(_mm256_or_si256(f0, f1), _mm256_or_si256(f2, f3))
}

#[inline(always)]
pub(crate) unsafe fn q2_0_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let nq = k / 32;
    let mut sumf = [0f32; NX];
    for b in 0..k / 64 {
        let wb = w.add(18 * b);
        let q = [fields2(wb.add(2)), fields2(wb.add(10))];
        let d = h2f(wb);
        for j in 0..NX {
            let xq = x.add(j * xs);
            let mut sumi = 0f32;
            for (h, &qh) in q.iter().enumerate() {
                let blk = 2 * b + h;
                let xv = ld(xq.add(32 * blk));
                let sum_x = (xq.add(k + 4 * nq + 4 * blk) as *const i32).read_unaligned();
                let s = hsum_i32(O::dot_us(_mm256_setzero_si256(), qh, xv)) - sum_x;
                sumi += rdf32(xq.add(k + 4 * blk)) * s as f32;
            }
            sumf[j] += d * sumi;
        }
    }
    out[..NX].copy_from_slice(&sumf);
}
