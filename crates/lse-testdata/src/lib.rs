//! Test-only helpers: locate the shared reference folder and the real models.
//!
//! `shared_dir()` is `$LSE_SHARED_DIR` or `../shared` beside the repository root.
//! `model(name)` returns a cached real model, fetching it with `scripts/get-models.sh` on first use.
//! When the fetch fails (no network) it returns `None` after printing why, and the test skips; CI sets
//! `LSE_REQUIRE_MODELS=1` so a missing model fails there instead.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root exists")
}

/// `../shared` beside the repository, or `$LSE_SHARED_DIR`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("LSE_SHARED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared"),
    }
}

/// A file under the shared folder.
pub fn shared(rel: &str) -> PathBuf {
    shared_dir().join(rel)
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
