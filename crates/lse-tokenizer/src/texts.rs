//! The token texts in one buffer: an end offset per token instead of a `String` each (a 262k
//! vocabulary's texts take ~3 MB here against ~15 MB as separate strings).

pub struct Texts {
    bytes: String,
    ends: Vec<u32>,
}

impl Texts {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn get(&self, id: usize) -> Option<&str> {
        let end = *self.ends.get(id)? as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] as usize };
        Some(&self.bytes[start..end])
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|i| &self[i])
    }
}

impl std::ops::Index<usize> for Texts {
    type Output = str;

    fn index(&self, id: usize) -> &str {
        self.get(id).unwrap_or_else(|| panic!("token id {id} outside a vocabulary of {}", self.len()))
    }
}

impl<S: AsRef<str>> FromIterator<S> for Texts {
    /// Panics past 4 GiB of text (no vocabulary comes near).
    fn from_iter<I: IntoIterator<Item = S>>(it: I) -> Texts {
        let mut t = Texts { bytes: String::new(), ends: Vec::new() };
        for s in it {
            t.bytes.push_str(s.as_ref());
            t.ends.push(u32::try_from(t.bytes.len()).expect("token texts exceed 4 GiB"));
        }
        t.bytes.shrink_to_fit();
        t
    }
}
