//! Block formats: one file per format with its layout, dequantization, activation quantization
//! (for the activation formats Q8_0/Q8_1/Q8_K) and the scalar reference dot.
//!
//! The scalar dots follow ggml's generic C code (same integer sums, same float order) and are
//! the oracle every SIMD kernel is tested against.

#![allow(clippy::needless_range_loop)] // block math reads clearer with explicit indices

pub mod float;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;

use lse_gguf::GgmlType;

/// The format activations are converted to before a dot with a weight row (ggml's
/// `vec_dot_type`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DotType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q8_1,
    Q8_K,
}

impl DotType {
    /// Elements per block.
    pub fn block_size(self) -> usize {
        match self {
            DotType::F32 | DotType::F16 | DotType::BF16 => 1,
            DotType::Q8_0 | DotType::Q8_1 => 32,
            DotType::Q8_K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            DotType::F32 => 4,
            DotType::F16 | DotType::BF16 => 2,
            DotType::Q8_0 => q8_0::BLOCK_BYTES,
            DotType::Q8_1 => q8_1::BLOCK_BYTES,
            DotType::Q8_K => q8_k::BLOCK_BYTES,
        }
    }

    /// Bytes of a row of `k` elements (`k` a multiple of the block size).
    pub fn row_bytes(self, k: usize) -> usize {
        k / self.block_size() * self.block_bytes()
    }
}

/// The activation format for weights of type `t`, or `None` when `t` has no kernel here.
pub fn dot_type(t: GgmlType) -> Option<DotType> {
    Some(match t {
        GgmlType::F32 => DotType::F32,
        GgmlType::F16 => DotType::F16,
        GgmlType::BF16 => DotType::BF16,
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => DotType::Q8_0,
        GgmlType::Q4_1 | GgmlType::Q5_1 => DotType::Q8_1,
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
            DotType::Q8_K
        }
        _ => return None,
    })
}

/// Quantizes one activation row `x` (length a multiple of the block size) into `dst`
/// (`dt.row_bytes(x.len())` bytes).
pub fn quantize_activation(dt: DotType, x: &[f32], dst: &mut [u8]) {
    assert_eq!(
        x.len() % dt.block_size(),
        0,
        "activation length not a multiple of the block size"
    );
    assert!(
        dst.len() >= dt.row_bytes(x.len()),
        "activation buffer too small"
    );
    match dt {
        DotType::F32 => float::quantize_f32(x, dst),
        DotType::F16 => float::quantize_f16(x, dst),
        DotType::BF16 => float::quantize_bf16(x, dst),
        DotType::Q8_0 => q8_0::quantize(x, dst),
        DotType::Q8_1 => q8_1::quantize(x, dst),
        DotType::Q8_K => q8_k::quantize(x, dst),
    }
}

/// A scalar dot: one weight row, one activation row in the dot type.
pub type DotFn = fn(&[u8], &[u8]) -> f32;
/// Dequantization of whole blocks into `dst.len()` floats.
pub type DequantFn = fn(&[u8], &mut [f32]);

/// The scalar reference dot of one weight row of type `t` with one activation row already in
/// `dot_type(t)`; both slices hold exactly one row. `None` when `t` has no kernel.
pub fn scalar_dot_fn(t: GgmlType) -> Option<DotFn> {
    Some(match t {
        GgmlType::F32 => float::dot_f32,
        GgmlType::F16 => float::dot_f16,
        GgmlType::BF16 => float::dot_bf16,
        GgmlType::Q4_0 => q4_0::dot,
        GgmlType::Q4_1 => q4_1::dot,
        GgmlType::Q5_0 => q5_0::dot,
        GgmlType::Q5_1 => q5_1::dot,
        GgmlType::Q8_0 => q8_0::dot,
        GgmlType::Q2_K => q2_k::dot,
        GgmlType::Q3_K => q3_k::dot,
        GgmlType::Q4_K => q4_k::dot,
        GgmlType::Q5_K => q5_k::dot,
        GgmlType::Q6_K => q6_k::dot,
        _ => return None,
    })
}

/// Dequantization of whole blocks for `t`, or `None` when unsupported.
pub fn dequantize_fn(t: GgmlType) -> Option<DequantFn> {
    Some(match t {
        GgmlType::F32 => float::dequantize_f32,
        GgmlType::F16 => float::dequantize_f16,
        GgmlType::BF16 => float::dequantize_bf16,
        GgmlType::Q4_0 => q4_0::dequantize,
        GgmlType::Q4_1 => q4_1::dequantize,
        GgmlType::Q5_0 => q5_0::dequantize,
        GgmlType::Q5_1 => q5_1::dequantize,
        GgmlType::Q8_0 => q8_0::dequantize,
        GgmlType::Q2_K => q2_k::dequantize,
        GgmlType::Q3_K => q3_k::dequantize,
        GgmlType::Q4_K => q4_k::dequantize,
        GgmlType::Q5_K => q5_k::dequantize,
        GgmlType::Q6_K => q6_k::dequantize,
        _ => return None,
    })
}
