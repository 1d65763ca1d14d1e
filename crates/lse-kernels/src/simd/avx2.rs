//! AVX2 (+FMA, F16C) row kernels: one weight row against up to `MR` activation rows.
//!
//! The kernel bodies are generic over `Ops`, the two integer multiply-accumulate primitives
//! that differ between plain AVX2 (`vpmaddubsw` + `vpmaddwd`) and AVX-512 VNNI (`vpdpbusd`,
//! `vpdpwssd`); `avx512.rs` instantiates the same bodies with VNNI. Every weight block is
//! decoded once and multiplied with all activation rows of the call. Integer sums per block
//! are exact (no i16 saturation is reachable for any format); only the f32 order differs from
//! the scalar reference.

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
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
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

#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s));
    _mm_cvtsi128_si32(s)
}

mod block32;
mod float;
mod kquant;
mod quantize;

pub(crate) use block32::*;
pub(crate) use float::*;
pub(crate) use kquant::*;
pub(crate) use quantize::*;

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
    ($name:ident, $qk:expr, $wb:expr, $xb:expr, $mode:tt) => {{
        fn f(k: usize, w: &[u8], x: &[u8], xs: usize, nx: usize, out: &mut [f32; MR]) {
            assert!(k.is_multiple_of($qk) && (1..=MR).contains(&nx));
            let (wl, xl) = (k / $qk * $wb, k / $qk * $xb);
            assert!(w.len() >= wl && xs >= xl && x.len() >= (nx - 1) * xs + xl, "row kernel: short buffers");
            // SAFETY: the caller only gets this kernel when the CPU has the entry's features;
            // the lengths were checked above.
            unsafe { row_fn!(@dispatch $mode, $name, k, w.as_ptr(), x.as_ptr(), xs, nx, out) }
        }
        f as RowKernel
    }};
    // up to 4 rows per entry call (16 vector registers)
    (@dispatch narrow, $name:ident, $k:expr, $w:expr, $x:expr, $xs:expr, $nx:expr, $out:expr) => {{
        let (k, w, x, xs, nx, out) = ($k, $w, $x, $xs, $nx, $out);
        row_fn!(@upto4 $name, k, w, x, xs, nx.min(4), out);
        if nx > 4 {
            let mut rest = [0f32; MR];
            row_fn!(@upto4 $name, k, w, x.add(4 * xs), xs, nx - 4, &mut rest);
            out[4..nx].copy_from_slice(&rest[..nx - 4]);
        }
    }};
    // up to 8 rows per entry call (32 vector registers)
    (@dispatch wide, $name:ident, $k:expr, $w:expr, $x:expr, $xs:expr, $nx:expr, $out:expr) => {{
        let (k, w, x, xs, nx, out) = ($k, $w, $x, $xs, $nx, $out);
        match nx {
            1 => $name::<1>(k, w, x, xs, out),
            2 => $name::<2>(k, w, x, xs, out),
            3 => $name::<3>(k, w, x, xs, out),
            4 => $name::<4>(k, w, x, xs, out),
            5 => $name::<5>(k, w, x, xs, out),
            6 => $name::<6>(k, w, x, xs, out),
            7 => $name::<7>(k, w, x, xs, out),
            _ => $name::<8>(k, w, x, xs, out),
        }
    }};
    (@upto4 $name:ident, $k:expr, $w:expr, $x:expr, $xs:expr, $nx:expr, $out:expr) => {
        match $nx {
            1 => $name::<1>($k, $w, $x, $xs, $out),
            2 => $name::<2>($k, $w, $x, $xs, $out),
            3 => $name::<3>($k, $w, $x, $xs, $out),
            _ => $name::<4>($k, $w, $x, $xs, $out),
        }
    };
}
pub(crate) use row_fn;

/// The row kernel table for one entry-point family (`$p` is the name prefix module).
macro_rules! kernel_table {
    ($m:tt, $t:expr, $f32:ident, $f16:ident, $bf16:ident, $q4_0:ident, $q4_1:ident, $q5_0:ident, $q5_1:ident, $q8_0:ident,
     $q2_k:ident, $q3_k:ident, $q4_k:ident, $q5_k:ident, $q6_k:ident) => {{
        use $crate::simd::{ActLayout::*, SimdKernel};
        // `$m` (wide = 8 rows per call where registers allow) measured faster for the k-quants
        // and Q4_1/Q5_0/Q5_1; Q8_0, Q4_0 and the float rows stay at 4 rows per call.
        let (kern, layout) = match $t {
            GgmlType::F32 => (row_fn!($f32, 1, 4, 4, narrow), Ggml),
            GgmlType::F16 => (row_fn!($f16, 1, 2, 2, narrow), Ggml),
            GgmlType::BF16 => (row_fn!($bf16, 1, 2, 2, narrow), Ggml),
            // Split32 activation rows: 32 quant bytes + f32 scale + 4-byte sum per block
            GgmlType::Q4_0 => (row_fn!($q4_0, 32, 18, 40, narrow), Split32),
            GgmlType::Q4_1 => (row_fn!($q4_1, 32, 20, 40, $m), Split32),
            GgmlType::Q5_0 => (row_fn!($q5_0, 32, 22, 40, $m), Split32),
            GgmlType::Q5_1 => (row_fn!($q5_1, 32, 24, 40, $m), Split32),
            GgmlType::Q8_0 => (row_fn!($q8_0, 32, 34, 40, narrow), Split32),
            GgmlType::Q2_K => (row_fn!($q2_k, 256, 84, 292, $m), Ggml),
            GgmlType::Q3_K => (row_fn!($q3_k, 256, 110, 292, $m), Ggml),
            GgmlType::Q4_K => (row_fn!($q4_k, 256, 144, 292, $m), Ggml),
            GgmlType::Q5_K => (row_fn!($q5_k, 256, 176, 292, $m), Ggml),
            GgmlType::Q6_K => (row_fn!($q6_k, 256, 210, 292, $m), Ggml),
            _ => return None,
        };
        Some(SimdKernel { kern, layout })
    }};
}
pub(crate) use kernel_table;

entries!("avx2,fma,f16c", Avx2Ops,
    f32_k => f32_body, f16_k => f16_body, bf16_k => bf16_body,
    q4_0_k => q4_0_body, q4_1_k => q4_1_body, q5_0_k => q5_0_body, q5_1_k => q5_1_body, q8_0_k => q8_0_body,
    q2_k_k => q2_k_body, q3_k_k => q3_k_body, q4_k_k => q4_k_body, q5_k_k => q5_k_body, q6_k_k => q6_k_body,
);

/// The AVX2 kernel for weight type `t`, or `None` when the CPU lacks AVX2/FMA/F16C.
pub fn row_kernel(t: GgmlType) -> Option<SimdKernel> {
    if !available() {
        return None;
    }
    kernel_table!(
        narrow, t, f32_k, f16_k, bf16_k, q4_0_k, q4_1_k, q5_0_k, q5_1_k, q8_0_k, q2_k_k, q3_k_k,
        q4_k_k, q5_k_k, q6_k_k
    )
}
