//! A session as bytes (llama-server's slot save and restore, llama.cpp's
//! `llama_state_seq_save_file`): its tokens, the KV rows of every attention layer as the cache
//! stores them, and any recurrent state, after a JSON header naming the model and the cache's
//! shapes. A session read back gives the logits the saved one would have, bit for bit.
//!
//! Layout: `LSESESS\0`, the header's length (u64 LE) and its JSON, the tokens (u32 LE), then per
//! attention layer its K bytes and its V bytes, then the recurrent buffers (f32 LE), then a
//! checksum of the parts after the header (u64 LE, [`crate::checksum`]): a file altered after it was
//! written is refused instead of giving other text.

use crate::checksum::checksum;
use crate::{Engine, EngineError, Session};
use lse_gguf::GgmlType;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

const MAGIC: &[u8; 8] = b"LSESESS\0";
const VERSION: u32 = 2;

/// What a session file must match to be read into an engine.
#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Header {
    version: u32,
    architecture: String,
    model_name: String,
    n_vocab: usize,
    /// `Weights::fingerprint` in hex: the file's tensors (another quantization or fine-tune
    /// of the same model differs).
    model_fingerprint: String,
    kv_dtype: String,
    /// Per layer, its KV heads and K and V head sizes (`None`: no attention cache).
    layers: Vec<Option<[usize; 3]>>,
    /// The recurrent buffers' lengths.
    recurrent: Vec<usize>,
    n_tokens: usize,
}

impl Engine {
    fn session_header(&self, s: &Session) -> Header {
        let st = &s.state;
        Header {
            version: VERSION,
            architecture: self.architecture().to_string(),
            model_name: self.model_name().to_string(),
            n_vocab: self.n_vocab(),
            model_fingerprint: format!("{:016x}", self.model.w.fingerprint()),
            kv_dtype: self.options().kv_dtype.name().to_string(),
            layers: st.kv.iter().map(|l| l.as_ref().map(|c| [c.n_head_kv, c.head_dim_k, c.head_dim_v])).collect(),
            recurrent: st.extra.as_ref().map_or_else(Vec::new, |r| r.buffers().iter().map(|b| b.len()).collect()),
            n_tokens: s.len(),
        }
    }

    /// Writes `s` to `w`; the bytes written.
    pub fn write_session(&self, s: &Session, w: &mut impl Write) -> std::io::Result<u64> {
        let header = serde_json::to_vec(&self.session_header(s)).map_err(std::io::Error::other)?;
        let mut n = 0u64;
        let mut sum = 0u64;
        w.write_all(MAGIC)?;
        w.write_all(&(header.len() as u64).to_le_bytes())?;
        w.write_all(&header)?;
        n += (MAGIC.len() + 8 + header.len()) as u64;
        let mut put = |b: &[u8]| {
            n += b.len() as u64;
            sum = checksum(sum, b);
            w.write_all(b)
        };
        put(&s.tokens.iter().flat_map(|t| t.to_le_bytes()).collect::<Vec<u8>>())?;
        for c in s.state.kv.iter().flatten() {
            let (k, v) = c.held(s.len());
            put(k)?;
            put(v)?;
        }
        if let Some(r) = &s.state.extra {
            for b in r.buffers() {
                put(&b.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())?;
            }
        }
        w.write_all(&sum.to_le_bytes())?;
        Ok(n + 8)
    }

    /// Reads a session written by [`Engine::write_session`] for this model and cache; `name`
    /// names the source in errors. The session and the bytes read.
    pub fn read_session(&self, r: &mut impl Read, name: &str) -> Result<(Session, u64), EngineError> {
        let bad = |why: String| EngineError::SessionFile(name.to_string(), why);
        let io = |e: std::io::Error| bad(if e.kind() == std::io::ErrorKind::UnexpectedEof { "it ends early".into() } else { e.to_string() });
        let mut read = 0u64;
        // the checksum of what was taken (restarted after the header: the parts, as written)
        let sum = std::cell::Cell::new(0u64);
        let mut take = |len: usize| -> Result<Vec<u8>, EngineError> {
            let mut b = Vec::new();
            r.take(len as u64).read_to_end(&mut b).map_err(io)?;
            if b.len() != len {
                return Err(bad("it ends early".into()));
            }
            read += len as u64;
            sum.set(checksum(sum.get(), &b));
            Ok(b)
        };
        if take(8)? != MAGIC {
            return Err(bad("not an LSE session file".into()));
        }
        let len = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        if len > 1 << 24 {
            return Err(bad(format!("its header claims {len} bytes")));
        }
        let got: Header = serde_json::from_slice(&take(len as usize)?).map_err(|e| bad(format!("its header: {e}")))?;
        sum.set(0);
        let mut s = self.new_session(None)?;
        let mut want = self.session_header(&s);
        want.n_tokens = got.n_tokens;
        if got.version != VERSION {
            return Err(bad(format!("version {} (this server reads {VERSION})", got.version)));
        }
        if (&got.architecture, &got.model_name, got.n_vocab) != (&want.architecture, &want.model_name, want.n_vocab) {
            return Err(bad(format!(
                "saved by model '{}' ({}, {} tokens), this engine runs '{}' ({}, {} tokens)",
                got.model_name, got.architecture, got.n_vocab, want.model_name, want.architecture, want.n_vocab
            )));
        }
        if got.model_fingerprint != want.model_fingerprint {
            return Err(bad(format!("saved by another file of model '{}' (its tensors differ: another quantization or fine-tune)", got.model_name)));
        }
        if got.kv_dtype != want.kv_dtype {
            return Err(bad(format!("its KV cache is {}, this engine's {} (--kv-cache-dtype)", got.kv_dtype, want.kv_dtype)));
        }
        if got != want {
            return Err(bad("its cache shapes are not this model's".into()));
        }
        if got.n_tokens > s.capacity() {
            return Err(bad(format!("it holds {} tokens; a session holds {} (--kv-len)", got.n_tokens, s.capacity())));
        }
        let n = got.n_tokens;
        let tokens: Vec<u32> = take(n * 4)?.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect();
        crate::check_token_ids(&tokens, self.n_vocab()).map_err(|e| bad(e.to_string()))?;
        for c in s.state.kv.iter_mut().flatten() {
            let (kb, vb) = c.held_bytes(n);
            let (k, v) = (take(kb)?, take(vb)?);
            if !finite(c.ty, &k) || !finite(c.ty, &v) {
                return Err(bad("its KV rows hold values that are not finite".into()));
            }
            c.put_held(&k, &v)?;
        }
        if let Some(st) = &mut s.state.extra {
            for b in st.buffers_mut() {
                let bytes = take(b.len() * 4)?;
                if !finite(GgmlType::F32, &bytes) {
                    return Err(bad("its recurrent state holds values that are not finite".into()));
                }
                for (x, y) in b.iter_mut().zip(bytes.chunks_exact(4)) {
                    *x = f32::from_le_bytes(y.try_into().expect("4 bytes"));
                }
            }
        }
        let want_sum = sum.get();
        let mut trailer = [0u8; 8];
        r.read_exact(&mut trailer).map_err(io)?;
        read += 8;
        if u64::from_le_bytes(trailer) != want_sum {
            return Err(bad("its checksum does not match its contents (the file was altered or damaged)".into()));
        }
        match r.read(&mut [0u8]) {
            Ok(0) => {}
            Ok(_) => return Err(bad("it has bytes past its end".into())),
            Err(e) => return Err(io(e)),
        }
        s.tokens = tokens;
        Ok((s, read))
    }
}

/// Whether every value of `bytes`, KV rows or state of type `ty`, is finite (a row that is not
/// would fail every sequence of the step that reads it).
fn finite(ty: GgmlType, bytes: &[u8]) -> bool {
    let half = |b: &[u8], exp: u16| b.chunks_exact(2).all(|h| u16::from_le_bytes([h[0], h[1]]) & exp != exp);
    match ty {
        GgmlType::F32 => bytes.chunks_exact(4).all(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite()),
        GgmlType::F16 => half(bytes, 0x7c00),
        GgmlType::BF16 => half(bytes, 0x7f80),
        // the f16 scale of each 34-byte block
        GgmlType::Q8_0 => bytes.chunks_exact(34).all(|b| half(&b[..2], 0x7c00)),
        _ => true,
    }
}
