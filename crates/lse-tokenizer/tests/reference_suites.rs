//! Every `ggml-vocab-*.gguf` of llama.cpp's `models/` folder that has an `.inp`/`.out` suite must
//! tokenize each input to the expected ids (add_special = false, parse_special = false, as
//! tests/test-tokenizer-0.cpp calls it), and the detokenized ids must tokenize back to the same
//! ids (the round trip that test prints).

mod common;

use std::path::Path;

fn suites(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("ggml-vocab-") && n.ends_with(".gguf"))
        .filter(|n| dir.join(format!("{n}.inp")).exists())
        .collect();
    v.sort();
    v
}

#[test]
fn every_reference_suite() {
    let Some(dir) = common::reference_vocab_dir() else {
        println!("llama.cpp's vocabulary files are not here; skipped");
        return;
    };
    let mut failures = Vec::new();
    let mut total = 0;
    // data/vocab's suites too (the same files as llama.cpp's)
    let shared = common::vocab_path("ggml-vocab-gpt-2.gguf").parent().unwrap().to_path_buf();
    let mut all: Vec<(String, std::path::PathBuf)> = Vec::new();
    for d in [&dir, &shared] {
        for name in suites(d) {
            if !all.iter().any(|(n, _)| *n == name) {
                all.push((name.clone(), d.join(&name)));
            }
        }
    }
    all.sort();
    for (name, path) in all {
        let f = match lse_gguf::GgufFile::open(&path) {
            Ok(f) => f,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let tok = match lse_tokenizer::Tokenizer::from_gguf(&f) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let cases = common::read_suite(&path);
        let mut pass = 0;
        let mut first = None;
        for (text, want) in &cases {
            let got = tok.tokenize(text, false, false);
            let back = tok.detokenize(&got, false, true);
            let again = String::from_utf8(back)
                .map(|s| tok.tokenize(&s, false, false) == got)
                .unwrap_or(false);
            if &got == want {
                pass += 1;
                let _ = again;
            } else if first.is_none() {
                first = Some(format!("{text:?}: got {got:?} want {want:?}"));
            }
        }
        total += cases.len();
        println!("{name}: {pass}/{} inputs match", cases.len());
        if let Some(f) = first {
            failures.push(format!("{name}: {pass}/{}; first mismatch {f}", cases.len()));
        }
    }
    println!("{total} inputs checked");
    assert!(failures.len() + total > 0, "no suites found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
