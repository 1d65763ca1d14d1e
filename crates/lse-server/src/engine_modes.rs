//! The parts that need the engine: loading a model, tokenizing with a GGUF vocabulary.

use crate::args::{Args, Dialect, KvDtype};
use crate::progress::StderrProgress;
use lse_eval::{NoProgress, PerplexityRequest, Preflight, Progress};
use std::path::{Path, PathBuf};

/// A `.gguf` file as is; a folder must hold exactly one model `.gguf`, or the shards of one split
/// model (then the first shard, which holds the vocabulary).
pub fn resolve_model_path(p: &Path) -> Result<PathBuf, String> {
    let meta = std::fs::metadata(p).map_err(|e| format!("cannot open model {}: {e}", p.display()))?;
    if !meta.is_dir() {
        return Ok(p.to_path_buf());
    }
    let mut ggufs: Vec<PathBuf> = std::fs::read_dir(p)
        .map_err(|e| format!("cannot read model folder {}: {e}", p.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf")))
        .filter(|f| !f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("mmproj")))
        .collect();
    ggufs.sort();
    match ggufs.len() {
        0 => Err(format!("model folder {} holds no .gguf file", p.display())),
        1 => Ok(ggufs.remove(0)),
        n => {
            let shard = |f: &PathBuf| {
                let s = f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                s.rsplit_once("-of-").and_then(|(a, _)| a.rsplit_once('-')).map(|(stem, _)| stem.to_string())
            };
            let stems: Vec<Option<String>> = ggufs.iter().map(shard).collect();
            if stems[0].is_some() && stems.iter().all(|s| s == &stems[0]) {
                Ok(ggufs.remove(0))
            } else {
                Err(format!("model folder {} holds {n} .gguf files; name one with --model", p.display()))
            }
        }
    }
}

/// Like llama-tokenize: special-token text is parsed as special unless `parse_special` is false.
pub fn tokenize(model: &Path, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>, String> {
    let path = resolve_model_path(model)?;
    let f = lse_gguf::GgufFile::open(&path).map_err(|e| format!("cannot read model {}: {e}", path.display()))?;
    let tok = lse_tokenizer::Tokenizer::from_gguf(&f).map_err(|e| format!("tokenizer: {e}"))?;
    Ok(tok.tokenize(text, add_special, parse_special))
}

fn options(a: &Args) -> lse_engine::EngineOptions {
    let mut o = lse_engine::EngineOptions::default();
    if let Some(t) = a.threads {
        o.threads = t;
    }
    o.batch_size = a.batch_size;
    o.ubatch_size = a.ubatch_size;
    o.kv_dtype = match a.kv_dtype {
        KvDtype::F32 => lse_engine::KvDtype::F32,
        KvDtype::F16 => lse_engine::KvDtype::F16,
        KvDtype::Bf16 => lse_engine::KvDtype::Bf16,
        KvDtype::Q8_0 => lse_engine::KvDtype::Q8_0,
    };
    o.kv_len = a.kv_len;
    o.flash_attention = a.flash;
    o.dialect = match a.dialect {
        Dialect::Simd => lse_engine::Dialect::Simd,
        Dialect::Scalar => lse_engine::Dialect::Scalar,
    };
    o.cpu_fallback_allowed = !a.no_cpu_fallback;
    o
}

pub fn perplexity(a: &Args, model: &Path, req: &PerplexityRequest, pre: Preflight) -> Result<serde_json::Value, String> {
    let opts = options(a);
    opts.validate().map_err(|e| e.to_string())?;
    let engine = lse_engine::Engine::load(model, opts).map_err(|e| e.to_string())?;
    let mut bar = StderrProgress::new();
    let mut none = NoProgress;
    let progress: &mut dyn Progress = if a.quiet { &mut none } else { &mut bar };
    lse_eval::run_prepared(&engine, req, pre, progress).map_err(|e| e.to_string())
}
