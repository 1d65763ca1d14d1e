//! JSON mode (`response_format: {"type": "json_object"}`): whether a text is the start of one
//! JSON object (RFC 8259), byte by byte, so the sampler can refuse tokens that would leave it. The
//! state is a few words and `Copy`: trying a token is copying it and feeding the token's bytes.
//! As llama.cpp's JSON grammar does, runs of whitespace and a number's length are bounded, so a
//! model cannot loop on blanks or digits; string contents are not checked as UTF-8.

/// Deepest nesting of objects and arrays (one bit of `kinds` each).
const MAX_DEPTH: u32 = 128;
/// Longest run of whitespace between tokens of the grammar.
pub(super) const MAX_BLANKS: u8 = 32;
/// Longest number, in bytes.
pub(super) const MAX_NUMBER: u8 = 32;

const WORDS: [&[u8]; 3] = [b"true", b"false", b"null"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Before the top-level `{`.
    Start,
    /// After `{`: a key or `}`.
    KeyOrClose,
    /// After `,` in an object.
    Key,
    /// After a key.
    Colon,
    /// After `:`, or `,` in an array.
    Value,
    /// After `[`: a value or `]`.
    ValueOrClose,
    Str { key: bool },
    Escape { key: bool },
    Hex { key: bool, left: u8 },
    Num(Num),
    Word { word: u8, at: u8 },
    /// After a value inside an object or array.
    After,
    /// The top-level object is closed.
    Done,
}

/// Where a number is: after `-`, a leading `0`, integer digits, `.`, fraction digits, `e`, the
/// exponent's sign, exponent digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

impl Num {
    /// The state after a number's first byte `b`, if a number starts with it.
    pub(super) fn first(b: u8) -> Option<Num> {
        match b {
            b'-' => Some(Num::Minus),
            b'0' => Some(Num::Zero),
            b'1'..=b'9' => Some(Num::Int),
            _ => None,
        }
    }

    /// Whether a number may end here.
    pub(super) fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::Exp)
    }

    /// The state after byte `b`, if `b` continues the number.
    pub(super) fn next(self, b: u8) -> Option<Num> {
        let digit = b.is_ascii_digit();
        match (self, b) {
            (Num::Minus, b'0') => Some(Num::Zero),
            (Num::Minus, _) if digit => Some(Num::Int),
            (Num::Int, _) if digit => Some(Num::Int),
            (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
            (Num::Dot | Num::Frac, _) if digit => Some(Num::Frac),
            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::E),
            (Num::E, b'+' | b'-') => Some(Num::ESign),
            (Num::E | Num::ESign | Num::Exp, _) if digit => Some(Num::Exp),
            _ => None,
        }
    }
}

/// How far a text has come as the start of one JSON object.
#[derive(Clone, Copy, Debug)]
pub struct JsonObject {
    at: At,
    depth: u32,
    /// Bit i set: nesting level i is an object (else an array).
    kinds: u128,
    /// Length of the current whitespace run or number.
    run: u8,
}

impl Default for JsonObject {
    fn default() -> Self {
        JsonObject { at: At::Start, depth: 0, kinds: 0, run: 0 }
    }
}

impl JsonObject {
    /// Whether the object is closed (only whitespace may follow).
    pub fn is_complete(&self) -> bool {
        self.at == At::Done
    }

    /// Whether the text followed by `bytes` is still the start of one JSON object.
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let mut s = *self;
        s.push_all(bytes)
    }

    /// Feeds `bytes`; false (and the state is then meaningless) if one of them breaks the object.
    pub fn push_all(&mut self, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.push(b))
    }

    fn push(&mut self, b: u8) -> bool {
        match self.at {
            At::Str { key } => match b {
                b'"' => self.at = if key { At::Colon } else { At::After },
                b'\\' => self.at = At::Escape { key },
                0..0x20 => return false,
                _ => {}
            },
            At::Escape { key } => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at = At::Str { key },
                b'u' => self.at = At::Hex { key, left: 4 },
                _ => return false,
            },
            At::Hex { key, left } => {
                if !b.is_ascii_hexdigit() {
                    return false;
                }
                self.at = if left == 1 { At::Str { key } } else { At::Hex { key, left: left - 1 } };
            }
            At::Num(n) => match n.next(b) {
                Some(m) if self.run < MAX_NUMBER => {
                    self.run += 1;
                    self.at = At::Num(m);
                }
                Some(_) => return false,
                None if n.complete() => {
                    self.at = At::After;
                    self.run = 0;
                    return self.push(b);
                }
                None => return false,
            },
            At::Word { word, at } => {
                let w = WORDS[word as usize];
                if b != w[at as usize] {
                    return false;
                }
                self.at = if at as usize + 1 == w.len() { At::After } else { At::Word { word, at: at + 1 } };
            }
            _ if matches!(b, b' ' | b'\t' | b'\n' | b'\r') => {
                self.run += 1;
                return self.run <= MAX_BLANKS;
            }
            _ => {
                self.run = 0;
                return self.structural(b);
            }
        }
        true
    }

    /// A byte outside strings, numbers and literals, not whitespace.
    fn structural(&mut self, b: u8) -> bool {
        let in_object = self.depth > 0 && self.kinds >> (self.depth - 1) & 1 == 1;
        match (self.at, b) {
            (At::Start, b'{') => self.open(true),
            (At::KeyOrClose | At::Key, b'"') => {
                self.at = At::Str { key: true };
                true
            }
            (At::KeyOrClose, b'}') | (At::ValueOrClose, b']') => self.close(),
            (At::Colon, b':') => {
                self.at = At::Value;
                true
            }
            (At::Value | At::ValueOrClose, _) => self.value(b),
            (At::After, b',') => {
                self.at = if in_object { At::Key } else { At::Value };
                true
            }
            (At::After, b'}') if in_object => self.close(),
            (At::After, b']') if !in_object => self.close(),
            _ => false,
        }
    }

    /// The first byte of a value.
    fn value(&mut self, b: u8) -> bool {
        self.at = match b {
            b'"' => At::Str { key: false },
            b'{' => return self.open(true),
            b'[' => return self.open(false),
            b'-' | b'0'..=b'9' => At::Num(Num::first(b).expect("a number's first byte")),
            b't' => At::Word { word: 0, at: 1 },
            b'f' => At::Word { word: 1, at: 1 },
            b'n' => At::Word { word: 2, at: 1 },
            _ => return false,
        };
        self.run = u8::from(matches!(self.at, At::Num(_)));
        true
    }

    fn open(&mut self, object: bool) -> bool {
        if self.depth == MAX_DEPTH {
            return false;
        }
        self.kinds = self.kinds & !(1 << self.depth) | u128::from(object) << self.depth;
        self.depth += 1;
        self.at = if object { At::KeyOrClose } else { At::ValueOrClose };
        true
    }

    fn close(&mut self) -> bool {
        self.depth -= 1;
        self.at = if self.depth == 0 { At::Done } else { At::After };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::JsonObject;

    fn fed(text: impl AsRef<[u8]>) -> Option<JsonObject> {
        let mut j = JsonObject::default();
        j.push_all(text.as_ref()).then_some(j)
    }

    /// Every prefix of a JSON object serde_json parses is accepted, incomplete until its closing
    /// brace; the whole is complete.
    #[test]
    fn accepts_every_prefix_of_objects_and_completes_at_the_end() {
        let objects = [
            r#"{}"#,
            r#" { "a" : 1 } "#,
            r#"{"name":"Alice","age":30,"tags":["x","y"],"ok":true,"none":null,"f":false}"#,
            r#"{"n":-0.5e+10,"m":0,"k":12.25E-3,"z":[0,-1,2e5]}"#,
            r#"{"s":"quote \" backslash \\ slash \/ \b\f\n\r\t \u00e9 é ✓"}"#,
            "{\n  \"nested\": {\"deep\": [[[{}]], []], \"e\": {}},\n  \"last\": \"x\"\n}",
        ];
        for o in objects {
            let v: serde_json::Value = serde_json::from_str(o).unwrap();
            assert!(v.is_object());
            let end = o.trim_end().len();
            let b = o.as_bytes();
            for i in 0..b.len() {
                let j = fed(&b[..i]).unwrap_or_else(|| panic!("prefix {:?} refused", String::from_utf8_lossy(&b[..i])));
                assert_eq!(j.is_complete(), i >= end, "{:?}", String::from_utf8_lossy(&b[..i]));
            }
            assert!(fed(o).unwrap().is_complete(), "{o}");
        }
    }

    /// Texts that no JSON object starts with are refused at the byte that breaks them.
    #[test]
    fn refuses_what_breaks_an_object() {
        for bad in [
            "[1]", "\"x\"", "1", "{a:1}", "{'a':1}", "{\"a\" 1}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1]", "{\"a\":[1}",
            "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":+1}", "{\"a\":tru}x", "{\"a\":nul1}",
            "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"line\nbreak\"}", "{}x",
            "{},", "{\"a\":1}}", "{\"a\":1 2}", "{\"a\"::1}", "{,}",
        ] {
            assert!(fed(bad).is_none(), "{bad:?} accepted");
            let v: Result<serde_json::Value, _> = serde_json::from_str(bad);
            assert!(!v.is_ok_and(|v| v.is_object()), "{bad:?} is an object to serde_json");
        }
    }

    /// Long runs of blanks or digits and nesting past the depth bound are refused.
    #[test]
    fn bounds_blanks_numbers_and_depth() {
        assert!(fed(format!("{{{}\"a\":1}}", " ".repeat(32))).is_some());
        assert!(fed(format!("{{{}", " ".repeat(33))).is_none());
        assert!(fed(format!("{{\"a\":{}}}", "9".repeat(32))).is_some());
        assert!(fed(format!("{{\"a\":{}", "9".repeat(33))).is_none());
        let deep = format!("{{\"a\":{}", "[".repeat(127));
        assert!(fed(&deep).is_some());
        assert!(fed(format!("{deep}[")).is_none());
        // a deep nesting closes level by level, each with its own kind
        let mixed = "{\"a\":[{\"b\":[[{}]]},{\"c\":[]}]}";
        assert!(fed(mixed).unwrap().is_complete());
        assert!(fed("{\"a\":[{\"b\":[[{}]}").is_none());
    }

    /// Random mutations of objects: whatever the machine calls a complete object, serde_json
    /// parses as one (an independent parser as the oracle).
    #[test]
    fn what_it_completes_serde_json_parses() {
        let base = br#"{"k":[1,-2.5e3,true,null,{"s":"a\"b\u0041"}],"t":false}"#;
        let alphabet = b"{}[]:,\"\\-+.eE0129truefalsnul ux";
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut complete = 0;
        for _ in 0..20000 {
            let mut t = base.to_vec();
            for _ in 0..1 + next() % 3 {
                let i = (next() % t.len() as u64) as usize;
                match next() % 3 {
                    0 => t[i] = alphabet[(next() % alphabet.len() as u64) as usize],
                    1 => _ = t.remove(i),
                    _ => t.insert(i, alphabet[(next() % alphabet.len() as u64) as usize]),
                }
            }
            let mut j = JsonObject::default();
            if j.push_all(&t) && j.is_complete() {
                complete += 1;
                let v: serde_json::Value = serde_json::from_slice(&t).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(&t)));
                assert!(v.is_object());
            }
        }
        assert!(complete > 100, "only {complete} mutants complete");
    }
}
