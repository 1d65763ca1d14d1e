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
