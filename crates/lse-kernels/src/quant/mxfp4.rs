//! MXFP4: blocks of 32, one E8M0 exponent byte `e` then 16 bytes of nibbles (element j < 16
//! the low nibble of byte j, j + 16 its high nibble), each an E2M1 value doubled
//! ([`KVALUES_MXFP4`]). value = 2^(e−128)·kvalue (the halving undoes the doubling).
//! Dot type: Q8_0.

use super::iq_common::KVALUES_MXFP4;
use super::q8_0;
use crate::fp::rd_f16;

pub const QK: usize = 32;
pub const BLOCK_BYTES: usize = 17;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::MXFP4,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::E8M0(0),
};

/// 2^(e−128) as f32, exact also for the subnormal results of e = 0 and 1 (ggml's
/// `ggml_e8m0_to_fp32_half`).
#[inline(always)]
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e as u32) - 1) << 23
    };
    f32::from_bits(bits)
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = e8m0_half(b[0]);
        for j in 0..16 {
            y[j] = KVALUES_MXFP4[(b[1 + j] & 15) as usize] as f32 * d;
            y[j + 16] = KVALUES_MXFP4[(b[1 + j] >> 4) as usize] as f32 * d;
        }
    }
}

/// Scalar dot with a Q8_0 row (ggml generic order: per block `(dy·d)·(Σlow + Σhigh)`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_0::BLOCK_BYTES)) {
        let d = rd_f16(xb, 0) * e8m0_half(wb[0]);
        let (mut s1, mut s2) = (0i32, 0i32);
        for j in 0..16 {
            s1 += (xb[2 + j] as i8 as i32) * KVALUES_MXFP4[(wb[1 + j] & 15) as usize] as i32;
            s2 += (xb[18 + j] as i8 as i32) * KVALUES_MXFP4[(wb[1 + j] >> 4) as usize] as i32;
        }
        sumf += d * (s1 + s2) as f32;
    }
    sumf
}
