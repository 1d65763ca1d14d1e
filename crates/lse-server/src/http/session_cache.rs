//! What the scheduler keeps of ended work for the next requests (llama-server's `cache_prompt`,
//! vLLM's prefix caching): the sessions of finished generations, so that a prompt that starts
//! with the tokens one holds (a chat's next turn, a repeated system prompt) runs only the rest of
//! itself; and (`scoring`) the sessions and log-probs of scored prompts.
//!
//! A generation's session is kept with its slot: the one most recently left by a slot's task is
//! that slot's cache, which llama-server's slot actions save, restore and erase.

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

    /// The most recent item for which `f` holds.
    pub fn find(&self, f: impl Fn(&T) -> bool) -> Option<&T> {
        self.items.iter().rev().find(|t| f(t))
    }

    /// Takes the most recent item for which `f` holds.
    pub fn take_where(&mut self, f: impl Fn(&T) -> bool) -> Option<T> {
        let i = self.items.iter().rposition(f)?;
        Some(self.items.remove(i))
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

/// A kept session; `slot`: the slot whose cache it is (its task was the last that slot ran).
pub struct SlotSession {
    pub slot: Option<usize>,
    pub session: Session,
}

/// Sessions of finished generations.
pub type SessionCache = Kept<SlotSession>;

impl Kept<SlotSession> {
    /// Keeps `session` as the cache of `slot` (the slot's earlier one stays, as no slot's).
    pub fn put_for(&mut self, slot: usize, session: Session) {
        self.forget_slot(slot);
        self.put(SlotSession { slot: Some(slot), session });
    }

    /// The session that is `slot`'s cache.
    pub fn of_slot(&self, slot: usize) -> Option<&Session> {
        self.find(|k| k.slot == Some(slot)).map(|k| &k.session)
    }

    /// Takes the session that is `slot`'s cache.
    pub fn take_slot(&mut self, slot: usize) -> Option<Session> {
        self.take_where(|k| k.slot == Some(slot)).map(|k| k.session)
    }

    /// `slot` has no cache any more (its sessions stay, as no slot's): a new one replaces it, or
    /// its task failed.
    pub fn forget_slot(&mut self, slot: usize) {
        self.items.iter_mut().filter(|k| k.slot == Some(slot)).for_each(|k| k.slot = None);
    }

    /// The most tokens of `prompt` a kept session would keep.
    pub fn best_for(&self, prompt: &[u32]) -> usize {
        self.best(|k| Some(k.session.reusable_prefix(prompt)))
    }

    /// The session a new `prompt` starts in: with `reuse`, the one keeping most of the prompt
    /// (the most recent among equals), with the slot whose cache it was; else, when `recycle`,
    /// the least recently used one, emptied (its memory serves again; no slot's cache any more);
    /// `None`: the caller makes a new session.
    pub fn take(&mut self, prompt: &[u32], reuse: bool, recycle: bool) -> Option<SlotSession> {
        if let Some((k, _)) = reuse.then(|| self.take_best(1, |k| Some(k.session.reusable_prefix(prompt)))).flatten() {
            return Some(k);
        }
        if !recycle {
            return None;
        }
        let mut s = self.take_oldest()?.session;
        s.reset();
        Some(SlotSession { slot: None, session: s })
    }
}
