//! Session files: a session written and read back decodes bit for bit as the session it came
//! from (attention caches of f16, bf16 and f32, and the recurrent state of qwen35), and a file that
//! does not fit (another model, another cache type, cut short, bytes past its end, too long for
//! the context, not a session file, another file of the same model, a value that is not finite, a
//! forged header, a finite value changed) is refused naming why.

use lse_engine::{Batch, Engine, EngineOptions, KvDtype, Session};

fn load(name: &str, kv: KvDtype, kv_len: usize) -> Engine {
    let path = lse_testdata::golden(&format!("synthetic/{name}.gguf"));
    Engine::load(&path, EngineOptions { threads: 2, kv_dtype: kv, kv_len: Some(kv_len), ..Default::default() }).unwrap()
}

/// Feeds `ids` to `s` and returns the last row's logits as bits.
fn feed(e: &Engine, s: &mut Session, ids: &[u32]) -> Vec<u32> {
    let mut b = Batch::new();
    b.add_tokens(0, s.len(), ids, |i| i + 1 == ids.len());
    let logits = e.head_logits(&e.forward(&mut [s], &b.rows).unwrap()).unwrap();
    logits.iter().map(|x| x.to_bits()).collect()
}

fn saved(e: &Engine, s: &Session) -> Vec<u8> {
    let mut bytes = Vec::new();
    let n = e.write_session(s, &mut bytes).unwrap();
    assert_eq!(n as usize, bytes.len());
    bytes
}

fn refused(e: &Engine, bytes: &[u8]) -> String {
    match e.read_session(&mut &bytes[..], "f") {
        Ok(_) => panic!("read a session it should refuse"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn a_session_read_back_decodes_as_the_saved_one() {
    let cases = [("llama-tiny", KvDtype::F16), ("llama-tiny", KvDtype::Bf16), ("qwen35-tiny", KvDtype::F16), ("gemma3-tiny", KvDtype::F32), ("gemma3-tiny", KvDtype::Q8_0)];
    for (name, kv) in cases {
        let e = load(name, kv, 256);
        let prompt: Vec<u32> = (0..70).map(|i| (i * 37 % 200 + 3) as u32).collect();
        let mut s = e.new_session(None).unwrap();
        feed(&e, &mut s, &prompt);
        let bytes = saved(&e, &s);
        let (mut back, read) = e.read_session(&mut &bytes[..], "f").unwrap();
        assert_eq!((read as usize, back.tokens()), (bytes.len(), s.tokens()), "{name}");
        for t in [5u32, 77, 140] {
            assert_eq!(feed(&e, &mut back, &[t]), feed(&e, &mut s, &[t]), "{name} {kv:?}: token {t}");
        }
        // an empty session too
        let empty = e.new_session(None).unwrap();
        let (back, _) = e.read_session(&mut &saved(&e, &empty)[..], "f").unwrap();
        assert!(back.is_empty());
    }
}

#[test]
fn a_file_that_does_not_fit_is_refused_naming_why() {
    let e = load("llama-tiny", KvDtype::F16, 256);
    let mut s = e.new_session(None).unwrap();
    feed(&e, &mut s, &[3, 4, 5, 6, 7, 8]);
    let bytes = saved(&e, &s);
    let other = load("qwen2-tiny", KvDtype::F16, 256);
    assert!(refused(&other, &bytes).contains("saved by model"), "{}", refused(&other, &bytes));
    let q8 = load("llama-tiny", KvDtype::Bf16, 256);
    assert!(refused(&q8, &bytes).contains("its KV cache is f16"), "{}", refused(&q8, &bytes));
    let short = load("llama-tiny", KvDtype::F16, 5);
    assert!(refused(&short, &bytes).contains("holds 6 tokens; a session holds 5"), "{}", refused(&short, &bytes));
    assert!(load("llama-tiny", KvDtype::F16, 6).read_session(&mut &bytes[..], "f").is_ok(), "a full session");
    // another file of the same model (a copy whose first tensor's first byte differs)
    let path = lse_testdata::golden("synthetic/llama-tiny.gguf");
    let f = lse_gguf::GgufFile::open(&path).unwrap();
    let mut raw = std::fs::read(&path).unwrap();
    let t = &f.tensors()[0];
    raw[(f.data_start() + t.offset) as usize] ^= 1;
    let dir = lse_testdata::tmp("engine", "session-files");
    let other_file = dir.join("llama-tiny-other.gguf");
    std::fs::write(&other_file, &raw).unwrap();
    let twin = Engine::load(&other_file, EngineOptions { threads: 2, kv_len: Some(256), ..Default::default() }).unwrap();
    assert!(refused(&twin, &bytes).contains("another file of model"), "{}", refused(&twin, &bytes));
    // a KV value that is not finite (an f16 infinity in the first K row)
    let mut inf = bytes.clone();
    let header_end = 16 + u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
    let first_k = header_end + 6 * 4;
    inf[first_k..first_k + 2].copy_from_slice(&0x7c00u16.to_le_bytes());
    assert!(refused(&e, &inf).contains("not finite"), "{}", refused(&e, &inf));
    // a finite value changed (the lowest mantissa bit of the first K value, and of the last
    // value before the checksum), or the checksum itself
    for at in [first_k, bytes.len() - 10, bytes.len() - 1] {
        let mut one = bytes.clone();
        one[at] ^= 1;
        assert!(refused(&e, &one).contains("checksum does not match"), "byte {at}: {}", refused(&e, &one));
    }
    // a header claiming more tokens than a session holds, or other cache shapes
    let forge = |key: &str, v: serde_json::Value| {
        let mut h: serde_json::Value = serde_json::from_slice(&bytes[16..header_end]).unwrap();
        h[key] = v;
        let h = serde_json::to_vec(&h).unwrap();
        [&bytes[..8], &(h.len() as u64).to_le_bytes()[..], &h, &bytes[header_end..]].concat()
    };
    let huge = forge("n_tokens", serde_json::json!(1u64 << 40));
    assert!(refused(&e, &huge).contains("holds 1099511627776 tokens"), "{}", refused(&e, &huge));
    let shapes = forge("recurrent", serde_json::json!([4]));
    assert!(refused(&e, &shapes).contains("cache shapes"), "{}", refused(&e, &shapes));
    assert!(refused(&e, &bytes[..bytes.len() - 1]).contains("ends early"));
    let mut long = bytes.clone();
    long.push(0);
    assert!(refused(&e, &long).contains("past its end"));
    assert!(refused(&e, b"GGUF\x03\0\0\0\0\0\0\0\0\0\0\0").contains("not an LSE session file"));
    assert!(refused(&e, &bytes[..20]).contains("ends early") || refused(&e, &bytes[..20]).contains("header"));
}
