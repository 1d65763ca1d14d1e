//! Test-only helpers: locate the repository's test data and the real models.
//!
//! Everything the tests read lives in this repository's `data/` folder (see `data/README.md`):
//! committed files (texts, llama.cpp's goldens, tokenizer suites) and files that are made on first
//! use and git-ignored: llama.cpp's vocabularies (fetched by package name, SHA-256 checked) and
//! the synthetic tiny models (rebuilt from their seeds, SHA-256 checked), both by
//! `scripts/get-testdata.sh`. `data(rel)` and `golden(rel)` run it once per process when a listed
//! file is missing, and panic when it fails: a test never skips for want of its data.
//!
//! `model(name)` returns a cached real model, fetching it with `scripts/get-models.sh` on first use.
//! When the fetch fails (no network) it returns `None` after printing why, and the test skips; CI sets
//! `LSE_REQUIRE_MODELS=1` so a missing model fails there instead.
//!
//! `tmp(suite, name)` gives a test a fresh folder that is removed when it is dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root exists")
}

/// The folders whose `SHA256SUMS` list files that are made, not committed.
const MADE: &[&str] =
    &["data/vocab", "data/vocab-extra", "data/golden/synthetic", "data/golden/synthetic-dense", "data/golden/synthetic-moe", "data/golden/synthetic-quant"];

/// Files listed in a `SHA256SUMS` that are not there yet.
fn missing_made_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in MADE {
        let dir = root.join(dir);
        let Ok(sums) = std::fs::read_to_string(dir.join("SHA256SUMS")) else { continue };
        for line in sums.lines() {
            if let Some(file) = line.split_whitespace().nth(1) {
                let path = dir.join(file.trim_start_matches('*'));
                if !path.exists() {
                    out.push(path);
                }
            }
        }
    }
    out
}

/// Makes the fetched and generated test files once per process (`scripts/get-testdata.sh`).
fn ensure_made() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let root = repo_root();
        if missing_made_files(&root).is_empty() {
            return;
        }
        let status = Command::new("bash").arg(root.join("scripts/get-testdata.sh")).status();
        let still = missing_made_files(&root);
        if !matches!(status, Ok(s) if s.success()) || !still.is_empty() {
            panic!(
                "test data unavailable: scripts/get-testdata.sh gave {status:?}; missing {:?} \
                 (it fetches llama.cpp's vocabularies by package name and needs python3 with numpy and gguf)",
                still
            );
        }
    });
}

/// A file or folder under the repository's `data/` (e.g. `wiki.test.raw`, `vocab/ggml-vocab-gpt-2.gguf`).
/// When it is in (or holds) a folder with made files, they are made first.
pub fn data(rel: &str) -> PathBuf {
    let path = Path::new("data").join(rel.trim_end_matches('/'));
    if MADE.iter().any(|d| path.starts_with(d) || Path::new(d).starts_with(&path)) {
        ensure_made();
    }
    repo_root().join(path)
}

/// A file or folder under `data/golden` (llama.cpp's reference outputs and the synthetic models),
/// e.g. `synthetic/llama-tiny.gguf`, `smollm2/tokens.json`.
pub fn golden(rel: &str) -> PathBuf {
    data(&format!("golden/{rel}"))
}

/// The former `../shared` layout, mapped into this repository: `golden/X` is `data/golden/X` and
/// `data/X` is `data/X` (kept so code written against the old paths still finds its files).
pub fn shared(rel: &str) -> PathBuf {
    match rel.strip_prefix("data/") {
        Some(rest) => data(rest),
        None => data(rel),
    }
}

/// The real models the project tests on: (short name, file name).
pub const MODELS: &[(&str, &str)] = &[
    ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma3", "gemma-3-270m-q4_k_m.gguf"),
    ("qwen25coder", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
];

/// Path of a cached real model, fetched on first use. `None` (with a printed reason) when it cannot
/// be had and `LSE_REQUIRE_MODELS` is unset; panics when it is set, so CI never skips silently.
pub fn model(name: &str) -> Option<PathBuf> {
    let file = MODELS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)?;
    let root = repo_root();
    let dir = std::env::var_os("LSE_MODELS_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("models"));
    let path = dir.join(file);
    if !path.exists() {
        let status = Command::new("bash").arg(root.join("scripts/get-models.sh")).arg(name).status();
        if !matches!(status, Ok(s) if s.success()) || !path.exists() {
            let why = format!("model {name} unavailable ({status:?}); skipping");
            if std::env::var_os("LSE_REQUIRE_MODELS").is_some() {
                panic!("{why} but LSE_REQUIRE_MODELS is set");
            }
            eprintln!("{why}");
            return None;
        }
    }
    Some(path)
}

/// A fresh folder for one test, removed when dropped.
pub struct Tmp(PathBuf);

impl std::ops::Deref for Tmp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `lse-{suite}-{pid}-{name}` in the temp folder, emptied.
pub fn tmp(suite: &str, name: &str) -> Tmp {
    let d = std::env::temp_dir().join(format!("lse-{suite}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_into_the_repository() {
        let root = repo_root();
        assert_eq!(data("wiki.test.raw"), root.join("data/wiki.test.raw"));
        assert_eq!(golden("synthetic/llama-tiny.gguf"), root.join("data/golden/synthetic/llama-tiny.gguf"));
        assert_eq!(shared("data/wiki.test.raw"), data("wiki.test.raw"));
        assert_eq!(shared("golden/smollm2/tokens.json"), golden("smollm2/tokens.json"));
        assert_eq!(golden(""), root.join("data/golden"));
        assert!(data("wiki.test.raw").exists());
        assert!(missing_made_files(&root).is_empty());
    }
}
