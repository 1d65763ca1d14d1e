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

/// A file name the actions take, by llama.cpp's rules: one plain name inside the save directory
/// (1 to 255 bytes; no separators or their look-alikes, control characters, `:*?"<>|`, BOM or
/// replacement character; no `..`; not starting with a space nor ending with a space or `.`).
pub fn valid_filename(name: &str) -> bool {
    const LOOK_ALIKES: [char; 5] = ['\u{FF0E}', '\u{2215}', '\u{2216}', '\u{FFFD}', '\u{FEFF}'];
    let bad = |c: char| c.is_control() || LOOK_ALIKES.contains(&c) || ":*?\"<>|/\\".contains(c);
    (1..=255).contains(&name.len())
        && !name.chars().any(bad)
        && !name.starts_with(' ')
        && !name.ends_with([' ', '.'])
        && !name.contains("..")
}

/// Refuses a path that exists and is not a plain file (a link, a FIFO that would block the
/// scheduler thread, a device, a directory).
fn plain_file(path: &Path, what: &str) -> ApiResult<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => Err(ApiError::bad_request(format!("Unable to {what} slot: {} is not a plain file", file_name(path)))),
        _ => Ok(()),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
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
            plain_file(&path, "save")?;
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
    let name = file_name(path);
    plain_file(path, "restore")?;
    let file = std::fs::File::open(path).map_err(|e| ApiError::bad_request(format!("Unable to restore slot: {name}: {e}")))?;
    engine.read_session(&mut std::io::BufReader::new(file), &name).map_err(|e| ApiError::bad_request(format!("Unable to restore slot: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_names_follow_llama_cpps_rules() {
        for ok in ["a.bin", "slot 0.bin", "ß-ünï.bin", ".hidden", "a.b.c"] {
            assert!(super::valid_filename(ok), "{ok}");
        }
        let long = "x".repeat(256);
        for bad in ["", ".", "..", "../a", "a/b", "a\\b", "a..b", " a", "a ", "a.", "a:b", "a*b", "a?b", "a\"b", "a<b", "a>b", "a|b", "a\nb", "a\u{2215}b", "a\u{FEFF}", &long] {
            assert!(!super::valid_filename(bad), "{bad:?}");
        }
    }
}
