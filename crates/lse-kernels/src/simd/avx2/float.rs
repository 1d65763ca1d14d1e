//! AVX2 bodies of the float rows (F32, F16, BF16): widen to f32, FMA, two accumulators per row.

use super::*;

pub(crate) trait FloatElem {
    /// Bytes per element.
    const ES: usize;
    unsafe fn load8(p: *const u8) -> __m256;
    unsafe fn load1(p: *const u8) -> f32;
}

pub(crate) struct F32E;
impl FloatElem for F32E {
    const ES: usize = 4;
    #[inline(always)]
    unsafe fn load8(p: *const u8) -> __m256 {
        _mm256_loadu_ps(p as *const f32)
    }
    #[inline(always)]
    unsafe fn load1(p: *const u8) -> f32 {
        rdf32(p)
    }
}

pub(crate) struct F16E;
impl FloatElem for F16E {
    const ES: usize = 2;
    #[inline(always)]
    unsafe fn load8(p: *const u8) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
    #[inline(always)]
    unsafe fn load1(p: *const u8) -> f32 {
        h2f(p)
    }
}

pub(crate) struct Bf16E;
impl FloatElem for Bf16E {
    const ES: usize = 2;
    #[inline(always)]
    unsafe fn load8(p: *const u8) -> __m256 {
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(
            _mm_loadu_si128(p as *const __m128i),
        )))
    }
    #[inline(always)]
    unsafe fn load1(p: *const u8) -> f32 {
        f32::from_bits(((p as *const u16).read_unaligned() as u32) << 16)
    }
}

/// Float rows, two accumulators per activation row.
#[inline(always)]
unsafe fn float_body<E: FloatElem, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    let es = E::ES;
    let mut acc0 = [_mm256_setzero_ps(); NX];
    let mut acc1 = [_mm256_setzero_ps(); NX];
    let mut i = 0;
    while i + 16 <= k {
        let w0 = E::load8(w.add(es * i));
        let w1 = E::load8(w.add(es * (i + 8)));
        for j in 0..NX {
            let p = x.add(j * xs + es * i);
            acc0[j] = _mm256_fmadd_ps(w0, E::load8(p), acc0[j]);
            acc1[j] = _mm256_fmadd_ps(w1, E::load8(p.add(8 * es)), acc1[j]);
        }
        i += 16;
    }
    while i + 8 <= k {
        let w0 = E::load8(w.add(es * i));
        for j in 0..NX {
            acc0[j] = _mm256_fmadd_ps(w0, E::load8(x.add(j * xs + es * i)), acc0[j]);
        }
        i += 8;
    }
    for j in 0..NX {
        let mut s = hsum(_mm256_add_ps(acc0[j], acc1[j]));
        for e in i..k {
            s += E::load1(w.add(es * e)) * E::load1(x.add(j * xs + es * e));
        }
        out[j] = s;
    }
}

#[inline(always)]
pub(crate) unsafe fn f32_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    float_body::<F32E, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn f16_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    float_body::<F16E, NX>(k, w, x, xs, out)
}

#[inline(always)]
pub(crate) unsafe fn bf16_body<O: Ops, const NX: usize>(
    k: usize,
    w: *const u8,
    x: *const u8,
    xs: usize,
    out: &mut [f32; MR],
) {
    float_body::<Bf16E, NX>(k, w, x, xs, out)
}
