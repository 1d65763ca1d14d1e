//! Tokenizes a file with a GGUF vocabulary and prints the id count, the SHA-256 of the ids and the
//! time taken: `cargo run --release -p lse-tokenizer --example tokenize_file -- MODEL.gguf FILE`.

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: tokenize_file MODEL.gguf FILE [--parse-special] [--repeat N]");
        std::process::exit(2);
    }
    let parse_special = args.iter().any(|a| a == "--parse-special");
    let repeat: usize = args
        .iter()
        .position(|a| a == "--repeat")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let t0 = Instant::now();
    let f = lse_gguf::GgufFile::open(std::path::Path::new(&args[1])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let tok = lse_tokenizer::Tokenizer::from_gguf(&f).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let load = t0.elapsed().as_secs_f64();
    let mut text = std::fs::read_to_string(&args[2]).expect("utf-8 text file");
    if text.ends_with('\n') {
        text.pop();
    }
    let mut best = f64::MAX;
    let mut ids = Vec::new();
    for _ in 0..repeat {
        let t1 = Instant::now();
        ids = tok.tokenize(&text, true, parse_special);
        best = best.min(t1.elapsed().as_secs_f64());
    }
    println!(
        "load {load:.3} s, tokenize {best:.3} s (best of {repeat}), {} ids",
        ids.len()
    );
}
