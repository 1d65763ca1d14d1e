//! A bounds-checked little-endian reader over the file bytes.

use crate::GgufError;

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    pub fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    pub fn truncated(&self, what: impl FnOnce() -> String, need: u64) -> GgufError {
        GgufError::Truncated {
            what: what(),
            need,
            offset: self.pos(),
            file_len: self.file_len(),
        }
    }

    /// The next `n` bytes; `what` names them for the error message and is only built on failure.
    pub fn take(&mut self, n: u64, what: impl FnOnce() -> String) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(self.truncated(what, n));
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn array<const N: usize>(
        &mut self,
        what: impl FnOnce() -> String,
    ) -> Result<[u8; N], GgufError> {
        let b = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    pub fn u8(&mut self, what: impl FnOnce() -> String) -> Result<u8, GgufError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: impl FnOnce() -> String) -> Result<u16, GgufError> {
        self.array(what).map(u16::from_le_bytes)
    }

    pub fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A u64 count of items that each take at least `min_item` bytes, refused when that many
    /// items could not fit in the rest of the file (so no allocation is sized by a bogus count).
    pub fn count(&mut self, min_item: u64, what: impl Fn() -> String) -> Result<u64, GgufError> {
        let offset = self.pos();
        let count = self.u64(|| format!("{} count", what()))?;
        let remaining = self.remaining();
        let need = u128::from(count) * u128::from(min_item);
        if need > u128::from(remaining) {
            return Err(GgufError::CountTooLarge {
                what: what(),
                count,
                offset,
                need,
                remaining,
            });
        }
        Ok(count)
    }

    /// A u64-length-prefixed string. Invalid UTF-8 is replaced (as U+FFFD) rather than refused,
    /// since ggml itself never validates it.
    pub fn string(&mut self, what: impl Fn() -> String) -> Result<String, GgufError> {
        let len = self.u64(|| format!("{} length", what()))?;
        let bytes = self.take(len, || format!("{} ({len}-byte string)", what()))?;
        Ok(match std::str::from_utf8(bytes) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
        })
    }
}
