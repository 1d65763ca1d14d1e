//! Split models: shards written with llama.cpp's naming and keys are joined into one tensor index.

use std::path::{Path, PathBuf};

use lse_gguf::{GgmlType, GgufError, GgufSplit, GgufWriter, Value};


/// Writes `count` shards with tensors named `t<shard>_<i>`, two per shard.
fn write_shards(dir: &Path, count: u16, tensors_count: i32, skip: Option<u16>) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for no in 0..count {
        let path = dir.join(format!("m-{:05}-of-{:05}.gguf", no + 1, count));
        paths.push(path.clone());
        if Some(no) == skip {
            continue;
        }
        let mut w = GgufWriter::new();
        if no == 0 {
            w.add_kv("general.architecture", Value::String("llama".into()));
        }
        w.add_kv("split.no", Value::U16(no))
            .add_kv("split.count", Value::U16(count))
            .add_kv("split.tensors.count", Value::I32(tensors_count));
        for i in 0..2u8 {
            w.add_tensor(
                format!("t{no}_{i}"),
                &[4],
                GgmlType::F32,
                vec![no as u8 * 10 + i; 16],
            );
        }
        w.write(&path).unwrap();
    }
    paths
}

#[test]
fn shards_join_from_any_shard() {
    let dir = lse_testdata::tmp("gguf", "split-ok");
    let paths = write_shards(&dir, 3, 6, None);
    for p in &paths {
        let s = GgufSplit::open(p).unwrap();
        assert_eq!(s.files().len(), 3);
        assert_eq!(s.first().architecture(), Some("llama"));
        assert_eq!(s.n_tensors(), 6);
        assert_eq!(s.tensor_data("t2_1"), Some(&[21u8; 16][..]));
        assert_eq!(s.tensor("t1_0").unwrap().1.dims, [4]);
        let names: Vec<_> = s.tensors().map(|(_, t)| t.name.as_str()).collect();
        assert_eq!(names, ["t0_0", "t0_1", "t1_0", "t1_1", "t2_0", "t2_1"]);
    }
    let reversed: Vec<PathBuf> = paths.iter().rev().cloned().collect();
    assert_eq!(GgufSplit::open_shards(&reversed).unwrap().n_tensors(), 6);
}

#[test]
fn a_plain_file_is_a_one_shard_model() {
    let dir = lse_testdata::tmp("gguf", "split-one");
    let path = dir.join("plain.gguf");
    let mut w = GgufWriter::new();
    w.add_tensor("w", &[2], GgmlType::F32, vec![1u8; 8]);
    w.write(&path).unwrap();
    let s = GgufSplit::open(&path).unwrap();
    assert_eq!(s.files().len(), 1);
    assert_eq!(s.tensor_data("w"), Some(&[1u8; 8][..]));
    assert!(s.tensor("x").is_none());
}

#[test]
fn inconsistent_shards_are_refused() {
    let dir = lse_testdata::tmp("gguf", "split-missing");
    let paths = write_shards(&dir, 3, 6, Some(1));
    let err = GgufSplit::open(&paths[0]).err().unwrap().to_string();
    assert!(err.contains("shard 2 of 3 is missing"), "{err}");

    let dir = lse_testdata::tmp("gguf", "split-count");
    let paths = write_shards(&dir, 2, 5, None);
    let err = GgufSplit::open(&paths[0]).err().unwrap().to_string();
    assert!(
        err.contains("split.tensors.count is I32(5) but the shards hold 4 tensors"),
        "{err}"
    );

    let dir = lse_testdata::tmp("gguf", "split-dup");
    let paths = write_shards(&dir, 2, 4, None);
    let err = GgufSplit::open_shards(&[paths[0].clone(), paths[0].clone()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("expected shards 0..2 by split.no, found [0, 0]"),
        "{err}"
    );

    let err = GgufSplit::from_files(vec![]).err().unwrap();
    assert!(matches!(err, GgufError::Split(_)));
}
