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
    lse_testdata::shared(&format!("data/vocab/{name}"))
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
/// if set (the value `repo` forces this repository's copies), else the extracted llama.cpp source beside the repository (`../llamacpp`, as the
/// project keeps it), else this repository's `data/vocab-extra` (unpacked from its `.xz` files
/// into the target folder). None when none of them has the files.
pub fn reference_vocab_dir() -> Option<std::path::PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = manifest.parent()?.parent()?.to_path_buf();
    let mut candidates = Vec::new();
    match std::env::var("LSE_VOCAB_DIR") {
        // "repo": only this repository's copies
        Ok(d) if d == "repo" => {}
        Ok(d) => candidates.push(std::path::PathBuf::from(d)),
        Err(_) => {}
    }
    if std::env::var("LSE_VOCAB_DIR").as_deref() != Ok("repo") {
        candidates.push(repo.join("../llamacpp/src/vendor/llama.cpp/models"));
        candidates.push(repo.join("../llamacpp/vendor/llama.cpp/models"));
        candidates.push(repo.join("../llamacpp/models"));
    }
    for c in candidates {
        if c.join("ggml-vocab-bert-bge.gguf").exists() {
            return Some(c);
        }
    }
    unpacked_extra(&repo.join("data/vocab-extra"))
}

/// Unpacks `data/vocab-extra/*.xz` (with the `xz` tool) next to the test binaries, once.
fn unpacked_extra(dir: &Path) -> Option<std::path::PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let out = std::env::temp_dir().join("lse-vocab-extra");
    std::fs::create_dir_all(&out).ok()?;
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name()?.to_str()?.to_string();
        if let Some(stem) = name.strip_suffix(".xz") {
            let target = out.join(stem);
            if !target.exists() {
                let tmp = out.join(format!("{stem}.{}.part", std::process::id()));
                let file = std::fs::File::create(&tmp).ok()?;
                let ok = std::process::Command::new("xz")
                    .args(["-dc"])
                    .arg(&p)
                    .stdout(file)
                    .status()
                    .ok()?
                    .success();
                if !ok {
                    return None;
                }
                std::fs::rename(&tmp, &target).ok()?;
            }
        } else {
            let target = out.join(&name);
            if !target.exists() {
                std::fs::copy(&p, &target).ok()?;
            }
        }
    }
    Some(out)
}
