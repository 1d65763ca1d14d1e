//! Tokenizes records separated by the byte 0x1E and prints one line of ids per record, for
//! comparing with other tokenizers: `tokenize_records MODEL.gguf FILE ADD_SPECIAL PARSE_SPECIAL`
//! (the flags as 0 or 1).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: tokenize_records MODEL.gguf FILE ADD_SPECIAL PARSE_SPECIAL");
        std::process::exit(2);
    }
    let f = lse_gguf::GgufFile::open(std::path::Path::new(&args[1])).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let tok = lse_tokenizer::Tokenizer::from_gguf(&f).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let text = std::fs::read_to_string(&args[2]).expect("utf-8 file");
    let (add, parse) = (args[3] == "1", args[4] == "1");
    let mut out = String::new();
    for rec in text.split('\u{1e}') {
        let ids = tok.tokenize(rec, add, parse);
        let line: Vec<String> = ids.iter().map(u32::to_string).collect();
        out.push_str(&line.join(" "));
        out.push('\n');
    }
    print!("{out}");
}
