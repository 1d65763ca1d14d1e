//! RWKV "world" tokenizer: token texts are escaped byte strings; a text is cut greedily into the
//! longest token that matches at each position, walking a byte trie.

use crate::trie::{ByteTrie, ROOT};
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
    trie: ByteTrie,
}

impl Rwkv {
    pub fn new(v: &Vocab) -> Rwkv {
        let mut trie = ByteTrie::new();
        for (id, text) in v.texts.iter().enumerate() {
            trie.insert(&unescape(text), id as u32);
        }
        Rwkv { trie }
    }

    pub fn tokenize(&self, v: &Vocab, text: &[u8], out: &mut Vec<u32>) {
        let mut pos = 0;
        while pos < text.len() {
            let Some(first) = self.trie.child(ROOT, text[pos]) else {
                // no token starts with this byte: the unknown token, if there is one
                out.extend(v.unk);
                pos += 1;
                continue;
            };
            let mut node = first;
            let mut best: Option<(u32, usize)> = None;
            let mut p = pos;
            loop {
                if let Some(id) = self.trie.value(node) {
                    best = Some((id, p + 1));
                }
                if p + 1 >= text.len() {
                    break;
                }
                p += 1;
                match self.trie.child(node, text[p]) {
                    Some(n) => node = n,
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
