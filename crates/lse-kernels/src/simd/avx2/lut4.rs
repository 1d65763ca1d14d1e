//! AVX2 bodies of the 4-bit codebook formats: IQ4_NL and MXFP4 (32-element blocks against Q8_0
//! activations in `ActLayout::Split32`) and IQ4_XS (against Q8_K). The nibbles index the
//! codebook with one `vpshufb`; signed products via `|w|`·`sign(x, w)`. Exact: the integer
//! (sub-)block sums are reduced 8 at a time and then scaled and added in the scalar order.

use super::exact::*;
use super::*;
use crate::quant::iq_common::{KVALUES_IQ4NL, KVALUES_MXFP4};
use crate::quant::{iq4_xs, mxfp4};

/// A 32-element block whose 16 nibble bytes index a 16-entry codebook.
pub(crate) trait Lut32 {
    const WB: usize;
    /// Byte offset of the nibbles.
    const QO: usize;
    const LUT: &'static [i8; 16];
    /// The block scale as f32.
    unsafe fn d(wb: *const u8) -> f32;
}

pub(crate) struct Iq4Nl;
impl Lut32 for Iq4Nl {
    const WB: usize = 18;
    const QO: usize = 2;
    const LUT: &'static [i8; 16] = &KVALUES_IQ4NL;
    #[inline(always)]
    unsafe fn d(wb: *const u8) -> f32 {
        h2f(wb)
    }
}

pub(crate) struct Mxfp4;
impl Lut32 for Mxfp4 {
    const WB: usize = 17;
    const QO: usize = 1;
    const LUT: &'static [i8; 16] = &KVALUES_MXFP4;
    #[inline(always)]
    unsafe fn d(wb: *const u8) -> f32 {
        mxfp4::e8m0_half(*wb)
    }
}

#[inline(always)]
unsafe fn lut(l: &[i8; 16]) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_loadu_si128(l.as_ptr() as *const __m128i))
}

/// `n` (≤ 8) blocks from block `b0`: decode once, then per row the 8 block sums in one vector,
/// scaled by dy·dw and added in block order.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn lut32_group<L: Lut32, O: Ops, const NX: usize, const N: usize>(
    table: __m256i,
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    b0: usize,
    n: usize,
    sumf: &mut [f32; NX],
) {
    let mut wa = [_mm256_setzero_si256(); 8];
    let mut ws = [_mm256_setzero_si256(); 8];
    let mut dw = [0f32; 8];
    for i in 0..N.min(n) {
        let wb = w.add(L::WB * (b0 + i));
        let v = _mm256_shuffle_epi8(table, nibbles(wb.add(L::QO)));
        ws[i] = v;
        wa[i] = _mm256_abs_epi8(v);
        dw[i] = L::d(wb);
    }
    let dw = _mm256_loadu_ps(dw.as_ptr());
    for j in 0..NX {
        let xq = x.add(j * xs);
        let mut s = [_mm256_setzero_si256(); 8];
        for i in 0..N.min(n) {
            let xv = ld(xq.add(32 * (b0 + i)));
            s[i] = O::dot_us(s[i], wa[i], _mm256_sign_epi8(xv, ws[i]));
        }
        let dy = if N == 8 {
            _mm256_loadu_ps(xq.add(k + 4 * b0) as *const f32)
        } else {
            load_f32_first(xq.add(k + 4 * b0), n)
        };
        let p = _mm256_mul_ps(_mm256_mul_ps(dy, dw), _mm256_cvtepi32_ps(reduce8(&s)));
        sumf[j] = chain(sumf[j], p, N.min(n));
    }
}

#[inline(always)]
unsafe fn lut32_body<L: Lut32, O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let nb = k / 32;
    let table = lut(L::LUT);
    let mut sumf = [0f32; NX];
    let mut b0 = 0;
    while b0 + 8 <= nb {
        lut32_group::<L, O, NX, 8>(table, k, w, x, xs, b0, 8, &mut sumf);
        b0 += 8;
    }
    if b0 < nb {
        lut32_group::<L, O, NX, 7>(table, k, w, x, xs, b0, nb - b0, &mut sumf);
    }
    out[..NX].copy_from_slice(&sumf);
}

#[inline(always)]
pub(crate) unsafe fn iq4_nl_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    lut32_body::<Iq4Nl, O, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn mxfp4_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    lut32_body::<Mxfp4, O, NX>(k, w, x, xs, out)
}

/// The 8 sub-block scales ls − 32 of an IQ4_XS block (low nibbles from `scales_l`, 2 high bits
/// from `scales_h`), as [`iq4_xs::scale`] computes them.
#[inline(always)]
unsafe fn iq4_xs_scales(wb: *const u8) -> __m256i {
    let sh = (wb.add(2) as *const u16).read_unaligned() as i32;
    let sl = (wb.add(4) as *const i32).read_unaligned();
    let lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(15),
    );
    let hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(sh), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3),
    );
    _mm256_sub_epi32(
        _mm256_or_si256(lo, _mm256_slli_epi32::<4>(hi)),
        _mm256_set1_epi32(32),
    )
}

#[inline(always)]
pub(crate) unsafe fn iq4_xs_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let table = lut(&KVALUES_IQ4NL);
    let mut sumf = [0f32; NX];
    for b in 0..k / 256 {
        let wb = w.add(iq4_xs::BLOCK_BYTES * b);
        let mut ws = [_mm256_setzero_si256(); 8];
        let mut wa = [_mm256_setzero_si256(); 8];
        for ib in 0..8 {
            ws[ib] = _mm256_shuffle_epi8(table, nibbles(wb.add(iq4_xs::QS + 16 * ib)));
            wa[ib] = _mm256_abs_epi8(ws[ib]);
        }
        let ls = _mm256_cvtepi32_ps(iq4_xs_scales(wb));
        let dw = h2f(wb);
        for j in 0..NX {
            let xq = x.add(j * xs + 292 * b);
            let mut s = [_mm256_setzero_si256(); 8];
            for ib in 0..8 {
                let xv = ld(xq.add(4 + 32 * ib));
                s[ib] = O::dot_us(s[ib], wa[ib], _mm256_sign_epi8(xv, ws[ib]));
            }
            let dl = _mm256_mul_ps(_mm256_set1_ps(dw * rdf32(xq)), ls);
            let p = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(reduce8(&s)));
            sumf[j] = chain(sumf[j], p, 8);
        }
    }
    out[..NX].copy_from_slice(&sumf);
}

/// NVFP4 against Split32 Q8_0 rows: each 32-element activation block meets 16 nibble bytes
/// (two 16-element sub-blocks); the four sub-block sums of a block are then scaled and added
/// in the scalar order `sumf += dy·d_s·Σ_s`.
#[inline(always)]
pub(crate) unsafe fn nvfp4_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let table = lut(&KVALUES_MXFP4);
    let mut sumf = [0f32; NX];
    for b in 0..k / 64 {
        let wb = w.add(36 * b);
        // [low nibbles 0..16 | high nibbles 0..16] → [sub-block 2h | sub-block 2h + 1]
        let half = |h: usize| {
            let v = _mm256_permute4x64_epi64::<0xD8>(nibbles(wb.add(4 + 16 * h)));
            _mm256_shuffle_epi8(table, v)
        };
        let (w0, w1) = (half(0), half(1));
        let mut ds = [0f32; 4];
        for (s, d) in ds.iter_mut().enumerate() {
            *d = crate::quant::nvfp4::ue4m3_half(*wb.add(s));
        }
        for j in 0..NX {
            let xq = x.add(j * xs);
            let v0 = dot_ss::<O>(_mm256_setzero_si256(), w0, ld(xq.add(64 * b)));
            let v1 = dot_ss::<O>(_mm256_setzero_si256(), w1, ld(xq.add(64 * b + 32)));
            let t = _mm256_hadd_epi32(v0, v1);
            let u = _mm256_hadd_epi32(t, t);
            let mut s = [0i32; 8];
            _mm256_storeu_si256(s.as_mut_ptr() as *mut __m256i, u);
            // lanes: 0 sub-block 0, 1 sub-block 2, 4 sub-block 1, 5 sub-block 3
            let sub = [s[0], s[4], s[1], s[5]];
            let dy = [rdf32(xq.add(k + 8 * b)), rdf32(xq.add(k + 8 * b + 4))];
            let mut acc = sumf[j];
            for sb in 0..4 {
                acc += dy[sb / 2] * ds[sb] * sub[sb] as f32;
            }
            sumf[j] = acc;
        }
    }
    out[..NX].copy_from_slice(&sumf);
}
