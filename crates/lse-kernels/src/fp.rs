//! Half-precision conversions (IEEE f16 and bfloat16) with ggml's rounding: round to nearest even.

use half::f16;

/// f16 bits to f32.
#[inline(always)]
pub fn f16_to_f32(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

/// f32 to f16 bits, round to nearest even (as F16C `vcvtps2ph` and ggml).
#[inline(always)]
pub fn f32_to_f16(x: f32) -> u16 {
    f16::from_f32(x).to_bits()
}

/// `src` as little-endian f16 bits into `dst` (2 bytes each), as [`f32_to_f16`] rounds; eight at
/// a time with F16C's `vcvtps2ph` where the CPU has it (the instruction `half` uses per value).
pub fn f32_to_f16_bytes(src: &[f32], dst: &mut [u8]) {
    assert_eq!(dst.len(), 2 * src.len(), "f16 row length");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: F16C (with the AVX it implies) checked above; lengths checked.
        return unsafe { f32_to_f16_bytes_f16c(src, dst) };
    }
    for (x, b) in src.iter().zip(dst.chunks_exact_mut(2)) {
        b.copy_from_slice(&f32_to_f16(*x).to_le_bytes());
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn f32_to_f16_bytes_f16c(src: &[f32], dst: &mut [u8]) {
    use core::arch::x86_64::*;
    let n8 = src.len() / 8 * 8;
    for i in (0..n8).step_by(8) {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(src.as_ptr().add(i)));
        _mm_storeu_si128(dst.as_mut_ptr().add(2 * i) as *mut __m128i, h);
    }
    for i in n8..src.len() {
        dst[2 * i..2 * i + 2].copy_from_slice(&f32_to_f16(src[i]).to_le_bytes());
    }
}

/// bf16 bits to f32 (exact).
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// f32 to bf16 bits the way ggml does: NaN stays a (quiet) NaN, everything else rounds to
/// nearest even on the upper 16 bits.
#[inline(always)]
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// Little-endian u16 at byte offset `o`.
#[inline(always)]
pub fn rd_u16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

/// Little-endian f16 at byte offset `o`, as f32.
#[inline(always)]
pub fn rd_f16(b: &[u8], o: usize) -> f32 {
    f16_to_f32(rd_u16(b, o))
}

/// Little-endian f32 at byte offset `o`.
#[inline(always)]
pub fn rd_f32(b: &[u8], o: usize) -> f32 {
    f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Round to nearest, ties to even, as an integer, for |v| <= 4194303 (ggml's `nearest_int`
/// trick: adding 1.5·2^23 leaves the rounded integer in the low mantissa bits). Plain SSE2
/// arithmetic, so the activation quantizers vectorize without SSE4.1's `roundps`.
#[inline(always)]
pub fn round_even_i32(v: f32) -> i32 {
    let t = v + 12_582_912.0;
    (t.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

#[cfg(test)]
mod tests {
    /// The eight-at-a-time conversion gives `half`'s bits for every kind of value: ties, values
    /// that round to infinity, subnormals, signed zeros, infinities and NaNs; lengths with a tail.
    #[test]
    fn f16_bytes_equal_per_value_conversion() {
        let mut rng = crate::test_rng::Rng::new(0x2545_f491);
        let mut x: Vec<f32> = (0..1000).map(|_| f32::from_bits((rng.next() >> 32) as u32)).collect();
        x.extend([0.0, -0.0, 1.0 + 2f32.powi(-11), 65520.0, -65519.0, 6e-8, 3e-5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        for n in [x.len(), 13, 7, 0] {
            let mut b = vec![0u8; 2 * n];
            super::f32_to_f16_bytes(&x[..n], &mut b);
            for (v, h) in x[..n].iter().zip(b.chunks_exact(2)) {
                assert_eq!(u16::from_le_bytes([h[0], h[1]]), half::f16::from_f32(*v).to_bits(), "{v:e}");
            }
        }
    }
}
