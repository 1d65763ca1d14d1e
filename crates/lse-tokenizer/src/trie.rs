//! A byte trie mapping token texts to ids (a later insert of the same bytes wins).

use crate::hash::FastMap;

pub struct ByteTrie {
    /// (node, byte) -> child; node 0 is the root.
    edges: FastMap<(u32, u8), u32>,
    value: Vec<Option<u32>>,
}

pub const ROOT: u32 = 0;

impl ByteTrie {
    pub fn new() -> ByteTrie {
        ByteTrie {
            edges: FastMap::default(),
            value: vec![None],
        }
    }

    pub fn insert(&mut self, key: &[u8], id: u32) {
        let mut node = ROOT;
        for &b in key {
            let next = self.value.len() as u32;
            node = *self.edges.entry((node, b)).or_insert(next);
            if node == next {
                self.value.push(None);
            }
        }
        self.value[node as usize] = Some(id);
    }

    #[inline]
    pub fn child(&self, node: u32, b: u8) -> Option<u32> {
        self.edges.get(&(node, b)).copied()
    }

    #[inline]
    pub fn value(&self, node: u32) -> Option<u32> {
        self.value[node as usize]
    }

    /// Length of the longest key that is a prefix of `s` (0 when none).
    pub fn longest_prefix(&self, s: &[u8]) -> usize {
        let mut node = ROOT;
        let mut best = 0;
        for (i, &b) in s.iter().enumerate() {
            match self.child(node, b) {
                Some(n) => node = n,
                None => break,
            }
            if self.value(node).is_some() {
                best = i + 1;
            }
        }
        best
    }
}
