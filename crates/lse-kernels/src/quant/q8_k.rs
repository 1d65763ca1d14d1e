//! Q8_K: blocks of 256 values, `d: f32`, 256 × `i8`, 16 × `i16` sums of each 16 quants.
//! Activation format for all k-quants (never a weight type in GGUF files).

use crate::fp::{rd_f32, round_even_i32};

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 292;
/// Byte offset of the quants in a block.
pub const QS: usize = 4;
/// Byte offset of the 16 group sums in a block.
pub const BSUMS: usize = 260;

/// Quantizes one activation row like ggml's `quantize_row_q8_K_ref` (used by the x86 build):
/// the signed value of largest magnitude `max` gives `iscale = -127/max`, quants are
/// `min(127, round_ties_even(iscale·x))`, `d = 1/iscale`; an all-zero block gets d = 0.
pub fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(QK).zip(dst.chunks_exact_mut(BLOCK_BYTES)) {
        let mut amax = 0.0f32;
        let mut max = 0.0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            b.fill(0);
            continue;
        }
        let iscale = -127.0 / max;
        for j in 0..QK {
            let q = round_even_i32(iscale * xb[j]).min(127);
            b[QS + j] = q as i8 as u8;
        }
        for g in 0..QK / 16 {
            let s: i32 = (0..16).map(|i| b[QS + g * 16 + i] as i8 as i32).sum();
            b[BSUMS + 2 * g..BSUMS + 2 * g + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        b[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

#[inline(always)]
pub fn d(b: &[u8]) -> f32 {
    rd_f32(b, 0)
}

#[inline(always)]
pub fn q(b: &[u8], j: usize) -> i32 {
    b[QS + j] as i8 as i32
}

#[inline(always)]
pub fn bsum(b: &[u8], g: usize) -> i32 {
    i16::from_le_bytes([b[BSUMS + 2 * g], b[BSUMS + 2 * g + 1]]) as i32
}
