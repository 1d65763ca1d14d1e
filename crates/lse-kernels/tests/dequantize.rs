//! dequantize_row against gguf-py's numpy decoding (fixtures made by tests/fixtures/gen_fixtures.py)
//! and against the original f32 weights of the synthetic Q8_0/Q4_0 models.

mod common;

use common::*;
use lse_gguf::GgufFile;
use lse_kernels::{dequantize_row, GgmlType};

/// Both decoders compute the same f32 expressions (scale products, then one multiply and at
/// most one subtraction), so they may differ only by the rounding of a fused/reordered product:
/// tolerance 2 ulp of the value's magnitude scale.
#[test]
fn dequantize_matches_gguf_py() {
    for t in types() {
        let name = t.name().to_lowercase();
        let raw = read_bytes(&format!("deq_{name}.bin"));
        let want = read_f32(&format!("deq_{name}.f32"));
        let mut got = vec![0f32; want.len()];
        dequantize_row(t, &raw, &mut got);
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut worst = 0f32;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let tol = 2.0 * f32::EPSILON * w.abs().max(scale * 1e-3);
            assert!((g - w).abs() <= tol, "{name}[{i}]: got {g}, gguf-py {w}");
            worst = worst.max((g - w).abs());
        }
        println!("{name:5}: {} elements, max |diff| {worst:e}", want.len());
    }
}

/// The synthetic Q8_0 / Q4_0 models hold exactly llama-tiny's f32 matrices quantized by gguf-py:
/// every decoded element must lie within the quantization error of the f32 original
/// (Q8_0: round to nearest on the unrounded scale, |err| <= d/2 + 127·d·2^-11 for the f16
/// rounding of d; Q4_0: truncation of x/d + 8.5 with the top code clipped, |err| <= |d| +
/// 8·|d|·2^-11).
#[test]
fn synthetic_model_rows_match_f32_weights() {
    let f32_path = lse_testdata::golden("synthetic/llama-tiny.gguf");
    if !f32_path.exists() {
        eprintln!("skipping: {} missing", f32_path.display());
        return;
    }
    let base = GgufFile::open(&f32_path).expect("open f32 model");
    for (file, t) in [
        ("llama-tiny-q8_0.gguf", GgmlType::Q8_0),
        ("llama-tiny-q4_0.gguf", GgmlType::Q4_0),
    ] {
        let q = GgufFile::open(&lse_testdata::golden(&format!("synthetic/{file}")))
            .expect("open quantized model");
        let mut checked = 0usize;
        for name in [
            "blk.0.attn_q.weight",
            "blk.1.ffn_down.weight",
            "blk.3.ffn_gate.weight",
            "token_embd.weight",
        ] {
            let qt = q
                .tensor(name)
                .unwrap_or_else(|| panic!("{file}: no {name}"));
            assert_eq!(qt.ggml_type, t);
            let bt = base.tensor(name).expect("tensor in f32 model");
            let k = qt.dims[0] as usize;
            let rows = (qt.n_elements() as usize / k).min(300);
            let qdata = q.tensor_data(qt);
            let bdata = base.tensor_data(bt);
            let rb = t.row_bytes(k).unwrap();
            let mut orig = vec![0f32; k];
            let mut got = vec![0f32; k];
            for r in 0..rows {
                dequantize_row(t, &qdata[r * rb..(r + 1) * rb], &mut got);
                dequantize_row(
                    bt.ggml_type,
                    &bdata[r * bt.ggml_type.row_bytes(k).unwrap()..],
                    &mut orig,
                );
                for blk in 0..k / 32 {
                    let d = half::f16::from_bits(u16::from_le_bytes([
                        qdata[r * rb + blk * t.type_size()],
                        qdata[r * rb + blk * t.type_size() + 1],
                    ]))
                    .to_f32()
                    .abs();
                    let bound = if t == GgmlType::Q8_0 {
                        d * (0.5 + 127.0 / 2048.0)
                    } else {
                        d * (1.0 + 8.0 / 2048.0)
                    } * (1.0 + 1e-5)
                        + 1e-7;
                    for i in blk * 32..blk * 32 + 32 {
                        assert!(
                            (got[i] - orig[i]).abs() <= bound,
                            "{file} {name} row {r} [{i}]: {} vs f32 {} (d {d})",
                            got[i],
                            orig[i]
                        );
                    }
                }
                checked += k;
            }
        }
        println!("{file}: {checked} elements within the quantization bound");
    }
}
