//! Reading the inputs of a run: text files, JSON token arrays, JSON Lines of prompt/response pairs.

use crate::error::{io_reason, EvalError, Result};
use sha2::{Digest, Sha256};
use std::path::Path;

/// One `{"prompt", "response"}` record. `line` is its 1-based line in the file (or its 1-based index
/// in an API request), used in error messages.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRecord {
    pub prompt: String,
    pub response: String,
    pub line: usize,
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    read_input(path).map_err(|reason| EvalError::Input(format!("cannot read {}: {reason}", path.display())))
}

/// Most bytes read from a stream (a regular file is read whole, whatever its size).
pub const MAX_STREAM_BYTES: usize = 1 << 30;

/// An input file's bytes, or why not (the OS's reason without its code). A regular file is read
/// whole; a stream (a pipe, `<(zcat f.gz)`, `/dev/stdin`, `/dev/null`) up to [`MAX_STREAM_BYTES`]:
/// one that never ends (`/dev/zero` read until the memory ran out) is refused there.
pub fn read_input(path: &Path) -> std::result::Result<Vec<u8>, String> {
    read_input_within(path, MAX_STREAM_BYTES)
}

fn read_input_within(path: &Path, cap: usize) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| io_reason(&e))?;
    let meta = file.metadata().map_err(|e| io_reason(&e))?;
    if meta.is_dir() {
        return Err("it is a directory".into());
    }
    if meta.is_file() {
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes).map_err(|e| io_reason(&e))?;
        return Ok(bytes);
    }
    // in chunks, so the buffer never grows past the cap by more than one
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_reason(&e)),
        };
        if n == 0 {
            return Ok(bytes);
        }
        if bytes.len() + n > cap {
            return Err(format!("the stream goes on past {} (a device that never ends?)", size_words(cap)));
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

fn size_words(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{b} bytes"),
    }
}

/// Checks that `bytes` are UTF-8; the error names the offset of the first invalid byte.
pub fn utf8(bytes: Vec<u8>, path: &Path) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let off = e.utf8_error().valid_up_to();
        EvalError::Input(format!("{} is not valid UTF-8: invalid byte at offset {off}", path.display()))
    })
}

/// A text file as `--perplexity FILE` reads it: bytes, UTF-8 checked, exactly one trailing `\n` removed.
pub fn read_text_file(path: &Path) -> Result<String> {
    let mut s = utf8(read_bytes(path)?, path)?;
    if s.ends_with('\n') {
        s.pop();
    }
    Ok(s)
}

/// A file's bytes verbatim as UTF-8 (`--tokenize FILE`: nothing stripped).
pub fn read_text_file_verbatim(path: &Path) -> Result<String> {
    utf8(read_bytes(path)?, path)
}

/// `--perplexity-tokens FILE`: a JSON array of non-negative integer token ids, or what
/// `--tokenize` writes (an `lse.tokens` object: its `ids`).
pub fn read_tokens_file(path: &Path) -> Result<Vec<u32>> {
    let text = utf8(read_bytes(path)?, path)?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| EvalError::Input(format!("{} is not valid JSON: {e}", path.display())))?;
    let ids = match v.get("object").and_then(|o| o.as_str()) {
        Some("lse.tokens") => v.get("ids").ok_or_else(|| EvalError::Input(format!("{}: an lse.tokens object without ids", path.display())))?,
        _ => &v,
    };
    tokens_from_json(ids).map_err(|m| EvalError::Input(format!("{}: {m}", path.display())))
}

/// A JSON array of token ids (`u32`). The error names the first bad element.
pub fn tokens_from_json(v: &serde_json::Value) -> std::result::Result<Vec<u32>, String> {
    let arr = v.as_array().ok_or_else(|| "expected a JSON array of token ids".to_string())?;
    arr.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_u64()
                .filter(|&n| n <= u32::MAX as u64)
                .map(|n| n as u32)
                .ok_or_else(|| format!("element {i} ({x}) is not a token id (a non-negative integer)"))
        })
        .collect()
}

/// `--perplexity-pairs FILE`: JSON Lines of `{"prompt": "...", "response": "..."}`. Blank lines are skipped.
/// Errors name the 1-based line.
pub fn read_pairs_file(path: &Path) -> Result<Vec<PairRecord>> {
    let text = utf8(read_bytes(path)?, path)?;
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line_no = i + 1;
        let l = line.strip_suffix('\r').unwrap_or(line);
        if l.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(l).map_err(|e| {
            EvalError::Input(format!("{} line {line_no}: not valid JSON ({e})", path.display()))
        })?;
        let rec = pair_from_json(&v, line_no)
            .map_err(|m| EvalError::Input(format!("{} line {line_no}: {m}", path.display())))?;
        out.push(rec);
    }
    if out.is_empty() {
        return Err(EvalError::Input(format!("{} holds no prompt/response records", path.display())));
    }
    Ok(out)
}

/// One pairs record from a JSON object.
pub fn pair_from_json(v: &serde_json::Value, line: usize) -> std::result::Result<PairRecord, String> {
    let obj = v.as_object().ok_or_else(|| "expected an object {\"prompt\": ..., \"response\": ...}".to_string())?;
    let field = |name: &str| -> std::result::Result<String, String> {
        match obj.get(name) {
            None => Err(format!("missing field \"{name}\"")),
            Some(serde_json::Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!("field \"{name}\" is not a string")),
        }
    };
    Ok(PairRecord { prompt: field("prompt")?, response: field("response")?, line })
}

/// SHA-256 of the ids as little-endian u32, lowercase hex.
pub fn token_ids_sha256(ids: &[u32]) -> String {
    let mut h = Sha256::new();
    let mut buf = Vec::with_capacity(4 * 4096);
    for chunk in ids.chunks(4096) {
        buf.clear();
        for &id in chunk {
            buf.extend_from_slice(&id.to_le_bytes());
        }
        h.update(&buf);
    }
    hex(&h.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(D[(b >> 4) as usize] as char);
        s.push(D[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_ids_is_over_le_u32() {
        // SHA-256 of the 8 bytes 01 00 00 00 02 00 00 00, computed independently (sha256sum).
        assert_eq!(token_ids_sha256(&[1, 2]), "34fb5c825de7ca4aea6e712f19d439c1da0c92c37b423936c5f618545ca4fa1f");
        assert_eq!(token_ids_sha256(&[]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    /// A stream that never ends (reading `/dev/zero` filled the memory) is refused at the cap; a
    /// pipe and `/dev/null` are read to their end; a folder is named as one.
    #[cfg(target_os = "linux")]
    #[test]
    fn endless_streams_stop_at_the_cap_and_pipes_read() {
        assert_eq!(read_input_within(Path::new("/dev/zero"), 1 << 20).unwrap_err(), "the stream goes on past 1 MiB (a device that never ends?)");
        assert_eq!(read_input(Path::new("/dev/null")).unwrap(), b"");
        assert_eq!(read_input(Path::new("/")).unwrap_err(), "it is a directory");
        let dir = std::env::temp_dir().join(format!("lse-eval-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, vec![b'x'; 300_000]).unwrap())
        };
        assert_eq!(read_input(&fifo).unwrap(), vec![b'x'; 300_000]);
        writer.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }
}
