//! The AVX2 micro-tile over the same packed groups as the VNNI one: a 64-byte chunk holds 4
//! quants of 16 weight rows, read here as two 8-row halves. `vpmaddubsw` multiplies unsigned
//! weight bytes with the broadcast signed activation bytes into i16 pair sums, `vpmaddwd` with
//! ones widens them to the 4-product i32 sums `vpdpbusd` would give.
//!
//! The i16 pair sums are exact (|u·x + u'·x'| ≤ 2·255·128 needs care, see below), and several
//! are added in i16 before widening where the bound allows it, so fewer multiplies run than
//! one `vpmaddwd` per `vpmaddubsw`. Every block's i32 sum and every f32 operation per output
//! is the VNNI tile's, in the same order: the two tiles give bit-identical results.
//!
//! i16 bounds per block (activation bytes |x| ≤ 128):
//! - 4-bit quants (u ≤ 15): a pair sum ≤ 3840, all 8 chunks of a block add to ≤ 30720;
//! - 5-bit (u ≤ 31, Q8_0/Q8_1 activations |x| ≤ 127): 4 chunks ≤ 31496;
//! - Q6_K (u ≤ 63): 2 chunks ≤ 32256;
//! - Q8_0 (u = q + 128 would overflow): `|q|` against `sign(x, q)` (≤ 32512), one chunk at a
//!   time, so the AVX2 pack keeps the file's signed `q`; the block sum is then Σq·x, which is the
//!   VNNI tile's −128·Σx + Σu·x.

use super::{Args, Scales, S_F16, S_F32, S_K};
use core::arch::x86_64::*;

/// Chunks of an unpacked group's bytes added in i16 before one widening (the bounds above):
/// 4-bit quants all 8 of a block, 5-bit 4.
const I16_CHUNKS_4BIT: usize = 8;
const I16_CHUNKS_5BIT: usize = 4;

/// Activation rows one pass keeps in registers (16 ymm: MR i16/i32 sums, MR f32 sums, the
/// weight chunk and constants). Q8_0 needs two more registers per chunk (`q`, `|q|`) and Q6_K
/// two integer sums per row: both measure fastest with 3.
pub(super) const MR: usize = 4;
pub(super) const MR_WIDE: usize = 3;
/// Activation rows of one pass over both halves (Q8_0 and groups rebuilt as bytes: two i32 sums
/// per row, and two i16 or two more i32 ones).
const MR_BOTH: usize = 4;
/// Bytes of a rebuilt Q6_K group a range of passes reads (see [`sub16_bytes_ranges`]): packed
/// bench Q6_K 640 × 2048 and 896 × 4864, 146 → 158 and 139 → 151 GFLOP/s (12, 20 and 28 KiB
/// the same within 2 %).
const SUB16_RANGE_BYTES: usize = 20 * 1024;

/// How a packed block is read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Two 4-bit quants per byte (Q4_0, Q4_1, Q4_K).
    Nibbles,
    /// 5-bit quants: nibbles and one high-bit plane (Q5_0, Q5_1).
    Bits5,
    /// Q8_0 (the signed quants).
    Bytes8,
    /// Q6_K: nibbles and two high-bit planes, two scales per block.
    Sub16,
    /// A group of 5-bit (`NibBytes`), 4-bit (`Nib4Bytes`) or Q6_K quants unpacked to one byte
    /// per quant by [`unpack_group`] (the Q8_0 byte order; scales at byte 512 of a block).
    NibBytes,
    Nib4Bytes,
    Sub16Bytes,
}

/// Rewrites group `a.wg` (nibbles and `hb` planes, blocks of `a.bb` bytes) with one byte per
/// quant into `out` (blocks of 512 bytes of quants and `scale_bytes` of scales: copied, or for
/// the k-quants the f32 products `d·sc` (and `−dmin·m`; Q6_K's two halves), exactly those a tile
/// forms), so that several passes over many activation rows rebuild each quant once instead of
/// once per pass.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn unpack_group<const HB: usize>(a: &Args, scale_bytes: usize, out: *mut u8) {
    let ob = 512 + scale_bytes;
    let hmask = _mm256_set1_epi8((((1 << HB) - 1) << 4) as i8);
    for b in 0..a.nb {
        let (src, dst) = (a.block(b), out.add(b * ob));
        if a.prefetch {
            super::prefetch_ahead(src, a.ahead_bytes(b), a.near);
        }
        for h in 0..2 {
            for t in 0..4 {
                let v = ld(src.add(64 * t + 32 * h));
                for (lo, s) in [(true, t), (false, 4 + t)] {
                    let mut u = nibbles(v, lo);
                    if HB > 0 {
                        let bits = chunk_bits(src.add(256 + 32 * h), HB, s);
                        u = _mm256_or_si256(u, _mm256_and_si256(bits, hmask));
                    }
                    _mm256_storeu_si256(dst.add(64 * s + 32 * h) as *mut __m256i, u);
                }
            }
        }
        let sc = src.add(super::quant_bytes(true, HB as u32));
        if a.hb == 0 {
            std::ptr::copy_nonoverlapping(sc, dst.add(512), scale_bytes);
            continue;
        }
        for i in 0..2 {
            for h in 0..2 {
                let v = k_scales8(a, b, sc, i, h, HB == 2);
                _mm256_storeu_ps(dst.add(512 + 64 * i + 32 * h) as *mut f32, v);
            }
        }
    }
}

/// A k-quant block's scales `8h..8h + 8` from its bytes at `sc`: byte array `i` (Q4_K: 0 `sc`,
/// 1 `m`; Q6_K: the two halves' `sc`, `signed`) times the header's `d` (Q4_K's mins: `−dmin`).
#[inline(always)]
unsafe fn k_scales8(a: &Args, b: usize, sc: *const u8, i: usize, h: usize, signed: bool) -> __m256 {
    let bytes = _mm_loadl_epi64(sc.add(16 * i + 8 * h) as *const __m128i);
    let v = if signed { _mm256_cvtepi8_epi32(bytes) } else { _mm256_cvtepu8_epi32(bytes) };
    let d = a.header(b).add(if signed { 0 } else { 64 * i } + 32 * h);
    _mm256_mul_ps(_mm256_loadu_ps(d as *const f32), _mm256_cvtepi32_ps(v))
}

/// Half `h` of block `b` of the group. The first half asks for the block's bytes ahead,
/// the second finds them in cache. A decode row needs it most: without it one row streamed a
/// large matrix at 75–90 % of a plain read on this Zen 3 host, with it at 95–105 % (decode steps
/// 3–7 % faster, measured alternating step by step).
#[inline(always)]
unsafe fn half_block(a: &Args, b: usize, h: usize) -> *const u8 {
    let wb = a.block(b).add(32 * h);
    if h == 0 && a.prefetch {
        super::prefetch_ahead(wb, a.ahead_bytes(b), a.near);
    }
    wb
}

/// Runs `block(b, h, wb, sums)` for every block `b` and each of the `H` halves `h0..` (`wb` its
/// bytes, `sums` the half's f32 sums of the `R` rows), then stores the sums. Compiled with the
/// kernels' features, so that their closure `block` can be inlined into it.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn over_blocks<const R: usize, const H: usize>(
    a: &Args,
    j0: usize,
    h0: usize,
    mut block: impl FnMut(usize, usize, *const u8, &mut [__m256; R]),
) {
    let mut facc = [[_mm256_setzero_ps(); R]; H];
    for b in 0..a.nb {
        for (hh, sums) in facc.iter_mut().enumerate() {
            block(b, h0 + hh, half_block(a, b, h0 + hh), sums);
        }
    }
    for (hh, sums) in facc.iter().enumerate() {
        store::<R>(a, j0, h0 + hh, sums);
    }
}

/// [`over_blocks`] for a pass over both halves: `block(b, wb, sums)` for every block `b` (`wb` its
/// bytes, `sums` both halves' f32 sums of the `R` rows), then the sums stored.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn over_blocks_both<const R: usize>(a: &Args, j0: usize, mut block: impl FnMut(usize, *const u8, &mut [[__m256; R]; 2])) {
    let mut facc = [[_mm256_setzero_ps(); R]; 2];
    for b in 0..a.nb {
        let wb = a.block(b);
        if a.prefetch {
            super::prefetch_ahead(wb, a.ahead_bytes(b), a.near);
        }
        block(b, wb, &mut facc);
    }
    store::<R>(a, j0, 0, &facc[0]);
    store::<R>(a, j0, 1, &facc[1]);
}

#[inline(always)]
unsafe fn bx(p: *const u8) -> __m256i {
    _mm256_set1_epi32((p as *const i32).read_unaligned())
}

#[inline(always)]
unsafe fn ld(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// Nibble chunk t (its low nibbles when `lo`, else its high ones) of a 32-byte half.
#[inline(always)]
unsafe fn nibbles(v: __m256i, lo: bool) -> __m256i {
    let m0f = _mm256_set1_epi8(0x0f);
    if lo {
        _mm256_and_si256(v, m0f)
    } else {
        _mm256_and_si256(_mm256_srli_epi16::<4>(v), m0f)
    }
}

/// The high bits of nibble chunk s (see the packed layout) from the `hb` planes at `p` (one
/// 32-byte half), moved to bit 4 of every byte; `s` is a constant once the loops are unrolled.
#[inline(always)]
unsafe fn chunk_bits(p: *const u8, hb: usize, s: usize) -> __m256i {
    let (plane, bit) = super::chunk_plane(s, hb);
    let v = ld(p.add(plane));
    // to bit 4 of each byte: a 16-bit shift by a constant count
    let o = bit as i32;
    if o <= 4 {
        _mm256_sll_epi16(v, _mm_cvtsi32_si128(4 - o))
    } else {
        _mm256_srl_epi16(v, _mm_cvtsi32_si128(o - 4))
    }
}

/// Block `b`'s scales (`i` 0) or mins (`i` 1) `8h..8h + 8`, its scale bytes at `p`: f16 or f32
/// per block, or (`S_K`, Q4_K) the header's f32 times the block's bytes.
#[inline(always)]
unsafe fn scales<const S: u8>(a: &Args, b: usize, p: *const u8, i: usize, h: usize) -> __m256 {
    if S == S_K {
        return k_scales8(a, b, p, i, h, false);
    }
    let p = p.add(i * super::scale_bytes(S));
    if S == S_F16 {
        _mm256_cvtph_ps(_mm_loadu_si128(p.add(16 * h) as *const __m128i))
    } else {
        _mm256_loadu_ps(p.add(32 * h) as *const f32)
    }
}

/// Block `b`'s f32 step for half `h` of rows `x0 + j·xs` (the VNNI tile's, in its order):
/// `facc[j] += cvt(ia[j])·(d·dx)`, then `+ m·s` with mins; `sc` is the block's scales.
#[inline(always)]
unsafe fn scale_block<const MIN: bool, const S: u8, const R: usize>(
    a: &Args,
    x0: *const u8,
    b: usize,
    sc: *const u8,
    h: usize,
    ia: &[__m256i; R],
    facc: &mut [__m256; R],
) {
    let dw = scales::<S>(a, b, sc, 0, h);
    let mw = if MIN { scales::<S>(a, b, sc, 1, h) } else { _mm256_setzero_ps() };
    for j in 0..R {
        let px = x0.add(j * a.xs);
        let dx = _mm256_set1_ps((px.add(a.k + 4 * b) as *const f32).read_unaligned());
        facc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[j]), _mm256_mul_ps(dw, dx), facc[j]);
        if MIN {
            let sx = _mm256_set1_ps((px.add(a.k + 4 * a.nb + 4 * b) as *const f32).read_unaligned());
            facc[j] = _mm256_fmadd_ps(mw, sx, facc[j]);
        }
    }
}

/// Q6_K's f32 step of block `b` for rows `x0 + j·xs` (the VNNI tile's, in its order): the two
/// sub-blocks' sums `sub` scaled by half `h`'s `d·sc` (the block's scales at `sc`: packed
/// (`PACKED`) or f32), then by `dx`.
#[inline(always)]
unsafe fn scale_block16<const PACKED: bool, const R: usize>(a: &Args, x0: *const u8, b: usize, sc: *const u8, h: usize, sub: &[[__m256i; R]; 2], facc: &mut [__m256; R]) {
    let (d0, d1) = if PACKED {
        (k_scales8(a, b, sc, 0, h, true), k_scales8(a, b, sc, 1, h, true))
    } else {
        (_mm256_loadu_ps(sc.add(32 * h) as *const f32), _mm256_loadu_ps(sc.add(64 + 32 * h) as *const f32))
    };
    for j in 0..R {
        let dx = _mm256_set1_ps((x0.add(j * a.xs + a.k + 4 * b) as *const f32).read_unaligned());
        let v0 = _mm256_cvtepi32_ps(sub[0][j]);
        let v1 = _mm256_cvtepi32_ps(sub[1][j]);
        let s = _mm256_fmadd_ps(v0, d0, _mm256_mul_ps(v1, d1));
        facc[j] = _mm256_fmadd_ps(s, dx, facc[j]);
    }
}

#[inline(always)]
unsafe fn widen(s16: __m256i) -> __m256i {
    _mm256_madd_epi16(s16, _mm256_set1_epi16(1))
}

/// The whole tile: `nx` activation rows in passes of at most [`MR`], each over both halves of
/// the group (the second skipped when no output of it is wanted); a single row reads both halves
/// in one pass.
///
/// # Safety
/// As [`super::PackedMatrix::tile`]; the CPU must have AVX2 and FMA.
pub(super) unsafe fn tile(a: &Args, kind: Kind, min: bool, scales: Scales, nx: usize) {
    let halves = if a.ncols > 8 { 2 } else { 1 };
    let mr = if matches!(kind, Kind::Bytes8 | Kind::Sub16 | Kind::Sub16Bytes) { MR_WIDE } else { MR };
    // Q8_0 and groups rebuilt as bytes: rows in passes of at most `MR_BOTH`, each over both
    // halves (an activation broadcast serves 16 weight rows)
    macro_rules! both_halves {
        ($f:ident $(, $g:tt)*) => {{
            let mut j0 = 0;
            while j0 < nx {
                let r = (nx - j0).min(MR_BOTH);
                let a = &Args { prefetch: a.prefetch && j0 == 0, ..*a };
                super::fetch_outputs(a, j0, r);
                match r {
                    1 => $f::<$($g,)* 1>(a, j0),
                    2 => $f::<$($g,)* 2>(a, j0),
                    3 => $f::<$($g,)* 3>(a, j0),
                    _ => $f::<$($g,)* MR_BOTH>(a, j0),
                }
                j0 += r;
            }
            return;
        }};
    }
    if halves == 2 && nx > 1 && kind == Kind::Sub16Bytes {
        return sub16_bytes_ranges(a, nx);
    }
    if halves == 2 && nx > 1 {
        match (kind, min, scales) {
            (Kind::Bytes8, _, _) => both_halves!(bytes8_pass),
            (Kind::NibBytes, true, Scales::F32) => both_halves!(nib_bytes_pass, true, S_F32, I16_CHUNKS_5BIT),
            (Kind::NibBytes, true, _) => both_halves!(nib_bytes_pass, true, S_F16, I16_CHUNKS_5BIT),
            (Kind::NibBytes, false, _) => both_halves!(nib_bytes_pass, false, S_F16, I16_CHUNKS_5BIT),
            (Kind::Nib4Bytes, true, Scales::F32) => both_halves!(nib_bytes_pass, true, S_F32, I16_CHUNKS_4BIT),
            (Kind::Nib4Bytes, true, _) => both_halves!(nib_bytes_pass, true, S_F16, I16_CHUNKS_4BIT),
            (Kind::Nib4Bytes, false, _) => both_halves!(nib_bytes_pass, false, S_F16, I16_CHUNKS_4BIT),
            _ => {}
        }
    }
    let mut j0 = 0;
    while j0 < nx {
        let r = (nx - j0).min(mr);
        // one row: both halves in one pass over the blocks (twice the independent chains)
        let both = r == 1 && halves == 2;
        let passes = if both { 1 } else { halves };
        super::fetch_outputs(a, j0, r);
        for h in 0..passes {
            // the group's bytes are in cache after the first pass
            let a = &Args { prefetch: a.prefetch && j0 == 0 && h == 0, ..*a };
            // `$f::<prefix.., R, H>`: both halves of one row, or half h for the pass's row count
            // R (at most `$max`)
            macro_rules! halves {
                ($f:ident, $($g:tt),*; $max:literal) => {
                    if both {
                        $f::<$($g,)* 1, 2>(a, j0, 0)
                    } else {
                        match r {
                            1 => $f::<$($g,)* 1, 1>(a, j0, h),
                            2 => $f::<$($g,)* 2, 1>(a, j0, h),
                            3 => $f::<$($g,)* 3, 1>(a, j0, h),
                            _ => $f::<$($g,)* $max, 1>(a, j0, h),
                        }
                    }
                };
            }
            match (kind, min, scales) {
                (Kind::Nibbles, true, Scales::K) => halves!(half, 0, true, S_K; 4),
                (Kind::Nibbles, true, _) => halves!(half, 0, true, S_F16; 4),
                (Kind::Nibbles, false, _) => halves!(half, 0, false, S_F16; 4),
                (Kind::Bits5, true, _) => halves!(half, 1, true, S_F16; 4),
                (Kind::Bits5, false, _) => halves!(half, 1, false, S_F16; 4),
                (Kind::Bytes8, _, _) => halves!(half, 2, false, S_F16; 3),
                (Kind::NibBytes, true, Scales::F32) => halves!(half, 3, true, S_F32; 4),
                (Kind::NibBytes, true, _) => halves!(half, 3, true, S_F16; 4),
                (Kind::NibBytes, false, _) => halves!(half, 3, false, S_F16; 4),
                (Kind::Nib4Bytes, true, Scales::F32) => halves!(half, 4, true, S_F32; 4),
                (Kind::Nib4Bytes, true, _) => halves!(half, 4, true, S_F16; 4),
                (Kind::Nib4Bytes, false, _) => halves!(half, 4, false, S_F16; 4),
                (Kind::Sub16, _, _) => halves!(half16, true; 3),
                (Kind::Sub16Bytes, _, _) => halves!(half16, false; 3),
            }
        }
        j0 += r;
    }
}

/// Rows `j0..j0 + R` against weight rows `8h..8h + 8` of the group for the `H` halves `h0..`;
/// `K`: 0 nibbles, 1 5-bit (nibbles and a plane), 2 Q8_0 bytes, 3 and 4 5- and 4-bit bytes
/// (unpacked).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn half<const K: u8, const MIN: bool, const S: u8, const R: usize, const H: usize>(a: &Args, j0: usize, h0: usize) {
    let (nb, k, xs) = (a.nb, a.k, a.xs);
    let qb = super::quant_bytes(K < 2, (K == 1) as u32);
    let x0 = a.x.add(j0 * xs);
    let m0f = _mm256_set1_epi8(0x0f);
    over_blocks::<R, H>(a, j0, h0, |b, h, wb, facc| {
        let xb = x0.add(32 * b);
        let so = k + 4 * nb + 4 * b;
        // Q8_0 family: the sums start at the folded offset correction −(Σx << SH); the Q8_0
        // path sums q·x directly and needs none
        let mut ia: [__m256i; R] = core::array::from_fn(|j| {
            if MIN || K == 2 {
                _mm256_setzero_si256()
            } else {
                _mm256_set1_epi32((x0.add(j * xs + so) as *const i32).read_unaligned())
            }
        });
        if K == 0 {
            let mut s = [_mm256_setzero_si256(); R];
            for t in 0..4 {
                let v = ld(wb.add(64 * t));
                let lo = _mm256_and_si256(v, m0f);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m0f);
                for j in 0..R {
                    let p = _mm256_maddubs_epi16(lo, bx(xb.add(j * xs + 4 * t)));
                    s[j] = _mm256_add_epi16(s[j], p);
                    let p = _mm256_maddubs_epi16(hi, bx(xb.add(j * xs + 16 + 4 * t)));
                    s[j] = _mm256_add_epi16(s[j], p);
                }
            }
            for j in 0..R {
                ia[j] = _mm256_add_epi32(ia[j], widen(s[j]));
            }
        } else if K == 1 {
            // the low nibble chunks (elements 0..16), then the high ones: 4 chunks each in i16
            let hmask = _mm256_set1_epi8(0x10);
            for (lo, xo) in [(true, 0), (false, 16)] {
                let mut s = [_mm256_setzero_si256(); R];
                for t in 0..4 {
                    let bits = chunk_bits(wb.add(256), 1, if lo { t } else { 4 + t });
                    let u = _mm256_or_si256(nibbles(ld(wb.add(64 * t)), lo), _mm256_and_si256(bits, hmask));
                    for j in 0..R {
                        s[j] = _mm256_add_epi16(s[j], _mm256_maddubs_epi16(u, bx(xb.add(j * xs + xo + 4 * t))));
                    }
                }
                for j in 0..R {
                    ia[j] = _mm256_add_epi32(ia[j], widen(s[j]));
                }
            }
        } else if K >= 3 {
            let chunks = if K == 4 { I16_CHUNKS_4BIT } else { I16_CHUNKS_5BIT };
            for t0 in (0..8).step_by(chunks) {
                let mut s = [_mm256_setzero_si256(); R];
                for t in t0..t0 + chunks {
                    let v = ld(wb.add(64 * t));
                    for j in 0..R {
                        s[j] = _mm256_add_epi16(s[j], _mm256_maddubs_epi16(v, bx(xb.add(j * xs + 4 * t))));
                    }
                }
                for j in 0..R {
                    ia[j] = _mm256_add_epi32(ia[j], widen(s[j]));
                }
            }
        } else {
            for t in 0..8 {
                let q = ld(wb.add(64 * t));
                let aq = _mm256_abs_epi8(q);
                for j in 0..R {
                    let sx = _mm256_sign_epi8(bx(xb.add(j * xs + 4 * t)), q);
                    ia[j] = _mm256_add_epi32(ia[j], widen(_mm256_maddubs_epi16(aq, sx)));
                }
            }
        }
        // this half's 8 scales (and mins) of the block
        scale_block::<MIN, S, R>(a, x0, b, a.block(b).add(qb), h, &ia, facc);
    });
}

/// Rows `j0..j0 + R` against all 16 weight rows of a Q8_0 group: per chunk `|q|` of both halves
/// once, then per row one broadcast, and per row and half `sign`, `vpmaddubsw`, `vpmaddwd`, add.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bytes8_pass<const R: usize>(a: &Args, j0: usize) {
    let xs = a.xs;
    let x0 = a.x.add(j0 * xs);
    over_blocks_both::<R>(a, j0, |b, wb, facc| {
        let xb = x0.add(32 * b);
        let mut ia = [[_mm256_setzero_si256(); R]; 2];
        // kept rolled: unrolled, the compiler hoists every chunk's broadcasts and spills the sums
        for t in 0..core::hint::black_box(8) {
            let q = [ld(wb.add(64 * t)), ld(wb.add(64 * t + 32))];
            let aq = [_mm256_abs_epi8(q[0]), _mm256_abs_epi8(q[1])];
            for j in 0..R {
                let x = bx(xb.add(j * xs + 4 * t));
                for h in 0..2 {
                    let p = _mm256_maddubs_epi16(aq[h], _mm256_sign_epi8(x, q[h]));
                    ia[h][j] = _mm256_add_epi32(ia[h][j], widen(p));
                }
            }
        }
        for h in 0..2 {
            scale_block::<false, S_F16, R>(a, x0, b, wb.add(super::quant_bytes(false, 0)), h, &ia[h], &mut facc[h]);
        }
    });
}

/// Rows `j0..j0 + R` against all 16 weight rows of an unpacked 4- or 5-bit group: [`half`]'s sums
/// and f32 steps per half (`K` 3 or 4), with each activation broadcast once for both halves; `C16`
/// chunks are added in i16 before each widening (4-bit 8, 5-bit 4: the bounds in the module docs).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nib_bytes_pass<const MIN: bool, const S: u8, const C16: usize, const R: usize>(a: &Args, j0: usize) {
    let (nb, k, xs) = (a.nb, a.k, a.xs);
    let x0 = a.x.add(j0 * xs);
    over_blocks_both::<R>(a, j0, |b, wb, facc| {
        let xb = x0.add(32 * b);
        let so = k + 4 * nb + 4 * b;
        // the Q8_0 family starts at the folded offset correction (see `half`)
        let start = |j: usize| {
            if MIN {
                _mm256_setzero_si256()
            } else {
                _mm256_set1_epi32((x0.add(j * xs + so) as *const i32).read_unaligned())
            }
        };
        let mut ia: [[__m256i; R]; 2] = [core::array::from_fn(start), core::array::from_fn(start)];
        // the chunk loop kept rolled, as in `bytes8_pass`
        for t0 in (0..8).step_by(C16) {
            let mut s16 = [[_mm256_setzero_si256(); R]; 2];
            for t in t0..t0 + core::hint::black_box(C16) {
                let v = [ld(wb.add(64 * t)), ld(wb.add(64 * t + 32))];
                for j in 0..R {
                    let x = bx(xb.add(j * xs + 4 * t));
                    for h in 0..2 {
                        s16[h][j] = _mm256_add_epi16(s16[h][j], _mm256_maddubs_epi16(v[h], x));
                    }
                }
            }
            for h in 0..2 {
                for j in 0..R {
                    ia[h][j] = _mm256_add_epi32(ia[h][j], widen(s16[h][j]));
                }
            }
        }
        for h in 0..2 {
            scale_block::<MIN, S, R>(a, x0, b, wb.add(super::quant_bytes(false, 0)), h, &ia[h], &mut facc[h]);
        }
    });
}

/// Blocks `bs` of rows `j0..j0 + R` against all 16 weight rows of an unpacked Q6_K group, adding
/// to `facc`: [`half16`]'s sums and f32 steps per half, each activation broadcast once for both
/// halves.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sub16_bytes_blocks<const R: usize>(a: &Args, j0: usize, bs: core::ops::Range<usize>, facc: &mut [[__m256; R]; 2]) {
    let (nb, k, xs) = (a.nb, a.k, a.xs);
    let x0 = a.x.add(j0 * xs);
    for b in bs {
        let wb = a.block(b);
        let xb = x0.add(32 * b);
        let so = k + 4 * nb + 8 * b;
        // [half][sub-block][row]
        let mut sums = [[[_mm256_setzero_si256(); R]; 2]; 2];
        for sb in 0..2 {
            let start = |j: usize| _mm256_set1_epi32((x0.add(j * xs + so + 4 * sb) as *const i32).read_unaligned());
            let mut acc: [[__m256i; R]; 2] = [core::array::from_fn(start), core::array::from_fn(start)];
            // kept rolled, as in `bytes8_pass`
            for t0 in (0..core::hint::black_box(4)).step_by(2) {
                let c = 64 * (4 * sb + t0);
                let u = [[ld(wb.add(c)), ld(wb.add(c + 64))], [ld(wb.add(c + 32)), ld(wb.add(c + 96))]];
                let xo = 16 * sb + 4 * t0;
                for j in 0..R {
                    let (xa, xc) = (bx(xb.add(j * xs + xo)), bx(xb.add(j * xs + xo + 4)));
                    for h in 0..2 {
                        let p = _mm256_add_epi16(_mm256_maddubs_epi16(u[h][0], xa), _mm256_maddubs_epi16(u[h][1], xc));
                        acc[h][j] = _mm256_add_epi32(acc[h][j], widen(p));
                    }
                }
            }
            sums[0][sb] = acc[0];
            sums[1][sb] = acc[1];
        }
        for h in 0..2 {
            scale_block16::<false, R>(a, x0, b, wb.add(super::quant_bytes(false, 2)), h, &sums[h], &mut facc[h]);
        }
    }
}

/// Rebuilt Q6_K bytes, `nx` rows in passes of [`MR_BOTH`] over both halves. A group beyond
/// [`SUB16_RANGE_BYTES`] (k ≥ 2048: 40 KiB and more, which leave L1 beside a pass's activation
/// rows) is read a range of blocks at a time: every pass over one range, then every pass over the
/// next, each pass's sums kept here between ranges (per output the same blocks in the same order,
/// so the same bits); a smaller group is one range.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sub16_bytes_ranges(a: &Args, nx: usize) {
    const PASSES: usize = super::PREFILL_UNPACK_ROWS / MR_BOTH;
    assert!(nx <= PASSES * MR_BOTH);
    let span = (SUB16_RANGE_BYTES / a.bb).max(1);
    let mut acc = [[[_mm256_setzero_ps(); MR_BOTH]; 2]; PASSES];
    for b0 in (0..a.nb).step_by(span) {
        let bs = b0..(b0 + span).min(a.nb);
        let last = bs.end == a.nb;
        for (p, j0) in (0..nx).step_by(MR_BOTH).enumerate() {
            let r = (nx - j0).min(MR_BOTH);
            if last {
                super::fetch_outputs(a, j0, r);
            }
            macro_rules! run {
                ($r:literal) => {{
                    let mut f: [[__m256; $r]; 2] = core::array::from_fn(|h| core::array::from_fn(|j| acc[p][h][j]));
                    sub16_bytes_blocks::<$r>(a, j0, bs.clone(), &mut f);
                    for h in 0..2 {
                        if last {
                            store::<$r>(a, j0, h, &f[h]);
                        }
                        acc[p][h][..$r].copy_from_slice(&f[h]);
                    }
                }};
            }
            match r {
                1 => run!(1),
                2 => run!(2),
                3 => run!(3),
                _ => run!(4),
            }
        }
    }
}

/// Q6_K: two 16-element sub-blocks per block, each starting at its own folded correction;
/// quants as nibbles and planes (`PLANES`) or unpacked bytes; halves as in [`half`].
#[target_feature(enable = "avx2,fma")]
unsafe fn half16<const PLANES: bool, const R: usize, const H: usize>(a: &Args, j0: usize, h0: usize) {
    let (nb, k, xs) = (a.nb, a.k, a.xs);
    let x0 = a.x.add(j0 * xs);
    over_blocks::<R, H>(a, j0, h0, |b, h, wb, facc| {
        let xb = x0.add(32 * b);
        let so = k + 4 * nb + 8 * b;
        let start = |j: usize, o: usize| _mm256_set1_epi32((x0.add(j * xs + so + o) as *const i32).read_unaligned());
        let mut sub: [[__m256i; R]; 2] = [core::array::from_fn(|j| start(j, 0)), core::array::from_fn(|j| start(j, 4))];
        let hmask = _mm256_set1_epi8(0x30);
        // sub-block 0 is the low nibble chunks, 1 the high ones; two chunks at a time in i16
        for (sb, acc) in sub.iter_mut().enumerate() {
            let lo = sb == 0;
            let chunk = |t: usize| {
                if !PLANES {
                    return ld(wb.add(64 * (4 * sb + t)));
                }
                let bits = chunk_bits(wb.add(256), 2, 4 * sb + t);
                _mm256_or_si256(nibbles(ld(wb.add(64 * t)), lo), _mm256_and_si256(bits, hmask))
            };
            for t0 in [0, 2] {
                let (u0, u1) = (chunk(t0), chunk(t0 + 1));
                let xo = 16 * sb + 4 * t0;
                for j in 0..R {
                    let p0 = _mm256_maddubs_epi16(u0, bx(xb.add(j * xs + xo)));
                    let p1 = _mm256_maddubs_epi16(u1, bx(xb.add(j * xs + xo + 4)));
                    acc[j] = _mm256_add_epi32(acc[j], widen(_mm256_add_epi16(p0, p1)));
                }
            }
        }
        scale_block16::<PLANES, R>(a, x0, b, a.block(b).add(super::quant_bytes(PLANES, 2)), h, &sub, facc);
    });
}

/// Writes rows `j0..j0 + R`, columns `8h..` (at most `ncols`).
#[inline(always)]
unsafe fn store<const R: usize>(a: &Args, j0: usize, h: usize, facc: &[__m256; R]) {
    let c0 = 8 * h;
    let n = a.ncols.saturating_sub(c0).min(8);
    for j in 0..R {
        let y = a.y.add((j0 + j) * a.ldy + c0);
        if n == 8 {
            _mm256_storeu_ps(y, facc[j]);
        } else {
            let mut tmp = [0f32; 8];
            _mm256_storeu_ps(tmp.as_mut_ptr(), facc[j]);
            std::ptr::copy_nonoverlapping(tmp.as_ptr(), y, n);
        }
    }
}
