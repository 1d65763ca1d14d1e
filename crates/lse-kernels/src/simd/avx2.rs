//! AVX2 (+FMA, F16C) row kernels: one weight row against up to `MR` activation rows.
//!
//! The kernel bodies are generic over [`Ops`], the two integer multiply-accumulate primitives
//! that differ between plain AVX2 (`vpmaddubsw` + `vpmaddwd`) and AVX-512 VNNI (`vpdpbusd`,
//! `vpdpwssd`); `avx512.rs` instantiates the same bodies with VNNI. Every weight block is
//! decoded once and multiplied with all activation rows of the call. Integer sums per block
//! are exact (no i16 saturation is reachable for any format); only the f32 order differs from
//! the scalar reference.

#![allow(clippy::needless_range_loop)] // per-row loops index several parallel arrays

use super::{RowKernel, MR};
use crate::quant::{q3_k, q4_k};
use core::arch::x86_64::*;
use lse_gguf::GgmlType;

/// Integer multiply-accumulate primitives.
pub(crate) trait Ops {
    /// `acc + Σ₄ u·s` per i32 lane (u unsigned bytes, s signed bytes; pair sums must fit i16
    /// for the AVX2 version).
    unsafe fn dot_us(acc: __m256i, u: __m256i, s: __m256i) -> __m256i;
    /// `acc + Σ₂ a·b` per i32 lane (i16 × i16).
    unsafe fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i;
}

pub(crate) struct Avx2Ops;

impl Ops for Avx2Ops {
    #[inline(always)]
    unsafe fn dot_us(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
    }
    #[inline(always)]
    unsafe fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
    }
}

pub fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
}

// ---------------------------------------------------------------- helpers

#[inline(always)]
pub(crate) unsafe fn h2f(p: *const u8) -> f32 {
    let h = (p as *const u16).read_unaligned();
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
}

#[inline(always)]
unsafe fn rdf32(p: *const u8) -> f32 {
    (p as *const f32).read_unaligned()
}

#[inline(always)]
unsafe fn ld(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// 16 bytes of nibbles → 32 bytes: low nibbles in bytes 0..16, high nibbles in 16..32.
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    let t = _mm_loadu_si128(p as *const __m128i);
    let v = _mm256_set_m128i(_mm_srli_epi16::<4>(t), t);
    _mm256_and_si256(v, _mm256_set1_epi8(0x0f))
}

/// 32 bits (LE) → 32 bytes, 0xFF where the bit is set.
#[inline(always)]
unsafe fn bits32(p: *const u8) -> __m256i {
    let q = (p as *const u32).read_unaligned();
    let v = _mm256_set1_epi32(q as i32);
    let shuf = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
    );
    let m = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, shuf), m), m)
}

/// i16 scale vector: `a` in the low 8 lanes (elements 0..16 of a 32-group), `b` in the high 8.
#[inline(always)]
unsafe fn two_scales(a: i16, b: i16) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(b), _mm_set1_epi16(a))
}

#[inline(always)]
unsafe fn finish<const NX: usize>(acc: &[__m256; NX], out: &mut [f32; MR]) {
    for j in 0..NX {
        out[j] = hsum(acc[j]);
    }
}

// ---------------------------------------------------------------- 32-block formats
//
// Blocks are taken 8 at a time: the 8 integer block sums of a row are reduced into one vector
// (hadd tree), converted once and scaled by the 8 products dw·dx in one multiply, instead of a
// scalar scale conversion, broadcast and FMA per block. Leftover blocks go one by one.

/// 8 f16 values at `p`, `p + stride`, … as f32.
#[inline(always)]
unsafe fn f16x8(p: *const u8, stride: usize) -> __m256 {
    let r = |i: usize| (p.add(i * stride) as *const i16).read_unaligned();
    _mm256_cvtph_ps(_mm_setr_epi16(r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7)))
}

/// Lane sums of 8 i32x8 vectors given as two hadd-tree halves (`q0` for blocks 0..4, `q1` for
/// 4..8, each [low-half sums | high-half sums]) → [B0 … B7].
#[inline(always)]
unsafe fn combine8(q0: __m256i, q1: __m256i) -> __m256i {
    _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(q0, q1), _mm256_permute2x128_si256::<0x31>(q0, q1))
}

/// Decodes block `b` of a weight row into 32 quants (signed for the Q8_0 family, unsigned for
/// the Q8_1 family).
pub(crate) trait Block32 {
    /// Weight block bytes.
    const WB: usize;
    /// Offset of the f16 min (Q8_1 family) in a block.
    const M: usize = 2;
    unsafe fn quants(wb: *const u8) -> __m256i;
}

pub(crate) struct Q8_0W;
impl Block32 for Q8_0W {
    const WB: usize = 34;
    #[inline(always)]
    unsafe fn quants(wb: *const u8) -> __m256i {
        ld(wb.add(2))
    }
}

pub(crate) struct Q4_0W;
impl Block32 for Q4_0W {
    const WB: usize = 18;
    #[inline(always)]
    unsafe fn quants(wb: *const u8) -> __m256i {
        _mm256_sub_epi8(nibbles(wb.add(2)), _mm256_set1_epi8(8))
    }
}

pub(crate) struct Q5_0W;
impl Block32 for Q5_0W {
    const WB: usize = 22;
    #[inline(always)]
    unsafe fn quants(wb: *const u8) -> __m256i {
        // q − 16: a clear 5th bit turns the nibble into nibble − 16 (top bits set).
        _mm256_or_si256(nibbles(wb.add(6)), _mm256_andnot_si256(bits32(wb.add(2)), _mm256_set1_epi8(0xf0u8 as i8)))
    }
}

pub(crate) struct Q4_1W;
impl Block32 for Q4_1W {
    const WB: usize = 20;
    #[inline(always)]
    unsafe fn quants(wb: *const u8) -> __m256i {
        nibbles(wb.add(4))
    }
}

pub(crate) struct Q5_1W;
impl Block32 for Q5_1W {
    const WB: usize = 24;
    #[inline(always)]
    unsafe fn quants(wb: *const u8) -> __m256i {
        _mm256_or_si256(nibbles(wb.add(8)), _mm256_and_si256(bits32(wb.add(4)), _mm256_set1_epi8(0x10)))
    }
}

/// Integer sums of weight block `wb` (quants `qw`) against activation block `p`.
/// `SIGNED`: Q8_0 family (signed weights, sign trick); else unsigned weights (Q8_1 family).
#[inline(always)]
unsafe fn block_sum<O: Ops, const SIGNED: bool, const XQ: usize>(qw: __m256i, aw: __m256i, p: *const u8) -> __m256i {
    let x = ld(p.add(XQ));
    if SIGNED {
        O::dot_us(_mm256_setzero_si256(), aw, _mm256_sign_epi8(x, qw))
    } else {
        O::dot_us(_mm256_setzero_si256(), qw, x)
    }
}

/// Shared body of the 32-block formats. `SIGNED` selects the Q8_0 activation layout (d, qs)
/// and signed weights; otherwise Q8_1 (d, s, qs) with unsigned weights and mins.
#[inline(always)]
unsafe fn block32_body<O: Ops, W: Block32, const SIGNED: bool, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let (xb, xq) = if SIGNED { (34usize, 2usize) } else { (36, 4) };
    let nb = k / 32;
    let mut acc = [_mm256_setzero_ps(); NX];
    let mut accm = [_mm256_setzero_ps(); NX];
    let mut b = 0;
    while b + 8 <= nb {
        let mut q = [[_mm256_setzero_si256(); 2]; NX];
        for half in 0..2 {
            let mut p = [[_mm256_setzero_si256(); 2]; NX];
            for pair in 0..2 {
                let b0 = b + 4 * half + 2 * pair;
                let qw0 = W::quants(w.add(W::WB * b0));
                let qw1 = W::quants(w.add(W::WB * (b0 + 1)));
                let (aw0, aw1) = if SIGNED { (_mm256_sign_epi8(qw0, qw0), _mm256_sign_epi8(qw1, qw1)) } else { (qw0, qw1) };
                for j in 0..NX {
                    let px = x.add(j * xs + xb * b0);
                    let s0 = block_sum::<O, SIGNED, 0>(qw0, aw0, px.add(xq));
                    let s1 = block_sum::<O, SIGNED, 0>(qw1, aw1, px.add(xb + xq));
                    p[j][pair] = _mm256_hadd_epi32(s0, s1);
                }
            }
            for j in 0..NX {
                q[j][half] = _mm256_hadd_epi32(p[j][0], p[j][1]);
            }
        }
        let dw = f16x8(w.add(W::WB * b), W::WB);
        let mw = if SIGNED { _mm256_setzero_ps() } else { f16x8(w.add(W::WB * b + W::M), W::WB) };
        for j in 0..NX {
            let px = x.add(j * xs + xb * b);
            let sums = _mm256_cvtepi32_ps(combine8(q[j][0], q[j][1]));
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, f16x8(px, xb)), sums, acc[j]);
            if !SIGNED {
                accm[j] = _mm256_fmadd_ps(mw, f16x8(px.add(2), xb), accm[j]);
            }
        }
        b += 8;
    }
    let mut tail = [0f32; NX];
    while b < nb {
        let wb = w.add(W::WB * b);
        let qw = W::quants(wb);
        let aw = if SIGNED { _mm256_sign_epi8(qw, qw) } else { qw };
        let dw = h2f(wb);
        for j in 0..NX {
            let px = x.add(j * xs + xb * b);
            let s = block_sum::<O, SIGNED, 0>(qw, aw, px.add(xq));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(px)), _mm256_cvtepi32_ps(s), acc[j]);
            if !SIGNED {
                tail[j] += h2f(wb.add(W::M)) * h2f(px.add(2));
            }
        }
        b += 1;
    }
    for j in 0..NX {
        out[j] = if SIGNED { hsum(acc[j]) } else { hsum(acc[j]) + (hsum(accm[j]) + tail[j]) };
    }
}

#[inline(always)]
pub(crate) unsafe fn q8_0_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    block32_body::<O, Q8_0W, true, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q4_0_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    block32_body::<O, Q4_0W, true, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q5_0_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    block32_body::<O, Q5_0W, true, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q4_1_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    block32_body::<O, Q4_1W, false, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q5_1_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    block32_body::<O, Q5_1W, false, NX>(k, w, x, xs, out)
}

// ---------------------------------------------------------------- k-quants (Q8_K activations)

/// One 32-element group of unsigned weight quants `q` with i16 scales `sc` (per pair lane)
/// against group `g` of each activation row's current Q8_K block.
/// Two accumulators per row (even / odd groups) keep the `vpdpwssd` dependency chains short.
#[inline(always)]
unsafe fn kq_group<O: Ops, const NX: usize>(q: __m256i, sc: __m256i, xq: *const u8, xs: usize, g: usize, sumi: &mut [[__m256i; 2]; NX]) {
    for j in 0..NX {
        let p = _mm256_maddubs_epi16(q, ld(xq.add(j * xs + 4 + 32 * g)));
        sumi[j][g & 1] = O::madd_acc(sumi[j][g & 1], p, sc);
    }
}

#[inline(always)]
unsafe fn sum2(s: [__m256i; 2]) -> __m256i {
    _mm256_add_epi32(s[0], s[1])
}

#[inline(always)]
pub(crate) unsafe fn q4_k_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    let mut acc = [_mm256_setzero_ps(); NX];
    let m4 = _mm256_set1_epi8(0x0f);
    for b in 0..k / 256 {
        let wb = w.add(144 * b);
        let xq = x.add(292 * b);
        let (sc, mn) = q4_k::scales_mins(core::slice::from_raw_parts(wb.add(4), 12));
        let mut sumi = [[_mm256_setzero_si256(); 2]; NX];
        for c in 0..4 {
            let raw = ld(wb.add(16 + 32 * c));
            let lo = _mm256_and_si256(raw, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(raw), m4);
            kq_group::<O, NX>(lo, _mm256_set1_epi16(sc[2 * c] as i16), xq, xs, 2 * c, &mut sumi);
            kq_group::<O, NX>(hi, _mm256_set1_epi16(sc[2 * c + 1] as i16), xq, xs, 2 * c + 1, &mut sumi);
        }
        let mins = mins16_pairs(&mn);
        let (d, dmin) = (h2f(wb), h2f(wb.add(2)));
        for j in 0..NX {
            let p = xq.add(j * xs);
            let dx = rdf32(p);
            let m = _mm256_madd_epi16(ld(p.add(260)), mins);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sum2(sumi[j])), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dx), _mm256_cvtepi32_ps(m), acc[j]);
        }
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
pub(crate) unsafe fn q5_k_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    let mut acc = [_mm256_setzero_ps(); NX];
    let m4 = _mm256_set1_epi8(0x0f);
    let b16 = _mm256_set1_epi8(0x10);
    for b in 0..k / 256 {
        let wb = w.add(176 * b);
        let xq = x.add(292 * b);
        let (sc, mn) = q4_k::scales_mins(core::slice::from_raw_parts(wb.add(4), 12));
        let hb = ld(wb.add(16));
        let mut bit = _mm256_set1_epi8(1);
        let mut sumi = [[_mm256_setzero_si256(); 2]; NX];
        for c in 0..4 {
            let raw = ld(wb.add(48 + 32 * c));
            let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit), b16);
            bit = _mm256_add_epi8(bit, bit);
            let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit), b16);
            bit = _mm256_add_epi8(bit, bit);
            let lo = _mm256_or_si256(_mm256_and_si256(raw, m4), h0);
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(raw), m4), h1);
            kq_group::<O, NX>(lo, _mm256_set1_epi16(sc[2 * c] as i16), xq, xs, 2 * c, &mut sumi);
            kq_group::<O, NX>(hi, _mm256_set1_epi16(sc[2 * c + 1] as i16), xq, xs, 2 * c + 1, &mut sumi);
        }
        let mins = mins16_pairs(&mn);
        let (d, dmin) = (h2f(wb), h2f(wb.add(2)));
        for j in 0..NX {
            let p = xq.add(j * xs);
            let dx = rdf32(p);
            let m = _mm256_madd_epi16(ld(p.add(260)), mins);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sum2(sumi[j])), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dx), _mm256_cvtepi32_ps(m), acc[j]);
        }
    }
    finish(&acc, out);
}

#[inline(always)]
pub(crate) unsafe fn q6_k_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
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
                kq_group::<O, NX>(q, two_scales(sc(2 * g), sc(2 * g + 1)), xq, xs, g, &mut sumi);
            }
        }
        // Σ sc·(q − 32)·x = Σ sc·q·x − 32·Σ_g sc_g·bsum_g
        let corr = _mm256_slli_epi16::<5>(_mm256_cvtepi8_epi16(_mm_loadu_si128(scp as *const __m128i)));
        let d = h2f(wb.add(208));
        for j in 0..NX {
            let p = xq.add(j * xs);
            let s = _mm256_sub_epi32(sum2(sumi[j]), _mm256_madd_epi16(ld(p.add(260)), corr));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * rdf32(p)), _mm256_cvtepi32_ps(s), acc[j]);
        }
    }
    finish(&acc, out);
}

#[inline(always)]
pub(crate) unsafe fn q2_k_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
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
                kq_group::<O, NX>(qs[t], two_scales(sc(2 * g), sc(2 * g + 1)), xq, xs, g, &mut sumi);
            }
        }
        let s16 = _mm_loadu_si128(wb as *const __m128i);
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(s16), _mm_set1_epi8(0x0f)));
        let (d, dmin) = (h2f(wb.add(80)), h2f(wb.add(82)));
        for j in 0..NX {
            let p = xq.add(j * xs);
            let dx = rdf32(p);
            let m = _mm256_madd_epi16(ld(p.add(260)), mins);
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dx * d), _mm256_cvtepi32_ps(sum2(sumi[j])), acc[j]);
            acc[j] = _mm256_fnmadd_ps(_mm256_set1_ps(dx * dmin), _mm256_cvtepi32_ps(m), acc[j]);
        }
    }
    finish(&acc, out);
}

#[inline(always)]
pub(crate) unsafe fn q3_k_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
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
                kq_group::<O, NX>(_mm256_or_si256(lows[t], hi), two_scales(sc[2 * g] as i16, sc[2 * g + 1] as i16), xq, xs, g, &mut sumi);
            }
        }
        // Σ sc·(u − 4)·x = Σ sc·u·x − 4·Σ_g sc_g·bsum_g
        let corr = _mm256_slli_epi16::<2>(_mm256_cvtepi8_epi16(_mm_loadu_si128(sc.as_ptr() as *const __m128i)));
        let d = h2f(wb.add(108));
        for j in 0..NX {
            let p = xq.add(j * xs);
            let s = _mm256_sub_epi32(sum2(sumi[j]), _mm256_madd_epi16(ld(p.add(260)), corr));
            acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * rdf32(p)), _mm256_cvtepi32_ps(s), acc[j]);
        }
    }
    finish(&acc, out);
}

// ---------------------------------------------------------------- float formats

/// Float rows: `load(p, i)` widens 8 elements starting at element i to f32; `ES` bytes per element.
#[inline(always)]
unsafe fn float_body<const NX: usize, const ES: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
    load: impl Fn(*const u8) -> __m256,
    scalar: impl Fn(*const u8) -> f32,
) {
    let mut acc0 = [_mm256_setzero_ps(); NX];
    let mut acc1 = [_mm256_setzero_ps(); NX];
    let mut i = 0;
    while i + 16 <= k {
        let w0 = load(w.add(ES * i));
        let w1 = load(w.add(ES * (i + 8)));
        for j in 0..NX {
            let p = x.add(j * xs + ES * i);
            acc0[j] = _mm256_fmadd_ps(w0, load(p), acc0[j]);
            acc1[j] = _mm256_fmadd_ps(w1, load(p.add(8 * ES)), acc1[j]);
        }
        i += 16;
    }
    while i + 8 <= k {
        let w0 = load(w.add(ES * i));
        for j in 0..NX {
            acc0[j] = _mm256_fmadd_ps(w0, load(x.add(j * xs + ES * i)), acc0[j]);
        }
        i += 8;
    }
    for j in 0..NX {
        let mut s = hsum(_mm256_add_ps(acc0[j], acc1[j]));
        for e in i..k {
            s += scalar(w.add(ES * e)) * scalar(x.add(j * xs + ES * e));
        }
        out[j] = s;
    }
}

#[inline(always)]
pub(crate) unsafe fn f32_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    float_body::<NX, 4>(k, w, x, xs, out, |p| _mm256_loadu_ps(p as *const f32), |p| rdf32(p))
}

#[inline(always)]
pub(crate) unsafe fn f16_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    float_body::<NX, 2>(k, w, x, xs, out, |p| _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)), |p| h2f(p))
}

#[inline(always)]
pub(crate) unsafe fn bf16_body<O: Ops, const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
    float_body::<NX, 2>(
        k,
        w,
        x,
        xs,
        out,
        |p| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i)))),
        |p| f32::from_bits(((p as *const u16).read_unaligned() as u32) << 16),
    )
}

// ---------------------------------------------------------------- entry points

/// Defines `#[target_feature]` entry points (`$name::<NX>`) running `$body::<$ops, NX>`.
macro_rules! entries {
    ($feat:literal, $ops:ty, $($name:ident => $($body:ident)::+),* $(,)?) => {
        $(
            #[target_feature(enable = $feat)]
            unsafe fn $name<const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
                $($body)::+::<$ops, NX>(k, w, x, xs, out)
            }
        )*
    };
}
pub(crate) use entries;

/// A safe [`RowKernel`] around an entry point, checking the slice lengths the kernel reads:
/// weight bytes per `$qk` elements `$wb`, activation bytes per `$qk` elements `$xb`.
macro_rules! row_fn {
    ($name:ident, $qk:expr, $wb:expr, $xb:expr) => {{
        fn f(k: usize, w: &[u8], x: &[u8], xs: usize, nx: usize, out: &mut [f32; MR]) {
            assert!(k.is_multiple_of($qk) && (1..=MR).contains(&nx));
            let (wl, xl) = (k / $qk * $wb, k / $qk * $xb);
            assert!(w.len() >= wl && xs >= xl && x.len() >= (nx - 1) * xs + xl, "row kernel: short buffers");
            // SAFETY: the caller only gets this kernel when the CPU has the entry's features;
            // the lengths were checked above.
            unsafe {
                match nx {
                    1 => $name::<1>(k, w.as_ptr(), x.as_ptr(), xs, out),
                    2 => $name::<2>(k, w.as_ptr(), x.as_ptr(), xs, out),
                    3 => $name::<3>(k, w.as_ptr(), x.as_ptr(), xs, out),
                    _ => $name::<4>(k, w.as_ptr(), x.as_ptr(), xs, out),
                }
            }
        }
        f as RowKernel
    }};
}
pub(crate) use row_fn;

/// The row kernel table for one entry-point family (`$p` is the name prefix module).
macro_rules! kernel_table {
    ($t:expr, $f32:ident, $f16:ident, $bf16:ident, $q4_0:ident, $q4_1:ident, $q5_0:ident, $q5_1:ident, $q8_0:ident,
     $q2_k:ident, $q3_k:ident, $q4_k:ident, $q5_k:ident, $q6_k:ident) => {
        match $t {
            GgmlType::F32 => Some(row_fn!($f32, 1, 4, 4)),
            GgmlType::F16 => Some(row_fn!($f16, 1, 2, 2)),
            GgmlType::BF16 => Some(row_fn!($bf16, 1, 2, 2)),
            GgmlType::Q4_0 => Some(row_fn!($q4_0, 32, 18, 34)),
            GgmlType::Q4_1 => Some(row_fn!($q4_1, 32, 20, 36)),
            GgmlType::Q5_0 => Some(row_fn!($q5_0, 32, 22, 34)),
            GgmlType::Q5_1 => Some(row_fn!($q5_1, 32, 24, 36)),
            GgmlType::Q8_0 => Some(row_fn!($q8_0, 32, 34, 34)),
            GgmlType::Q2_K => Some(row_fn!($q2_k, 256, 84, 292)),
            GgmlType::Q3_K => Some(row_fn!($q3_k, 256, 110, 292)),
            GgmlType::Q4_K => Some(row_fn!($q4_k, 256, 144, 292)),
            GgmlType::Q5_K => Some(row_fn!($q5_k, 256, 176, 292)),
            GgmlType::Q6_K => Some(row_fn!($q6_k, 256, 210, 292)),
            _ => None,
        }
    };
}
pub(crate) use kernel_table;

entries!("avx2,fma,f16c", Avx2Ops,
    f32_k => f32_body, f16_k => f16_body, bf16_k => bf16_body,
    q4_0_k => q4_0_body, q4_1_k => q4_1_body, q5_0_k => q5_0_body, q5_1_k => q5_1_body, q8_0_k => q8_0_body,
    q2_k_k => q2_k_body, q3_k_k => q3_k_body, q4_k_k => q4_k_body, q5_k_k => q5_k_body, q6_k_k => q6_k_body,
);

/// The AVX2 kernel for weight type `t`. Only call when [`available`] is true.
pub fn row_kernel(t: GgmlType) -> Option<RowKernel> {
    if !available() {
        return None;
    }
    kernel_table!(t, f32_k, f16_k, bf16_k, q4_0_k, q4_1_k, q5_0_k, q5_1_k, q8_0_k, q2_k_k, q3_k_k, q4_k_k, q5_k_k, q6_k_k)
}

// ---------------------------------------------------------------- activation quantization
//
// Vector versions of the quantizers in `quant::q8_0/q8_1/q8_k` and the f16 rounding: the same
// single-rounding arithmetic (one multiply, round to nearest even, saturating narrow), so
// the bytes are identical to the scalar ones (tested).

#[inline(always)]
unsafe fn max_abs8(v: &[__m256]) -> f32 {
    let sign = _mm256_set1_ps(-0.0);
    let mut m = _mm256_andnot_ps(sign, v[0]);
    for &vi in &v[1..] {
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, vi));
    }
    let h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
    let h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    let h = _mm_max_ss(h, _mm_movehdup_ps(h));
    _mm_cvtss_f32(h)
}

#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

/// 4 × 8 i32 → 32 saturated i8 in element order.
#[inline(always)]
unsafe fn pack32(i: [__m256i; 4]) -> __m256i {
    let a = _mm256_packs_epi32(i[0], i[1]);
    let b = _mm256_packs_epi32(i[2], i[3]);
    let c = _mm256_packs_epi16(a, b);
    _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// Q8_0 (`SUM = false`) or Q8_1 (`SUM = true`) rows, as `quant::q8_0::quantize` / `q8_1`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8_32<const SUM: bool>(x: &[f32], dst: &mut [u8]) {
    let bb = if SUM { 36 } else { 34 };
    let nb = x.len() / 32;
    assert!(dst.len() >= nb * bb);
    for b in 0..nb {
        let p = x.as_ptr().add(32 * b);
        let v = [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)), _mm256_loadu_ps(p.add(16)), _mm256_loadu_ps(p.add(24))];
        let amax = max_abs8(&v);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let m = _mm256_set1_ps(id);
        let i = v.map(|vi| _mm256_cvtps_epi32(_mm256_mul_ps(vi, m)));
        let o = dst.as_mut_ptr().add(bb * b);
        (o as *mut u16).write_unaligned(crate::fp::f32_to_f16(d));
        if SUM {
            let s = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3])));
            (o.add(2) as *mut u16).write_unaligned(crate::fp::f32_to_f16(d * s as f32));
        }
        _mm256_storeu_si256(o.add(bb - 32) as *mut __m256i, pack32(i));
    }
}

/// Q8_K rows, as `quant::q8_k::quantize`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn quantize_q8_k(x: &[f32], dst: &mut [u8]) {
    let nb = x.len() / 256;
    assert!(dst.len() >= nb * 292);
    let sign = _mm256_set1_ps(-0.0);
    for b in 0..nb {
        let p = x.as_ptr().add(256 * b);
        let o = dst.as_mut_ptr().add(292 * b);
        let mut v = [_mm256_setzero_ps(); 32];
        for (i, vi) in v.iter_mut().enumerate() {
            *vi = _mm256_loadu_ps(p.add(8 * i));
        }
        let amax = max_abs8(&v);
        if amax == 0.0 {
            core::ptr::write_bytes(o, 0, 292);
            continue;
        }
        // the first element of largest magnitude gives the sign
        let am = _mm256_set1_ps(amax);
        let mut first = 0;
        for (i, vi) in v.iter().enumerate() {
            let mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_andnot_ps(sign, *vi), am));
            if mask != 0 {
                first = 8 * i + mask.trailing_zeros() as usize;
                break;
            }
        }
        let iscale = -127.0 / *p.add(first);
        let m = _mm256_set1_ps(iscale);
        let c127 = _mm256_set1_epi32(127);
        for g in 0..8 {
            let i = [0, 1, 2, 3].map(|t| _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[4 * g + t], m)), c127));
            _mm256_storeu_si256(o.add(4 + 32 * g) as *mut __m256i, pack32(i));
            let s0 = hsum_i32(_mm256_add_epi32(i[0], i[1]));
            let s1 = hsum_i32(_mm256_add_epi32(i[2], i[3]));
            (o.add(260 + 4 * g) as *mut i16).write_unaligned(s0 as i16);
            (o.add(262 + 4 * g) as *mut i16).write_unaligned(s1 as i16);
        }
        (o as *mut f32).write_unaligned(1.0 / iscale);
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
