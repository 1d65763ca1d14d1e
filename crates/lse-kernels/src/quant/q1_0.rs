//! Q1_0: blocks of 128, `d: f16` then 16 bytes of sign bits (bit j%8 of byte j/8 for element
//! j). value = +d where the bit is set, −d where not. Dot type: Q8_0 (four activation blocks
//! per Q1_0 block).

pub const QK: usize = 128;
pub const BLOCK_BYTES: usize = 18;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q1_0,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// +1 where the bit of element `j` is set, −1 where not.
#[inline(always)]
fn value(b: &[u8], j: usize) -> i32 {
    if b[2 + j / 8] >> (j % 8) & 1 != 0 {
        1
    } else {
        -1
    }
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    super::lowbit::dequantize(src, dst, BLOCK_BYTES, QK, value)
}

/// Scalar dot with a Q8_0 row (ggml generic order, see [`super::lowbit::dot`]).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    super::lowbit::dot(w, x, BLOCK_BYTES, QK, value)
}
