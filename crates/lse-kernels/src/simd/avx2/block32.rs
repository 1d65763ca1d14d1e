//! AVX2 bodies of the 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
//!
//! Activations come in `ActLayout::Split32`: quants [k], then f32 scales [k/32], then per block
//! Σq (i32, Q8_0) or s (f32, Q8_1). Weights of the Q8_0 family are used unsigned (u = q + 2^SH)
//! and the offset is taken back once per block as 2^SH·Σq_x, which saves the per-row sign
//! trick; only Q8_0 weights on plain AVX2 (u up to 255 would saturate `vpmaddubsw`) keep it.
//! Blocks go 8 at a time: the 8 integer block sums of a row are reduced into one vector (hadd
//! tree) and scaled by the 8 products dw·dx in one multiply; the rest in groups of up to 4.

use super::*;

/// 8 f16 values at `p`, `p + stride`, … as f32.
#[inline(always)]
unsafe fn f16x8(p: *const u8, stride: usize) -> __m256 {
    let r = |i: usize| (p.add(i * stride) as *const i16).read_unaligned();
    _mm256_cvtph_ps(_mm_setr_epi16(
        r(0),
        r(1),
        r(2),
        r(3),
        r(4),
        r(5),
        r(6),
        r(7),
    ))
}

/// The first `n` (≤ 4) of the f16 values at `p`, `p + stride`, … as f32 (the rest 0; nothing
/// past value `n` is read).
#[inline(always)]
unsafe fn f16x4_first(p: *const u8, stride: usize, n: usize) -> __m128 {
    let r = |i: usize| {
        if i < n {
            (p.add(i * stride) as *const i16).read_unaligned()
        } else {
            0
        }
    };
    _mm_cvtph_ps(_mm_setr_epi16(r(0), r(1), r(2), r(3), 0, 0, 0, 0))
}

/// Lane sums of 8 i32x8 vectors given as two hadd-tree halves (`q0` for blocks 0..4, `q1` for
/// 4..8, each [low-half sums | high-half sums]) → [B0 … B7].
#[inline(always)]
unsafe fn combine8(q0: __m256i, q1: __m256i) -> __m256i {
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(q0, q1),
        _mm256_permute2x128_si256::<0x31>(q0, q1),
    )
}

/// A 32-element weight block format.
pub(crate) trait Block32 {
    /// Weight block bytes.
    const WB: usize;
    /// Q8_1 family (unsigned quants and an f16 min at byte 2); else Q8_0 family.
    const MIN: bool;
    /// Q8_0 family: the signed quant is `unsigned − 2^SH`.
    const SH: i32 = 0;
    /// The quants as unsigned bytes.
    unsafe fn unsigned(wb: *const u8) -> __m256i;
    /// The signed quants (Q8_0 family).
    #[inline(always)]
    unsafe fn signed(wb: *const u8) -> __m256i {
        _mm256_sub_epi8(
            Self::unsigned(wb),
            _mm256_set1_epi8((1i32 << Self::SH) as i8),
        )
    }
}

pub(crate) struct Q8_0W;
impl Block32 for Q8_0W {
    const WB: usize = 34;
    const MIN: bool = false;
    const SH: i32 = 7;
    #[inline(always)]
    unsafe fn unsigned(wb: *const u8) -> __m256i {
        _mm256_xor_si256(ld(wb.add(2)), _mm256_set1_epi8(0x80u8 as i8))
    }
    #[inline(always)]
    unsafe fn signed(wb: *const u8) -> __m256i {
        ld(wb.add(2))
    }
}

pub(crate) struct Q4_0W;
impl Block32 for Q4_0W {
    const WB: usize = 18;
    const MIN: bool = false;
    const SH: i32 = 3;
    #[inline(always)]
    unsafe fn unsigned(wb: *const u8) -> __m256i {
        nibbles(wb.add(2))
    }
}

pub(crate) struct Q5_0W;
impl Block32 for Q5_0W {
    const WB: usize = 22;
    const MIN: bool = false;
    const SH: i32 = 4;
    #[inline(always)]
    unsafe fn unsigned(wb: *const u8) -> __m256i {
        _mm256_or_si256(
            nibbles(wb.add(6)),
            _mm256_and_si256(bits32(wb.add(2)), _mm256_set1_epi8(0x10)),
        )
    }
}

pub(crate) struct Q4_1W;
impl Block32 for Q4_1W {
    const WB: usize = 20;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn unsigned(wb: *const u8) -> __m256i {
        nibbles(wb.add(4))
    }
}

pub(crate) struct Q5_1W;
impl Block32 for Q5_1W {
    const WB: usize = 24;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn unsigned(wb: *const u8) -> __m256i {
        _mm256_or_si256(
            nibbles(wb.add(8)),
            _mm256_and_si256(bits32(wb.add(4)), _mm256_set1_epi8(0x10)),
        )
    }
}

/// Weight block quants as (unsigned operand, sign source for the sign trick).
#[inline(always)]
unsafe fn decode32<W: Block32>(use_sign: bool, wb: *const u8) -> (__m256i, __m256i) {
    if use_sign {
        let q = W::signed(wb);
        (_mm256_sign_epi8(q, q), q)
    } else {
        (W::unsigned(wb), _mm256_setzero_si256())
    }
}

/// Integer lane sums of one weight block against the 32 activation quants at `px`.
#[inline(always)]
unsafe fn dot32<O: Ops>(use_sign: bool, u: __m256i, sgn: __m256i, px: *const u8) -> __m256i {
    let xv = ld(px);
    if use_sign {
        O::dot_us(_mm256_setzero_si256(), u, _mm256_sign_epi8(xv, sgn))
    } else {
        O::dot_us(_mm256_setzero_si256(), u, xv)
    }
}

/// Shared body of the 32-block formats (activations in `ActLayout::Split32`).
#[inline(always)]
unsafe fn block32_body<O: Ops, W: Block32, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let nb = k / 32;
    let (d_off, s_off) = (k, k + 4 * nb);
    let use_sign = !O::VNNI && !W::MIN && W::SH == 7;
    let correct = !W::MIN && !use_sign;
    let sh = _mm_cvtsi32_si128(W::SH);
    let mut acc = [_mm256_setzero_ps(); NX];
    let mut accm = [_mm256_setzero_ps(); NX];
    let mut b = 0;
    while b + 8 <= nb {
        let mut q = [[_mm256_setzero_si256(); 2]; NX];
        for half in 0..2 {
            let mut p = [[_mm256_setzero_si256(); 2]; NX];
            for pair in 0..2 {
                let b0 = b + 4 * half + 2 * pair;
                let (u0, g0) = decode32::<W>(use_sign, w.add(W::WB * b0));
                let (u1, g1) = decode32::<W>(use_sign, w.add(W::WB * (b0 + 1)));
                for j in 0..NX {
                    let px = x.add(j * xs + 32 * b0);
                    p[j][pair] = _mm256_hadd_epi32(
                        dot32::<O>(use_sign, u0, g0, px),
                        dot32::<O>(use_sign, u1, g1, px.add(32)),
                    );
                }
            }
            for j in 0..NX {
                q[j][half] = _mm256_hadd_epi32(p[j][0], p[j][1]);
            }
        }
        let dw = f16x8(w.add(W::WB * b), W::WB);
        let mw = if W::MIN {
            f16x8(w.add(W::WB * b + 2), W::WB)
        } else {
            _mm256_setzero_ps()
        };
        for j in 0..NX {
            let px = x.add(j * xs);
            let mut isum = combine8(q[j][0], q[j][1]);
            if correct {
                isum = _mm256_sub_epi32(isum, _mm256_sll_epi32(ld(px.add(s_off + 4 * b)), sh));
            }
            let dx = _mm256_loadu_ps(px.add(d_off + 4 * b) as *const f32);
            acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), acc[j]);
            if W::MIN {
                accm[j] = _mm256_fmadd_ps(
                    mw,
                    _mm256_loadu_ps(px.add(s_off + 4 * b) as *const f32),
                    accm[j],
                );
            }
        }
        b += 8;
    }
    // What is left (1..=7 blocks, e.g. k = 576, 640, 896): groups of up to 4 blocks through
    // half the tree in 128 bits; missing blocks are zero and the scale loads are masked.
    while b < nb {
        let rem = (nb - b).min(4);
        let mut p = [[_mm256_setzero_si256(); 2]; NX];
        for pair in 0..2 {
            let b0 = b + 2 * pair;
            if b0 >= b + rem {
                break;
            }
            let has1 = b0 + 1 < b + rem;
            let (u0, g0) = decode32::<W>(use_sign, w.add(W::WB * b0));
            let (u1, g1) = if has1 {
                decode32::<W>(use_sign, w.add(W::WB * (b0 + 1)))
            } else {
                (_mm256_setzero_si256(), _mm256_setzero_si256())
            };
            for j in 0..NX {
                let px = x.add(j * xs + 32 * b0);
                let s0 = dot32::<O>(use_sign, u0, g0, px);
                let s1 = if has1 {
                    dot32::<O>(use_sign, u1, g1, px.add(32))
                } else {
                    _mm256_setzero_si256()
                };
                p[j][pair] = _mm256_hadd_epi32(s0, s1);
            }
        }
        let lane = |i: usize| if i < rem { -1i32 } else { 0 };
        let mask = _mm_setr_epi32(lane(0), lane(1), lane(2), lane(3));
        let dw = f16x4_first(w.add(W::WB * b), W::WB, rem);
        let mw = if W::MIN {
            f16x4_first(w.add(W::WB * b + 2), W::WB, rem)
        } else {
            _mm_setzero_ps()
        };
        for j in 0..NX {
            let px = x.add(j * xs);
            let q = _mm256_hadd_epi32(p[j][0], p[j][1]);
            let mut isum =
                _mm_add_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
            if correct {
                let sx = _mm_maskload_epi32(px.add(s_off + 4 * b) as *const i32, mask);
                isum = _mm_sub_epi32(isum, _mm_sll_epi32(sx, sh));
            }
            let dx = _mm_maskload_ps(px.add(d_off + 4 * b) as *const f32, mask);
            let mut v = _mm_mul_ps(_mm_mul_ps(dw, dx), _mm_cvtepi32_ps(isum));
            if W::MIN {
                v = _mm_fmadd_ps(
                    mw,
                    _mm_maskload_ps(px.add(s_off + 4 * b) as *const f32, mask),
                    v,
                );
            }
            acc[j] = _mm256_add_ps(acc[j], _mm256_set_m128(_mm_setzero_ps(), v));
        }
        b += rem;
    }
    for j in 0..NX {
        let mut r = hsum(acc[j]);
        if W::MIN {
            r += hsum(accm[j]);
        }
        out[j] = r;
    }
}

#[inline(always)]
pub(crate) unsafe fn q8_0_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    block32_body::<O, Q8_0W, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q4_0_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    block32_body::<O, Q4_0W, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q5_0_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    block32_body::<O, Q5_0W, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q4_1_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    block32_body::<O, Q4_1W, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn q5_1_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    block32_body::<O, Q5_1W, NX>(k, w, x, xs, out)
}
