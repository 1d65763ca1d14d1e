//! Activation quantization against numpy (fixtures from tests/fixtures/gen_fixtures.py, which
//! spell out llama.cpp's x86 quantizers independently), plus the f16/bf16 rounding rules.

mod common;

use common::*;
use lse_kernels::quant::{quantize_activation, DotType};

#[test]
fn q8_activations_match_numpy_bytes() {
    let x = read_f32("act_rows.f32");
    let k = 512;
    for (dt, name) in [
        (DotType::Q8_0, "q8_0"),
        (DotType::Q8_1, "q8_1"),
        (DotType::Q8_K, "q8_k"),
    ] {
        let want = read_bytes(&format!("act_{name}.bin"));
        let rb = dt.row_bytes(k);
        assert_eq!(want.len(), 3 * rb);
        for r in 0..3 {
            let mut got = vec![0u8; rb];
            quantize_activation(dt, &x[r * k..(r + 1) * k], &mut got);
            for (i, (g, w)) in got.iter().zip(&want[r * rb..(r + 1) * rb]).enumerate() {
                assert_eq!(
                    g,
                    w,
                    "{name} row {r} byte {i} (block {}, offset {})",
                    i / dt.block_bytes(),
                    i % dt.block_bytes()
                );
            }
        }
        println!("{name}: 3 rows x {k} byte-exact");
    }
}

#[test]
fn half_conversions_round_to_nearest_even() {
    use lse_kernels::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
    // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties to even -> 1.
    assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
    // 1 + 3·2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even) -> the even one.
    assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
    assert_eq!(f16_to_f32(0x3c01), 1.0 + 2f32.powi(-10));
    assert_eq!(f32_to_f16(65520.0), 0x7c00); // rounds to +inf
                                             // bf16 keeps the top 16 bits, ties to even.
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
    assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
    assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
    assert_eq!(bf16_to_f32(0x4049), 3.140625);
}

/// Property check on random rows: every Q8 quant reconstructs its input to within half a step.
#[test]
fn q8_reconstruction_within_half_step() {
    let mut rng = Rng::new(7);
    let k = 1024;
    let x = random_acts(&mut rng, 4, k);
    for dt in [DotType::Q8_0, DotType::Q8_1, DotType::Q8_K] {
        for r in 0..4 {
            let row = &x[r * k..(r + 1) * k];
            let mut b = vec![0u8; dt.row_bytes(k)];
            quantize_activation(dt, row, &mut b);
            let dec = decode_activation(dt, &b, k);
            for bl in 0..k / dt.block_size() {
                let span = bl * dt.block_size()..(bl + 1) * dt.block_size();
                let amax = row[span.clone()].iter().fold(0f32, |m, v| m.max(v.abs()));
                // step = amax/127, plus f16 rounding of the scale for Q8_0/Q8_1 (rel 2^-11 of 127 steps)
                let step = amax / 127.0;
                let bound = step * 0.5 + amax * 2f32.powi(-11) + 1e-6;
                for i in span {
                    assert!(
                        (dec[i] - row[i]).abs() <= bound,
                        "{dt:?} row {r} [{i}]: {} vs {}",
                        dec[i],
                        row[i]
                    );
                }
            }
        }
    }
}
