//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

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
