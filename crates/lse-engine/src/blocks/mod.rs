//! Layer building blocks shared by every architecture (each exists once).

pub mod attention;
pub mod mlp;
pub mod prenorm;
