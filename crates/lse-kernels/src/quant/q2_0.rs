//! Q2_0: blocks of 64, `d: f16` then 16 bytes of 2-bit codes (bits 2(j%4).. of byte j/4 for
//! element j). value = (q − 1)·d, q in 0..4. Dot type: Q8_0 (two activation blocks per Q2_0
//! block).

pub const QK: usize = 64;
pub const BLOCK_BYTES: usize = 18;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q2_0,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// q − 1 of element `j`.
#[inline(always)]
fn value(b: &[u8], j: usize) -> i32 {
    ((b[2 + j / 4] >> (2 * (j % 4))) & 3) as i32 - 1
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    super::lowbit::dequantize(src, dst, BLOCK_BYTES, QK, value)
}

/// Scalar dot with a Q8_0 row (ggml generic order, see [`super::lowbit::dot`]).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    super::lowbit::dot(w, x, BLOCK_BYTES, QK, value)
}
