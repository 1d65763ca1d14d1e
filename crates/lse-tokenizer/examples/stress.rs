//! Stress run: throws random bytes and random Unicode at every vocabulary given on the command
//! line (tokenize with all flag combinations, detokenize, token_to_piece of random ids) for a
//! number of minutes, and reports any panic with the input that caused it.
//!
//! cargo run --release -p lse-tokenizer --example stress -- --minutes 10 VOCAB.gguf...
//!
//! With no files it takes every `*.gguf` in `LSE_VOCAB_DIR` and `data/vocab` (run from the repository root;
//! `scripts/get-vocabs.sh` fetches them).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lse_gguf::GgufFile;
use lse_tokenizer::Tokenizer;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Characters that exercise the splitters: whitespace of every kind, digits, letters of many
/// scripts, marks, CJK, emoji parts, SentencePiece's ▁, and special-token punctuation.
const PALETTE: &[&str] = &[
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u{0B}", "\u{0C}", "\u{85}", "\u{A0}", "\u{3000}",
    "\u{2028}", "a", "Z", "é", "ß", "ǅ", "ﬁ", "İ", "0", "7", "٣", "①", "Ⅻ", "'", "'s", "'LL", "-",
    ".", ",", "!", "?", "…", "。", "，", "$", "+", "<", ">", "|", "_", "\\", "\u{301}", "\u{94D}",
    "中", "文", "日本", "カタ", "한국", "ㄱ", "🦙", "\u{200D}", "🇺", "\u{FE0F}", "\u{2581}",
    "<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<mask>", "[MASK]",
    "<|user|>", "\u{0}", "\u{FFFD}", "\u{10FFFF}", "ـ", "א", "ก", "ä", "Ω",
];

fn random_text(r: &mut Rng) -> String {
    let n = r.below(64) as usize;
    let mut s = String::new();
    match r.below(3) {
        // raw bytes, made valid UTF-8 the lossy way
        0 => {
            let bytes: Vec<u8> = (0..n * 2).map(|_| r.next() as u8).collect();
            s = String::from_utf8_lossy(&bytes).into_owned();
        }
        // any codepoint
        1 => {
            for _ in 0..n {
                let c = match r.below(4) {
                    0 => r.below(0x80) as u32,
                    1 => r.below(0x800) as u32,
                    2 => r.below(0x10000) as u32,
                    _ => r.below(0x110000) as u32,
                };
                s.extend(char::from_u32(c));
            }
        }
        // pieces of the palette, sometimes long runs
        _ => {
            for _ in 0..n {
                let p = PALETTE[r.below(PALETTE.len() as u64) as usize];
                let k = if r.below(16) == 0 { r.below(300) + 1 } else { 1 };
                for _ in 0..k {
                    s.push_str(p);
                }
            }
        }
    }
    s
}

fn exercise(tok: &Tokenizer, text: &str, r: &mut Rng) -> usize {
    let mut n = 0;
    for (add, parse) in [(false, false), (false, true), (true, false), (true, true)] {
        let ids = tok.tokenize(text, add, parse);
        assert!(ids.iter().all(|&id| (id as usize) < tok.n_vocab()), "id out of range");
        for (rm, unparse) in [(false, false), (true, true)] {
            n += tok.detokenize(&ids, rm, unparse).len();
        }
        n += ids.len();
    }
    for _ in 0..8 {
        let id = if r.below(8) == 0 {
            r.next() as u32
        } else {
            r.below(tok.n_vocab() as u64) as u32
        };
        n += tok.token_to_piece(id, r.below(2) == 0).len();
        n += tok.token_bytes(id).len();
    }
    let ids: Vec<u32> = (0..r.below(32)).map(|_| r.next() as u32 % (tok.n_vocab() as u32 + 8)).collect();
    n += tok.detokenize(&ids, true, false).len();
    n
}

fn main() {
    let mut minutes = 1.0f64;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--minutes" {
            minutes = args.next().and_then(|m| m.parse().ok()).unwrap_or(minutes);
        } else {
            files.push(a.into());
        }
    }
    if files.is_empty() {
        let dirs: Vec<PathBuf> = std::env::var("LSE_VOCAB_DIR")
            .into_iter()
            .map(PathBuf::from)
            .chain([PathBuf::from("data/vocab")])
            .collect();
        for d in dirs {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().extension().is_some_and(|x| x == "gguf") {
                    files.push(e.path());
                }
            }
        }
    }
    files.sort();
    let toks: Vec<(String, Tokenizer)> = files
        .iter()
        .filter_map(|p| {
            let f = GgufFile::open(p).ok()?;
            match Tokenizer::from_gguf(&f) {
                Ok(t) => Some((p.display().to_string(), t)),
                Err(e) => {
                    eprintln!("{}: {e}", p.display());
                    None
                }
            }
        })
        .collect();
    eprintln!("{} vocabularies, {minutes} minutes", toks.len());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    let mut r = Rng(seed);
    let t0 = Instant::now();
    let limit = Duration::from_secs_f64(minutes * 60.0);
    let (mut cases, mut sink, mut panics) = (0u64, 0usize, 0u64);
    std::panic::set_hook(Box::new(|_| {}));
    while t0.elapsed() < limit {
        let text = random_text(&mut r);
        for (name, tok) in &toks {
            let mut r2 = Rng(r.next() | 1);
            match catch_unwind(AssertUnwindSafe(|| exercise(tok, &text, &mut r2))) {
                Ok(n) => sink = sink.wrapping_add(n),
                Err(e) => {
                    panics += 1;
                    let msg = e
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| e.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    println!("PANIC in {name}: {msg}; input {text:?}");
                }
            }
            cases += 1;
        }
    }
    println!(
        "{cases} inputs x vocabularies in {:.1} s (seed {seed}), {panics} panics (checksum {sink})",
        t0.elapsed().as_secs_f64()
    );
    if panics > 0 {
        std::process::exit(1);
    }
}
