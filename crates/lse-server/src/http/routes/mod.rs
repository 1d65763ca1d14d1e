//! The HTTP routes, one file each.

pub mod chat;
pub mod completion;
pub mod completions;
pub mod embeddings;
pub mod infill;
pub mod info;
pub mod perplexity;
pub mod tokens;
