//! The bytes behind a `GgufFile`: a read-only memory map, or an owned copy aligned like one.

use memmap2::Mmap;

/// Owned bytes whose start is 64-byte aligned, so tensor data read from memory is as aligned
/// as tensor data read from a map (GGUF aligns each tensor relative to the file start).
pub(crate) struct AlignedBytes {
    blocks: Vec<Block>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; 64]);

impl AlignedBytes {
    pub fn copy_from(bytes: &[u8]) -> Self {
        let mut blocks = vec![Block([0; 64]); bytes.len().div_ceil(64)];
        for (block, chunk) in blocks.iter_mut().zip(bytes.chunks(64)) {
            block.0[..chunk.len()].copy_from_slice(chunk);
        }
        AlignedBytes {
            blocks,
            len: bytes.len(),
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `Block` is 64 plain bytes with no padding, the vector holds at least `len`
        // bytes of them contiguously, and the slice borrows `self` so it cannot outlive them.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr().cast::<u8>(), self.len) }
    }
}

pub(crate) enum Storage {
    Mapped(Mmap),
    Owned(AlignedBytes),
}

impl Storage {
    /// Tells the kernel that the mapped pages wholly inside `start..end` are not needed now: they
    /// leave the resident set and are read from the file again if touched. No-op when owned.
    pub fn release(&self, start: usize, end: usize) {
        #[cfg(unix)]
        if let Storage::Mapped(m) = self {
            const PAGE: usize = 4096;
            let base = m.as_ptr() as usize;
            let first = (base + start).div_ceil(PAGE) * PAGE - base;
            let last = ((base + end) / PAGE) * PAGE - base;
            if last > first && end <= m.len() {
                // SAFETY: the map is read-only and private; dropped pages are refilled from the
                // file on the next access, so no data the program can see changes.
                let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, last - first) };
            }
        }
        #[cfg(not(unix))]
        let _ = (start, end);
    }

    pub fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(b) => b.as_slice(),
        }
    }
}
