//! Throws arbitrary bytes and arbitrary Unicode at every vocabulary: tokenize (all flag
//! combinations), detokenize, token_to_piece. Any panic, overflow or out-of-range id is a bug.
//!
//! The vocabularies are the `*.gguf` files of `LSE_VOCAB_DIR` (several folders separated by
//! `:`), by default `data/vocab` and `data/vocab-extra` (fetched by
//! `scripts/get-vocabs.sh`).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use lse_gguf::GgufFile;
use lse_tokenizer::Tokenizer;

fn vocabularies() -> &'static [Tokenizer] {
    static V: OnceLock<Vec<Tokenizer>> = OnceLock::new();
    V.get_or_init(|| {
        let dirs: Vec<std::path::PathBuf> = match std::env::var("LSE_VOCAB_DIR") {
            Ok(d) => d.split(':').map(Into::into).collect(),
            Err(_) => vec![
                "data/vocab".into(),
                "../data/vocab".into(),
                "data/vocab-extra".into(),
                "../data/vocab-extra".into(),
            ],
        };
        let mut files: Vec<_> = dirs
            .iter()
            .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
            .collect();
        files.sort();
        let v: Vec<Tokenizer> = files
            .iter()
            .filter_map(|p| Tokenizer::from_gguf(&GgufFile::open(p).ok()?).ok())
            .collect();
        assert!(!v.is_empty(), "no vocabularies found (set LSE_VOCAB_DIR)");
        eprintln!("tokenizer fuzz: {} vocabularies", v.len());
        v
    })
}

fuzz_target!(|data: &[u8]| {
    let vocabs = vocabularies();
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let tok = &vocabs[sel as usize % vocabs.len()];
    let (add, parse) = (sel & 0x40 != 0, sel & 0x80 != 0);
    // half the time the bytes, the other half codepoints built from them
    let text: String = if sel & 0x20 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        rest.chunks(3)
            .filter_map(|c| {
                let v = c.iter().fold(0u32, |a, &b| (a << 8) | b as u32);
                char::from_u32(v % 0x11_0000)
            })
            .collect()
    };
    let ids = tok.tokenize(&text, add, parse);
    let n = tok.n_vocab() as u32;
    assert!(ids.iter().all(|&id| id < n));
    let _ = tok.detokenize(&ids, add, parse);
    for &b in rest.iter().take(16) {
        let id = (b as u32).wrapping_mul(2654435761) % (n + 4);
        let _ = tok.token_to_piece(id, b & 1 == 1);
    }
    let raw: Vec<u32> = rest
        .chunks(4)
        .map(|c| c.iter().fold(0u32, |a, &b| (a << 8) | b as u32))
        .collect();
    let _ = tok.detokenize(&raw, parse, add);
});
