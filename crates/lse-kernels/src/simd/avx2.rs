//! AVX2 (+FMA, F16C) row kernels: one weight row against up to `MR` activation rows.
//!
//! The kernel bodies are generic over `Ops`, the two integer multiply-accumulate primitives
//! that differ between plain AVX2 (`vpmaddubsw` + `vpmaddwd`) and AVX-512 VNNI (`vpdpbusd`,
//! `vpdpwssd`); `avx512.rs` instantiates the same bodies with VNNI. Every weight block is
//! decoded once and multiplied with all activation rows of the call. Integer sums per block
//! are exact (no i16 saturation is reachable for any format). For the legacy, k- and float
//! formats only the f32 order differs from the scalar reference; the i-quant, ternary, FP4 and
//! Q1_0/Q2_0 kernels (`lut4`, `grid`, `ternary`, `lowbit`) also keep the scalar's f32 order and
//! are bit-identical to it. Every kernel's per-row arithmetic is the same whatever the number
//! of rows in the call, so results do not depend on batching.

#![allow(clippy::needless_range_loop)] // per-row loops index several parallel arrays

use super::{RowKernel, SimdKernel, MR};
use core::arch::x86_64::*;
use lse_gguf::GgmlType;

/// Integer multiply-accumulate primitives.
pub(crate) trait Ops {
    /// True when `dot_us` has no i16 intermediate (VNNI), so unsigned operands up to 255 work.
    const VNNI: bool;
    /// `acc + Σ₄ u·s` per i32 lane (u unsigned bytes, s signed bytes; pair sums must fit i16
    /// for the AVX2 version).
    unsafe fn dot_us(acc: __m256i, u: __m256i, s: __m256i) -> __m256i;
    /// `acc + Σ₂ a·b` per i32 lane (i16 × i16).
    unsafe fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i;
}

pub(crate) struct Avx2Ops;

impl Ops for Avx2Ops {
    const VNNI: bool = false;
    #[inline(always)]
    unsafe fn dot_us(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_add_epi32(
            acc,
            _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)),
        )
    }
    #[inline(always)]
    unsafe fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
    }
}

pub fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

// ---------------------------------------------------------------- helpers

#[inline(always)]
pub(crate) unsafe fn h2f(p: *const u8) -> f32 {
    f16_bits_to_f32((p as *const u16).read_unaligned())
}

/// f16 bits to f32 with F16C (exact).
#[inline(always)]
pub(crate) unsafe fn f16_bits_to_f32(h: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
}

/// f32 to f16 bits with F16C, round to nearest even: `fp::f32_to_f16`'s bits without its run-time
/// CPU check and call.
#[inline(always)]
pub(crate) unsafe fn f32_to_f16_bits(x: f32) -> u16 {
    _mm_extract_epi16::<0>(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(x))) as u16
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

/// 32 bits (LE) at `p` → 32 bytes, 0xFF where the bit is set.
#[inline(always)]
unsafe fn bits32(p: *const u8) -> __m256i {
    exact::mask32((p as *const u32).read_unaligned())
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

#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

mod block32;
mod exact;
mod float;
mod grid;
mod kquant;
mod lowbit;
mod lut4;
mod quantize;
mod ternary;

pub(crate) use block32::*;
pub(crate) use float::*;
pub(crate) use grid::*;
pub(crate) use kquant::*;
pub(crate) use lowbit::*;
pub(crate) use lut4::*;
pub(crate) use quantize::*;
pub(crate) use ternary::*;

// ---------------------------------------------------------------- entry points

/// The one list of x86 row kernels, handed to the callback macro `$cb` (with `$args` first).
/// Per weight type: the generic body (in this module), elements per block, weight bytes per
/// block, activation bytes per block in the kernel's layout, whether the AVX-512 level takes 8
/// rows per call (32 vector registers; measured faster for the k-quants, Q4_1/Q5_0/Q5_1, the
/// grid i-quants and TQ1_0/TQ2_0; Q8_0, Q4_0, the float rows, the 4-bit codebook formats and
/// Q1_0/Q2_0 stay at 4), and the activation layout. AVX2 always takes 4 rows per call
/// (16 registers).
macro_rules! kernel_list {
    ($cb:ident ! ($($args:tt)*)) => {
        $crate::simd::avx2::$cb! { ($($args)*)
            F32 => f32_body, 1, 4, 4, false, Ggml;
            F16 => f16_body, 1, 2, 2, false, Ggml;
            BF16 => bf16_body, 1, 2, 2, false, Ggml;
            // Split32 activation rows: 32 quant bytes + f32 scale + 4-byte sum per block
            Q4_0 => q4_0_body, 32, 18, 40, false, Split32;
            Q4_1 => q4_1_body, 32, 20, 40, true, Split32;
            Q5_0 => q5_0_body, 32, 22, 40, true, Split32;
            Q5_1 => q5_1_body, 32, 24, 40, true, Split32;
            Q8_0 => q8_0_body, 32, 34, 40, false, Split32;
            Q2_K => q2_k_body, 256, 84, 292, true, Ggml;
            Q3_K => q3_k_body, 256, 110, 292, true, Ggml;
            Q4_K => q4_k_body, 256, 144, 292, true, Ggml;
            Q5_K => q5_k_body, 256, 176, 292, true, Ggml;
            Q6_K => q6_k_body, 256, 210, 292, true, Ggml;
            IQ4_NL => iq4_nl_body, 32, 18, 40, false, Split32;
            MXFP4 => mxfp4_body, 32, 17, 40, false, Split32;
            IQ4_XS => iq4_xs_body, 256, 136, 292, false, Ggml;
            IQ2_XXS => iq2_xxs_body, 256, 66, 292, true, Ggml;
            IQ2_XS => iq2_xs_body, 256, 74, 292, true, Ggml;
            IQ2_S => iq2_s_body, 256, 82, 292, true, Ggml;
            IQ3_XXS => iq3_xxs_body, 256, 98, 292, true, Ggml;
            IQ3_S => iq3_s_body, 256, 110, 292, true, Ggml;
            IQ1_S => iq1_s_body, 256, 50, 292, true, Ggml;
            IQ1_M => iq1_m_body, 256, 56, 292, true, Ggml;
            TQ1_0 => tq1_0_body, 256, 54, 292, true, Ggml;
            TQ2_0 => tq2_0_body, 256, 66, 292, true, Ggml;
            NVFP4 => nvfp4_body, 64, 36, 80, false, Split32;
            Q1_0 => q1_0_body, 128, 18, 160, false, Split32;
            Q2_0 => q2_0_body, 64, 18, 80, false, Split32;
        }
    };
}
pub(crate) use kernel_list;

/// Defines, for one level, `#[target_feature]` entry points running the generic bodies with
/// `$ops` and `row_kernel(t)`, the safe [`RowKernel`] per weight type. `$wide`: whether this
/// level may take 8 rows per call where the list allows it.
macro_rules! define_level {
    (($feat:literal, $ops:ty, $wide:expr)
     $($t:ident => $body:ident, $qk:expr, $wb:expr, $xb:expr, $w8:expr, $lay:ident;)*) => {
        mod entry {
            use super::*;
            $(
                #[target_feature(enable = $feat)]
                pub(super) unsafe fn $body<const NX: usize>(k: usize, w: *const u8, x: *const u8, xs: usize, out: &mut [f32; MR]) {
                    $crate::simd::avx2::$body::<$ops, NX>(k, w, x, xs, out)
                }
            )*
        }

        /// The row kernel for weight type `t` at this level, or `None` when the CPU lacks the
        /// level's features or the type has no kernel.
        pub fn row_kernel(t: GgmlType) -> Option<SimdKernel> {
            use $crate::simd::ActLayout::*;
            if !available() {
                return None;
            }
            let (kern, layout) = match t {
                $( GgmlType::$t => (row_fn!(entry::$body, $qk, $wb, $xb, $wide && $w8), $lay), )*
                _ => return None,
            };
            Some(SimdKernel { kern, layout })
        }
    };
}
pub(crate) use define_level;

/// A safe [`RowKernel`] around an entry point, checking the slice lengths the kernel reads:
/// weight bytes per `$qk` elements `$wb`, activation bytes per `$qk` elements `$xb`. `$wide`:
/// up to 8 rows per entry call (32 vector registers), else up to 4 (16 registers).
macro_rules! row_fn {
    ($($name:ident)::+, $qk:expr, $wb:expr, $xb:expr, $wide:expr) => {{
        fn f(k: usize, w: &[u8], x: &[u8], xs: usize, nx: usize, out: &mut [f32; MR]) {
            assert!(k.is_multiple_of($qk) && (1..=MR).contains(&nx));
            let (wl, xl) = (k / $qk * $wb, k / $qk * $xb);
            assert!(w.len() >= wl && xs >= xl && x.len() >= (nx - 1) * xs + xl, "row kernel: short buffers");
            let (w, x) = (w.as_ptr(), x.as_ptr());
            // SAFETY: the caller only gets this kernel when the CPU has the entry's features;
            // the lengths were checked above.
            unsafe {
                if $wide {
                    match nx {
                        1 => $($name)::+::<1>(k, w, x, xs, out),
                        2 => $($name)::+::<2>(k, w, x, xs, out),
                        3 => $($name)::+::<3>(k, w, x, xs, out),
                        4 => $($name)::+::<4>(k, w, x, xs, out),
                        5 => $($name)::+::<5>(k, w, x, xs, out),
                        6 => $($name)::+::<6>(k, w, x, xs, out),
                        7 => $($name)::+::<7>(k, w, x, xs, out),
                        _ => $($name)::+::<8>(k, w, x, xs, out),
                    }
                } else {
                    row_fn!(@upto4 $($name)::+, k, w, x, xs, nx.min(4), out);
                    if nx > 4 {
                        let mut rest = [0f32; MR];
                        row_fn!(@upto4 $($name)::+, k, w, x.add(4 * xs), xs, nx - 4, &mut rest);
                        out[4..nx].copy_from_slice(&rest[..nx - 4]);
                    }
                }
            }
        }
        f as RowKernel
    }};
    (@upto4 $($name:ident)::+, $k:expr, $w:expr, $x:expr, $xs:expr, $nx:expr, $out:expr) => {
        match $nx {
            1 => $($name)::+::<1>($k, $w, $x, $xs, $out),
            2 => $($name)::+::<2>($k, $w, $x, $xs, $out),
            3 => $($name)::+::<3>($k, $w, $x, $xs, $out),
            _ => $($name)::+::<4>($k, $w, $x, $xs, $out),
        }
    };
}
pub(crate) use row_fn;

kernel_list!(define_level!("avx2,fma,f16c", Avx2Ops, false));
