//! Corrupt and hostile files: each is refused with one clear line, never a panic.

mod common;

use common::{f32_bytes, Raw, ALIGN};
use lse_gguf::{GgmlType, GgufFile, GgufWriter, Value};

/// Opens `bytes`, expecting an error whose message contains `phrase`.
#[track_caller]
fn refused(bytes: Vec<u8>, phrase: &str) -> String {
    match GgufFile::from_bytes(bytes) {
        Ok(_) => panic!("expected an error containing {phrase:?}, but the file opened"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(phrase), "{msg:?} lacks {phrase:?}");
            assert!(
                msg.starts_with("gguf: ") && !msg.contains('\n'),
                "not one line: {msg:?}"
            );
            msg
        }
    }
}

/// A small file with every value type and three tensors, laid out so it has no trailing
/// padding: any shorter prefix is missing something.
fn small_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", Value::String("llama".into()))
        .add_kv("u8", Value::U8(1))
        .add_kv("i8", Value::I8(-1))
        .add_kv("u16", Value::U16(2))
        .add_kv("i16", Value::I16(-2))
        .add_kv("u32", Value::U32(3))
        .add_kv("i32", Value::I32(-3))
        .add_kv("u64", Value::U64(4))
        .add_kv("i64", Value::I64(-4))
        .add_kv("f32", Value::F32(0.5))
        .add_kv("f64", Value::F64(0.25))
        .add_kv("bool", Value::Bool(true))
        .add_kv(
            "arr",
            Value::Array(vec![
                Value::Array(vec![Value::String("ab".into())]),
                Value::Array(vec![]),
            ]),
        )
        .add_tensor("t0", &[8], GgmlType::F32, f32_bytes(&[1.0; 8]))
        .add_tensor("t1", &[32, 2], GgmlType::Q8_0, vec![3u8; 68])
        .add_tensor("t2", &[16], GgmlType::F16, vec![5u8; 32]);
    let bytes = w.to_bytes().unwrap();
    assert_eq!(bytes.len() % ALIGN, 0);
    bytes
}

#[test]
fn every_prefix_of_a_small_file_is_refused() {
    let full = small_file();
    GgufFile::from_bytes(full.clone()).unwrap();
    for len in 0..full.len() {
        let err = GgufFile::from_bytes(full[..len].to_vec()).err();
        let err = err.unwrap_or_else(|| panic!("prefix of {len} bytes opened"));
        let msg = err.to_string();
        assert!(msg.starts_with("gguf: truncated"), "prefix {len}: {msg}");
    }
}

#[test]
fn sampled_prefixes_of_a_synthetic_model_are_refused() {
    let full = std::fs::read(lse_testdata::golden("synthetic/llama-tiny-q4_0.gguf")).unwrap();
    let lens = (0..600)
        .chain((600..full.len()).step_by(7919))
        .chain([full.len() - 1]);
    for len in lens {
        let err = GgufFile::from_bytes(full[..len].to_vec()).err();
        let msg = err
            .unwrap_or_else(|| panic!("prefix of {len} bytes opened"))
            .to_string();
        assert!(msg.starts_with("gguf: truncated"), "prefix {len}: {msg}");
    }
}

#[test]
fn truncation_message_names_the_part_and_sizes() {
    let full = small_file();
    let data_end = full.len();
    let msg = refused(
        full[..data_end - 1].to_vec(),
        "truncated file: data of tensor 't2' needs 32 bytes",
    );
    assert!(
        msg.ends_with(&format!("but the file has {}", data_end - 1)),
        "{msg}"
    );
    refused(
        full[..10].to_vec(),
        "truncated file: tensor count needs 8 bytes at offset 8 but the file has 10",
    );
}

/// Flipping bytes all over the header and tables must never panic.
#[test]
fn random_byte_corruption_never_panics() {
    let full = small_file();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let mut b = full.clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % b.len() as u64) as usize;
            b[at] = match next() % 3 {
                0 => next() as u8,
                1 => 0xff,
                _ => 0,
            };
        }
        if let Err(e) = GgufFile::from_bytes(b) {
            assert!(e.to_string().starts_with("gguf: "));
        }
    }
}

#[test]
fn bad_magic() {
    let mut b = small_file();
    b[..4].copy_from_slice(b"GGML");
    refused(b, "not a GGUF file");
    refused(b"PK\x03\x04 this is a zip".to_vec(), "not a GGUF file");
}

#[test]
fn unsupported_versions() {
    for v in [0u32, 1, 4, 99, 0x0300_0000] {
        let mut b = small_file();
        b[4..8].copy_from_slice(&v.to_le_bytes());
        refused(b, &format!("unsupported GGUF version {v}"));
    }
}

#[test]
fn huge_tensor_and_kv_counts() {
    for count in [u64::MAX, 1 << 40, 1_000_000] {
        let mut b = small_file();
        b[8..16].copy_from_slice(&count.to_le_bytes());
        refused(
            b,
            &format!("truncated or corrupt file: tensor count {count} at offset 8 needs at least"),
        );
        let mut b = small_file();
        b[16..24].copy_from_slice(&count.to_le_bytes());
        refused(
            b,
            &format!("metadata key/value count {count} at offset 16 needs at least"),
        );
    }
}

#[test]
fn huge_string_lengths() {
    let mut r = Raw::header(3, 0, 1);
    r.u64(u64::MAX).zeros(64);
    refused(r.bytes(), "truncated file: metadata key #0");

    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(8).u64(1 << 62).zeros(64);
    refused(r.bytes(), "truncated file: value of metadata key 'k'");

    let mut r = Raw::header(3, 1, 0);
    r.u64(u64::MAX - 3).zeros(64);
    refused(r.bytes(), "truncated file: name of tensor #0");
}

#[test]
fn huge_array_lengths() {
    for (elem_ty, n) in [
        (4u32, u64::MAX),
        (8, 1 << 61),
        (0, 1 << 40),
        (9, u64::MAX / 12 + 1),
    ] {
        let mut r = Raw::header(3, 0, 1);
        r.str("arr").u32(9).u32(elem_ty).u64(n).zeros(100);
        refused(
            r.bytes(),
            &format!("array element of metadata key 'arr' count {n} at offset 43 needs at least"),
        );
    }
    // A count that fits the file as bytes but whose strings run out.
    let mut r = Raw::header(3, 0, 1);
    r.str("arr").u32(9).u32(8).u64(2).str("a").u64(100);
    refused(
        r.bytes(),
        "truncated file: value of metadata key 'arr' (100-byte string) needs 100 bytes",
    );
}

#[test]
fn deeply_nested_arrays() {
    let mut r = Raw::header(3, 0, 1);
    r.str("deep").u32(9);
    for _ in 0..100 {
        r.u32(9).u64(1);
    }
    r.u32(0).u64(0);
    refused(
        r.bytes(),
        "metadata key 'deep': arrays nested deeper than 8 levels",
    );
}

#[test]
fn unknown_value_types() {
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(13).u64(0);
    refused(r.bytes(), "metadata key 'k' has unknown value type id 13");
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(9).u32(77).u64(1).u64(0);
    refused(r.bytes(), "metadata key 'k' has unknown value type id 77");
}

#[test]
fn bool_must_be_zero_or_one() {
    let mut r = Raw::header(3, 0, 1);
    r.str("b").u32(7).u8(2);
    refused(r.bytes(), "bool value is 2");
}

#[test]
fn duplicate_keys_and_tensor_names() {
    let mut w = GgufWriter::new();
    w.add_kv("a", Value::U8(1)).add_kv("a", Value::U8(2));
    refused(w.to_bytes().unwrap(), "duplicate metadata key 'a'");
    let mut w = GgufWriter::new();
    w.add_tensor("w", &[1], GgmlType::F32, vec![0; 4])
        .add_tensor("w", &[1], GgmlType::F32, vec![0; 4]);
    refused(w.to_bytes().unwrap(), "duplicate tensor name 'w'");
}

#[test]
fn bad_alignment_values() {
    for (ty, value, phrase) in [
        (4u32, 0u64, "alignment 0 is not a nonzero power of two"),
        (4, 48, "alignment 48 is not a nonzero power of two"),
        (
            10,
            1 << 63,
            "truncated file: padding before the data section",
        ),
    ] {
        let mut r = Raw::header(3, 1, 1);
        r.str("general.alignment").u32(ty);
        if ty == 4 {
            r.u32(value as u32);
        } else {
            r.u64(value);
        }
        r.tensor("w", &[1], 0, 0).zeros(64);
        refused(r.bytes(), phrase);
    }
    let mut r = Raw::header(3, 0, 1);
    r.str("general.alignment").u32(8).str("32");
    refused(
        r.bytes(),
        "general.alignment': expected an unsigned integer, found string",
    );
}

/// One F32 tensor of `dims` at `offset`, followed by `data_len` bytes of data.
fn one_tensor(dims: &[u64], type_id: u32, offset: u64, data_len: usize) -> Vec<u8> {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", dims, type_id, offset)
        .pad(ALIGN)
        .zeros(data_len);
    r.bytes()
}

#[test]
fn a_valid_hand_built_tensor_opens() {
    let f = GgufFile::from_bytes(one_tensor(&[4, 2], 0, 0, 32)).unwrap();
    assert_eq!(f.tensors()[0].n_bytes, 32);
    assert_eq!(f.tensor_data(&f.tensors()[0]).len(), 32);
}

#[test]
fn huge_dims_and_overflowing_products() {
    refused(
        one_tensor(&[u64::MAX], 0, 0, 64),
        "dimension 0 is 18446744073709551615, larger than ggml's int64 limit",
    );
    refused(
        one_tensor(&[1 << 32, 1 << 32], 0, 0, 64),
        "element count of dims [4294967296, 4294967296] overflows",
    );
    refused(one_tensor(&[1 << 62, 4, 1, 1], 0, 0, 64), "overflows");
    refused(
        one_tensor(&[1 << 62], 0, 0, 64),
        "byte size of dims [4611686018427387904] as f32 overflows",
    );
    // Representable but far larger than the file.
    refused(
        one_tensor(&[1 << 20, 1 << 20], 0, 0, 64),
        "truncated file: data of tensor 'w' needs 4398046511104 bytes",
    );
}

#[test]
fn offsets_past_the_end_or_misaligned() {
    refused(
        one_tensor(&[8], 0, 1 << 20, 64),
        "truncated file: data of tensor 'w' needs 32 bytes at offset 1048640",
    );
    refused(
        one_tensor(&[8], 0, 32, 32),
        "truncated file: data of tensor 'w'",
    );
    refused(
        one_tensor(&[8], 0, u64::MAX - 31, 64),
        "offset 18446744073709551584 overflows",
    );
    refused(
        one_tensor(&[8], 0, 4, 64),
        "offset 4 is not a multiple of the alignment 32",
    );
}

#[test]
fn unknown_tensor_types() {
    for id in [4u32, 31, 43, 1000, u32::MAX] {
        refused(
            one_tensor(&[8], id, 0, 64),
            &format!("tensor 'w' has unknown type id {id}"),
        );
    }
}

#[test]
fn too_many_dims() {
    refused(
        one_tensor(&[1, 1, 1, 1, 1], 0, 0, 64),
        "n_dims 5 exceeds the maximum of 4",
    );
    let mut r = Raw::header(3, 1, 0);
    r.str("w").u32(u32::MAX).zeros(64);
    refused(r.bytes(), "n_dims 4294967295 exceeds");
}

#[test]
fn rows_must_be_whole_blocks() {
    refused(
        one_tensor(&[33, 2], 2, 0, 128),
        "row length 33 is not a multiple of the q4_0 block size 32",
    );
    refused(
        one_tensor(&[128], 12, 0, 256),
        "row length 128 is not a multiple of the q4_K block size 256",
    );
}

#[test]
fn missing_data_section_padding() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor("w", &[0], 0, 0);
    let len = r.0.len();
    assert_ne!(len % ALIGN, 0);
    refused(r.bytes(), "truncated file: padding before the data section");
}
