//! The prefill pass plan: a fresh session, the prompt in passes of `batch_size` tokens, each pass
//! in launches of `ubatch_size` tokens through the layer stack; the requested rows come out
//! final-normed.

use crate::{Engine, EngineError, ForwardCtx, HiddenRows};

impl Engine {
    /// Fresh session over `tokens`; returns the final-normed hidden rows at `positions` (ascending).
    pub fn prefill(&self, tokens: &[u32], positions: &[usize]) -> Result<HiddenRows, EngineError> {
        let m = &self.model;
        let n = tokens.len();
        if n == 0 {
            return Err(EngineError::InvalidRequest("prefill of zero tokens".into()));
        }
        if n > self.kv_capacity {
            return Err(EngineError::WindowTooLong { tokens: n, capacity: self.kv_capacity });
        }
        if let Some((index, &id)) = tokens.iter().enumerate().find(|(_, &t)| t as usize >= m.n_vocab) {
            return Err(EngineError::InvalidToken { id, index, n_vocab: m.n_vocab });
        }
        if positions.windows(2).any(|p| p[0] >= p[1]) || positions.last().is_some_and(|&p| p >= n) {
            return Err(EngineError::InvalidRequest(format!("positions must be ascending and below {n}")));
        }
        let e = m.n_embd;
        let mut out = HiddenRows { n_rows: positions.len(), n_embd: e, data: vec![0f32; positions.len() * e] };
        let mut st = m.arch.new_session(n, self.opts.kv_dtype)?;
        let cx = ForwardCtx::new(&*self.backend);
        let (bs, ubs) = (self.opts.batch_size, self.opts.ubatch_size);
        let mut next = 0; // index into positions
        let mut x = Vec::new();
        for pass0 in (0..n).step_by(bs) {
            let pass1 = (pass0 + bs).min(n);
            for ub0 in (pass0..pass1).step_by(ubs) {
                let ub1 = (ub0 + ubs).min(pass1);
                let nt = ub1 - ub0;
                x.resize(nt * e, 0.0);
                self.backend.get_rows(&m.token_embd, &tokens[ub0..ub1], &mut x);
                m.arch.forward(&cx, &mut st, &mut x, nt, ub0)?;
                while next < positions.len() && positions[next] < ub1 {
                    let r = positions[next] - ub0;
                    out.data[next * e..(next + 1) * e].copy_from_slice(&x[r * e..(r + 1) * e]);
                    next += 1;
                }
            }
        }
        self.backend.rms_norm(&mut out.data, e, &m.output_norm, m.w.hp.eps);
        Ok(out)
    }
}
