//! The LM head over hidden rows, `HEAD_ROWS` rows by one vocabulary slice at a time: output matmul
//! (quantized weights), final soft-capping, then per-row reductions that take the row slice by slice
//! (lse-kernels::reduce::SlicedRow). Only the reductions survive; one block's logits buffer is reused.

use crate::{Engine, EngineError, HiddenRows, RowReduction, RowRequest};
use lse_kernels::reduce;
use std::ops::Range;
use std::sync::Mutex;

/// Rows per LM-head block.
pub const HEAD_ROWS: usize = 128;
/// Vocabulary entries per LM-head slice at most: a block's logits stay within 16 MiB.
pub const HEAD_SLICE: usize = 32768;

/// The vocabulary cut into equal slices of at most [`HEAD_SLICE`] entries, each starting at a
/// multiple of 16 (the packed kernels' column group). Depends on the vocabulary size only.
pub fn head_slices(n_vocab: usize) -> Vec<Range<usize>> {
    let n = n_vocab.div_ceil(HEAD_SLICE).max(1);
    let w = n_vocab.div_ceil(n).next_multiple_of(16);
    (0..n_vocab).step_by(w.max(1)).map(|c| c..(c + w).min(n_vocab)).collect()
}

impl Engine {
    fn check_rows(&self, rows: &HiddenRows) -> Result<(), EngineError> {
        if rows.n_embd != self.model.n_embd || rows.data.len() != rows.n_rows * rows.n_embd {
            return Err(EngineError::InvalidRequest(format!(
                "hidden rows are {} x {} ({} floats), the model needs n_embd {}",
                rows.n_rows,
                rows.n_embd,
                rows.data.len(),
                self.model.n_embd
            )));
        }
        Ok(())
    }

    /// Logits of rows `r0..r1` for vocabulary entries `cols` into `out` (`(r1-r0) × cols.len()`),
    /// divided by the logit scale and soft-capped when the model says.
    fn head_block(&self, rows: &HiddenRows, r0: usize, r1: usize, cols: Range<usize>, out: &mut [f32]) {
        let m = &self.model;
        let e = rows.n_embd;
        self.backend.matmul_cols(&m.output, &rows.data[r0 * e..r1 * e], r1 - r0, cols, out);
        if let Some(s) = m.logit_scale {
            self.backend.scale(out, 1.0 / s);
        }
        if let Some(cap) = m.final_softcap {
            reduce::softcap(self.opts.dialect, out, cap);
        }
    }

    /// LM head over the rows, [`HEAD_ROWS`] rows by [`head_slices`] vocabulary entries at a time,
    /// reduced per row as the slices come.
    pub fn head_reduce(&self, rows: &HiddenRows, requests: &[RowRequest]) -> Result<Vec<RowReduction>, EngineError> {
        self.check_rows(rows)?;
        let v = self.model.n_vocab;
        if requests.len() != rows.n_rows {
            return Err(EngineError::InvalidRequest(format!("{} row requests for {} hidden rows", requests.len(), rows.n_rows)));
        }
        for (i, r) in requests.iter().enumerate() {
            crate::check_token_ids(r.ids, v).map_err(|e| EngineError::InvalidRequest(format!("row request {i}: {e}")))?;
        }
        let slices = head_slices(v);
        let mut results: Vec<RowReduction> = Vec::with_capacity(rows.n_rows);
        // one block's logits (at most 16 MiB), for this call only: not held while the forward runs
        let mut logits = vec![0f32; HEAD_ROWS.min(rows.n_rows) * slices[0].len()];
        let d = self.opts.dialect;
        for r0 in (0..rows.n_rows).step_by(HEAD_ROWS) {
            let r1 = (r0 + HEAD_ROWS).min(rows.n_rows);
            let nb = r1 - r0;
            let acc: Vec<Mutex<reduce::SlicedRow>> = requests[r0..r1].iter().map(|q| Mutex::new(reduce::SlicedRow::new(q.ids, q.top_k))).collect();
            for cols in &slices {
                let w = cols.len();
                let block = &mut logits[..nb * w];
                self.head_block(rows, r0, r1, cols.clone(), block);
                let block = &*block;
                self.backend.run(nb, &|i| acc[i].lock().unwrap_or_else(|e| e.into_inner()).add(d, cols.start, &block[i * w..(i + 1) * w]));
            }
            for (i, a) in acc.into_iter().enumerate() {
                let red = a.into_inner().unwrap_or_else(|e| e.into_inner()).finish();
                if !red.max.is_finite() || !red.sum_exp.is_finite() {
                    return Err(EngineError::NonFinite(format!("logits of scored row {} are not finite (max {}, sum_exp {})", r0 + i, red.max, red.sum_exp)));
                }
                results.push(red);
            }
        }
        Ok(results)
    }

    /// The full logits (rows × n_vocab).
    pub fn head_logits(&self, rows: &HiddenRows) -> Result<Vec<f32>, EngineError> {
        let mut out = Vec::new();
        self.head_logits_into(rows, &mut out)?;
        Ok(out)
    }

    /// [`Engine::head_logits`] into `out` (resized to rows × n_vocab), so that a caller stepping
    /// many times reuses one buffer: a fresh vocabulary-sized vector per step is fresh pages,
    /// each faulted in and zeroed by the kernel.
    pub fn head_logits_into(&self, rows: &HiddenRows, out: &mut Vec<f32>) -> Result<(), EngineError> {
        self.check_rows(rows)?;
        let v = self.model.n_vocab;
        let need = rows.n_rows * v;
        // a caller asking for many rows (the Python logits()) gets an error, not an abort
        out.try_reserve(need.saturating_sub(out.len())).map_err(|_| {
            EngineError::InvalidRequest(format!("the logits of {} rows ({} MiB) could not be allocated", rows.n_rows, (need * 4) >> 20))
        })?;
        out.resize(need, 0.0);
        for r0 in (0..rows.n_rows).step_by(HEAD_ROWS) {
            let r1 = (r0 + HEAD_ROWS).min(rows.n_rows);
            self.head_block(rows, r0, r1, 0..v, &mut out[r0 * v..r1 * v]);
        }
        Ok(())
    }
}
