//! Tables shared by the i-quants and the 4-bit lookup formats: the sign patterns, the
//! non-linear 4-bit codebooks, and the byte access to the grids of [`super::iq_grids`].

/// The byte of 8 signs for a 7-bit sign index: bit 7 is the parity of the other seven, so
/// every pattern flips an even number of the 8 values (ggml's `ksigns_iq2xs`).
#[inline(always)]
pub fn ksigns(i: u32) -> u8 {
    let i = (i & 127) as u8;
    i | (((i.count_ones() & 1) as u8) << 7)
}

/// [`ksigns`] of every index, for lookups in the SIMD kernels.
pub static KSIGNS: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = i as u8 | (((i as u32).count_ones() as u8 & 1) << 7);
        i += 1;
    }
    t
};

/// [`ksigns`] of every index spread to bytes: 0xFF for each negated element, else 0.
pub static KSIGNS_MASK: [u64; 128] = {
    let mut t = [0u64; 128];
    let mut i = 0;
    while i < 128 {
        let s = KSIGNS[i];
        let mut j = 0;
        while j < 8 {
            if s >> j & 1 != 0 {
                t[i] |= 0xff << (8 * j);
            }
            j += 1;
        }
        i += 1;
    }
    t
};

/// ±1 for element `j` (0..8) of a sign byte: −1 where bit j is set.
#[inline(always)]
pub fn sign(signs: u8, j: usize) -> i32 {
    if signs >> j & 1 != 0 {
        -1
    } else {
        1
    }
}

/// The same as an f32 factor.
#[inline(always)]
pub fn sign_f(signs: u8, j: usize) -> f32 {
    if signs >> j & 1 != 0 {
        -1.0
    } else {
        1.0
    }
}

/// Byte `j` of a grid word.
#[inline(always)]
pub fn gbyte64(g: u64, j: usize) -> u8 {
    (g >> (8 * j)) as u8
}

#[inline(always)]
pub fn gbyte32(g: u32, j: usize) -> u8 {
    (g >> (8 * j)) as u8
}

/// IQ4_NL / IQ4_XS codebook (ggml's `kvalues_iq4nl`).
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// MXFP4 / NVFP4 codebook: the E2M1 values doubled (ggml's `kvalues_mxfp4`).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// The offset ±1/8 that IQ1_S / IQ1_M add to every grid value (`IQ1S_DELTA`, `IQ1M_DELTA`).
pub const IQ1_DELTA: f32 = 0.125;

/// The scalar dot shape the 256-element grid formats share (ggml generic order): per block an
/// exact integer sum `bsum(weight block, activation quants)`, `sumf += (dw·dx)·bsum` with dw
/// the f16 at byte 0, and `factor·sumf` at the end.
#[inline(always)]
pub fn dot_bsum(
    w: &[u8],
    x: &[u8],
    block_bytes: usize,
    factor: f32,
    bsum: impl Fn(&[u8], &[u8]) -> i32,
) -> f32 {
    use super::q8_k;
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(block_bytes).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let d = crate::fp::rd_f16(wb, 0) * q8_k::d(xb);
        sumf += d * bsum(wb, &xb[q8_k::QS..q8_k::QS + 256]) as f32;
    }
    factor * sumf
}

/// Decodes the 256-element blocks of an IQ2_XS-like format: `code(block, ib, l)` gives the
/// grid point and sign byte of the 8 elements `32·ib + 8·l ..`, `scale(block, ib, h)` the 4-bit
/// scale s of half h of sub-block ib; value = d·(0.5 + s)·0.25·grid·sign.
#[inline(always)]
pub fn dequantize_iq2(
    src: &[u8],
    dst: &mut [f32],
    block_bytes: usize,
    code: impl Fn(&[u8], usize, usize) -> (u64, u8),
    scale: impl Fn(&[u8], usize, usize) -> u32,
) {
    for (b, y) in src.chunks_exact(block_bytes).zip(dst.chunks_exact_mut(256)) {
        let d = crate::fp::rd_f16(b, 0);
        for ib in 0..8 {
            for l in 0..4 {
                let db = d * (0.5 + scale(b, ib, l / 2) as f32) * 0.25;
                let (grid, signs) = code(b, ib, l);
                for j in 0..8 {
                    y[32 * ib + 8 * l + j] = db * gbyte64(grid, j) as f32 * sign_f(signs, j);
                }
            }
        }
    }
}

/// The block sum of an IQ2_XS-like format (see [`dequantize_iq2`]): Σ over the 16 halves of
/// (2s + 1)·Σ grid·sign·q.
#[inline(always)]
pub fn bsum_iq2(
    b: &[u8],
    xq: &[u8],
    code: impl Fn(&[u8], usize, usize) -> (u64, u8),
    scale: impl Fn(&[u8], usize, usize) -> u32,
) -> i32 {
    let mut bsum = 0i32;
    for ib in 0..8 {
        for h in 0..2 {
            let mut sumi = 0i32;
            for l in 2 * h..2 * h + 2 {
                let (grid, signs) = code(b, ib, l);
                for j in 0..8 {
                    let q = xq[32 * ib + 8 * l + j] as i8 as i32;
                    sumi += gbyte64(grid, j) as i32 * q * sign(signs, j);
                }
            }
            bsum += sumi * (2 * scale(b, ib, h) as i32 + 1);
        }
    }
    bsum
}

#[cfg(test)]
mod tests {
    #[test]
    fn ksigns_have_even_parity() {
        // ggml's table starts 0x00 0x81 0x82 0x03 0x84 0x05 0x06 0x87 and ends 0x7e 0xff
        let head = [0x00, 0x81, 0x82, 0x03, 0x84, 0x05, 0x06, 0x87];
        for (i, &v) in head.iter().enumerate() {
            assert_eq!(super::ksigns(i as u32), v);
        }
        assert_eq!(super::ksigns(126), 0x7e);
        assert_eq!(super::ksigns(127), 0xff);
        for i in 0..128 {
            assert_eq!(super::ksigns(i).count_ones() % 2, 0);
            assert_eq!(super::KSIGNS[i as usize], super::ksigns(i));
        }
    }
}
