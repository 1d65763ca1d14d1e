//! GgmlType facts, checked against the bits-per-weight figures ggml documents for each format.

use lse_gguf::GgmlType;

#[test]
fn ids_and_names() {
    let expect = [
        (GgmlType::F32, 0, "f32"),
        (GgmlType::F16, 1, "f16"),
        (GgmlType::Q4_0, 2, "q4_0"),
        (GgmlType::Q4_1, 3, "q4_1"),
        (GgmlType::Q5_0, 6, "q5_0"),
        (GgmlType::Q5_1, 7, "q5_1"),
        (GgmlType::Q8_0, 8, "q8_0"),
        (GgmlType::Q8_1, 9, "q8_1"),
        (GgmlType::Q2_K, 10, "q2_K"),
        (GgmlType::Q3_K, 11, "q3_K"),
        (GgmlType::Q4_K, 12, "q4_K"),
        (GgmlType::Q5_K, 13, "q5_K"),
        (GgmlType::Q6_K, 14, "q6_K"),
        (GgmlType::Q8_K, 15, "q8_K"),
        (GgmlType::BF16, 30, "bf16"),
        (GgmlType::MXFP4, 39, "mxfp4"),
        (GgmlType::NVFP4, 40, "nvfp4"),
        (GgmlType::Q1_0, 41, "q1_0"),
        (GgmlType::Q2_0, 42, "q2_0"),
    ];
    for (t, id, name) in expect {
        assert_eq!(t.id(), id);
        assert_eq!(t.name(), name);
        assert_eq!(GgmlType::from_id(id), Some(t));
        assert_eq!(t.to_string(), name);
    }
    for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43, 1000, u32::MAX] {
        assert_eq!(GgmlType::from_id(removed), None, "id {removed}");
    }
}

#[test]
fn block_layouts_match_bits_per_weight() {
    // (type, elements per block, bits per weight)
    let expect = [
        (GgmlType::F32, 1, 32.0),
        (GgmlType::F16, 1, 16.0),
        (GgmlType::BF16, 1, 16.0),
        (GgmlType::Q4_0, 32, 4.5),
        (GgmlType::Q4_1, 32, 5.0),
        (GgmlType::Q5_0, 32, 5.5),
        (GgmlType::Q5_1, 32, 6.0),
        (GgmlType::Q8_0, 32, 8.5),
        (GgmlType::Q8_1, 32, 9.0),
        (GgmlType::Q2_K, 256, 2.625),
        (GgmlType::Q3_K, 256, 3.4375),
        (GgmlType::Q4_K, 256, 4.5),
        (GgmlType::Q5_K, 256, 5.5),
        (GgmlType::Q6_K, 256, 6.5625),
        (GgmlType::Q8_K, 256, 9.125),
        (GgmlType::IQ2_XXS, 256, 2.0625),
        (GgmlType::IQ2_XS, 256, 2.3125),
        (GgmlType::IQ3_XXS, 256, 3.0625),
        (GgmlType::IQ4_NL, 32, 4.5),
        (GgmlType::IQ4_XS, 256, 4.25),
        (GgmlType::IQ3_S, 256, 3.4375),
        (GgmlType::IQ2_S, 256, 2.5625),
        (GgmlType::IQ1_S, 256, 1.5625),
        (GgmlType::IQ1_M, 256, 1.75),
        (GgmlType::TQ1_0, 256, 1.6875),
        (GgmlType::TQ2_0, 256, 2.0625),
        (GgmlType::MXFP4, 32, 4.25),
        (GgmlType::NVFP4, 64, 4.5),
        (GgmlType::Q1_0, 128, 1.125),
        (GgmlType::Q2_0, 64, 2.25),
    ];
    for (t, bs, bpw) in expect {
        assert_eq!(t.block_size(), bs, "{t}");
        assert_eq!((t.type_size() * 8) as f64 / bs as f64, bpw, "{t}");
    }
}

#[test]
fn row_bytes() {
    assert_eq!(GgmlType::F32.row_bytes(7), Some(28));
    assert_eq!(GgmlType::Q4_0.row_bytes(64), Some(36));
    assert_eq!(GgmlType::Q4_0.row_bytes(48), None);
    assert_eq!(GgmlType::Q4_K.row_bytes(512), Some(288));
    assert_eq!(GgmlType::Q6_K.row_bytes(0), Some(0));
    assert_eq!(GgmlType::Q6_K.row_bytes(255), None);
    assert_eq!(
        GgmlType::F32.row_bytes(usize::MAX / 2),
        None,
        "overflow is None"
    );
}

#[test]
fn every_type_has_a_distinct_id_and_name() {
    let all: Vec<_> = GgmlType::all().collect();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a.id(), b.id());
            assert_ne!(a.name(), b.name());
        }
    }
}
