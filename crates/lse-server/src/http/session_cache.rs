//! What the scheduler keeps of ended work for the next requests (llama-server's `cache_prompt`,
//! vLLM's prefix caching): the sessions of finished generations, so that a prompt that starts
//! with the tokens one holds (a chat's next turn, a repeated system prompt) runs only the rest of
//! itself; and (`scoring`) the sessions and log-probs of scored prompts.

use lse_engine::Session;

/// At most `cap` items, least recently used first.
pub struct Kept<T> {
    items: Vec<T>,
    cap: usize,
}

impl<T> Kept<T> {
    pub fn new(cap: usize) -> Kept<T> {
        // grown as items come: `--parallel` is a bound, not an allocation
        Kept { items: Vec::new(), cap }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Keeps `item` as the most recent; past `cap` the least recently used one goes.
    pub fn put(&mut self, item: T) {
        if self.cap == 0 {
            return;
        }
        if self.items.len() == self.cap {
            self.items.remove(0);
        }
        self.items.push(item);
    }

    /// The least recently used item.
    pub fn take_oldest(&mut self) -> Option<T> {
        (!self.items.is_empty()).then(|| self.items.remove(0))
    }

    /// The largest `score` of the items (0 when none has one).
    pub fn best(&self, score: impl Fn(&T) -> Option<usize>) -> usize {
        self.items.iter().filter_map(score).max().unwrap_or(0)
    }

    /// The item of the largest `score` (the most recent among equals) when that is at least
    /// `min`, and its score.
    pub fn take_best(&mut self, min: usize, score: impl Fn(&T) -> Option<usize>) -> Option<(T, usize)> {
        let (n, i) = self.items.iter().enumerate().filter_map(|(i, t)| Some((score(t)?, i))).max()?;
        (n >= min).then(|| (self.items.remove(i), n))
    }
}

/// Sessions of finished generations.
pub type SessionCache = Kept<Session>;

impl Kept<Session> {
    /// The most tokens of `prompt` a kept session would keep.
    pub fn best_for(&self, prompt: &[u32]) -> usize {
        self.best(|s| Some(s.reusable_prefix(prompt)))
    }

    /// The session a new `prompt` starts in: with `reuse`, the one keeping most of the prompt
    /// (the most recent among equals); else, when `recycle`, the least recently used one, emptied
    /// (its memory serves again); `None`: the caller makes a new session.
    pub fn take(&mut self, prompt: &[u32], reuse: bool, recycle: bool) -> Option<Session> {
        if let Some((s, _)) = reuse.then(|| self.take_best(1, |s| Some(s.reusable_prefix(prompt)))).flatten() {
            return Some(s);
        }
        if !recycle {
            return None;
        }
        let mut s = self.take_oldest()?;
        s.reset();
        Some(s)
    }
}
