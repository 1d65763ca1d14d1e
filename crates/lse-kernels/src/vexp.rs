//! Vector `expf` for the attention and activation kernels, 8 lanes (AVX2+FMA) and 16 (AVX-512):
//! n = round(x log2 e), r = x - n ln2 (two-part constant), e^r by a degree-6 polynomial on
//! |r| <= ln2/2, then 2^n in two exponent steps so n = -126..128 stays representable. Within about
//! 1 ulp of libm on [-87.3, 88.4]; below that (and for -inf) 0.

use core::arch::x86_64::*;

const LO: f32 = -87.336_54;
const HI: f32 = 88.376_26;
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Taylor coefficients of e^r, highest power first (1/6! … 1/1!, 1/0!).
const POLY: [f32; 7] = [1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0];

#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn exp8(x: __m256) -> __m256 {
    let lo = _mm256_set1_ps(LO);
    let xc = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(HI));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(xc, _mm256_set1_ps(std::f32::consts::LOG2_E)));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), xc);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    let mut p = _mm256_set1_ps(POLY[0]);
    for &c in &POLY[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let ni = _mm256_cvtps_epi32(n);
    let half1 = _mm256_srai_epi32::<1>(ni);
    let half2 = _mm256_sub_epi32(ni, half1);
    let bias = _mm256_set1_epi32(127);
    let s1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(half1, bias)));
    let s2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(half2, bias)));
    let y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    _mm256_and_ps(y, _mm256_cmp_ps::<_CMP_GE_OQ>(x, lo))
}

#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn exp16(x: __m512) -> __m512 {
    let lo = _mm512_set1_ps(LO);
    let xc = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(HI));
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(xc, _mm512_set1_ps(std::f32::consts::LOG2_E)));
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), xc);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    let mut p = _mm512_set1_ps(POLY[0]);
    for &c in &POLY[1..] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let ni = _mm512_cvtps_epi32(n);
    let half1 = _mm512_srai_epi32::<1>(ni);
    let half2 = _mm512_sub_epi32(ni, half1);
    let bias = _mm512_set1_epi32(127);
    let s1 = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(half1, bias)));
    let s2 = _mm512_castsi512_ps(_mm512_slli_epi32::<23>(_mm512_add_epi32(half2, bias)));
    let y = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
    _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, lo), y)
}
