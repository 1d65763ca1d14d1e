//! Layer building blocks shared by every architecture (each exists once).

pub mod attention;
pub mod ffn;
pub mod mlp;
pub mod moe;
pub mod prenorm;
