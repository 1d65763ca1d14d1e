//! Blocks at the largest magnitudes a packed kernel meets: every quant of a block set to its
//! extreme, activations all ±1 (quantized to ±127) — the largest integer sums a block can have,
//! where the AVX2 tile's i16 bounds are tight. Shared by the unit tests (`packed/tests.rs`) and the
//! integration tests (`tests/packed_check`, which include this file by path).

use lse_gguf::GgmlType;

/// Sets every quant of the blocks of type `t` in `w` to its largest magnitude (scales untouched).
pub fn saturate_weights(t: GgmlType, w: &mut [u8]) {
    let (quants, top) = match t {
        GgmlType::Q4_0 => (2..18, 0xff),
        GgmlType::Q4_1 => (4..20, 0xff),
        GgmlType::Q5_0 => (2..22, 0xff),
        GgmlType::Q5_1 => (4..24, 0xff),
        GgmlType::Q8_0 => (2..34, 0x80),
        GgmlType::Q4_K => (16..144, 0xff),
        GgmlType::Q6_K => (0..192, 0xff),
        _ => panic!("{} has no packed kernel", t.name()),
    };
    for blk in w.chunks_exact_mut(t.type_size()) {
        blk[quants.clone()].fill(top);
    }
}

/// Activations of magnitude 1 with the signs of `x`.
pub fn saturate_acts(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = if *v < 0.0 { -1.0 } else { 1.0 };
    }
}
