//! Every SIMD row kernel at every level this CPU has, against the scalar reference dot, on
//! random rows (1..=MR activation rows per call, odd strides).
//!
//! Error bound: the integer block sums are exact in both, so they differ only in the order and
//! grouping of the f32 operations on (scale × integer) terms. With T terms per row (blocks, or
//! k/8 lanes for float rows), each reordering costs at most ~T·ε relative to Σ|w_i·x_i|; we
//! allow 4·(T + 16)·ε·Σ|w_i·x_i| + 1e-30.

use super::*;
use crate::fp::{f16_to_f32, f32_to_f16, rd_f32};
use crate::quant::{self, DotType};
use lse_gguf::GgmlType;

/// Types whose SIMD kernels sum in the scalar order (exact integer (sub-)block sums, then the
/// scalar's f32 steps): their results must be bit-identical to the scalar dot.
const EXACT: &[GgmlType] = &[
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
];

fn types() -> Vec<GgmlType> {
    quant::FORMATS.iter().map(|f| f.ty).collect()
}

use crate::test_rng::Rng;

fn random_row(rng: &mut Rng, t: GgmlType, k: usize) -> Vec<u8> {
    let mut w = vec![0u8; t.row_bytes(k).unwrap()];
    match t {
        GgmlType::F32 => w
            .chunks_exact_mut(4)
            .for_each(|c| c.copy_from_slice(&rng.normal().to_le_bytes())),
        GgmlType::F16 => w
            .chunks_exact_mut(2)
            .for_each(|c| c.copy_from_slice(&f32_to_f16(rng.normal()).to_le_bytes())),
        GgmlType::BF16 => w.chunks_exact_mut(2).for_each(|c| {
            c.copy_from_slice(&((rng.normal().to_bits() >> 16) as u16).to_le_bytes())
        }),
        _ => {
            w.iter_mut().for_each(|b| *b = rng.next() as u8);
            let scales = &quant::format(t).unwrap().scales;
            for blk in w.chunks_exact_mut(t.type_size()) {
                scales.set_sane(blk, &mut || rng.unit());
            }
        }
    }
    w
}

fn decode_act(dt: DotType, b: &[u8], k: usize) -> Vec<f32> {
    let h = |o: usize| f16_to_f32(u16::from_le_bytes([b[o], b[o + 1]]));
    (0..k)
        .map(|i| match dt {
            DotType::F32 => rd_f32(b, 4 * i),
            DotType::F16 => h(2 * i),
            DotType::BF16 => {
                f32::from_bits((u16::from_le_bytes([b[2 * i], b[2 * i + 1]]) as u32) << 16)
            }
            DotType::Q8_0 => h(34 * (i / 32)) * (b[34 * (i / 32) + 2 + i % 32] as i8) as f32,
            DotType::Q8_1 => h(36 * (i / 32)) * (b[36 * (i / 32) + 4 + i % 32] as i8) as f32,
            DotType::Q8_K => {
                rd_f32(b, 292 * (i / 256)) * (b[292 * (i / 256) + 4 + i % 256] as i8) as f32
            }
        })
        .collect()
}

#[test]
fn simd_row_kernels_match_scalar() {
    let levels = available_levels();
    println!(
        "SIMD levels on this CPU: {:?} (Dialect::Simd uses {:?})",
        levels,
        level()
    );
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut checked = 0;
    for &lv in levels.iter().filter(|l| **l != Level::Scalar) {
        for t in types() {
            let Some(SimdKernel { kern, layout }) = row_kernel(lv, t) else {
                println!("{:?}: no kernel for {} (scalar fallback)", lv, t.name());
                continue;
            };
            let dt = quant::dot_type(t).unwrap();
            let scalar = quant::scalar_dot_fn(t).unwrap();
            let ks: Vec<usize> = if t.block_size() == 256 {
                vec![256, 1024, 2816]
            } else if t.block_size() > 1 {
                [32, 64, 96, 128, 224, 576, 640, 896, 2048]
                    .into_iter()
                    .filter(|k| k % t.block_size() == 0)
                    .collect()
            } else {
                vec![1, 7, 8, 23, 64, 200, 1000]
            };
            let mut worst = 0f64;
            for &k in &ks {
                let w = random_row(&mut rng, t, k);
                let mut wd = vec![0f32; k];
                quant::dequantize_fn(t).unwrap()(&w, &mut wd);
                let xrb = dt.row_bytes(k);
                let lrb = act_row_bytes(layout, dt, k);
                let xs = lrb + 3 * dt.block_bytes(); // stride larger than a row
                let mut xq = vec![0u8; MR * xrb]; // ggml layout, for the scalar oracle
                let mut xl = vec![0u8; MR * xs]; // the kernel's layout
                let mut xd = Vec::new();
                for j in 0..MR {
                    let scale = 0.05 + 5.0 * rng.unit();
                    let row: Vec<f32> = (0..k).map(|_| rng.normal() * scale).collect();
                    let g = &mut xq[j * xrb..(j + 1) * xrb];
                    quant::quantize_activation(dt, &row, g);
                    xd.push(decode_act(dt, g, k));
                    match layout {
                        ActLayout::Ggml => xl[j * xs..j * xs + xrb].copy_from_slice(g),
                        ActLayout::Split32 => {
                            ggml_to_split32(dt, g, k, &mut xl[j * xs..j * xs + lrb])
                        }
                    }
                }
                let terms = if dt.block_size() == 1 {
                    k / 8
                } else {
                    k / dt.block_size() * 8
                };
                for nx in 1..=MR {
                    let mut out = [f32::NAN; MR];
                    kern(k, &w, &xl, xs, nx, &mut out);
                    for j in 0..nx {
                        let want = scalar(&w, &xq[j * xrb..(j + 1) * xrb]) as f64;
                        let mag: f64 = wd
                            .iter()
                            .zip(&xd[j])
                            .map(|(a, b)| (*a as f64 * *b as f64).abs())
                            .sum();
                        let bound = 4.0 * (terms + 16) as f64 * f32::EPSILON as f64 * mag + 1e-30;
                        if EXACT.contains(&t) {
                            assert_eq!(out[j].to_bits(), (want as f32).to_bits(), "{lv:?} {} k={k} nx={nx} row {j}: simd {} scalar {want} (must be bit-identical)", t.name(), out[j]);
                        }
                        let err = (out[j] as f64 - want).abs();
                        assert!(err <= bound, "{lv:?} {} k={k} nx={nx} row {j}: simd {} scalar {want} (bound {bound:e})", t.name(), out[j]);
                        worst = worst.max(err / bound);
                        checked += 1;
                    }
                }
            }
            println!("{:?} {:5}: ok, worst err/bound {worst:.3}", lv, t.name());
        }
    }
    println!("{checked} dots checked");
}

/// Integer parts are exact: with activations whose every block scale is 1 (quants chosen so
/// that no rounding happens) and power-of-two weight scales, SIMD and scalar agree bit for bit.
#[test]
fn simd_integer_sums_exact() {
    let mut rng = Rng(99);
    for &lv in available_levels().iter().filter(|l| **l != Level::Scalar) {
        for t in types().into_iter().filter(|t| t.block_size() > 1) {
            let Some(SimdKernel { kern, layout }) = row_kernel(lv, t) else {
                continue;
            };
            let dt = quant::dot_type(t).unwrap();
            let k = 2 * dt.block_size().max(t.block_size());
            let mut w = random_row(&mut rng, t, k);
            let quant::ScaleFields::F16(offs) = quant::format(t).unwrap().scales else {
                continue; // power-of-two scales are only set up for plain f16 fields
            };
            for blk in w.chunks_exact_mut(t.type_size()) {
                for &o in offs {
                    blk[o..o + 2].copy_from_slice(&f32_to_f16(0.0625).to_le_bytes());
                }
            }
            // activations: integers in −127..=127 with ±127 present in every block, so the
            // quantizer's scale is exactly 1 and quants equal the inputs.
            let row: Vec<f32> = (0..k)
                .map(|i| {
                    if i % 32 == 0 {
                        127.0
                    } else {
                        ((rng.next() % 255) as i32 - 127) as f32
                    }
                })
                .collect();
            let mut xq = vec![0u8; dt.row_bytes(k)];
            quant::quantize_activation(dt, &row, &mut xq);
            let mut xl = vec![0u8; act_row_bytes(layout, dt, k)];
            quantize_activation(lv, layout, dt, &row, &mut xl);
            let mut out = [0f32; MR];
            kern(k, &w, &xl, xl.len(), 1, &mut out);
            let want = quant::scalar_dot_fn(t).unwrap()(&w, &xq);
            assert_eq!(out[0], want, "{lv:?} {}", t.name());
        }
    }
}

#[test]
fn simd_activation_quantization_is_byte_identical() {
    let mut rng = Rng(4242);
    for &lv in available_levels().iter() {
        for dt in [
            DotType::Q8_0,
            DotType::Q8_1,
            DotType::Q8_K,
            DotType::F16,
            DotType::BF16,
            DotType::F32,
        ] {
            for rep in 0..20 {
                // 35 blocks of 32: the vector quantizers' 8-block groups and a remainder
                let k = if matches!(dt, DotType::Q8_0 | DotType::Q8_1) && rep % 2 == 1 { 1120 } else { 1024 };
                let scale = 0.01 + 10.0 * rng.unit();
                let mut row: Vec<f32> = (0..k).map(|_| rng.normal() * scale).collect();
                if rep == 1 {
                    row[..256].fill(0.0); // zero blocks
                }
                if rep == 2 {
                    // equal magnitudes of both signs: the first one decides Q8_K's sign
                    row[300] = -50.0;
                    row[301] = 50.0;
                    row[600] = 50.0;
                    row[601] = -50.0;
                }
                if rep == 3 {
                    for (i, v) in row.iter_mut().enumerate() {
                        *v = (i % 7) as f32 - 3.0 + if i % 2 == 0 { 0.5 } else { 0.0 };
                        // ties
                    }
                }
                let mut a = vec![0u8; dt.row_bytes(k)];
                let mut b = vec![0u8; dt.row_bytes(k)];
                quant::quantize_activation(dt, &row, &mut a);
                quantize_activation(lv, ActLayout::Ggml, dt, &row, &mut b);
                assert!(a == b, "{lv:?} {dt:?} rep {rep}: vector quantizer differs");
                if matches!(dt, DotType::Q8_0 | DotType::Q8_1) {
                    let mut sa = vec![0u8; act_row_bytes(ActLayout::Split32, dt, k)];
                    let mut sb = sa.clone();
                    ggml_to_split32(dt, &a, k, &mut sa);
                    quantize_activation(lv, ActLayout::Split32, dt, &row, &mut sb);
                    assert!(
                        sa == sb,
                        "{lv:?} {dt:?} rep {rep}: Split32 quantizer differs"
                    );
                }
            }
        }
    }
}

/// The vector Q8_K writer into the packed tiles' Split32 layout gives the bytes the scalar path
/// makes (llama.cpp's Q8_K rows, then rewritten), with and without the 16-element sums.
#[test]
fn q8k_split32_is_byte_identical() {
    let pool = crate::pool::ThreadPool::new(1);
    let mut rng = Rng(777);
    let (k, m) = (1024, 5);
    let nb = k / 32;
    for sub16 in [false, true] {
        let xrb = k + 4 * nb + if sub16 { 8 * nb } else { 4 * nb };
        for rep in 0..8 {
            let scale = 0.01 + 10.0 * rng.unit();
            let mut x: Vec<f32> = (0..k * m).map(|_| rng.normal() * scale).collect();
            if rep == 1 {
                x[256..512].fill(0.0); // a zero super-block
            }
            if rep == 2 {
                // equal magnitudes of both signs: the first one decides the sign
                x[300] = -50.0;
                x[301] = 50.0;
            }
            if rep == 3 {
                // the same, the positive first and the two in different vectors of the block
                x[520] = 50.0;
                x[700] = -50.0;
            }
            if rep == 4 {
                x[768..1024].fill(-0.0); // a super-block of negative zeros
            }
            let mut want = vec![0u8; m * xrb];
            crate::matmul::quantize_rows_q8k_split(&pool, Level::Scalar, &x, k, m, &mut want, xrb, sub16);
            for &lv in available_levels().iter() {
                let mut got = vec![0xAAu8; m * xrb];
                crate::matmul::quantize_rows_q8k_split(&pool, lv, &x, k, m, &mut got, xrb, sub16);
                assert!(got == want, "{lv:?} sub16={sub16} rep {rep}: Split32 Q8_K rows differ");
            }
        }
    }
}
