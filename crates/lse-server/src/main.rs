//! `lse-server`: loads a GGUF model and either does one job (tokenize, perplexity, generate) and
//! exits, or serves HTTP.
//! Every failure is one line on stderr, `lse-server: <cause>`, and a non-zero exit status.

mod args;
mod engine_modes;
mod http;
mod json_out;
mod progress;

use args::{Args, GenerateSource, Mode};
use lse_eval::atomic::AtomicFile;
use lse_eval::{PerplexityInput, PerplexityRequest};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

static PANIC: Mutex<Option<String>> = Mutex::new(None);

fn main() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        let loc = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        if let Ok(mut p) = PANIC.lock() {
            *p = Some(format!("{msg}{loc}"));
        }
    }));
    let code = match std::panic::catch_unwind(run) {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => {
            eprintln!("lse-server: {}", one_line(&msg));
            1
        }
        Err(_) => {
            let m = PANIC.lock().ok().and_then(|p| p.clone()).unwrap_or_default();
            eprintln!("lse-server: internal error (a bug): {}", one_line(&m));
            70
        }
    };
    std::process::exit(code);
}

fn one_line(s: &str) -> String {
    s.split(['\n', '\r']).filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join("; ")
}

fn run() -> Result<(), String> {
    let mut argv = Vec::new();
    for a in std::env::args_os().skip(1) {
        argv.push(a.into_string().map_err(|a| format!("argument {a:?} is not valid UTF-8"))?);
    }
    let args = args::parse(&argv)?;
    if args.help {
        print!("{}", args::HELP);
        return Ok(());
    }
    if let Some(Mode::PerplexityMerge(files)) = &args.mode {
        return merge(&args, files);
    }
    let model = args.model.clone().expect("checked by parse");
    if std::fs::metadata(&model).is_err() {
        return Err(format!("model {} not found (no such file or folder)", model.display()));
    }
    match args.mode.clone().expect("checked by parse") {
        Mode::Tokenize(file) => tokenize(&args, &model, &file),
        Mode::Generate(src) => generate(&args, &model, &src),
        Mode::Serve => http::serve(&args, &model),
        mode => perplexity(&args, &model, mode),
    }
}

fn write_stdout(bytes: &[u8]) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|_| out.flush()).map_err(|e| format!("cannot write to standard output: {e}"))
}

fn emit(out: Option<AtomicFile>, bytes: &[u8]) -> Result<(), String> {
    match out {
        Some(f) => f.commit(bytes).map_err(|e| e.to_string()),
        None => write_stdout(bytes),
    }
}

fn tokenize(args: &Args, model: &Path, file: &Path) -> Result<(), String> {
    let out = match &args.tokenize_output {
        Some(p) => Some(AtomicFile::create(p, "output file").map_err(|e| e.to_string())?),
        None => None,
    };
    let text = lse_eval::read_text_file_verbatim(file).map_err(|e| e.to_string())?;
    let ids = engine_modes::tokenize(model, &text, !args.tokenize_no_special, !args.tokenize_no_parse_special)?;
    let mut obj = serde_json::Map::new();
    obj.insert("object".into(), "lse.tokens".into());
    obj.insert("tokens".into(), ids.len().into());
    obj.insert("token_ids_sha256".into(), lse_eval::token_ids_sha256(&ids).into());
    obj.insert("ids".into(), serde_json::json!(ids));
    let mut s = serde_json::Value::Object(obj).to_string();
    s.push('\n');
    emit(out, s.as_bytes())
}

fn generate(args: &Args, model: &Path, src: &GenerateSource) -> Result<(), String> {
    let out = match &args.generate_output {
        Some(p) => Some(AtomicFile::create(p, "output file").map_err(|e| e.to_string())?),
        None => None,
    };
    let prompt = match src {
        GenerateSource::Text(t) => t.clone(),
        GenerateSource::File(f) => lse_eval::read_text_file_verbatim(f).map_err(|e| e.to_string())?,
    };
    let prompt = match &args.generate_suffix {
        Some(suffix) => lse_engine::Prompt::Infill(lse_engine::Infill { prefix: prompt, suffix: suffix.clone(), ..Default::default() }),
        None => lse_engine::Prompt::Text(prompt),
    };
    let req = lse_engine::GenerateRequest { prompt, ..args.generate.clone() };
    req.validate()?;
    let engine = engine_modes::load_engine(model, args)?;
    let report = engine.generate(&req).map_err(|e| e.to_string())?;
    let v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
    emit(out, json_out::pretty(&v).as_bytes())
}

fn perplexity(args: &Args, model: &Path, mode: Mode) -> Result<(), String> {
    let err = |e: lse_eval::EvalError| e.to_string();
    let placeholder = match &mode {
        Mode::PerplexityTokens(_) => PerplexityInput::Tokens(Vec::new()),
        Mode::PerplexityPairs(_) => PerplexityInput::Pairs(Vec::new()),
        _ => PerplexityInput::Text(String::new()),
    };
    let mut req = PerplexityRequest { input: placeholder, ..args.request.clone() };
    if matches!(mode, Mode::PerplexityPairs(_)) && req.ctx.is_some() {
        return Err("--perplexity-ctx does not apply to --perplexity-pairs (the ctx is the longest record)".into());
    }
    if req.shard.is_some() {
        // a shard run writes its shard file (created by the preflight) instead of the report
        req.shard_out = args.output.clone();
    }
    req.validate().map_err(err)?;
    // Everything that can fail without the model fails now: output paths, the KLD base, the input.
    let out = match (&args.output, req.shard) {
        (Some(p), None) => Some(AtomicFile::create(p, "output file").map_err(err)?),
        _ => None,
    };
    req.input = match &mode {
        Mode::Perplexity(f) => PerplexityInput::Text(lse_eval::read_text_file(f).map_err(err)?),
        Mode::PerplexityTokens(f) => PerplexityInput::Tokens(lse_eval::read_tokens_file(f).map_err(err)?),
        Mode::PerplexityPairs(f) => PerplexityInput::Pairs(lse_eval::read_pairs_file(f).map_err(err)?),
        Mode::Tokenize(_) | Mode::Generate(_) | Mode::Serve | Mode::PerplexityMerge(_) => unreachable!(),
    };
    let pre = lse_eval::preflight(&req).map_err(err)?;
    if req.shard.is_some() {
        req.model_sha256 = Some(lse_eval::model_sha256(model).map_err(|e| e.to_string())?);
    }
    let report = engine_modes::perplexity(args, model, &req, pre)?;
    if req.shard.is_some() {
        // the shard file is written; say what it holds
        return write_stdout(format!("{report}\n").as_bytes());
    }
    emit(out, json_out::pretty(&report).as_bytes())
}

/// `--perplexity-merge`: the report of the shards (as one run would write it) and the merged base.
fn merge(args: &Args, files: &[std::path::PathBuf]) -> Result<(), String> {
    let err = |e: lse_eval::EvalError| e.to_string();
    let req = lse_eval::MergeRequest {
        shards: files.to_vec(),
        kld_base_out: args.request.kld_base_out.clone(),
        include_windows: args.request.include_windows,
        include_token_ids: args.request.include_token_ids,
    };
    req.validate().map_err(err)?;
    let out = match &args.output {
        Some(p) => Some(AtomicFile::create(p, "output file").map_err(err)?),
        None => None,
    };
    let report = lse_eval::merge(&req).map_err(err)?;
    emit(out, json_out::pretty(&report).as_bytes())
}
