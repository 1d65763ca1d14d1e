//! AVX-512 level: the AVX2 kernel bodies (256-bit vectors) with the integer multiply-accumulates
//! done by AVX-512 VNNI (`vpdpbusd` for u8×i8 sums of 4, `vpdpwssd` for i16×i16 sums of 2).
//! Zen 4 and most Intel parts run 512-bit integer ops as two 256-bit halves, so the win here
//! is fewer instructions per block, not wider vectors. Requires AVX-512 F/BW/VL + VNNI.

use super::avx2::{self, entries, kernel_table, row_fn, Ops};
use super::{RowKernel, SimdKernel, MR};
use core::arch::x86_64::*;
use lse_gguf::GgmlType;

pub(crate) struct VnniOps;

impl Ops for VnniOps {
    const VNNI: bool = true;
    #[inline(always)]
    unsafe fn dot_us(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, u, s)
    }
    #[inline(always)]
    unsafe fn madd_acc(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpwssd_epi32(acc, a, b)
    }
}

pub fn available() -> bool {
    avx2::available()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

entries!("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", VnniOps,
    f32_k => avx2::f32_body, f16_k => avx2::f16_body, bf16_k => avx2::bf16_body,
    q4_0_k => avx2::q4_0_body, q4_1_k => avx2::q4_1_body, q5_0_k => avx2::q5_0_body,
    q5_1_k => avx2::q5_1_body, q8_0_k => avx2::q8_0_body,
    q2_k_k => avx2::q2_k_body, q3_k_k => avx2::q3_k_body, q4_k_k => avx2::q4_k_body,
    q5_k_k => avx2::q5_k_body, q6_k_k => avx2::q6_k_body,
);

/// The AVX-512 VNNI kernel for weight type `t`, or `None` when the CPU lacks the features.
pub fn row_kernel(t: GgmlType) -> Option<SimdKernel> {
    if !available() {
        return None;
    }
    kernel_table!(
        wide, t, f32_k, f16_k, bf16_k, q4_0_k, q4_1_k, q5_0_k, q5_1_k, q8_0_k, q2_k_k, q3_k_k,
        q4_k_k, q5_k_k, q6_k_k
    )
}
