//! `Session`: one sequence's state between forward passes — the KV cache of every attention
//! layer, any recurrent state (qwen35), and the tokens it holds. Many sessions live at once; a
//! batched forward ([`crate::Batch`]) appends rows to several of them in one pass.

use crate::arch::SessionState;
use crate::{Engine, EngineError};

pub struct Session {
    pub(crate) state: SessionState,
    pub(crate) tokens: Vec<u32>,
    capacity: usize,
    /// The architecture keeps state that cannot be rewound (recurrent layers).
    recurrent: bool,
}

impl Session {
    /// Tokens in the session (the next row goes to position `len()`).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Positions the session can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The tokens fed so far, in position order.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Empties the session (keeps its memory).
    pub fn reset(&mut self) {
        self.tokens.clear();
        self.state.reset_recurrent();
    }

    /// Keeps the first `n` tokens (prefix reuse). Attention caches simply forget the positions
    /// past `n`; recurrent state cannot be rewound, so there only `n == len()` or `n == 0` work.
    pub fn truncate(&mut self, n: usize) -> Result<(), EngineError> {
        if n >= self.tokens.len() {
            return Ok(());
        }
        if n == 0 {
            self.reset();
            return Ok(());
        }
        if self.recurrent {
            return Err(EngineError::InvalidRequest(format!(
                "cannot truncate a session of a recurrent model to {n} of its {} tokens (only reset)",
                self.tokens.len()
            )));
        }
        self.tokens.truncate(n);
        Ok(())
    }

    /// A copy of the session (llama.cpp's `llama_memory_seq_cp`): its KV rows, recurrent state
    /// and tokens, bit for bit, in memory of its own.
    pub fn fork(&self) -> Session {
        Session { state: self.state.clone(), tokens: self.tokens.clone(), capacity: self.capacity, recurrent: self.recurrent }
    }

    /// How many of this session's tokens a sequence with `prompt` can keep (prefix reuse, see
    /// [`Engine::start_sequence_in`]): their common prefix, less the prompt's last token, which
    /// must run again to give the first logits. A recurrent model's state cannot be rewound, so
    /// there the session is kept only when all its tokens are such a prefix (else 0).
    pub fn reusable_prefix(&self, prompt: &[u32]) -> usize {
        let n = common_prefix(&self.tokens, prompt).min(prompt.len().saturating_sub(1));
        if self.recurrent && n != self.tokens.len() {
            0
        } else {
            n
        }
    }
}

/// How many leading tokens `a` and `b` share.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Engine {
    /// A new empty session for up to `capacity` tokens (`--kv-len` when `None`).
    pub fn new_session(&self, capacity: Option<usize>) -> Result<Session, EngineError> {
        let capacity = capacity.unwrap_or(self.kv_capacity);
        if capacity == 0 || capacity > self.kv_capacity {
            return Err(EngineError::InvalidRequest(format!(
                "session capacity {capacity} must be between 1 and the KV capacity {} (--kv-len)",
                self.kv_capacity
            )));
        }
        let state = self.model.arch.new_session(capacity, self.opts.kv_dtype)?;
        let recurrent = state.extra.is_some();
        // the token list grows with the tokens, as the cache does: a capacity is a bound
        Ok(Session { state, tokens: Vec::new(), capacity, recurrent })
    }

    /// Bytes one session holds per token it holds (KV rows of every attention layer in the cache
    /// dtype; the tiled attention kernel keeps an f32 copy beside them), and the fixed bytes of
    /// its recurrent state. The cache grows with the tokens, not with the capacity.
    pub fn session_bytes(&self) -> Result<(usize, usize), EngineError> {
        let st = self.model.arch.new_session(1, self.opts.kv_dtype)?;
        let per_token = st.kv.iter().flatten().map(|c| c.bytes_per_position()).sum();
        Ok((per_token, st.bytes()))
    }
}
