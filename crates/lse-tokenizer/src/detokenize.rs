//! Ids back to text, as llama.cpp's `detokenize` does it: optionally drop the BOS/EOS the
//! vocabulary adds, concatenate the pieces (the first one without its leading space when the
//! vocabulary adds a space prefix), then, for vocabularies that ask for it, tidy the spaces around
//! punctuation and English contractions.

use crate::vocab::{attr, Vocab};

pub fn detokenize(
    v: &Vocab,
    pieces: &[Vec<u8>],
    ids: &[u32],
    remove_special: bool,
    unparse_special: bool,
) -> Vec<u8> {
    let mut ids = ids;
    let mut strip_space = v.add_space_prefix;
    if remove_special && v.add_bos {
        if let (Some(&first), Some(bos)) = (ids.first(), v.bos) {
            if first == bos {
                strip_space = false;
                ids = &ids[1..];
            }
        }
    }
    if remove_special && v.add_eos {
        if let (Some(&last), Some(eos)) = (ids.last(), v.eos) {
            if last == eos {
                ids = &ids[..ids.len() - 1];
            }
        }
    }
    let mut out = Vec::new();
    for &id in ids {
        let piece = piece_of(v, pieces, id, unparse_special);
        let piece = if strip_space {
            piece.strip_prefix(b" ").unwrap_or(piece)
        } else {
            piece
        };
        strip_space = false;
        out.extend_from_slice(piece);
    }
    if v.clean_spaces {
        clean_spaces(&mut out);
    }
    out
}

/// `token_to_piece`: the rendered piece, or nothing for UNKNOWN/CONTROL tokens unless `special`.
pub fn piece_of<'a>(v: &Vocab, pieces: &'a [Vec<u8>], id: u32, special: bool) -> &'a [u8] {
    let Some(p) = pieces.get(id as usize) else {
        return &[];
    };
    if !special && v.attrs[id as usize] & (attr::UNKNOWN | attr::CONTROL) != 0 {
        return &[];
    }
    p
}

/// The three clean-up passes of llama.cpp's detokenizer.
fn clean_spaces(t: &mut Vec<u8>) {
    // " ?", " !", " .", " ,": drop the space
    let mut out: Vec<u8> = Vec::with_capacity(t.len());
    for i in 0..t.len() {
        let x = t[i];
        if i > 0 && t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            out.pop();
        }
        out.push(x);
    }
    *t = out;

    // " ' " between spaces: drop both spaces
    let mut out: Vec<u8> = Vec::with_capacity(t.len());
    let n = t.len();
    let mut i = 0;
    while i < n {
        let x = t[i];
        if i > 0 && x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            out.pop();
            out.push(x);
            // the space after is dropped, and no longer counts as the character before the next
            if i + 1 < n {
                t[i + 1] = 0;
            }
            i += 2;
            continue;
        }
        out.push(x);
        i += 1;
    }
    *t = out;

    // " 's", " 'm", " 're", " 've": drop the space
    let mut out: Vec<u8> = Vec::with_capacity(t.len());
    let n = t.len();
    for i in 0..n {
        let x = t[i];
        if i > 0 && t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            let x2 = t.get(i + 2).copied().filter(|_| i + 2 < n);
            let drop = matches!(x1, b's' | b'm')
                || matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e')));
            if drop {
                out.pop();
            }
        }
        out.push(x);
    }
    *t = out;
}

#[cfg(test)]
mod tests {
    use super::clean_spaces;

    fn clean(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        clean_spaces(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn passes() {
        assert_eq!(clean("a , b ."), "a, b.");
        assert_eq!(clean("rock ' n"), "rock'n");
        assert_eq!(clean("it 's I 'm we 're 've 'll 't"), "it's I'm we're've 'll 't");
        assert_eq!(clean(" ,"), ",");
    }
}
