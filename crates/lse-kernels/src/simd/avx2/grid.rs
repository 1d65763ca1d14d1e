//! AVX2 bodies of the grid i-quants against Q8_K activations: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S (unsigned grid magnitudes with sign bits) and IQ1_S, IQ1_M (grid values −1/0/1 plus a
//! ±1/8 offset). Each 32-element sub-block is decoded once (grid words gathered from the
//! tables, signs expanded to a byte mask) and multiplied with every activation row; the integer
//! block sums are exact and go through the scalar's f32 steps, so results are bit-identical to
//! the scalar dots.

use super::exact::*;
use super::*;
use crate::quant::iq_common::KSIGNS_MASK;
use crate::quant::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};
use crate::quant::{iq1_m, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs};

/// A grid format whose value is `scale·magnitude·sign` with unsigned magnitudes.
pub(crate) trait Grid {
    const WB: usize;
    /// The factor the scalar dot applies to its sum at the end.
    const FACTOR: f32;
    /// Sub-block `ib` of block `b`: (magnitudes, 0xFF where negative, i16 scales per pair lane).
    unsafe fn sub(b: &[u8], ib: usize) -> (__m256i, __m256i, __m256i);
}

#[inline(always)]
unsafe fn u64x4(a: u64, b: u64, c: u64, d: u64) -> __m256i {
    _mm256_set_epi64x(d as i64, c as i64, b as i64, a as i64)
}

#[inline(always)]
unsafe fn u32x8(g: impl Fn(usize) -> u32) -> __m256i {
    _mm256_setr_epi32(
        g(0) as i32,
        g(1) as i32,
        g(2) as i32,
        g(3) as i32,
        g(4) as i32,
        g(5) as i32,
        g(6) as i32,
        g(7) as i32,
    )
}

/// The 0xFF-where-negative mask of four 7-bit sign indices at bits 0, 7, 14, 21 of `s`.
#[inline(always)]
unsafe fn ksign_mask(s: u32) -> __m256i {
    let k = |l: u32| KSIGNS_MASK[(s >> (7 * l) & 127) as usize];
    u64x4(k(0), k(1), k(2), k(3))
}

#[inline(always)]
fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

pub(crate) struct Iq2Xxs;
impl Grid for Iq2Xxs {
    const WB: usize = iq2_xxs::BLOCK_BYTES;
    const FACTOR: f32 = 0.125;
    #[inline(always)]
    unsafe fn sub(b: &[u8], ib: usize) -> (__m256i, __m256i, __m256i) {
        let (g, s) = iq2_xxs::words(b, ib);
        let p = |l: u32| IQ2XXS_GRID[(g >> (8 * l) & 255) as usize];
        let sc = _mm256_set1_epi16((2 * (s >> 28) + 1) as i16);
        (u64x4(p(0), p(1), p(2), p(3)), ksign_mask(s), sc)
    }
}

pub(crate) struct Iq2Xs;
impl Grid for Iq2Xs {
    const WB: usize = iq2_xs::BLOCK_BYTES;
    const FACTOR: f32 = 0.125;
    #[inline(always)]
    unsafe fn sub(b: &[u8], ib: usize) -> (__m256i, __m256i, __m256i) {
        let c = |l: usize| u16::from_le_bytes([b[2 + 8 * ib + 2 * l], b[3 + 8 * ib + 2 * l]]);
        let p = |l: usize| IQ2XS_GRID[(c(l) & 511) as usize];
        let sg = |l: usize| KSIGNS_MASK[(c(l) >> 9) as usize];
        let ls = |h: usize| (2 * iq2_xs::scale(b, ib, h) + 1) as i16;
        let neg = u64x4(sg(0), sg(1), sg(2), sg(3));
        (u64x4(p(0), p(1), p(2), p(3)), neg, two_scales(ls(0), ls(1)))
    }
}

pub(crate) struct Iq2S;
impl Grid for Iq2S {
    const WB: usize = iq2_s::BLOCK_BYTES;
    const FACTOR: f32 = 0.125;
    #[inline(always)]
    unsafe fn sub(b: &[u8], ib: usize) -> (__m256i, __m256i, __m256i) {
        let qh = b[iq2_s::QH + ib] as usize;
        let p = |l: usize| IQ2S_GRID[b[iq2_s::QS + 4 * ib + l] as usize | (qh >> (2 * l) & 3) << 8];
        let ls = |h: usize| (2 * iq2_s::scale(b, ib, h) + 1) as i16;
        let signs = rd32(b, iq2_s::SIGNS + 4 * ib);
        (u64x4(p(0), p(1), p(2), p(3)), mask32(signs), two_scales(ls(0), ls(1)))
    }
}

pub(crate) struct Iq3Xxs;
impl Grid for Iq3Xxs {
    const WB: usize = iq3_xxs::BLOCK_BYTES;
    const FACTOR: f32 = 0.25;
    #[inline(always)]
    unsafe fn sub(b: &[u8], ib: usize) -> (__m256i, __m256i, __m256i) {
        let s = iq3_xxs::sas(b, ib);
        let mags = u32x8(|i| IQ3XXS_GRID[b[iq3_xxs::QS + 8 * ib + i] as usize]);
        (mags, ksign_mask(s), _mm256_set1_epi16((2 * (s >> 28) + 1) as i16))
    }
}

pub(crate) struct Iq3S;
impl Grid for Iq3S {
    const WB: usize = iq3_s::BLOCK_BYTES;
    const FACTOR: f32 = 1.0;
    #[inline(always)]
    unsafe fn sub(b: &[u8], ib: usize) -> (__m256i, __m256i, __m256i) {
        let qh = b[iq3_s::QH + ib] as usize;
        let mags = u32x8(|i| IQ3S_GRID[b[iq3_s::QS + 8 * ib + i] as usize | (qh >> i & 1) << 8]);
        let signs = rd32(b, iq3_s::SIGNS + 4 * ib);
        (mags, mask32(signs), _mm256_set1_epi16(iq3_s::scale(b, ib) as i16))
    }
}

#[inline(always)]
unsafe fn grid_body<G: Grid, O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let mut sumf = [0f32; NX];
    for b in 0..k / 256 {
        let wb = w.add(G::WB * b);
        let blk = core::slice::from_raw_parts(wb, G::WB);
        let mut acc = [_mm256_setzero_si256(); NX];
        for ib in 0..8 {
            let (mag, neg, sc) = G::sub(blk, ib);
            for j in 0..NX {
                let xv = ld(x.add(j * xs + 292 * b + 4 + 32 * ib));
                let p = _mm256_maddubs_epi16(mag, negate_where(xv, neg));
                acc[j] = O::madd_acc(acc[j], p, sc);
            }
        }
        let dw = h2f(wb);
        for j in 0..NX {
            let d = dw * rdf32(x.add(j * xs + 292 * b));
            sumf[j] += d * hsum_i32(acc[j]) as f32;
        }
    }
    for j in 0..NX {
        out[j] = G::FACTOR * sumf[j];
    }
}

macro_rules! grid_entry {
    ($name:ident, $g:ty) => {
        #[inline(always)]
        pub(crate) unsafe fn $name<O: Ops, const NX: usize>(
            k: usize,
            w: *const u8,
            x: *const u8,
            xs: usize,
            out: &mut [f32; MR],
        ) {
            grid_body::<$g, O, NX>(k, w, x, xs, out)
        }
    };
}
grid_entry!(iq2_xxs_body, Iq2Xxs);
grid_entry!(iq2_xs_body, Iq2Xs);
grid_entry!(iq2_s_body, Iq2S);
grid_entry!(iq3_xxs_body, Iq3Xxs);
grid_entry!(iq3_s_body, Iq3S);

/// The 32 grid values (−1, 0, 1 as i8) of IQ1_S / IQ1_M codes `p(0..4)`.
#[inline(always)]
unsafe fn ternary_points(p: impl Fn(usize) -> usize) -> __m256i {
    u64x4(IQ1S_GRID[p(0)], IQ1S_GRID[p(1)], IQ1S_GRID[p(2)], IQ1S_GRID[p(3)])
}

/// IQ1_S: Σ ls·Σgrid·q per block from the vectors, Σ ls·(±1)·bsums from the activation block
/// sums; then the scalar's `dw·dx·(sumi + δ·sumi1)`.
#[inline(always)]
pub(crate) unsafe fn iq1_s_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let mut sumf = [0f32; NX];
    for b in 0..k / 256 {
        let wb = w.add(iq1_s::BLOCK_BYTES * b);
        let blk = core::slice::from_raw_parts(wb, iq1_s::BLOCK_BYTES);
        let mut acc = [_mm256_setzero_si256(); NX];
        let mut coef = [0i16; 16];
        for ib in 0..8 {
            let qh = u16::from_le_bytes([blk[iq1_s::QH + 2 * ib], blk[iq1_s::QH + 2 * ib + 1]]);
            let ls = 2 * ((qh >> 12) & 7) as i16 + 1;
            let c = if qh & 0x8000 != 0 { -ls } else { ls };
            coef[2 * ib] = c;
            coef[2 * ib + 1] = c;
            let qs = iq1_s::QS + 4 * ib;
            let g = ternary_points(|l| blk[qs + l] as usize | ((qh as usize) >> (3 * l) & 7) << 8);
            let (ga, sc) = (_mm256_abs_epi8(g), _mm256_set1_epi16(ls));
            for j in 0..NX {
                let xv = ld(x.add(j * xs + 292 * b + 4 + 32 * ib));
                let p = _mm256_maddubs_epi16(ga, _mm256_sign_epi8(xv, g));
                acc[j] = O::madd_acc(acc[j], p, sc);
            }
        }
        let coef = _mm256_loadu_si256(coef.as_ptr() as *const __m256i);
        let dw = h2f(wb);
        for j in 0..NX {
            let xb = x.add(j * xs + 292 * b);
            let sumi1 = hsum_i32(_mm256_madd_epi16(ld(xb.add(260)), coef));
            let sumi = hsum_i32(acc[j]);
            sumf[j] += dw * rdf32(xb) * (sumi as f32 + 0.125 * sumi1 as f32);
        }
    }
    out[..NX].copy_from_slice(&sumf);
}

/// IQ1_M: the grid sums and the ±1 offset sums (per 8 elements) both weighted by the 3-bit
/// half-sub-block scales; then the scalar's `d·dx·(sumi1 + δ·sumi2)`.
#[inline(always)]
pub(crate) unsafe fn iq1_m_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let ones = _mm256_set1_epi8(1);
    let mut sumf = [0f32; NX];
    for b in 0..k / 256 {
        let wb = w.add(iq1_m::BLOCK_BYTES * b);
        let blk = core::slice::from_raw_parts(wb, iq1_m::BLOCK_BYTES);
        let mut acc1 = [_mm256_setzero_si256(); NX];
        let mut acc2 = [_mm256_setzero_si256(); NX];
        for ib in 0..8 {
            let c = |l: usize| iq1_m::code(blk, ib, l);
            let (c0, c1, c2, c3) = (c(0), c(1), c(2), c(3));
            let g = u64x4(c0.0, c1.0, c2.0, c3.0);
            let n = |s: i32| if s < 0 { u64::MAX } else { 0 };
            let neg = u64x4(n(c0.1), n(c1.1), n(c2.1), n(c3.1));
            let sc = two_scales(
                iq1_m::scale(blk, ib, 0) as i16,
                iq1_m::scale(blk, ib, 1) as i16,
            );
            let ga = _mm256_abs_epi8(g);
            for j in 0..NX {
                let xv = ld(x.add(j * xs + 292 * b + 4 + 32 * ib));
                let p1 = _mm256_maddubs_epi16(ga, _mm256_sign_epi8(xv, g));
                let p2 = _mm256_maddubs_epi16(ones, negate_where(xv, neg));
                acc1[j] = O::madd_acc(acc1[j], p1, sc);
                acc2[j] = O::madd_acc(acc2[j], p2, sc);
            }
        }
        let d = iq1_m::d(blk);
        for j in 0..NX {
            let dx = rdf32(x.add(j * xs + 292 * b));
            let (s1, s2) = (hsum_i32(acc1[j]), hsum_i32(acc2[j]));
            sumf[j] += d * dx * (s1 as f32 + 0.125 * s2 as f32);
        }
    }
    out[..NX].copy_from_slice(&sumf);
}
