//! Token text → id without a second copy of the texts: an open-addressing table of ids whose keys
//! are the vocabulary's own texts (4 bytes a slot; a map of owned keys costs ~100 bytes a token,
//! 25 MB for a 262k vocabulary).

use crate::hash::FastHasher;
use crate::texts::Texts;
use std::hash::Hasher;

const EMPTY: u32 = u32::MAX;

pub struct TokenIndex {
    slots: Vec<u32>,
}

impl TokenIndex {
    /// Room for `n` tokens at a load of at most one half.
    pub fn with_capacity(n: usize) -> TokenIndex {
        TokenIndex { slots: vec![EMPTY; (2 * n).next_power_of_two().max(16)] }
    }

    fn start(&self, text: &[u8]) -> usize {
        let mut h = FastHasher::default();
        h.write(text);
        h.finish() as usize & (self.slots.len() - 1)
    }

    /// The id whose text in `texts` is `text`.
    #[inline]
    pub fn get(&self, texts: &Texts, text: &[u8]) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = self.start(text);
        loop {
            let id = self.slots[i];
            if id == EMPTY {
                return None;
            }
            if texts[id as usize].as_bytes() == text {
                return Some(id);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `id` (its text is `texts[id]`); when another id already has that text, returns it and
    /// adds nothing. The table must have been made for at least as many ids as are inserted.
    pub fn insert(&mut self, texts: &Texts, id: u32) -> Option<u32> {
        let text = texts[id as usize].as_bytes();
        let mask = self.slots.len() - 1;
        let mut i = self.start(text);
        while self.slots[i] != EMPTY {
            let other = self.slots[i];
            if texts[other as usize].as_bytes() == text {
                return Some(other);
            }
            i = (i + 1) & mask;
        }
        self.slots[i] = id;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_text_and_refuses_others() {
        let texts: Texts = (0..5000).map(|i| format!("t{i}")).chain(["".to_string(), "é".to_string()]).collect();
        let mut ix = TokenIndex::with_capacity(texts.len());
        for id in 0..texts.len() as u32 {
            assert_eq!(ix.insert(&texts, id), None);
        }
        for (id, t) in texts.iter().enumerate() {
            assert_eq!(ix.get(&texts, t.as_bytes()), Some(id as u32));
        }
        assert_eq!(ix.get(&texts, b"t5000"), None);
        assert_eq!(ix.get(&texts, b"x"), None);
        let dup: Texts = texts.iter().chain(["t17"]).collect();
        assert_eq!(ix.insert(&dup, dup.len() as u32 - 1), Some(17));
    }
}
