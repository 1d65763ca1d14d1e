//! The text of one token as llama.cpp's `token_to_piece` renders it: special tokens as their text,
//! SentencePiece-style `▁` as a space, byte tokens `<0xXX>` as that byte, GPT-2 byte characters as
//! their bytes, RWKV escapes undone.

use crate::bytes;
use crate::vocab::{attr, ModelKind, Vocab};

/// What `token_to_piece(id, special = true)` gives; `special = false` only empties UNKNOWN and
/// CONTROL tokens.
pub fn render(v: &Vocab, id: u32) -> Vec<u8> {
    let a = v.attrs[id as usize];
    let text = &v.texts[id as usize];
    if v.kind == ModelKind::Rwkv {
        return crate::rwkv::unescape(text);
    }
    if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
        return text.as_bytes().to_vec();
    }
    if a & attr::NORMAL != 0 {
        return match v.kind {
            ModelKind::Bpe(_) if !v.escape_whitespaces => bytes::decode(text),
            _ => text.replace('\u{2581}', " ").into_bytes(),
        };
    }
    if a & attr::BYTE != 0 {
        return match v.kind {
            ModelKind::Wpm => Vec::new(),
            _ => vec![v.token_byte(id)],
        };
    }
    Vec::new()
}
