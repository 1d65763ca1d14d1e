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
