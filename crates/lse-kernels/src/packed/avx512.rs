//! The AVX-512 VNNI micro-tile: one `vpdpbusd` adds 4 products of 16 weight rows per activation row.

use super::{Args, S_F16, S_K};
use core::arch::x86_64::*;

#[inline(always)]
unsafe fn bx(p: *const u8) -> __m512i {
    _mm512_set1_epi32((p as *const i32).read_unaligned())
}

/// The high bits of nibble chunk s (see the packed layout) from the `HB` planes at `p`, moved
/// to bit 4 of every byte. `s` is a constant once the chunk loop is unrolled.
#[inline(always)]
unsafe fn chunk_bits<const HB: u32>(p: *const u8, s: usize) -> __m512i {
    let (plane, bit) = super::chunk_plane(s, HB as usize);
    let v = _mm512_loadu_si512(p.add(plane) as *const _);
    // to bit 4 of each byte: a 16-bit shift by a constant count
    let o = bit as i32;
    if o <= 4 {
        _mm512_sll_epi16(v, _mm_cvtsi32_si128(4 - o))
    } else {
        _mm512_srl_epi16(v, _mm_cvtsi32_si128(o - 4))
    }
}

/// `nib | (bits & mask)`: a nibble chunk with its high bits.
#[inline(always)]
unsafe fn with_bits(nib: __m512i, bits: __m512i, mask: __m512i) -> __m512i {
    _mm512_or_si512(nib, _mm512_and_si512(bits, mask))
}

/// Nibble chunks `t` and `4 + t` of the block at `wb` (with their high bits from the `HB` planes)
/// as one byte per quant.
#[inline(always)]
unsafe fn chunks<const HB: u32>(wb: *const u8, t: usize, m0f: __m512i, hmask: __m512i) -> (__m512i, __m512i) {
    let v = _mm512_loadu_si512(wb.add(64 * t) as *const _);
    let lo = _mm512_and_si512(v, m0f);
    let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m0f);
    if HB == 0 {
        return (lo, hi);
    }
    (with_bits(lo, chunk_bits::<HB>(wb.add(256), t), hmask), with_bits(hi, chunk_bits::<HB>(wb.add(256), 4 + t), hmask))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn tile<const NIB: bool, const HB: u32, const MIN: bool, const S: u8, const MR: usize>(a: &Args) {
    let (nb, k, xs) = (a.nb, a.k, a.xs);
    let qb = super::quant_bytes(NIB, HB);
    let m0f = _mm512_set1_epi8(0x0f);
    let hmask = _mm512_set1_epi8((((1 << HB) - 1) << 4) as i8);
    let mut facc = [_mm512_setzero_ps(); MR];
    super::fetch_outputs(a, 0, MR);
    for b in 0..nb {
        let wb = a.block(b);
        if a.prefetch {
            super::prefetch_ahead(wb, a.ahead_bytes(b), a.near);
        }
        let xb = a.x.add(32 * b);
        let so = k + 4 * nb + 4 * b;
        // Q8_0 family: the sums start at the folded offset correction −(Σx << SH)
        let mut ia: [__m512i; MR] = core::array::from_fn(|j| {
            if MIN {
                _mm512_setzero_si512()
            } else {
                _mm512_set1_epi32((a.x.add(j * xs + so) as *const i32).read_unaligned())
            }
        });
        // With few rows, one chain of dependent vpdpbusd per row would bound a block by their
        // latency: a second set of sums (integer, so the result is the same) halves the chain.
        let mut ib = [_mm512_setzero_si512(); MR];
        let two = MR <= 2;
        if NIB {
            for t in 0..4 {
                let (lo, hi) = chunks::<HB>(wb, t, m0f, hmask);
                for j in 0..MR {
                    ia[j] = _mm512_dpbusd_epi32(ia[j], lo, bx(xb.add(j * xs + 4 * t)));
                }
                for j in 0..MR {
                    let acc = if two { &mut ib[j] } else { &mut ia[j] };
                    *acc = _mm512_dpbusd_epi32(*acc, hi, bx(xb.add(j * xs + 16 + 4 * t)));
                }
            }
        } else {
            for t in 0..8 {
                let v = _mm512_loadu_si512(wb.add(64 * t) as *const _);
                for j in 0..MR {
                    let acc = if two && t % 2 == 1 { &mut ib[j] } else { &mut ia[j] };
                    *acc = _mm512_dpbusd_epi32(*acc, v, bx(xb.add(j * xs + 4 * t)));
                }
            }
        }
        if two {
            for j in 0..MR {
                ia[j] = _mm512_add_epi32(ia[j], ib[j]);
            }
        }
        scale_block::<MIN, S, MR>(a, b, wb.add(qb), &ia, &mut facc);
    }
    store::<MR>(a, &facc);
}

/// The group rebuilt with one byte per quant, as [`super::avx2::unpack_group`] writes it (the
/// same bytes), a 64-byte chunk per operation.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn unpack_group<const HB: u32>(a: &Args, scale_bytes: usize, out: *mut u8) {
    let ob = 512 + scale_bytes;
    let m0f = _mm512_set1_epi8(0x0f);
    let hmask = _mm512_set1_epi8((((1 << HB) - 1) << 4) as i8);
    for b in 0..a.nb {
        let (src, dst) = (a.block(b), out.add(b * ob));
        if a.prefetch {
            super::prefetch_ahead(src, a.ahead_bytes(b), a.near);
        }
        for t in 0..4 {
            let (lo, hi) = chunks::<HB>(src, t, m0f, hmask);
            _mm512_storeu_si512(dst.add(64 * t) as *mut _, lo);
            _mm512_storeu_si512(dst.add(64 * (4 + t)) as *mut _, hi);
        }
        let sc = src.add(super::quant_bytes(true, HB));
        if a.hb == 0 {
            // f16 scales (and mins): 32 or 64 bytes, copied
            for o in (0..scale_bytes).step_by(32) {
                _mm256_storeu_si256(dst.add(512 + o) as *mut __m256i, _mm256_loadu_si256(sc.add(o) as *const __m256i));
            }
            continue;
        }
        for i in 0..2 {
            _mm512_storeu_ps(dst.add(512 + 64 * i) as *mut f32, k_scales16(a, b, sc, i, HB == 2));
        }
    }
}

/// Block `b`'s f32 step for rows `0..MR` of `a.x` (its scales at `sc`): `facc[j] +=
/// cvt(ia[j])·(d·dx)`, then `+ m·s` with mins.
#[inline(always)]
unsafe fn scale_block<const MIN: bool, const S: u8, const MR: usize>(a: &Args, b: usize, sc: *const u8, ia: &[__m512i; MR], facc: &mut [__m512; MR]) {
    let dw = scales::<S>(a, b, sc, 0);
    let mw = if MIN { scales::<S>(a, b, sc, 1) } else { _mm512_setzero_ps() };
    for j in 0..MR {
        let px = a.x.add(j * a.xs);
        let dx = _mm512_set1_ps((px.add(a.k + 4 * b) as *const f32).read_unaligned());
        facc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[j]), _mm512_mul_ps(dw, dx), facc[j]);
        if MIN {
            let sx = _mm512_set1_ps((px.add(a.k + 4 * a.nb + 4 * b) as *const f32).read_unaligned());
            facc[j] = _mm512_fmadd_ps(mw, sx, facc[j]);
        }
    }
}

/// Two groups of one byte per quant (Q8_0, or nibble groups rebuilt as bytes) side by side, `a`
/// and `a2` (the same rows and layout): each activation broadcast feeds two `vpdpbusd`, and
/// `2·MR` independent sums hide their latency (Intel, Q8_0 bytes from L2: 2 × 6 rows ran 10–15 %
/// faster than 1 × 8). Per output the same integer sums and f32 steps as [`tile`].
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn pair<const MIN: bool, const S: u8, const MR: usize>(a: &Args, a2: &Args) {
    let (nb, k, xs) = (a.nb, a.k, a.xs);
    let mut facc = [[_mm512_setzero_ps(); MR]; 2];
    super::fetch_outputs(a, 0, MR);
    super::fetch_outputs(a2, 0, MR);
    for b in 0..nb {
        let wb = [a.block(b), a2.block(b)];
        if a.prefetch {
            super::prefetch_ahead(wb[0], a.ahead_bytes(b), a.near);
            super::prefetch_ahead(wb[1], a.ahead_bytes(b), a.near);
        }
        let xb = a.x.add(32 * b);
        let so = k + 4 * nb + 4 * b;
        // Q8_0 family: the sums start at the folded offset correction −(Σx << SH)
        let start = |j: usize| if MIN { _mm512_setzero_si512() } else { bx(a.x.add(j * xs + so)) };
        let mut ia: [[__m512i; MR]; 2] = [core::array::from_fn(start), core::array::from_fn(start)];
        for t in 0..8 {
            let v = [_mm512_loadu_si512(wb[0].add(64 * t) as *const _), _mm512_loadu_si512(wb[1].add(64 * t) as *const _)];
            for j in 0..MR {
                let xj = bx(xb.add(j * xs + 4 * t));
                ia[0][j] = _mm512_dpbusd_epi32(ia[0][j], v[0], xj);
                ia[1][j] = _mm512_dpbusd_epi32(ia[1][j], v[1], xj);
            }
        }
        let qb = super::quant_bytes(false, 0);
        scale_block::<MIN, S, MR>(a, b, wb[0].add(qb), &ia[0], &mut facc[0]);
        scale_block::<MIN, S, MR>(a2, b, wb[1].add(qb), &ia[1], &mut facc[1]);
    }
    store::<MR>(a, &facc[0]);
    store::<MR>(a2, &facc[1]);
}

/// Block `b`'s 16 scales (`i` 0) or mins (`i` 1), its scale bytes at `p`: f16 or f32 per block,
/// or (`S_K`) the header's f32 times the block's unsigned bytes.
#[inline(always)]
unsafe fn scales<const S: u8>(a: &Args, b: usize, p: *const u8, i: usize) -> __m512 {
    if S == S_K {
        return k_scales16(a, b, p, i, false);
    }
    let p = p.add(i * super::scale_bytes(S));
    if S == S_F16 {
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    } else {
        _mm512_loadu_ps(p as *const f32)
    }
}

/// A k-quant block's 16 scales from its bytes at `sc`: byte array `i` (Q4_K: 0 `sc`, 1 `m`;
/// Q6_K: the two halves' `sc`, `signed`) times the header's `d` (Q4_K's mins: `−dmin`).
#[inline(always)]
unsafe fn k_scales16(a: &Args, b: usize, sc: *const u8, i: usize, signed: bool) -> __m512 {
    let bytes = _mm_loadu_si128(sc.add(16 * i) as *const __m128i);
    let v = if signed { _mm512_cvtepi8_epi32(bytes) } else { _mm512_cvtepu8_epi32(bytes) };
    let d = a.header(b).add(if signed { 0 } else { 64 * i });
    _mm512_mul_ps(_mm512_loadu_ps(d as *const f32), _mm512_cvtepi32_ps(v))
}

#[inline(always)]
unsafe fn store<const MR: usize>(a: &Args, facc: &[__m512; MR]) {
    if a.ncols >= 16 {
        for j in 0..MR {
            _mm512_storeu_ps(a.y.add(j * a.ldy), facc[j]);
        }
    } else {
        let mask: __mmask16 = ((1u32 << a.ncols) - 1) as u16;
        for j in 0..MR {
            _mm512_mask_storeu_ps(a.y.add(j * a.ldy), mask, facc[j]);
        }
    }
}

/// Q6_K: 6-bit quants (nibbles and two high-bit planes with the packed scales, or one byte per
/// quant and f32 scales after `avx2::unpack_group` when `!PLANES`) with two 16-element
/// sub-blocks per block: scales `d₀`, `d₁` per row, activation rows with per-16 folded corrections (`u = q + 2^SH`,
/// corrected per sub-block). The low nibble chunks are elements 0..16, the high ones 16..32.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn tile16<const PLANES: bool, const MR: usize>(a: &Args) {
    let (nb, k, xs) = (a.nb, a.k, a.xs);
    let m0f = _mm512_set1_epi8(0x0f);
    let hmask = _mm512_set1_epi8(0x30);
    let mut facc = [_mm512_setzero_ps(); MR];
    super::fetch_outputs(a, 0, MR);
    for b in 0..nb {
        let wb = a.block(b);
        if a.prefetch {
            super::prefetch_ahead(wb, a.ahead_bytes(b), a.near);
        }
        let xb = a.x.add(32 * b);
        let so = k + 4 * nb + 8 * b;
        let start = |j: usize, o: usize| _mm512_set1_epi32((a.x.add(j * xs + so + o) as *const i32).read_unaligned());
        let mut i0: [__m512i; MR] = core::array::from_fn(|j| start(j, 0));
        let mut i1: [__m512i; MR] = core::array::from_fn(|j| start(j, 4));
        for t in 0..4 {
            let (lo, hi) = if PLANES {
                chunks::<2>(wb, t, m0f, hmask)
            } else {
                (_mm512_loadu_si512(wb.add(64 * t) as *const _), _mm512_loadu_si512(wb.add(64 * (4 + t)) as *const _))
            };
            for j in 0..MR {
                i0[j] = _mm512_dpbusd_epi32(i0[j], lo, bx(xb.add(j * xs + 4 * t)));
            }
            for j in 0..MR {
                i1[j] = _mm512_dpbusd_epi32(i1[j], hi, bx(xb.add(j * xs + 16 + 4 * t)));
            }
        }
        let (d0, d1) = if PLANES {
            (k_scales16(a, b, wb.add(384), 0, true), k_scales16(a, b, wb.add(384), 1, true))
        } else {
            (_mm512_loadu_ps(wb.add(512) as *const f32), _mm512_loadu_ps(wb.add(576) as *const f32))
        };
        for j in 0..MR {
            let px = a.x.add(j * xs);
            let dx = _mm512_set1_ps((px.add(k + 4 * b) as *const f32).read_unaligned());
            let v0 = _mm512_cvtepi32_ps(i0[j]);
            let v1 = _mm512_cvtepi32_ps(i1[j]);
            let s = _mm512_fmadd_ps(v0, d0, _mm512_mul_ps(v1, d1));
            facc[j] = _mm512_fmadd_ps(s, dx, facc[j]);
        }
    }
    store::<MR>(a, &facc);
}
