//! The HTTP server (SPEC §11). Being built.

use crate::args::Args;
use std::path::Path;

pub fn serve(_args: &Args, _model: &Path) -> Result<(), String> {
    Err("serving HTTP is not built yet: use --perplexity, --tokenize or --generate".into())
}
