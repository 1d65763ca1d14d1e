//! The string `format`s a JSON schema may ask for (`date`, `time`, `date-time`, `uuid`), written as
//! llama.cpp's JSON-schema grammar writes them: each format is a few alternatives of fixed byte
//! classes (72 at most, for `date-time`), quotes included, which a schema run follows as it follows
//! an `enum`'s literals: the alternatives still matching as a bit set (`json_schema`'s `Frame::Lit`).

/// A set of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Class([u64; 4]);

impl Class {
    fn of(ranges: &[(u8, u8)]) -> Class {
        let mut bits = [0u64; 4];
        for &(lo, hi) in ranges {
            for b in lo..=hi {
                bits[b as usize / 64] |= 1 << (b % 64);
            }
        }
        Class(bits)
    }

    pub(super) fn has(self, b: u8) -> bool {
        self.0[b as usize / 64] >> (b % 64) & 1 == 1
    }
}

/// Alternatives, each a sequence of classes.
pub(super) type Alternatives = Vec<Vec<Class>>;

/// The formats supported, as named in a schema.
pub(super) const FORMATS: [&str; 4] = ["date", "time", "date-time", "uuid"];

/// Format `name`'s quoted alternatives, if it is one of [`FORMATS`].
pub(super) fn compile(name: &str) -> Option<Alternatives> {
    let body = match name {
        "date" => date(),
        "time" => time(),
        "date-time" => cat(&[date(), lit("T"), time()]),
        "uuid" => {
            let hex = |n| rep(one(&[(b'0', b'9'), (b'a', b'f'), (b'A', b'F')]), n);
            cat(&[hex(8), lit("-"), hex(4), lit("-"), hex(4), lit("-"), hex(4), lit("-"), hex(12)])
        }
        _ => return None,
    };
    Some(cat(&[lit("\""), body, lit("\"")]))
}

/// `YYYY-MM-DD`: month 01–12, day 01–31.
fn date() -> Alternatives {
    let month = alt(&[cat(&[lit("0"), one(&[(b'1', b'9')])]), cat(&[lit("1"), one(&[(b'0', b'2')])])]);
    let day = alt(&[cat(&[lit("0"), one(&[(b'1', b'9')])]), cat(&[one(&[(b'1', b'2')]), digit()]), cat(&[lit("3"), one(&[(b'0', b'1')])])]);
    cat(&[rep(digit(), 4), lit("-"), month, lit("-"), day])
}

/// `HH:MM:SS`, optionally `.mmm`, then `Z` or `±HH:MM`.
fn time() -> Alternatives {
    let hour = alt(&[cat(&[one(&[(b'0', b'1')]), digit()]), cat(&[lit("2"), one(&[(b'0', b'3')])])]);
    let sixty = cat(&[one(&[(b'0', b'5')]), digit()]);
    let fraction = alt(&[vec![vec![]], cat(&[lit("."), rep(digit(), 3)])]);
    let zone = alt(&[lit("Z"), cat(&[one(&[(b'+', b'+'), (b'-', b'-')]), hour.clone(), lit(":"), sixty.clone()])]);
    cat(&[hour, lit(":"), sixty.clone(), lit(":"), sixty, fraction, zone])
}

fn digit() -> Alternatives {
    one(&[(b'0', b'9')])
}

fn one(ranges: &[(u8, u8)]) -> Alternatives {
    vec![vec![Class::of(ranges)]]
}

fn lit(s: &str) -> Alternatives {
    vec![s.bytes().map(|b| Class::of(&[(b, b)])).collect()]
}

fn rep(a: Alternatives, n: usize) -> Alternatives {
    cat(&vec![a; n])
}

fn alt(parts: &[Alternatives]) -> Alternatives {
    parts.concat()
}

/// Every way of following one alternative of each part by one of the next.
fn cat(parts: &[Alternatives]) -> Alternatives {
    parts.iter().fold(vec![vec![]], |acc, part| {
        acc.iter().flat_map(|head| part.iter().map(move |tail| [head.as_slice(), tail].concat())).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text` is a whole value of the format: some alternative holds each of its bytes.
    fn whole(name: &str, text: &str) -> bool {
        compile(name).unwrap().iter().any(|a| a.len() == text.len() && a.iter().zip(text.bytes()).all(|(c, b)| c.has(b)))
    }

    #[test]
    fn formats_take_their_values_and_no_others() {
        assert_eq!(compile("date-time").unwrap().len(), 72);
        for (name, good, bad) in [
            ("date", &["\"2024-02-29\"", "\"0000-01-01\"", "\"1999-12-31\"", "\"2024-10-30\""][..], &["\"2024-13-01\"", "\"2024-00-10\"", "\"2024-01-32\"", "\"2024-01-00\"", "\"2024-1-01\"", "\"24-01-01\"", "2024-01-01", "\"2024-01-01"][..]),
            ("time", &["\"23:59:59Z\"", "\"00:00:00.123+05:30\"", "\"12:30:00-23:59\"", "\"09:05:07.000Z\""], &["\"24:00:00Z\"", "\"12:60:00Z\"", "\"12:00:00\"", "\"12:00:00.12Z\"", "\"12:00:00+24:00\"", "\"12:00Z\"", "\"12:00:00z\""]),
            ("date-time", &["\"2024-02-29T23:59:59Z\"", "\"1970-01-01T00:00:00.000+00:00\""], &["\"2024-02-29 23:59:59Z\"", "\"2024-02-29T23:59:59\"", "\"2024-02-29\""]),
            ("uuid", &["\"123e4567-e89b-12d3-a456-426614174000\"", "\"ABCDEF01-2345-6789-ABCD-EF0123456789\""], &["\"123e4567e89b-12d3-a456-426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\"", "\"123e4567-e89b-12d3-a456-4266141740\""]),
        ] {
            for g in good {
                assert!(whole(name, g), "{name}: {g} refused");
            }
            for b in bad {
                assert!(!whole(name, b), "{name}: {b} taken");
            }
        }
        assert!(compile("email").is_none());
    }
}
