//! llama-server's slot actions (`POST /slots/{id}?action=save|restore|erase`, with
//! `--slot-save-path`): a slot's cache (the session its last task left, see `session_cache`)
//! written to a file in that directory, read back as the slot's cache (a later prompt sharing
//! its tokens runs only the rest), or dropped. Run on the scheduler thread while the slot is free.

use super::errors::{ApiError, ApiResult};
use super::session_cache::SessionCache;
use lse_engine::Engine;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub enum SlotFileAction {
    Save(PathBuf),
    Restore(PathBuf),
    Erase,
}

/// What an action did: tokens saved, restored or erased, file bytes, milliseconds.
pub struct SlotFileDone {
    pub n_tokens: usize,
    pub n_bytes: u64,
    pub ms: f64,
}

/// A file name the actions take: one plain name inside the save directory (no separators, no
/// `.`/`..`, no control characters, at most 255 bytes).
pub fn valid_filename(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Runs `action` on `slot`'s cache. `others`: sessions held by running sequences, so that a
/// restored session keeps running plus kept sessions within `parallel`.
pub fn run(engine: &Engine, cache: &mut SessionCache, slot: usize, others: usize, parallel: usize, action: SlotFileAction) -> ApiResult<SlotFileDone> {
    let t = Instant::now();
    let done = |n_tokens: usize, n_bytes: u64| SlotFileDone { n_tokens, n_bytes, ms: t.elapsed().as_secs_f64() * 1e3 };
    match action {
        SlotFileAction::Save(path) => {
            let empty;
            let session = match cache.of_slot(slot) {
                Some(s) => s,
                None => {
                    empty = engine.new_session(None).map_err(|e| ApiError::internal(e.to_string()))?;
                    &empty
                }
            };
            let mut file = lse_eval::atomic::AtomicFile::create(&path, "slot file").map_err(|e| ApiError::internal(format!("Unable to save slot: {e}")))?;
            let mut n_bytes = 0;
            file.commit_with(|w| {
                n_bytes = engine.write_session(session, w)?;
                Ok(())
            })
            .map_err(|e| ApiError::internal(format!("Unable to save slot: {e}")))?;
            Ok(done(session.len(), n_bytes))
        }
        SlotFileAction::Restore(path) => {
            let (session, n_bytes) = read(engine, &path)?;
            cache.take_slot(slot);
            while others + cache.len() + 1 > parallel && cache.take_oldest().is_some() {}
            let n = session.len();
            cache.put_for(slot, session);
            Ok(done(n, n_bytes))
        }
        SlotFileAction::Erase => Ok(done(cache.take_slot(slot).map_or(0, |s| s.len()), 0)),
    }
}

fn read(engine: &Engine, path: &Path) -> ApiResult<(lse_engine::Session, u64)> {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let file = std::fs::File::open(path).map_err(|e| ApiError::bad_request(format!("Unable to restore slot: {name}: {e}")))?;
    engine.read_session(&mut std::io::BufReader::new(file), &name).map_err(|e| ApiError::bad_request(format!("Unable to restore slot: {e}")))
}
