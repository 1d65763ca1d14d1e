//! The batched forward: rows of many sessions in one pass, as llama.cpp's `llama_batch` /
//! `llama_decode`. A batch is split into passes of `--batch-size` rows and each pass into
//! launches of `--ubatch-size` rows; in a launch the matmuls see every row at once (weights are
//! streamed once) while rope, KV writes, attention and recurrent updates run per session.
//!
//! Batch invariance: every kernel computes a row with an accumulation order that does not
//! depend on how many rows share the launch or where the row sits, so a session's hidden rows
//! (and logits) are bit-identical whether it ran alone or beside others, under any split.

use crate::arch::SeqRows;
use crate::{Engine, EngineError, ForwardCtx, HiddenRows, Session, StepList};

/// One row of a batch: `token` at position `pos` of session `seq` (an index into the sessions
/// passed to [`Engine::forward`]); `output` asks for its final-normed hidden row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchRow {
    pub seq: usize,
    pub pos: usize,
    pub token: u32,
    pub output: bool,
}

/// A list of rows (llama.cpp's `llama_batch`).
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub rows: Vec<BatchRow>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Appends `tokens` for session `seq` from position `pos0`; `output(i)` says whether row `i`
    /// of them wants its hidden row.
    pub fn add_tokens(&mut self, seq: usize, pos0: usize, tokens: &[u32], output: impl Fn(usize) -> bool) {
        self.rows.extend(tokens.iter().enumerate().map(|(i, &token)| BatchRow { seq, pos: pos0 + i, token, output: output(i) }));
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Rows that want output.
    pub fn n_outputs(&self) -> usize {
        self.rows.iter().filter(|r| r.output).count()
    }
}

impl Engine {
    /// Checks a batch against the sessions: known session, token in the vocabulary, positions
    /// that continue each session without gaps, and room in its cache.
    fn check_batch(&self, sessions: &[&mut Session], rows: &[BatchRow]) -> Result<(), EngineError> {
        let mut next: StepList<usize> = sessions.iter().map(|s| s.len()).collect();
        for (i, r) in rows.iter().enumerate() {
            let Some(want) = next.get_mut(r.seq) else {
                return Err(EngineError::InvalidRequest(format!("batch row {i} names session {} of {}", r.seq, sessions.len())));
            };
            if r.token as usize >= self.model.n_vocab {
                // as `check_token_ids`, the index being the row's
                return Err(EngineError::InvalidToken { id: r.token, index: i, n_vocab: self.model.n_vocab });
            }
            if r.pos != *want {
                return Err(EngineError::InvalidRequest(format!(
                    "batch row {i}: session {} expects position {} next, the row says {}",
                    r.seq, *want, r.pos
                )));
            }
            *want += 1;
            let cap = sessions[r.seq].capacity();
            if *want > cap {
                return Err(EngineError::WindowTooLong { tokens: *want, capacity: cap });
            }
        }
        Ok(())
    }

    /// Runs `rows` through the model, appending them to their sessions, and returns the
    /// final-normed hidden rows of the rows marked `output`, in batch order. On error the
    /// sessions the batch touched are reset.
    pub fn forward(&self, sessions: &mut [&mut Session], rows: &[BatchRow]) -> Result<HiddenRows, EngineError> {
        self.check_batch(sessions, rows)?;
        let result = self.run_passes(sessions, rows);
        match result {
            Ok(out) => {
                for r in rows {
                    sessions[r.seq].tokens.push(r.token);
                }
                Ok(out)
            }
            Err(e) => {
                for r in rows {
                    sessions[r.seq].reset();
                }
                Err(e)
            }
        }
    }

    fn run_passes(&self, sessions: &mut [&mut Session], rows: &[BatchRow]) -> Result<HiddenRows, EngineError> {
        let m = &self.model;
        let e = m.n_embd;
        let n_out = rows.iter().filter(|r| r.output).count();
        let mut out = HiddenRows { n_rows: n_out, n_embd: e, data: vec![0f32; n_out * e] };
        let cx = ForwardCtx::new(&*self.backend, &self.scratch);
        let mut x = cx.buffer_for_overwrite(0);
        let mut out_next = 0;
        for pass in rows.chunks(self.opts.batch_size) {
            for ub in pass.chunks(self.opts.ubatch_size) {
                // rows grouped by session (stable): one contiguous run each
                let mut order: StepList<usize> = (0..ub.len()).collect();
                order.sort_by_key(|&i| ub[i].seq);
                let tokens: StepList<u32> = order.iter().map(|&i| ub[i].token).collect();
                let n = tokens.len();
                x.resize(n * e, 0.0);
                self.backend.get_rows(&m.token_embd, &tokens, &mut x);
                m.token_embd.release_rows(&tokens);
                // (rows, first position) of each session in this launch, in one scan
                let mut runs: StepList<(usize, usize)> = smallvec::smallvec![(0, 0); sessions.len()];
                for r in ub.iter().rev() {
                    runs[r.seq] = (runs[r.seq].0 + 1, r.pos);
                }
                let mut seqs: StepList<SeqRows> = StepList::new();
                let mut r0 = 0;
                for (s, &(count, pos0)) in sessions.iter_mut().zip(&runs) {
                    if count > 0 {
                        seqs.push(SeqRows { state: &mut s.state, r0, n: count, pos0 });
                        r0 += count;
                    }
                }
                m.arch.forward(&cx, &mut seqs, &mut x, n)?;
                // outputs in batch order: the k-th output row of this launch in `ub` order
                let mut slot_of: StepList<usize> = smallvec::smallvec![usize::MAX; ub.len()];
                for (slot, &i) in order.iter().enumerate() {
                    slot_of[i] = slot;
                }
                for (i, r) in ub.iter().enumerate() {
                    if r.output {
                        let s = slot_of[i];
                        out.data[out_next * e..(out_next + 1) * e].copy_from_slice(&x[s * e..(s + 1) * e]);
                        out_next += 1;
                    }
                }
            }
        }
        cx.recycle(x);
        self.backend.rms_norm(&mut out.data, e, &m.output_norm, m.w.hp.eps);
        Ok(out)
    }

    /// Scoring's pass: each window a fresh session, all windows in one batch (so
    /// `--batch-size / ctx` windows share a pass); returns each window's final-normed hidden rows
    /// at its `positions` (ascending).
    pub fn prefill_windows(&self, windows: &[(&[u32], &[usize])]) -> Result<Vec<HiddenRows>, EngineError> {
        let mut sessions = Vec::with_capacity(windows.len());
        let mut batch = Batch::new();
        for (wi, (tokens, positions)) in windows.iter().enumerate() {
            if tokens.is_empty() {
                return Err(EngineError::InvalidRequest("prefill of zero tokens".into()));
            }
            if tokens.len() > self.kv_capacity {
                return Err(EngineError::WindowTooLong { tokens: tokens.len(), capacity: self.kv_capacity });
            }
            if positions.windows(2).any(|p| p[0] >= p[1]) || positions.last().is_some_and(|&p| p >= tokens.len()) {
                return Err(EngineError::InvalidRequest(format!("positions must be ascending and below {}", tokens.len())));
            }
            sessions.push(self.new_session(Some(tokens.len()))?);
            let mut want = vec![false; tokens.len()];
            positions.iter().for_each(|&p| want[p] = true);
            batch.add_tokens(wi, 0, tokens, |i| want[i]);
        }
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let all = self.forward(&mut refs, &batch.rows)?;
        let e = all.n_embd;
        let mut out = Vec::with_capacity(windows.len());
        let mut r = 0;
        for (_, positions) in windows {
            let n = positions.len();
            out.push(HiddenRows { n_rows: n, n_embd: e, data: all.data[r * e..(r + n) * e].to_vec() });
            r += n;
        }
        Ok(out)
    }

    /// One window: a fresh session over `tokens`, the final-normed hidden rows at `positions`.
    pub fn prefill(&self, tokens: &[u32], positions: &[usize]) -> Result<HiddenRows, EngineError> {
        let mut rows = self.prefill_windows(&[(tokens, positions)])?;
        Ok(rows.remove(0))
    }
}
