//! `GgufWriter`: builds small GGUF files for test fixtures.
//!
//! It checks only what it needs to lay a file out (array element types, data sizes, shapes).
//! Duplicate names are written as given, which lets tests build files the reader must refuse.

use std::path::Path;

use crate::parse::{align_up, tensor_bytes, ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAGIC, MAX_DIMS};
use crate::value::type_id;
use crate::{GgmlType, GgufError, Value};

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    data: Vec<u8>,
}

pub struct GgufWriter {
    version: u32,
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// An empty GGUF v3 file.
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// A copy of `src`: its metadata less the keys in `drop`, with the values in `set` in place of
    /// the ones it keeps (in its order) or after them, and all its tensors.
    pub fn copy_of(src: &crate::GgufFile, drop: &[&str], set: &[(&str, Value)]) -> Self {
        let mut w = GgufWriter::new();
        for (k, v) in src.metadata() {
            if !drop.contains(&k.as_str()) {
                let v = set.iter().find(|(s, _)| s == k).map_or(v, |(_, n)| n);
                w.add_kv(k.clone(), v.clone());
            }
        }
        for (k, v) in set {
            if drop.contains(k) || !src.metadata().iter().any(|(s, _)| s == k) {
                w.add_kv(*k, v.clone());
            }
        }
        for t in src.tensors() {
            w.add_tensor(t.name.clone(), &t.dims, t.ggml_type, src.tensor_data(t).to_vec());
        }
        w
    }

    /// The version number written in the header (the layout is the same for 2 and 3).
    pub fn set_version(&mut self, version: u32) -> &mut Self {
        self.version = version;
        self
    }

    /// Sets `general.alignment` (as a u32, the type ggml expects); data is padded to it.
    pub fn set_alignment(&mut self, alignment: u32) -> &mut Self {
        self.metadata.retain(|(k, _)| k != ALIGNMENT_KEY);
        self.add_kv(ALIGNMENT_KEY, Value::U32(alignment))
    }

    /// Appends a key/value pair. Arrays must hold values of one type; an empty array is written
    /// with element type u8.
    pub fn add_kv(&mut self, key: impl Into<String>, value: Value) -> &mut Self {
        self.metadata.push((key.into(), value));
        self
    }

    /// Appends a tensor. `dims` has ne0 (the contiguous dimension) first; `data` must be exactly
    /// the tensor's size in `ggml_type`.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
        data: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.to_vec(),
            ggml_type,
            data: data.into(),
        });
        self
    }

    pub fn write(&self, path: &Path) -> Result<(), GgufError> {
        let bytes = self.to_bytes()?;
        std::fs::write(path, bytes).map_err(|source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        })
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let alignment = self.alignment()?;
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, self.version);
        put_u64(&mut out, self.tensors.len() as u64);
        put_u64(&mut out, self.metadata.len() as u64);
        for (key, value) in &self.metadata {
            put_str(&mut out, key);
            put_u32(&mut out, value.type_id());
            put_value(&mut out, key, value)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            check_tensor(t)?;
            put_str(&mut out, &t.name);
            put_u32(&mut out, t.dims.len() as u32);
            for &d in &t.dims {
                put_u64(&mut out, d);
            }
            put_u32(&mut out, t.ggml_type.id());
            put_u64(&mut out, offset);
            offset =
                align_up(offset + t.data.len() as u64, alignment).expect("fixture sizes are small");
        }
        if !self.tensors.is_empty() {
            pad(&mut out, alignment);
            for t in &self.tensors {
                out.extend_from_slice(&t.data);
                pad(&mut out, alignment);
            }
        }
        Ok(out)
    }

    fn alignment(&self) -> Result<u64, GgufError> {
        let Some((_, v)) = self.metadata.iter().rev().find(|(k, _)| k == ALIGNMENT_KEY) else {
            return Ok(DEFAULT_ALIGNMENT);
        };
        match v.as_u64() {
            Some(a) if a.is_power_of_two() => Ok(a),
            _ => Err(GgufError::Writer(format!(
                "{ALIGNMENT_KEY} {v:?} is not a power of two"
            ))),
        }
    }
}

fn check_tensor(t: &PendingTensor) -> Result<(), GgufError> {
    if t.dims.len() > MAX_DIMS {
        return Err(GgufError::Writer(format!(
            "tensor '{}' has {} dims (at most {MAX_DIMS})",
            t.name,
            t.dims.len()
        )));
    }
    let need = tensor_bytes(&t.name, &t.dims, t.ggml_type)
        .map_err(|e| GgufError::Writer(e.to_string()))?;
    if need != t.data.len() as u64 {
        return Err(GgufError::Writer(format!(
            "tensor '{}' {:?} as {} needs {need} bytes of data, got {}",
            t.name,
            t.dims,
            t.ggml_type,
            t.data.len()
        )));
    }
    Ok(())
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn pad(out: &mut Vec<u8>, alignment: u64) {
    let len = align_up(out.len() as u64, alignment).expect("fixture sizes are small");
    out.resize(len as usize, 0);
}

fn put_value(out: &mut Vec<u8>, key: &str, value: &Value) -> Result<(), GgufError> {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(s) => put_str(out, s),
        Value::Array(items) => {
            let elem = items.first().map_or(type_id::U8, Value::type_id);
            if let Some(odd) = items.iter().find(|v| v.type_id() != elem) {
                return Err(GgufError::Writer(format!(
                    "array '{key}' mixes {} and {} elements",
                    items[0].type_name(),
                    odd.type_name()
                )));
            }
            put_u32(out, elem);
            put_u64(out, items.len() as u64);
            for item in items {
                put_value(out, key, item)?;
            }
        }
    }
    Ok(())
}
