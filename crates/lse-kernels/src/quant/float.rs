//! F32, F16 and BF16 rows: little-endian element arrays. Their dot types are the same format
//! (activations rounded to f16 / bf16 for F16 / BF16 weights, as ggml does).

use crate::fp::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, rd_f32, rd_u16};

use super::{DotType, Format, ScaleFields};
use lse_gguf::GgmlType;

pub const F32: Format = Format {
    ty: GgmlType::F32,
    dot_type: DotType::F32,
    dequantize: dequantize_f32,
    dot: dot_f32,
    scales: ScaleFields::F16(&[]),
};
pub const F16: Format = Format {
    ty: GgmlType::F16,
    dot_type: DotType::F16,
    dequantize: dequantize_f16,
    dot: dot_f16,
    scales: ScaleFields::F16(&[]),
};
pub const BF16: Format = Format {
    ty: GgmlType::BF16,
    dot_type: DotType::BF16,
    dequantize: dequantize_bf16,
    dot: dot_bf16,
    scales: ScaleFields::F16(&[]),
};

pub fn dequantize_f32(src: &[u8], dst: &mut [f32]) {
    for (s, y) in src.chunks_exact(4).zip(dst.iter_mut()) {
        *y = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    }
}

pub fn dequantize_f16(src: &[u8], dst: &mut [f32]) {
    for (s, y) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *y = f16_to_f32(u16::from_le_bytes([s[0], s[1]]));
    }
}

pub fn dequantize_bf16(src: &[u8], dst: &mut [f32]) {
    for (s, y) in src.chunks_exact(2).zip(dst.iter_mut()) {
        *y = bf16_to_f32(u16::from_le_bytes([s[0], s[1]]));
    }
}

pub fn quantize_f32(x: &[f32], dst: &mut [u8]) {
    for (v, d) in x.iter().zip(dst.chunks_exact_mut(4)) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

pub fn quantize_f16(x: &[f32], dst: &mut [u8]) {
    for (v, d) in x.iter().zip(dst.chunks_exact_mut(2)) {
        d.copy_from_slice(&f32_to_f16(*v).to_le_bytes());
    }
}

pub fn quantize_bf16(x: &[f32], dst: &mut [u8]) {
    for (v, d) in x.iter().zip(dst.chunks_exact_mut(2)) {
        d.copy_from_slice(&f32_to_bf16(*v).to_le_bytes());
    }
}

/// Scalar F32 dot: f32 products summed in f64 (ggml's `ggml_vec_dot_f32` generic path).
pub fn dot_f32(w: &[u8], x: &[u8]) -> f32 {
    let n = w.len() / 4;
    let mut s = 0.0f64;
    for i in 0..n {
        s += (rd_f32(w, 4 * i) * rd_f32(x, 4 * i)) as f64;
    }
    s as f32
}

/// Scalar F16 dot: products of the widened halves in f32, summed in f64.
pub fn dot_f16(w: &[u8], x: &[u8]) -> f32 {
    let n = w.len() / 2;
    let mut s = 0.0f64;
    for i in 0..n {
        s += (f16_to_f32(rd_u16(w, 2 * i)) * f16_to_f32(rd_u16(x, 2 * i))) as f64;
    }
    s as f32
}

/// Scalar BF16 dot: products of the widened values in f32, summed in f64.
pub fn dot_bf16(w: &[u8], x: &[u8]) -> f32 {
    let n = w.len() / 2;
    let mut s = 0.0f64;
    for i in 0..n {
        s += (bf16_to_f32(rd_u16(w, 2 * i)) * bf16_to_f32(rd_u16(x, 2 * i))) as f64;
    }
    s as f32
}
