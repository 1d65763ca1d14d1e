//! A model split over two GGUF files (llama.cpp's gguf-split naming and keys) loads from its
//! folder or from any shard and computes what the single file does, bit for bit; a missing shard
//! is named.

use lse_engine::{Engine, EngineOptions};
use lse_gguf::{GgufFile, GgufWriter, Value};
use std::path::{Path, PathBuf};

fn opts() -> EngineOptions {
    EngineOptions { threads: 1, batch_size: 128, ubatch_size: 128, kv_len: Some(64), ..EngineOptions::default() }
}

/// llama-tiny as two shards in `dir`: the metadata and the first `first` tensors, then the rest
/// (gguf-split's `--no-tensor-first-split` is `first` 0).
fn write_split(src: &Path, dir: &Path, first: usize) -> Vec<PathBuf> {
    let f = GgufFile::open(src).unwrap();
    let tensors = f.tensors();
    let mut paths = Vec::new();
    for (no, part) in [&tensors[..first], &tensors[first..]].into_iter().enumerate() {
        let mut w = GgufWriter::new();
        if no == 0 {
            for (k, v) in f.metadata().iter().filter(|(k, _)| k != "general.alignment") {
                w.add_kv(k.clone(), v.clone());
            }
            w.add_kv("split.tensors.count", Value::I32(tensors.len() as i32));
        }
        w.add_kv("split.no", Value::U16(no as u16)).add_kv("split.count", Value::U16(2));
        for t in part {
            w.add_tensor(t.name.clone(), &t.dims, t.ggml_type, f.tensor_data(t).to_vec());
        }
        let path = dir.join(format!("tiny-{:05}-of-00002.gguf", no + 1));
        w.write(&path).unwrap();
        paths.push(path);
    }
    paths
}

fn logits(model: &Path) -> Vec<u32> {
    let e = Engine::load(model, opts()).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
    let ids = e.tokenizer().tokenize("The quick brown fox jumps over the lazy dog", true, false);
    let rows = e.prefill(&ids, &(0..ids.len()).collect::<Vec<_>>()).unwrap();
    e.head_logits(&rows).unwrap().iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_split_model_loads_from_its_folder_or_any_shard() {
    let src = lse_testdata::golden("synthetic/llama-tiny.gguf");
    let want = logits(&src);
    let bare = lse_testdata::tmp("engine", "split-model-bare-first");
    let paths = write_split(&src, &bare, 0);
    assert_eq!(logits(&paths[0]), want, "the first shard holding no tensor");
    let dir = lse_testdata::tmp("engine", "split-model");
    let paths = write_split(&src, &dir, 19);
    assert_eq!(logits(&dir), want, "from the folder");
    assert_eq!(logits(&paths[1]), want, "from the second shard");
    // a shard file's fingerprint hashes every shard
    assert_eq!(lse_engine::model_files(&paths[1]).unwrap(), paths);
    assert_eq!(lse_engine::model_files(&src).unwrap(), std::slice::from_ref(&src));
    std::fs::remove_file(&paths[1]).unwrap();
    let e = Engine::load(&dir, opts()).err().expect("loaded without its second shard").to_string();
    assert!(e.contains("shard 2 of 2 is missing"), "{e}");
}
