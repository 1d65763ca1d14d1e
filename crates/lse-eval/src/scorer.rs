//! The seam between the scoring loop and the engine.
//!
//! The loop needs: the vocabulary facts, a tokenizer, a fresh-session prefill that returns hidden
//! rows at the scored positions, and the LM head over a block of those rows (reduced, or full logits
//! for the llama.cpp-base path only). `lse_engine::Engine` implements it; tests
//! implement it with analytically known logits.

use crate::error::Result;
use std::ops::Range;

/// What to reduce a row's logits to.
#[derive(Debug, Clone, PartialEq)]
pub struct RowRequest {
    /// Ids whose logits to return: the target first, then the base's ids when comparing.
    pub ids: Vec<u32>,
    /// Top-K ids to return (0 = none).
    pub top_k: usize,
}

/// A row's logits reduced: max, `sum(exp(l - max))`, argmax, the requested logits, the top-K
/// (the engine's type).
pub use lse_engine::RowReduction as Reduction;

/// Everything the scoring loop needs from an engine.
pub trait Scorer {
    /// Hidden rows returned by `prefill`.
    type Rows;
    fn n_vocab(&self) -> usize;
    fn add_bos(&self) -> bool;
    fn bos_id(&self) -> Option<u32>;
    /// KV capacity of one session, in tokens.
    fn kv_capacity(&self) -> usize;
    /// Rows per LM-head block (128).
    fn head_rows(&self) -> usize {
        128
    }
    /// Tokenize as a prompt with no template; special-token text is not parsed.
    fn tokenize(&self, text: &str, add_special: bool) -> Vec<u32>;
    /// The report's `config` object (SPEC §4).
    fn config_json(&self) -> serde_json::Value;
    /// The base header's `model` object (architecture, name, ...).
    fn model_json(&self) -> serde_json::Value;
    /// A fresh session over `input`; hidden rows at `positions` (ascending).
    fn prefill(&self, input: &[u32], positions: &[usize]) -> Result<Self::Rows>;
    /// How many windows of `ctx` tokens share one pass (llama.cpp's perplexity: batch / ctx).
    fn windows_per_pass(&self, _ctx: usize) -> usize {
        1
    }
    /// Fresh sessions over several windows run together; one result per window, in order.
    fn prefill_windows(&self, windows: &[(&[u32], &[usize])]) -> Result<Vec<Self::Rows>> {
        windows.iter().map(|(input, positions)| self.prefill(input, positions)).collect()
    }
    /// LM head over rows `range` of `rows`, one reduction per row (`requests.len() == range.len()`).
    fn head_reduce(&self, rows: &Self::Rows, range: Range<usize>, requests: &[RowRequest]) -> Result<Vec<Reduction>>;
    /// LM head over rows `range`, full logits (`range.len() x n_vocab`). Only for llama.cpp bases.
    fn head_logits(&self, rows: &Self::Rows, range: Range<usize>) -> Result<Vec<f32>>;
}

mod engine_impl {
    use super::*;
    use crate::error::EvalError;
    use lse_engine::{Engine, HiddenRows};

    fn slice(rows: &HiddenRows, range: Range<usize>) -> HiddenRows {
        let e = rows.n_embd;
        HiddenRows { n_rows: range.len(), n_embd: e, data: rows.data[range.start * e..range.end * e].to_vec() }
    }

    fn eng(e: impl std::fmt::Display) -> EvalError {
        EvalError::Engine(e.to_string())
    }

    impl Scorer for Engine {
        type Rows = HiddenRows;
        fn n_vocab(&self) -> usize {
            Engine::n_vocab(self)
        }
        fn add_bos(&self) -> bool {
            self.tokenizer().add_bos()
        }
        fn bos_id(&self) -> Option<u32> {
            self.tokenizer().bos_id()
        }
        fn kv_capacity(&self) -> usize {
            Engine::kv_capacity(self)
        }
        fn head_rows(&self) -> usize {
            self.config().head_rows.max(1)
        }
        fn tokenize(&self, text: &str, add_special: bool) -> Vec<u32> {
            self.tokenizer().tokenize(text, add_special, false)
        }
        fn config_json(&self) -> serde_json::Value {
            let c = self.config();
            serde_json::json!({
                "device_arch": c.device_arch,
                "prefill_attention": c.prefill_attention,
                "prefill_attention_scale": crate::report::f32_json(c.prefill_attention_scale),
                "kv_cache_dtype": c.kv_cache_dtype,
                "kv_capacity": c.kv_capacity,
                "batch_size": c.batch_size,
                "ubatch_size": c.ubatch_size,
                "head_rows": c.head_rows,
                "cpu_fallback_allowed": c.cpu_fallback_allowed,
            })
        }
        fn model_json(&self) -> serde_json::Value {
            serde_json::json!({ "architecture": self.architecture(), "name": self.model_name() })
        }
        fn prefill(&self, input: &[u32], positions: &[usize]) -> Result<HiddenRows> {
            Engine::prefill(self, input, positions).map_err(eng)
        }
        fn windows_per_pass(&self, ctx: usize) -> usize {
            (self.options().batch_size / ctx.max(1)).max(1)
        }
        fn prefill_windows(&self, windows: &[(&[u32], &[usize])]) -> Result<Vec<HiddenRows>> {
            Engine::prefill_windows(self, windows).map_err(eng)
        }
        fn head_reduce(&self, rows: &HiddenRows, range: Range<usize>, requests: &[RowRequest]) -> Result<Vec<Reduction>> {
            let block = slice(rows, range);
            let reqs: Vec<lse_engine::RowRequest<'_>> =
                requests.iter().map(|r| lse_engine::RowRequest { ids: &r.ids, top_k: r.top_k }).collect();
            Engine::head_reduce(self, &block, &reqs).map_err(eng)
        }
        fn head_logits(&self, rows: &HiddenRows, range: Range<usize>) -> Result<Vec<f32>> {
            Engine::head_logits(self, &slice(rows, range)).map_err(eng)
        }
    }
}
