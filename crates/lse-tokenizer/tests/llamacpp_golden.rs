//! Parity with llama.cpp's own library (commit 0c1e570) on every vocabulary of its `models/`
//! folder: for each, tests/golden/llamacpp/<name>.json holds what llama.cpp returned for
//! `llama_tokenize` (all four add_special/parse_special combinations) on the suite inputs, each
//! line of data/tokenizer-cases.txt, the whole file and a few special-token texts;
//! `llama_detokenize` of its ids (all four remove_special/unparse_special combinations);
//! a hash of `llama_token_to_piece` of every token (special false and true); and its special
//! token ids and end-of-generation set. `rwkv-synthetic` is a small RWKV "world"-style vocabulary
//! made for this test (tests/data/rwkv-synthetic-vocab.json, written to a GGUF at run time),
//! there being no RWKV vocabulary among llama.cpp's.

mod common;

use sha2::{Digest, Sha256};

fn vocab_path(name: &str) -> Option<std::path::PathBuf> {
    let shared = common::vocab_path(name);
    if shared.exists() {
        return Some(shared);
    }
    if name == "ggml-vocab-rwkv-synthetic.gguf" {
        return Some(rwkv_synthetic());
    }
    common::reference_vocab_dir().map(|d| d.join(name)).filter(|p| p.exists())
}

/// Writes the RWKV test vocabulary (tests/data/rwkv-synthetic-vocab.json) as a vocabulary-only
/// GGUF in cargo's folder for test files (under target/, not the machine's /tmp), once per process
/// (written to a file of this process and renamed, so concurrent runs each see a whole file).
fn rwkv_synthetic() -> std::path::PathBuf {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(write_rwkv_synthetic).clone()
}

fn write_rwkv_synthetic() -> std::path::PathBuf {
    use lse_gguf::{GgufWriter, Value};
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("lse-rwkv-synthetic.gguf");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rwkv-synthetic-vocab.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    let mut w = GgufWriter::new();
    for (k, x) in v["metadata"].as_object().unwrap() {
        let value = match x {
            serde_json::Value::String(s) => Value::String(s.clone()),
            n => Value::U32(n.as_u64().unwrap() as u32),
        };
        w.add_kv(k.as_str(), value);
    }
    let strings = v["tokens"].as_array().unwrap().iter().map(|t| Value::String(t.as_str().unwrap().to_string())).collect();
    w.add_kv("tokenizer.ggml.tokens", Value::Array(strings));
    let types = v["token_type"].as_array().unwrap().iter().map(|t| Value::I32(t.as_i64().unwrap() as i32)).collect();
    w.add_kv("tokenizer.ggml.token_type", Value::Array(types));
    let tmp = path.with_extension(format!("part.{}", std::process::id()));
    w.write(&tmp).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn expected_bytes(v: &serde_json::Value) -> Vec<u8> {
    match v {
        serde_json::Value::String(s) => s.as_bytes().to_vec(),
        other => {
            let h = other["hex"].as_str().unwrap();
            (0..h.len() / 2)
                .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        }
    }
}

fn pieces_sha(tok: &lse_tokenizer::Tokenizer, special: bool) -> String {
    let mut h = Sha256::new();
    for id in 0..tok.n_vocab() as u32 {
        let p = tok.token_to_piece(id, special);
        h.update((p.len() as u32).to_le_bytes());
        h.update(&p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn check(g: &serde_json::Value) -> Vec<String> {
    let name = g["vocab"].as_str().unwrap();
    let mut bad = Vec::new();
    let Some(path) = vocab_path(name) else {
        println!("{name}: vocabulary file not here; skipped");
        return bad;
    };
    let tok = common::load(&path);
    if tok.n_vocab() as u64 != g["n_vocab"].as_u64().unwrap() {
        bad.push(format!("{name}: n_vocab {}", tok.n_vocab()));
    }
    let want_eog = ids(&g["eog"]);
    if tok.eog_ids() != want_eog.as_slice() {
        bad.push(format!("{name}: eog {:?} want {want_eog:?}", tok.eog_ids()));
    }
    let sp = &g["specials"];
    let opt = |k: &str| sp[k].as_i64().filter(|&x| x >= 0).map(|x| x as u32);
    for (k, got) in [
        ("bos", tok.bos_id()),
        ("eos", tok.eos_id()),
        ("eot", tok.eot_id()),
        ("pad", tok.pad_id()),
        ("sep", tok.sep_id()),
    ] {
        if got != opt(k) {
            bad.push(format!("{name}: {k} {got:?} want {:?}", opt(k)));
        }
    }
    for special in [false, true] {
        let key = format!("pieces_sha256_special_{}", special as u8);
        if pieces_sha(&tok, special) != g[&key].as_str().unwrap() {
            bad.push(format!("{name}: token_to_piece(special = {special}) differs"));
        }
    }
    let mut n = 0;
    for rec in g["texts"].as_array().unwrap() {
        let text = rec["text"].as_str().unwrap();
        for (k, want) in rec["tokenize"].as_object().unwrap() {
            let (add, parse) = (&k[0..1] == "1", &k[1..2] == "1");
            let got = tok.tokenize(text, add, parse);
            n += 1;
            if got != ids(want) {
                bad.push(format!(
                    "{name}: tokenize({text:?}, add_special={add}, parse_special={parse}) = {got:?} want {:?}",
                    ids(want)
                ));
            }
        }
        let llama_ids = ids(&rec["tokenize"]["11"]);
        for (k, want) in rec["detokenize"].as_object().unwrap() {
            let (rm, unparse) = (&k[0..1] == "1", &k[1..2] == "1");
            let got = tok.detokenize(&llama_ids, rm, unparse);
            n += 1;
            if got != expected_bytes(want) {
                bad.push(format!(
                    "{name}: detokenize(ids of {text:?}, remove_special={rm}, unparse_special={unparse}) = {:?} want {:?}",
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&expected_bytes(want))
                ));
            }
        }
    }
    println!("{name}: {n} calls checked, {} differ", bad.len());
    bad
}

#[test]
fn matches_llama_cpp_on_every_vocabulary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/llamacpp");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    let mut bad = Vec::new();
    for f in files {
        let g: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        bad.extend(check(&g));
    }
    let shown: Vec<_> = bad.iter().take(40).cloned().collect();
    assert!(bad.is_empty(), "{} differences:\n{}", bad.len(), shown.join("\n"));
}
