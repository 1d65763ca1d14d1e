//! Helpers for the kernels that reproduce their scalar reference bit for bit: the integer sums
//! are exact in any order, so they are reduced per block (or sub-block) and then go through the
//! scalar's f32 steps in the scalar's order (no FMA, same products, same sequence of adds).

use super::*;

/// [Σ v0, Σ v1, …, Σ v7]: the lane sums of 8 i32x8 vectors (exact).
#[inline(always)]
pub(crate) unsafe fn reduce8(v: &[__m256i; 8]) -> __m256i {
    let t0 = _mm256_hadd_epi32(v[0], v[1]);
    let t1 = _mm256_hadd_epi32(v[2], v[3]);
    let t2 = _mm256_hadd_epi32(v[4], v[5]);
    let t3 = _mm256_hadd_epi32(v[6], v[7]);
    let u0 = _mm256_hadd_epi32(t0, t1);
    let u1 = _mm256_hadd_epi32(t2, t3);
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(u0, u1),
        _mm256_permute2x128_si256::<0x31>(u0, u1),
    )
}

/// `acc + p[0] + p[1] + … + p[n−1]`, one add at a time in lane order (a scalar loop's order).
#[inline(always)]
pub(crate) unsafe fn chain(mut acc: f32, p: __m256, n: usize) -> f32 {
    let mut a = [0f32; 8];
    _mm256_storeu_ps(a.as_mut_ptr(), p);
    for v in a.iter().take(n) {
        acc += *v;
    }
    acc
}

/// `x` negated where the byte of `neg` is 0xFF (`neg` bytes are 0 or 0xFF).
#[inline(always)]
pub(crate) unsafe fn negate_where(x: __m256i, neg: __m256i) -> __m256i {
    _mm256_sub_epi8(_mm256_xor_si256(x, neg), neg)
}

/// Σ over groups of 4 lanes of `w·x` for signed bytes `w` (|w| ≤ 127) and `x` (|x| ≤ 127),
/// added to `acc` per i32 lane.
#[inline(always)]
pub(crate) unsafe fn dot_ss<O: Ops>(acc: __m256i, w: __m256i, x: __m256i) -> __m256i {
    O::dot_us(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w))
}

/// The 32 bits of `bits` (LE) as bytes, 0xFF where set.
#[inline(always)]
pub(crate) unsafe fn mask32(bits: u32) -> __m256i {
    let v = _mm256_set1_epi32(bits as i32);
    let shuf = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let m = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, shuf), m), m)
}

/// Up to 8 f32 at `p` (the rest 0; nothing past value `n` is read).
#[inline(always)]
pub(crate) unsafe fn load_f32_first(p: *const u8, n: usize) -> __m256 {
    if n == 8 {
        return _mm256_loadu_ps(p as *const f32);
    }
    let mut a = [0f32; 8];
    // byte copy: `p` need not be 4-byte aligned
    core::ptr::copy_nonoverlapping(p, a.as_mut_ptr() as *mut u8, 4 * n);
    _mm256_loadu_ps(a.as_ptr())
}
