//! Writer -> reader round trips: every value type, nested arrays, tensors and alignment.

mod common;

use common::f32_bytes;
use lse_gguf::{GgmlType, GgufError, GgufFile, GgufWriter, Value};

fn every_scalar() -> Vec<(&'static str, Value)> {
    vec![
        ("t.u8", Value::U8(250)),
        ("t.i8", Value::I8(-120)),
        ("t.u16", Value::U16(65_000)),
        ("t.i16", Value::I16(-32_000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(i32::MIN)),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.f32", Value::F32(-1.5e-7)),
        ("t.f64", Value::F64(std::f64::consts::PI)),
        ("t.bool_true", Value::Bool(true)),
        ("t.bool_false", Value::Bool(false)),
        ("t.str", Value::String("héllo ▁world <0x0A>".into())),
        ("t.empty_str", Value::String(String::new())),
    ]
}

fn nested_arrays() -> Vec<(&'static str, Value)> {
    let s = |x: &str| Value::String(x.into());
    vec![
        ("a.u8", Value::Array(vec![Value::U8(0), Value::U8(255)])),
        ("a.i32", Value::Array((-3..3).map(Value::I32).collect())),
        (
            "a.f32",
            Value::Array(vec![
                Value::F32(0.25),
                Value::F32(-0.0),
                Value::F32(f32::INFINITY),
            ]),
        ),
        (
            "a.bool",
            Value::Array(vec![Value::Bool(true), Value::Bool(false)]),
        ),
        ("a.str", Value::Array(vec![s("a"), s(""), s("ccc")])),
        ("a.empty", Value::Array(vec![])),
        (
            "a.nested",
            Value::Array(vec![
                Value::Array(vec![s("x"), s("y")]),
                Value::Array(vec![]),
                Value::Array(vec![s("z")]),
            ]),
        ),
        (
            "a.nested3",
            Value::Array(vec![Value::Array(vec![Value::Array(vec![
                Value::U64(7),
                Value::U64(8),
            ])])]),
        ),
    ]
}

#[test]
fn every_value_type_round_trips_in_order() {
    let mut w = GgufWriter::new();
    let all: Vec<_> = every_scalar().into_iter().chain(nested_arrays()).collect();
    for (k, v) in &all {
        w.add_kv(*k, v.clone());
    }
    let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert!(f.tensors().is_empty());
    let got: Vec<_> = f
        .metadata()
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    assert_eq!(got, all);
    for (k, v) in &all {
        assert_eq!(f.get(k), Some(v));
    }
}

#[test]
fn getters_convert_as_documented() {
    let mut w = GgufWriter::new();
    for (k, v) in every_scalar().into_iter().chain(nested_arrays()) {
        w.add_kv(k, v);
    }
    w.add_kv("general.architecture", Value::String("llama".into()));
    let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.get_u64("t.u8"), Some(250));
    assert_eq!(f.get_u64("t.u64"), Some(u64::MAX));
    assert_eq!(f.get_u64("t.i8"), None, "negative ints are not u64");
    assert_eq!(f.get_i64("t.i64"), Some(i64::MIN));
    assert_eq!(f.get_i64("t.u64"), None, "u64::MAX does not fit i64");
    assert_eq!(f.get_f32("t.f32"), Some(-1.5e-7));
    assert_eq!(f.get_f32("t.u16"), Some(65_000.0));
    assert_eq!(f.get_f64("t.f64"), Some(std::f64::consts::PI));
    assert_eq!(f.get_bool("t.bool_true"), Some(true));
    assert_eq!(f.get_bool("t.u8"), None);
    assert_eq!(f.get_str("t.str"), Some("héllo ▁world <0x0A>"));
    assert_eq!(f.get_str("t.u8"), None);
    assert_eq!(f.get_array("a.str").map(|a| a.len()), Some(3));
    assert_eq!(
        f.get_array("a.nested").unwrap()[2].as_array().unwrap()[0].as_str(),
        Some("z")
    );
    assert_eq!(f.get("missing"), None);
    assert_eq!(f.get_u64("missing"), None);
}

/// Tensors of several types, with data that differs per tensor, read back byte for byte at
/// aligned offsets, for the default and a custom alignment.
#[test]
fn tensors_round_trip_with_alignment() {
    for alignment in [None, Some(1u32), Some(64), Some(4096)] {
        let mut w = GgufWriter::new();
        if let Some(a) = alignment {
            w.set_alignment(a);
        }
        let f32_data = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let q4: Vec<u8> = (0..18 * 4).map(|i| i as u8).collect(); // 2 rows of 64 q4_0 values
        let q6k: Vec<u8> = (0..210).map(|i| (i * 7) as u8).collect(); // one q6_K block
        let f16: Vec<u8> = vec![0x3c, 0x00, 0xc0, 0x00, 0x11, 0x22]; // 3 halves
        w.add_tensor("a.f32", &[3, 2], GgmlType::F32, f32_data.clone())
            .add_tensor("b.q4_0", &[64, 2], GgmlType::Q4_0, q4.clone())
            .add_tensor("c.q6_k", &[256], GgmlType::Q6_K, q6k.clone())
            .add_tensor("d.f16", &[3, 1, 1, 1], GgmlType::F16, f16.clone())
            .add_tensor("e.scalar", &[], GgmlType::F32, f32_bytes(&[9.0]));
        let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
        let a = u64::from(alignment.unwrap_or(32));
        assert_eq!(f.alignment(), a);
        assert_eq!(f.data_start() % a, 0);
        let expect: [(&str, &[u64], GgmlType, &[u8]); 5] = [
            ("a.f32", &[3, 2], GgmlType::F32, &f32_data),
            ("b.q4_0", &[64, 2], GgmlType::Q4_0, &q4),
            ("c.q6_k", &[256], GgmlType::Q6_K, &q6k),
            ("d.f16", &[3, 1, 1, 1], GgmlType::F16, &f16),
            ("e.scalar", &[], GgmlType::F32, &f32_bytes(&[9.0])),
        ];
        assert_eq!(f.tensors().len(), expect.len());
        for (t, (name, dims, ty, data)) in f.tensors().iter().zip(expect) {
            assert_eq!(t.name, name);
            assert_eq!(t.dims, dims);
            assert_eq!(t.ggml_type, ty);
            assert_eq!(t.n_bytes, data.len() as u64);
            assert_eq!(t.offset % a, 0, "{name} misaligned");
            assert_eq!(f.tensor_data(t), data, "{name} data");
            assert_eq!(f.tensor(name), Some(t));
            // The in-memory image keeps the file's alignment (up to 64 bytes).
            assert_eq!(
                f.tensor_data(t).as_ptr() as u64 % a.min(64),
                0,
                "{name} not aligned in memory"
            );
        }
        assert_eq!(f.tensor("absent"), None);
        assert_eq!(f.tensor("e.scalar").unwrap().n_elements(), 1);
        assert_eq!(f.tensor("b.q4_0").unwrap().n_elements(), 128);
    }
}

#[test]
fn open_maps_the_same_file_from_disk() {
    let mut w = GgufWriter::new();
    w.set_version(2)
        .add_kv("general.architecture", Value::String("qwen2".into()))
        .add_kv("v", Value::Array(vec![Value::String("tok".into()); 1000]))
        .add_tensor("w", &[32, 3], GgmlType::Q8_0, vec![7u8; 34 * 3]);
    let dir = std::env::temp_dir().join(format!("lse-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rt.gguf");
    w.write(&path).unwrap();
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.version(), 2);
    assert_eq!(f.architecture(), Some("qwen2"));
    assert_eq!(f.get_array("v").unwrap().len(), 1000);
    let t = f.tensor("w").unwrap();
    assert_eq!(f.tensor_data(t), &[7u8; 102][..]);
    assert_eq!(f.tensor_data(t).as_ptr() as usize % 32, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn open_reports_missing_files_and_empty_files() {
    let err = GgufFile::open(std::path::Path::new("/nonexistent/x.gguf")).unwrap_err();
    assert!(matches!(err, GgufError::Io { .. }));
    assert!(
        err.to_string().contains("cannot read /nonexistent/x.gguf"),
        "{err}"
    );

    let dir = std::env::temp_dir().join(format!("lse-gguf-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("empty.gguf");
    std::fs::write(&path, b"").unwrap();
    let err = GgufFile::open(&path).unwrap_err();
    assert!(
        err.to_string()
            .contains("truncated file: magic needs 4 bytes at offset 0 but the file has 0"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tensor_data_of_a_foreign_tensor_is_empty_not_a_panic() {
    let mut w = GgufWriter::new();
    w.add_tensor("big", &[1024], GgmlType::F32, vec![0u8; 4096]);
    let big = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    let small = GgufFile::from_bytes(GgufWriter::new().to_bytes().unwrap()).unwrap();
    assert!(small.tensor_data(&big.tensors()[0]).is_empty());
}

#[test]
fn writer_refuses_what_it_cannot_lay_out() {
    let mut w = GgufWriter::new();
    w.add_kv("mixed", Value::Array(vec![Value::U8(1), Value::I8(1)]));
    assert!(w
        .to_bytes()
        .unwrap_err()
        .to_string()
        .contains("mixes u8 and i8"));

    let mut w = GgufWriter::new();
    w.add_tensor("t", &[32], GgmlType::Q8_0, vec![0u8; 33]);
    assert!(w
        .to_bytes()
        .unwrap_err()
        .to_string()
        .contains("needs 34 bytes of data, got 33"));

    let mut w = GgufWriter::new();
    w.add_tensor("t", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0u8; 4]);
    assert!(w.to_bytes().is_err());

    let mut w = GgufWriter::new();
    w.set_alignment(3);
    assert!(w.to_bytes().is_err());
}

/// Layout facts the writer must follow for llama.cpp to accept its files: tensor offsets are
/// consecutive padded sizes, and the data section starts at the first aligned offset.
#[test]
fn writer_layout_matches_the_gguf_rules() {
    let mut w = GgufWriter::new();
    w.add_tensor("a", &[5], GgmlType::F32, vec![0u8; 20])
        .add_tensor("b", &[40], GgmlType::F32, vec![1u8; 160])
        .add_tensor("c", &[1], GgmlType::F32, vec![2u8; 4]);
    let bytes = w.to_bytes().unwrap();
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    let offsets: Vec<u64> = f.tensors().iter().map(|t| t.offset).collect();
    assert_eq!(offsets, [0, 32, 192]);
    // header 24 + three entries of (8 + 1 name + 4 + 8 dim + 4 + 8) = 33 bytes -> 123, padded to 128.
    assert_eq!(f.data_start(), 128);
    assert_eq!(bytes.len(), 128 + 192 + 32);
}

/// 262,144 token strings (Gemma 3's vocabulary size) must load quickly.
#[test]
fn large_string_array_loads_quickly() {
    let n = 262_144;
    let tokens: Vec<Value> = (0..n).map(|i| Value::String(format!("▁tok{i}"))).collect();
    let scores: Vec<Value> = (0..n).map(|i| Value::F32(-(i as f32))).collect();
    let mut w = GgufWriter::new();
    w.add_kv("tokenizer.ggml.tokens", Value::Array(tokens))
        .add_kv("tokenizer.ggml.scores", Value::Array(scores));
    let bytes = w.to_bytes().unwrap();
    // Timing is printed for information only (speed belongs in benchmarks).
    let mut took = std::time::Duration::MAX;
    let mut f = None;
    for _ in 0..3 {
        let copy = bytes.clone();
        let start = std::time::Instant::now();
        f = Some(GgufFile::from_bytes(copy).unwrap());
        took = took.min(start.elapsed());
    }
    let f = f.unwrap();
    eprintln!("262k-token metadata: {took:?}");
    let toks = f.get_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(toks.len(), n);
    assert_eq!(toks[123_456].as_str(), Some("▁tok123456"));
}
