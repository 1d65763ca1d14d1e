//! Q8_1: blocks of 32 values, `d: f16`, `s: f16` (= d·Σq), 32 × `i8`. Activation format for
//! Q4_1 and Q5_1 weights (never a weight type in GGUF files).

use crate::fp::{f32_to_f16, round_even_i32};

pub const QK: usize = 32;
pub const BLOCK_BYTES: usize = 36;

/// Quantizes one activation row like llama.cpp's x86 build (`quantize_row_q8_1` with AVX2):
/// as Q8_0 (`d = amax/127`, multiplier `127/amax`, ties to even), plus `s = f16(d · Σq)`.
pub fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES)) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let mut sum = 0i32;
        for j in 0..QK {
            let q = round_even_i32(xb[j] * id).clamp(-128, 127);
            sum += q;
            b[4 + j] = q as i8 as u8;
        }
        b[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        b[2..4].copy_from_slice(&f32_to_f16(d * sum as f32).to_le_bytes());
    }
}
