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
    pub fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(b) => b.as_slice(),
        }
    }
}
