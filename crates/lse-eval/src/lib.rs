//! Scoring: window plans, LM-head reductions to NLL/top-K, KL bases, statistics and the JSON report.
//!
//! The entry point is [`run_perplexity`]: it takes a loaded
//! `lse_engine::Engine` and a [`PerplexityRequest`] and returns the SPEC §4 report as a
//! `serde_json::Value` with keys in order. The loop itself is generic over [`Scorer`]
//! ([`run_with`]), so it is tested with analytically known logits.
//!
//! To fail fast before loading a model, call [`preflight`] first (options, KLD base header,
//! output paths) and then [`run_prepared`].

pub mod atomic;
pub mod conditional;
pub mod error;
pub mod input;
pub mod kld;
pub mod merge;
pub mod plan;
pub mod report;
pub mod request;
pub mod run;
pub mod scorer;
pub mod shard_file;
pub mod stats;
pub mod summary;

pub use error::EvalError;
pub use input::{read_pairs_file, read_text_file, read_text_file_verbatim, read_tokens_file, token_ids_sha256, PairRecord};
pub use plan::{Method, Window};
pub use merge::merge;
pub use request::{in_field_terms, MergeRequest, PerplexityInput, PerplexityRequest, ShardSpec, REQUEST_FIELDS};
pub use shard_file::{file_sha256, model_sha256};
pub use run::{preflight, run_prepared, run_with, NoProgress, Preflight, Progress, ProgressInfo};
pub use scorer::{Reduction, RowRequest, Scorer};

/// Scores `req` with `engine` and returns the SPEC §4 report (keys in order).
/// Validation, KLD-base checks and output-path checks happen before any model work.
pub fn run_perplexity(
    engine: &lse_engine::Engine,
    req: &PerplexityRequest,
    progress: &mut dyn Progress,
) -> Result<serde_json::Value, EvalError> {
    run_with(engine, req, progress)
}
