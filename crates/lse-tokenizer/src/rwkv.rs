//! RWKV "world" tokenizer: token texts are escaped byte strings; a text is cut greedily into the
//! longest token that matches at each position, walking a byte trie.

use crate::hash::FastMap;
use crate::vocab::Vocab;

/// The bytes of an escaped RWKV token text (`\t`, `\n`, `\r`, `\xHH`, `\<c>` for a literal c),
/// decoded with llama.cpp's arithmetic: hex digits are not checked.
pub fn unescape(escaped: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(escaped.len());
    let mut escaping = false;
    let mut hex_left = 0u8;
    let mut acc = 0u8;
    for &c in escaped.as_bytes() {
        if hex_left != 0 {
            let d = if c >= b'a' {
                c.wrapping_sub(b'a').wrapping_add(10)
            } else {
                c.wrapping_sub(b'0')
            };
            acc = (acc << 4).wrapping_add(d);
            hex_left -= 1;
            if hex_left == 0 {
                out.push(acc);
                acc = 0;
            }
            continue;
        }
        if escaping {
            match c {
                b't' => out.push(b'\t'),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b'x' => hex_left = 2,
                _ => out.push(c),
            }
            escaping = false;
            continue;
        }
        if c == b'\\' {
            escaping = true;
            continue;
        }
        out.push(c);
    }
    out
}

/// A byte trie over the unescaped token texts.
pub struct Rwkv {
    /// (node, byte) -> child node; node 0 is the root.
    edges: FastMap<(u32, u8), u32>,
    /// The token ending at each node (a later token with the same bytes wins).
    value: Vec<Option<u32>>,
}

impl Rwkv {
    pub fn new(v: &Vocab) -> Rwkv {
        let mut t = Rwkv {
            edges: FastMap::default(),
            value: vec![None],
        };
        for (id, text) in v.texts.iter().enumerate() {
            let mut node = 0u32;
            for b in unescape(text) {
                let next = t.value.len() as u32;
                node = *t.edges.entry((node, b)).or_insert(next);
                if node == next {
                    t.value.push(None);
                }
            }
            t.value[node as usize] = Some(id as u32);
        }
        t
    }

    pub fn tokenize(&self, v: &Vocab, text: &[u8], out: &mut Vec<u32>) {
        let mut pos = 0;
        while pos < text.len() {
            let Some(&first) = self.edges.get(&(0, text[pos])) else {
                // no token starts with this byte: the unknown token, if there is one
                out.extend(v.unk);
                pos += 1;
                continue;
            };
            let mut node = first;
            let mut best: Option<(u32, usize)> = None;
            let mut p = pos;
            loop {
                if let Some(id) = self.value[node as usize] {
                    best = Some((id, p + 1));
                }
                if p + 1 >= text.len() {
                    break;
                }
                p += 1;
                match self.edges.get(&(node, text[p])) {
                    Some(&n) => node = n,
                    None => break,
                }
            }
            match best {
                Some((id, end)) => {
                    out.push(id);
                    pos = end;
                }
                None => {
                    // llama.cpp would emit token 0 and start over here, forever; emit it once
                    // and move on
                    out.push(0);
                    pos += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn escapes() {
        assert_eq!(unescape("a\\nb"), b"a\nb");
        assert_eq!(unescape("\\x41\\x0a"), b"A\n");
        assert_eq!(unescape("\\\\"), b"\\");
    }
}
