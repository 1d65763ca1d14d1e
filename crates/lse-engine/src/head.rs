//! The LM head over hidden rows, `HEAD_ROWS` rows at a time: output matmul (quantized weights),
//! final soft-capping, then per-row reductions (lse-kernels::reduce). Only the reductions survive
//! a block; the logits buffer is reused for the next one.

use crate::{Engine, EngineError, HiddenRows, RowReduction, RowRequest};
use lse_kernels::reduce;
use std::sync::Mutex;

/// Rows per LM-head block.
pub const HEAD_ROWS: usize = 128;

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

    /// Logits of rows `r0..r1` into `out` (`(r1-r0) × n_vocab`), soft-capped when the model says.
    fn head_block(&self, rows: &HiddenRows, r0: usize, r1: usize, out: &mut [f32]) {
        let m = &self.model;
        let e = rows.n_embd;
        self.backend.matmul(&m.output, &rows.data[r0 * e..r1 * e], r1 - r0, out);
        if let Some(cap) = m.final_softcap {
            reduce::softcap(self.opts.dialect, out, cap);
        }
    }

    /// LM head over the rows, 128 at a time, reduced per row.
    pub fn head_reduce(&self, rows: &HiddenRows, requests: &[RowRequest]) -> Result<Vec<RowReduction>, EngineError> {
        self.check_rows(rows)?;
        let v = self.model.n_vocab;
        if requests.len() != rows.n_rows {
            return Err(EngineError::InvalidRequest(format!("{} row requests for {} hidden rows", requests.len(), rows.n_rows)));
        }
        for r in requests {
            if let Some(&id) = r.ids.iter().find(|&&id| id as usize >= v) {
                return Err(EngineError::InvalidToken { id, index: 0, n_vocab: v });
            }
        }
        let mut results: Vec<RowReduction> = Vec::with_capacity(rows.n_rows);
        // Taken out of the engine for the call (a concurrent call allocates its own).
        let mut logits = std::mem::take(&mut *self.head_logits_block.lock().unwrap_or_else(|e| e.into_inner()));
        let need = HEAD_ROWS.min(rows.n_rows) * v;
        if logits.len() < need {
            logits.resize(need, 0.0);
        }
        let d = self.opts.dialect;
        for r0 in (0..rows.n_rows).step_by(HEAD_ROWS) {
            let r1 = (r0 + HEAD_ROWS).min(rows.n_rows);
            let nb = r1 - r0;
            let block = &mut logits[..nb * v];
            self.head_block(rows, r0, r1, block);
            let slots: Vec<Mutex<Option<reduce::RowReduce>>> = (0..nb).map(|_| Mutex::new(None)).collect();
            let block = &*block;
            self.backend.run(nb, &|i| {
                let req = &requests[r0 + i];
                let red = reduce::reduce_row(d, &block[i * v..(i + 1) * v], req.ids, req.top_k);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(red);
            });
            for (i, s) in slots.into_iter().enumerate() {
                let red = s.into_inner().unwrap_or_else(|e| e.into_inner()).ok_or_else(|| EngineError::Kernel("row reduction missing".into()))?;
                if !red.max.is_finite() || !red.sum_exp.is_finite() {
                    return Err(EngineError::NonFinite(format!("logits of scored row {} are not finite (max {}, sum_exp {})", r0 + i, red.max, red.sum_exp)));
                }
                results.push(red);
            }
        }
        *self.head_logits_block.lock().unwrap_or_else(|e| e.into_inner()) = logits;
        Ok(results)
    }

    /// Validation only: the full logits (rows × n_vocab).
    pub fn head_logits(&self, rows: &HiddenRows) -> Result<Vec<f32>, EngineError> {
        self.check_rows(rows)?;
        let v = self.model.n_vocab;
        let mut out = vec![0f32; rows.n_rows * v];
        for r0 in (0..rows.n_rows).step_by(HEAD_ROWS) {
            let r1 = (r0 + HEAD_ROWS).min(rows.n_rows);
            self.head_block(rows, r0, r1, &mut out[r0 * v..r1 * v]);
        }
        Ok(out)
    }
}
