//! The i-quant, ternary and FP4 decoders against gguf-py's numpy decoding (fixtures made by
//! tests/fixtures/make_iquant_fixtures.py; Q1_0/Q2_0 against that script's own numpy decoders).
//! Both sides compute the same f32 expressions in the same order, so the values must be
//! identical: max |diff| 0.

mod common;

use common::*;
use lse_kernels::{dequantize_row, GgmlType};

const NEW_TYPES: &[GgmlType] = &[
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
];

#[test]
fn dequantize_equals_gguf_py_exactly() {
    for &t in NEW_TYPES {
        assert!(lse_kernels::supports(t), "{t} not supported");
        let name = t.name();
        let raw = read_bytes(&format!("deq_{name}.bin"));
        let want = read_f32(&format!("deq_{name}.f32"));
        assert_eq!(raw.len(), t.row_bytes(want.len()).unwrap(), "{name}: fixture sizes");
        let mut got = vec![f32::NAN; want.len()];
        dequantize_row(t, &raw, &mut got);
        let mut worst = 0f32;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w, "{name}[{i}]: got {g:e}, gguf-py {w:e}");
            worst = worst.max((g - w).abs());
        }
        println!("{name:8}: {} values, max |diff| {worst:e}", want.len());
    }
}
