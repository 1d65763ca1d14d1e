//! Sessions of finished generations, kept for the next requests (llama-server's `cache_prompt`,
//! vLLM's prefix caching): a prompt that starts with the tokens a kept session holds (a chat's
//! next turn, a repeated system prompt) runs only the rest of itself.

use lse_engine::Session;

/// At most `cap` idle sessions, least recently used first.
pub struct SessionCache {
    idle: Vec<Session>,
    cap: usize,
}

impl SessionCache {
    pub fn new(cap: usize) -> SessionCache {
        SessionCache { idle: Vec::with_capacity(cap), cap }
    }

    pub fn len(&self) -> usize {
        self.idle.len()
    }

    /// Keeps a finished sequence's session; past `cap` the least recently used one goes.
    pub fn put(&mut self, s: Session) {
        if self.cap == 0 {
            return;
        }
        if self.idle.len() == self.cap {
            self.idle.remove(0);
        }
        self.idle.push(s);
    }

    /// The most tokens of `prompt` a kept session would keep.
    pub fn best(&self, prompt: &[u32]) -> usize {
        self.idle.iter().map(|s| s.reusable_prefix(prompt)).max().unwrap_or(0)
    }

    /// Frees the least recently used kept session (room for a forked one).
    pub fn drop_oldest(&mut self) {
        if !self.idle.is_empty() {
            self.idle.remove(0);
        }
    }

    /// The session a new `prompt` starts in: with `reuse`, the one keeping most of the prompt
    /// (the most recent among equals); else, when `recycle`, the least recently used one, emptied
    /// (its memory serves again); `None`: the caller makes a new session.
    pub fn take(&mut self, prompt: &[u32], reuse: bool, recycle: bool) -> Option<Session> {
        let best = reuse.then(|| self.idle.iter().enumerate().map(|(i, s)| (s.reusable_prefix(prompt), i)).max()).flatten();
        match best {
            Some((n, i)) if n > 0 => Some(self.idle.remove(i)),
            _ if recycle && !self.idle.is_empty() => {
                let mut s = self.idle.remove(0);
                s.reset();
                Some(s)
            }
            _ => None,
        }
    }
}
