//! The parts that need the engine: loading a model, tokenizing with a GGUF vocabulary.

use crate::args::Args;
use crate::progress::StderrProgress;
use lse_eval::{NoProgress, PerplexityRequest, Preflight, Progress};
use std::path::Path;

/// Like llama-tokenize: special-token text is parsed as special unless `parse_special` is false.
pub fn tokenize(model: &Path, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>, String> {
    let f = lse_engine::open_model_metadata(model).map_err(|e| e.to_string())?;
    let tok = lse_tokenizer::Tokenizer::from_gguf(&f).map_err(|e| format!("tokenizer: {e}"))?;
    Ok(tok.tokenize(text, add_special, parse_special))
}

/// Loads the engine, saying on stderr what its tokenizer set aside (as llama.cpp's loader warns).
pub fn load_engine(model: &Path, a: &Args) -> Result<lse_engine::Engine, String> {
    let engine = lse_engine::Engine::load(model, a.engine.clone()).map_err(|e| e.to_string())?;
    for note in engine.tokenizer().load_notes() {
        eprintln!("lse-server: {note}");
    }
    Ok(engine)
}

pub fn perplexity(a: &Args, model: &Path, req: &PerplexityRequest, pre: Preflight) -> Result<serde_json::Value, String> {
    let engine = load_engine(model, a)?;
    let mut bar = StderrProgress::new();
    let mut none = NoProgress;
    let progress: &mut dyn Progress = if a.quiet { &mut none } else { &mut bar };
    lse_eval::run_prepared(&engine, req, pre, progress).map_err(|e| e.to_string())
}
