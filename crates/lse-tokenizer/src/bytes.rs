//! GPT-2's reversible byte <-> character mapping used by byte-level BPE vocabularies: printable
//! Latin-1 bytes stand for themselves, the other 68 bytes map to U+0100 and up, in byte order.

use std::sync::OnceLock;

fn printable(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The character standing for each byte.
pub fn byte_to_char() -> &'static [char; 256] {
    static MAP: OnceLock<[char; 256]> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut map = ['\0'; 256];
        let mut n = 0u32;
        for b in 0..=255u8 {
            map[b as usize] = if printable(b) {
                b as char
            } else {
                n += 1;
                char::from_u32(255 + n).unwrap()
            };
        }
        map
    })
}

/// The byte a character stands for, if it is one of the 256.
pub fn char_to_byte(c: char) -> Option<u8> {
    let c = c as u32;
    if c < 256 && printable(c as u8) {
        return Some(c as u8);
    }
    if (256..256 + 68).contains(&c) {
        let k = c - 256;
        return (0..=255u8).filter(|&b| !printable(b)).nth(k as usize);
    }
    None
}

/// Decodes a byte-level token text to the bytes it stands for. A character outside the map
/// becomes llama.cpp's marker: `[UNK_BYTE_0x` and the character's UTF-8 bytes in hex, then the
/// whole token text and `]`.
pub fn decode(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let m = byte_to_char();
        assert_eq!(m[b' ' as usize], '\u{120}');
        assert_eq!(m[b'\n' as usize], '\u{10A}');
        assert_eq!(m[b'a' as usize], 'a');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(m[b as usize]), Some(b));
        }
        assert_eq!(decode("\u{120}hi\u{10A}"), b" hi\n");
        assert_eq!(decode("a\u{4e00}"), "a[UNK_BYTE_0xe4b880a\u{4e00}]".as_bytes());
    }
}
