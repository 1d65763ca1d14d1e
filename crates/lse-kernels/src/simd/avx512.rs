//! AVX-512 level: the AVX2 kernel bodies (256-bit vectors) with the integer multiply-accumulates
//! done by AVX-512 VNNI (`vpdpbusd` for u8×i8 sums of 4, `vpdpwssd` for i16×i16 sums of 2).
//! Zen 4 and most Intel parts run 512-bit integer ops as two 256-bit halves, so the win here
//! is fewer instructions per block, not wider vectors. Requires AVX-512 F/BW/VL + VNNI.

use super::avx2::{self, kernel_list, row_fn, Ops};
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

kernel_list!(define_level!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    VnniOps,
    true
));
