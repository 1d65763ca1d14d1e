//! Q8_0: blocks of 32 values, `d: f16` then 32 × `i8`; value = d·q.
//! Also the activation format for Q4_0, Q5_0 and Q8_0 weights.

use crate::fp::{f32_to_f16, rd_f16, round_even_i32};

pub const QK: usize = 32;
pub const BLOCK_BYTES: usize = 34;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q8_0,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for j in 0..QK {
            y[j] = d * (b[2 + j] as i8) as f32;
        }
    }
}

/// Quantizes one activation row the way llama.cpp's x86 build does (`quantize_row_q8_0` with
/// AVX2): `d = amax/127` stored as f16, multiplier `127/amax` (0 for an all-zero block),
/// rounding to nearest with ties to even.
pub fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES)) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        for j in 0..QK {
            b[2 + j] = round_even_i32(xb[j] * id).clamp(-128, 127) as i8 as u8;
        }
    }
}

/// Scalar dot of a Q8_0 weight row with a Q8_0 activation row (ggml's generic order:
/// per block `sumi · (dx·dy)`, summed in f32).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(BLOCK_BYTES)) {
        let mut sumi = 0i32;
        for j in 0..QK {
            sumi += (wb[2 + j] as i8 as i32) * (xb[2 + j] as i8 as i32);
        }
        sumf += sumi as f32 * (rd_f16(wb, 0) * rd_f16(xb, 0));
    }
    sumf
}
