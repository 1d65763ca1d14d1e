//! IQ1_M: super-blocks of 256 = 8 sub-blocks of 32 (each two halves of 16). Layout: 32 low
//! index bytes (4 per sub-block), 16 `qh` bytes (byte 2ib + l/2, nibble l%2: bits 0..3 are
//! index bits 8..11 of code l, bit 3 the sign of its offset δ = ±1/8), then four u16 scale
//! words: 3-bit scales (sub-block ib, half h at bits 6·(ib%2) + 3h of word ib/2) and, in the
//! top nibbles, the f16 super-block scale d (nibble i in word i). Codes address
//! [`IQ1S_GRID`]. value = d·(2s + 1)·(grid + δ). Dot type: Q8_K.

use super::iq_common::IQ1_DELTA;
use super::iq_grids::IQ1S_GRID;
use super::q8_k;
use crate::fp::{f16_to_f32, rd_u16};

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 56;
pub const QH: usize = 32;
pub const SCALES: usize = 48;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ1_M,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16Nibbles(SCALES),
};

/// The super-block scale d.
#[inline(always)]
pub fn d(b: &[u8]) -> f32 {
    let mut h = 0u16;
    for i in 0..4 {
        h |= (rd_u16(b, SCALES + 2 * i) >> 12) << (4 * i);
    }
    f16_to_f32(h)
}

/// The odd scale 2s + 1 of half `h` of sub-block `ib`.
#[inline(always)]
pub fn scale(b: &[u8], ib: usize, h: usize) -> i32 {
    let w = rd_u16(b, SCALES + 2 * (ib / 2));
    2 * ((w >> (6 * (ib % 2) + 3 * h)) & 7) as i32 + 1
}

/// (grid point, δ sign ±1) of code `l` (0..4) of sub-block `ib`.
#[inline(always)]
pub fn code(b: &[u8], ib: usize, l: usize) -> (u64, i32) {
    let nib = (b[QH + 2 * ib + l / 2] >> (4 * (l % 2))) & 15;
    let idx = b[4 * ib + l] as usize | (((nib & 7) as usize) << 8);
    (IQ1S_GRID[idx], if nib & 8 != 0 { -1 } else { 1 })
}

#[inline(always)]
fn gval(g: u64, j: usize) -> i32 {
    (g >> (8 * j)) as u8 as i8 as i32
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = d(b);
        for ib in 0..8 {
            for l in 0..4 {
                let dl = d * scale(b, ib, l / 2) as f32;
                let (g, s) = code(b, ib, l);
                let delta = if s < 0 { -IQ1_DELTA } else { IQ1_DELTA };
                for j in 0..8 {
                    y[32 * ib + 8 * l + j] = dl * (gval(g, j) as f32 + delta);
                }
            }
        }
    }
}

/// Scalar dot with a Q8_K row (ggml generic order: integer sums Σ ls·Σgrid·q and
/// Σ ls·(±1)·Σq per block, `sumf += d·dy·(sumi1 + δ·sumi2)`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for ib in 0..8 {
            let (mut s1, mut s2) = ([0i32; 2], [0i32; 2]);
            for l in 0..4 {
                let (g, delta) = code(wb, ib, l);
                let (mut lsum1, mut lsum2) = (0i32, 0i32);
                for j in 0..8 {
                    let q = q8_k::q(xb, 32 * ib + 8 * l + j);
                    lsum1 += q * gval(g, j);
                    lsum2 += q;
                }
                s1[l / 2] += lsum1;
                s2[l / 2] += lsum2 * delta;
            }
            let (ls1, ls2) = (scale(wb, ib, 0), scale(wb, ib, 1));
            sumi1 += s1[0] * ls1 + s1[1] * ls2;
            sumi2 += s2[0] * ls1 + s2[1] * ls2;
        }
        sumf += d(wb) * q8_k::d(xb) * (sumi1 as f32 + IQ1_DELTA * sumi2 as f32);
    }
    sumf
}
