//! Which `.gguf` file a `--model` path names.

use crate::EngineError;
use lse_gguf::GgufFile;
use std::path::{Path, PathBuf};

/// Every file of the model at `p`, in shard order (one for an unsplit model).
pub fn model_files(p: &Path) -> Result<Vec<PathBuf>, EngineError> {
    let path = resolve_model_path(p)?;
    Ok(lse_gguf::model_paths(&path, &GgufFile::open(&path)?)?)
}

/// The model file holding the metadata (a split model's first shard, found from any shard).
pub fn open_model_metadata(p: &Path) -> Result<GgufFile, EngineError> {
    Ok(GgufFile::open(&model_files(p)?[0])?)
}

/// A file as is; a folder must hold exactly one model `.gguf` (or the shards of one split model).
pub fn resolve_model_path(p: &Path) -> Result<PathBuf, EngineError> {
    let err = |m: String| EngineError::ModelPath(p.display().to_string(), m);
    let meta = std::fs::metadata(p).map_err(|e| err(e.to_string()))?;
    if !meta.is_dir() {
        return Ok(p.to_path_buf());
    }
    let mut ggufs: Vec<PathBuf> = std::fs::read_dir(p)
        .map_err(|e| err(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf")))
        .filter(|f| !f.file_name().is_some_and(|n| n.to_string_lossy().starts_with("mmproj")))
        .collect();
    ggufs.sort();
    match ggufs.len() {
        0 => Err(err("the folder holds no .gguf file".into())),
        1 => Ok(ggufs.remove(0)),
        n => {
            let first = ggufs.iter().find(|f| f.to_string_lossy().contains("-00001-of-"));
            let all_shards = ggufs.iter().all(|f| f.to_string_lossy().contains("-of-"));
            match first {
                Some(f) if all_shards => Ok(f.clone()),
                _ => Err(err(format!("the folder holds {n} .gguf files; pass one of them"))),
            }
        }
    }
}
