//! `GgufFile`: an opened, fully validated GGUF file.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::parse::{parse, Parsed};
use crate::storage::{AlignedBytes, Storage};
use crate::{GgmlType, GgufError, Value};

/// One entry of the tensor table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// Sizes with ne0 (the contiguous dimension) first, as ggml orders them.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Byte offset of the data from the start of the data section.
    pub offset: u64,
    /// Bytes of data.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Number of elements (1 for a tensor with no dimensions).
    pub fn n_elements(&self) -> u64 {
        // Proven not to overflow when the file was opened.
        self.dims.iter().product()
    }
}

/// A GGUF v2/v3 file whose header, metadata and tensor table have been checked: every tensor's
/// data lies inside the file at an aligned offset.
pub struct GgufFile {
    storage: Storage,
    /// Header, metadata and tensor table, all bounds-checked against `storage`.
    parsed: Parsed,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.parsed.version)
            .field("alignment", &self.parsed.alignment)
            .field("metadata", &self.parsed.metadata.len())
            .field("tensors", &self.parsed.tensors.len())
            .field("data_start", &self.parsed.data_start)
            .finish()
    }
}

impl GgufFile {
    /// Maps the file read-only and validates it.
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        // a FIFO or a device would block the open or read as empty: only files are models
        if !std::fs::metadata(path).map_err(io)?.is_file() {
            return Err(io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file")));
        }
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            // Nothing to map; report it the way any other short file is reported.
            return Self::from_storage(Storage::Owned(AlignedBytes::copy_from(&[])));
        }
        // SAFETY: the map is read-only. Like every mmap-based reader we rely on the file not
        // being truncated or rewritten by another process while it is open.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Self::from_storage(Storage::Mapped(map))
    }

    /// Validates a GGUF image held in memory (same checks as `open`).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GgufFile, GgufError> {
        Self::from_storage(Storage::Owned(AlignedBytes::copy_from(&bytes)))
    }

    fn from_storage(storage: Storage) -> Result<GgufFile, GgufError> {
        let parsed = parse(storage.bytes())?;
        Ok(GgufFile { storage, parsed })
    }

    pub fn version(&self) -> u32 {
        self.parsed.version
    }

    /// `general.alignment`, or 32 when absent.
    pub fn alignment(&self) -> u64 {
        self.parsed.alignment
    }

    /// Absolute file offset of the data section.
    pub fn data_start(&self) -> u64 {
        self.parsed.data_start
    }

    /// All key/value pairs, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.parsed.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.parsed.metadata_index.get(key).map(|&i| &self.parsed.metadata[i].1)
    }

    /// Drops the parsed values of `keys` (vocabulary-sized arrays a consumer has already read,
    /// tens of MB for a 262k vocabulary); `get` then answers `None` for them. The file is unchanged.
    pub fn forget(&mut self, keys: &[&str]) {
        let p = &mut self.parsed;
        p.metadata.retain(|(k, _)| !keys.contains(&k.as_str()));
        p.metadata_index = p.metadata.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
    }

    /// Any non-negative integer value.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.as_u64()
    }

    pub fn get_i64(&self, key: &str) -> Option<i64> {
        self.get(key)?.as_i64()
    }

    /// A float value, or an integer converted.
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        self.get(key)?.as_f32()
    }

    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key)?.as_f64()
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }

    pub fn get_array(&self, key: &str) -> Option<&[Value]> {
        self.get(key)?.as_array()
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// The tensor table, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.parsed.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_position(name).map(|i| &self.parsed.tensors[i])
    }

    /// Where tensor `name` stands in [`GgufFile::tensors`].
    pub fn tensor_position(&self, name: &str) -> Option<usize> {
        self.parsed.tensor_index.get(name).copied()
    }

    /// The bytes of a tensor from this file's table. For a `TensorInfo` that did not come from
    /// this file and does not fit in it, the slice is empty rather than a panic.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let range = || {
            let start = usize::try_from(self.parsed.data_start.checked_add(t.offset)?).ok()?;
            let end = start.checked_add(usize::try_from(t.n_bytes).ok()?)?;
            self.storage.bytes().get(start..end)
        };
        range().unwrap_or(&[])
    }

    /// Drops the resident pages wholly inside `part`, a slice of this file's image (e.g. the rows
    /// of a tensor already repacked). A slice from elsewhere is ignored.
    pub fn release_pages(&self, part: &[u8]) {
        if let Some(start) = self.offset_of(part) {
            self.storage.release(start, start + part.len());
        }
    }

    /// Where `part` starts in the file image, when it lies wholly inside it.
    fn offset_of(&self, part: &[u8]) -> Option<usize> {
        let image = self.storage.bytes();
        let start = (part.as_ptr() as usize).checked_sub(image.as_ptr() as usize)?;
        (start.checked_add(part.len())? <= image.len()).then_some(start)
    }

    /// The whole file image.
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }
}
