//! Atomic output files: a temporary file beside the target, written and renamed over it on commit.
//! Creating one up front proves the path is writable before a long run starts (a temporary file
//! made and removed at once: a run stopped by a signal, whose destructors do not run, leaves
//! nothing behind); a failed write removes its temporary file.

use crate::error::{io_reason, EvalError, Result};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct AtomicFile {
    target: PathBuf,
    /// The temporary file's name without its number, then (from the commit on) the file renamed
    /// over the target; `None` where the target is written in place (a device, FIFO or other
    /// non-file the user named, e.g. `/dev/stdout`).
    tmp: Option<PathBuf>,
    /// The device written in place.
    file: Option<File>,
    /// The replaced file's permissions, kept by the new one.
    keep: Option<std::fs::Permissions>,
    /// Set once the temporary file exists (from the commit on).
    written: bool,
}

impl AtomicFile {
    /// Checks now that a temporary file can be made beside the target (and removes it: nothing
    /// is on disk until the commit). `what` names the file in errors (e.g. "output file").
    pub fn create(target: &Path, what: &str) -> Result<AtomicFile> {
        let err = |reason: String| EvalError::Output(format!("cannot write {what} {}: {reason}", target.display()));
        if target.as_os_str().is_empty() {
            return Err(EvalError::Output(format!("{what}: empty path")));
        }
        let mut keep = None;
        match std::fs::metadata(target) {
            Ok(m) if m.is_dir() => return Err(err("it is a directory".into())),
            Ok(m) if !m.is_file() => {
                // renaming over a device or FIFO would replace it with a plain file
                let file = std::fs::OpenOptions::new().write(true).open(target).map_err(|e| err(io_reason(&e)))?;
                return Ok(AtomicFile { target: target.to_path_buf(), tmp: None, file: Some(file), keep: None, written: false });
            }
            // a rename would replace what its owner protected
            Ok(m) if m.permissions().readonly() => return Err(err("it is read-only".into())),
            Ok(m) => keep = Some(m.permissions()),
            Err(_) => {}
        }
        // a symlink to a file: write beside the file it names and rename over that, keeping the link
        let target = &std::fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
        let name = target.file_name().ok_or_else(|| err("not a file name".into()))?;
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let stem = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let (probe, _) = create_unique(&stem).map_err(|e| err(io_reason(&e)))?;
        let _ = std::fs::remove_file(&probe);
        Ok(AtomicFile { target: target.to_path_buf(), tmp: Some(stem), file: None, keep, written: false })
    }

    pub fn path(&self) -> &Path {
        &self.target
    }

    /// Writes `bytes` to the temporary file and renames it over the target.
    pub fn commit(mut self, bytes: &[u8]) -> Result<()> {
        self.commit_with(|f| f.write_all(bytes))
    }

    /// Writes with `f`, flushes, and renames over the target.
    pub fn commit_with(&mut self, f: impl FnOnce(&mut std::io::BufWriter<&File>) -> std::io::Result<()>) -> Result<()> {
        let err = |e: std::io::Error| EvalError::Output(EvalError::io("write", &self.target, &e));
        assert!(!self.written, "committed once");
        let file = match (self.file.take(), &self.tmp) {
            (Some(device), _) => device,
            (None, Some(stem)) => {
                let (tmp, file) = create_unique(stem).map_err(err)?;
                self.tmp = Some(tmp);
                self.written = true;
                if let Some(p) = &self.keep {
                    file.set_permissions(p.clone()).map_err(err)?;
                }
                file
            }
            (None, None) => unreachable!("a device is opened at create"),
        };
        {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, &file);
            f(&mut w).map_err(err)?;
            w.flush().map_err(err)?;
        }
        let Some(tmp) = &self.tmp else { return Ok(()) };
        file.sync_all().map_err(err)?;
        drop(file);
        std::fs::rename(tmp, &self.target).map_err(err)?;
        Ok(())
    }
}

/// Whether two paths name one file: by what they resolve to where both exist, else as written.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// A new file `STEM-N` for the first N not taken (a run killed while committing, or another
/// process of the same id in another container, may have left one).
fn create_unique(stem: &Path) -> std::io::Result<(PathBuf, File)> {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    loop {
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut name = stem.as_os_str().to_owned();
        name.push(format!("-{seq}"));
        let path = PathBuf::from(name);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && seq < 1 << 20 => continue,
            r => return r.map(|f| (path, f)),
        }
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.as_ref().filter(|_| self.written) {
            // gone after its rename; here after a failed write
            if tmp.exists() {
                let _ = std::fs::remove_file(tmp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty folder of this test process's own.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lse-eval-atomic-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn commit_and_abandon() {
        let dir = scratch("commit");
        let t = dir.join("out.json");
        let a = AtomicFile::create(&t, "output file").unwrap();
        // nothing on disk while the run goes: a signal that ends it leaves no temporary file
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        a.commit(b"hello").unwrap();
        assert_eq!(std::fs::read(&t).unwrap(), b"hello");
        let t2 = dir.join("gone.json");
        drop(AtomicFile::create(&t2, "output file").unwrap());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let e = AtomicFile::create(&dir.join("no/such/dir/x"), "output file").err().unwrap().to_string();
        assert!(e.contains("cannot write output file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Temporary files left by another run with this process id (a container's PID 1, killed
    /// while committing) are stepped over, not an error.
    #[test]
    fn leftovers_are_stepped_over() {
        let dir = scratch("left");
        for n in 0..64 {
            std::fs::write(dir.join(format!(".out.json.tmp-{}-{n}", std::process::id())), b"stale").unwrap();
        }
        let t = dir.join("out.json");
        AtomicFile::create(&t, "output file").unwrap().commit(b"new").unwrap();
        assert_eq!(std::fs::read(&t).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 65, "the leftovers untouched, nothing added");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A read-only file is not replaced; a writable one's permissions are kept.
    #[cfg(unix)]
    #[test]
    fn permissions_are_respected() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("mode");
        let (ro, rw) = (dir.join("ro.json"), dir.join("rw.json"));
        for (p, mode) in [(&ro, 0o444), (&rw, 0o640)] {
            std::fs::write(p, b"old").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let e = AtomicFile::create(&ro, "output file").err().unwrap().to_string();
        assert!(e.ends_with("ro.json: it is read-only"), "{e}");
        AtomicFile::create(&rw, "output file").unwrap().commit(b"new").unwrap();
        assert_eq!(std::fs::metadata(&rw).unwrap().permissions().mode() & 0o777, 0o640);
        assert_eq!((std::fs::read(&ro).unwrap(), std::fs::read(&rw).unwrap()), (b"old".to_vec(), b"new".to_vec()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A device is written in place (renaming over it would replace it with a plain file), and
    /// a symlink keeps linking to what it names, which gets the new bytes. The device is reached
    /// through a link in a scratch folder, so a regression replaces the link, never the device.
    #[cfg(unix)]
    #[test]
    fn devices_and_symlinks_survive() {
        let dir = scratch("link");
        let (real, link, null) = (dir.join("real.json"), dir.join("link.json"), dir.join("null"));
        std::fs::write(&real, b"old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        std::os::unix::fs::symlink("/dev/null", &null).unwrap();
        AtomicFile::create(&link, "output file").unwrap().commit(b"new").unwrap();
        AtomicFile::create(&null, "output file").unwrap().commit(b"x").unwrap();
        for l in [&link, &null] {
            assert!(std::fs::symlink_metadata(l).unwrap().file_type().is_symlink(), "{}", l.display());
        }
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
