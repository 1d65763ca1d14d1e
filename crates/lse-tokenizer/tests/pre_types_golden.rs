//! Every `tokenizer.ggml.pre` name llama.cpp knows, checked against llama.cpp itself: the qwen2
//! vocabulary with its pre-type renamed to each name was run through llama.cpp's library, and
//! tests/golden/pre_types.json holds, per name, hashes of what it returned for a set of texts:
//! `llama_tokenize` (four flag combinations) and `llama_detokenize` of the ids (four), the
//! pieces of every token (special false/true) and the end-of-generation set. A name llama.cpp
//! refuses must be refused here; where llama.cpp aborts mid-tokenization ("whitespace" on a
//! byte-level vocabulary trips an assertion) only loading is checked.

mod common;

use sha2::{Digest, Sha256};

fn hex(h: Sha256) -> String {
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The qwen2 vocabulary file with `tokenizer.ggml.pre` set to `name`.
fn renamed(base: &[u8], name: &str) -> Vec<u8> {
    let key = b"tokenizer.ggml.pre";
    let at = base.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    let len = u64::from_le_bytes(base[at + 4..at + 12].try_into().unwrap()) as usize;
    let mut out = base[..at + 4].to_vec();
    out.extend((name.len() as u64).to_le_bytes());
    out.extend(name.as_bytes());
    out.extend(&base[at + 12 + len..]);
    out
}

#[test]
fn every_pre_type_matches_llama_cpp() {
    let g: serde_json::Value = serde_json::from_slice(
        &std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/pre_types.json")).unwrap(),
    )
    .unwrap();
    let base = std::fs::read(common::vocab_path(g["base"].as_str().unwrap())).unwrap();
    let texts: Vec<&str> = g["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let all: Vec<(&String, &serde_json::Value)> = g["pre_types"].as_object().unwrap().iter().collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let chunk = all.len().div_ceil(threads);
    let results: Vec<(Vec<String>, usize)> = std::thread::scope(|s| {
        let hs: Vec<_> = all
            .chunks(chunk)
            .map(|part| s.spawn(|| check_part(part, &base, &texts)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let checked: usize = results.iter().map(|r| r.1).sum();
    let bad: Vec<String> = results.into_iter().flat_map(|r| r.0).collect();
    println!("{checked} pre-types match llama.cpp on {} texts", texts.len());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn check_part(part: &[(&String, &serde_json::Value)], base: &[u8], texts: &[&str]) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut checked = 0;
    for &(name, want) in part {
        let f = lse_gguf::GgufFile::from_bytes(renamed(base, name)).unwrap();
        let tok = lse_tokenizer::Tokenizer::from_gguf(&f);
        if want.get("error").is_some() {
            if name == "whitespace" {
                // llama.cpp loads it, then aborts while merging; loading must work here
                if let Err(e) = tok {
                    bad.push(format!("{name}: {e}"));
                }
            } else if tok.is_ok() {
                bad.push(format!("{name}: llama.cpp refuses it, this crate loads it"));
            }
            continue;
        }
        let tok = match tok {
            Ok(t) => t,
            Err(e) => {
                bad.push(format!("{name}: {e}"));
                continue;
            }
        };
        let eog: Vec<u32> = want["eog"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        if tok.eog_ids() != eog.as_slice() {
            bad.push(format!("{name}: eog {:?} want {eog:?}", tok.eog_ids()));
        }
        for special in [false, true] {
            let mut h = Sha256::new();
            for id in 0..tok.n_vocab() as u32 {
                let p = tok.token_to_piece(id, special);
                h.update((p.len() as u32).to_le_bytes());
                h.update(&p);
            }
            if hex(h) != want[format!("pieces_{}", special as u8)].as_str().unwrap() {
                bad.push(format!("{name}: token_to_piece(special = {special}) differs"));
            }
        }
        let mut h = Sha256::new();
        for t in texts {
            let mut ids11 = Vec::new();
            for (add, parse) in [(false, false), (false, true), (true, false), (true, true)] {
                let ids = tok.tokenize(t, add, parse);
                h.update((ids.len() as u32).to_le_bytes());
                for id in &ids {
                    h.update(id.to_le_bytes());
                }
                ids11 = ids;
            }
            for (rm, unparse) in [(false, false), (false, true), (true, false), (true, true)] {
                let b = tok.detokenize(&ids11, rm, unparse);
                h.update((b.len() as u32).to_le_bytes());
                h.update(&b);
            }
        }
        if hex(h) != want["calls"].as_str().unwrap() {
            bad.push(format!("{name}: tokenize/detokenize results differ"));
        }
        checked += 1;
    }
    (bad, checked)
}
