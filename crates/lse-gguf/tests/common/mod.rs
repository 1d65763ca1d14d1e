//! Hand-built GGUF byte images for tests that need files the writer would never produce.
#![allow(dead_code)]

pub const ALIGN: usize = 32;

/// Little-endian byte builder following the GGUF layout by hand.
#[derive(Default, Clone)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version, tensor count, key/value count.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    /// A u32 (value type 4) key/value pair.
    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key).u32(4).u32(v)
    }
    /// One tensor table entry.
    pub fn tensor(&mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(type_id).u64(offset)
    }
    pub fn pad(&mut self, align: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    pub fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    pub fn bytes(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// Little-endian bytes of f32 values.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
