//! Command-line parsing and validation (SPEC §2, §3). Every error is one line naming the option.

use lse_engine::{parse_dialect, EngineOptions, GenerateRequest, KvDtype};
use lse_eval::{Method, PerplexityRequest};
use std::path::{Path, PathBuf};

pub const HELP: &str = "\
lse-server: score text with a GGUF model the way llama.cpp's llama-perplexity does

usage:
  lse-server ENGINE --tokenize FILE [--tokenize-no-special] [--tokenize-output PATH]
  lse-server ENGINE --perplexity FILE          [perplexity options]
  lse-server ENGINE --perplexity-tokens FILE   [perplexity options]
  lse-server ENGINE --perplexity-pairs FILE    [perplexity options]
  lse-server --perplexity-merge SHARD... [--perplexity-output PATH] [--perplexity-kld-base-out PATH]
             [--perplexity-windows] [--perplexity-token-ids]   merge shard files (no model needed)
  lse-server ENGINE --generate TEXT | --generate-file FILE [generation options]
  lse-server ENGINE [server options]          serve HTTP (OpenAI-compatible) until SIGINT/SIGTERM

engine options (ENGINE):
  --model PATH, -m           a .gguf file, or a folder holding one model (required)
  --pool DEV                 where kernels run: cpu (default cpu)
  --dialect D                simd or scalar (default simd)
  --simd LEVEL               cap the SIMD kernels: avx512, avx2 or scalar (default: the best the CPU has)
  --threads N, -t            compute threads (default: physical cores)
  --batch-size N, -b         tokens per prefill pass (default 2048)
  --ubatch-size N, -ub       tokens per kernel launch, <= batch size (default 512)
  --kv-cache-dtype T         f32, f16, bf16 or q8_0 (default f16)
  --kv-len N                 KV capacity per session in tokens (default: the model's context)
  --FlashPrefillV2=on|off    fused tiled attention (on, default) or dense attention (off)
  --huge-pages on|off        packed weights on huge pages (default: on when serving or generating,
                             whose decode streams them every token; off for scoring and tokenizing)
  --no-cpu-fallback          fail instead of running an operation without a device kernel on the CPU
  --no-mtp                   do not load a speculative decoder (scoring never uses one)

tokenize options:
  --tokenize FILE            print the token ids of FILE's bytes (verbatim) as JSON; like
                             llama-tokenize, special-token text such as <s> is parsed as special
  --tokenize-no-special      do not add BOS/EOS
  --tokenize-no-parse-special  tokenize special-token text as plain text (as --perplexity does)
  --tokenize-output PATH     write the JSON there instead of standard output

perplexity options:
  --perplexity FILE          UTF-8 text (one trailing newline removed)
  --perplexity-tokens FILE   a JSON array of token ids (or the output of --tokenize)
  --perplexity-pairs FILE    JSON Lines of {\"prompt\": ..., \"response\": ...}: response tokens scored
  --perplexity-method M      chunks (default, llama.cpp's) or sliding
  --perplexity-ctx N         tokens per chunk or window (default 512)
  --perplexity-stride N      sliding only: tokens between window starts (default: the ctx)
  --perplexity-chunks N      score only the first N chunks or windows
  --perplexity-kld-base-out FILE   record a KL-divergence base
  --perplexity-kld-top-k K   ids per scored token in that base (1..32, default 32)
  --perplexity-kld FILE      compare against a base (LSE, or llama.cpp --kl-divergence-base)
  --perplexity-output PATH   write the JSON report there (default: standard output)
  --perplexity-token-ids     include the token ids in the report
  --perplexity-windows       include the per-window array in the report
  --perplexity-shard I/N     score only shard I (0-based) of N contiguous shares of the windows and
                             write a shard file to --perplexity-output (required); a base being
                             recorded goes into the shard file. auto/N (or auto in a Slurm array)
                             takes I from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX (Kubernetes)
  --perplexity-merge SHARD...  check that the shard files are one plan, complete and disjoint; write
                             the report (as one run would) and the merged base (to the shards'
                             --perplexity-kld-base-out, or this command's)

generation options (llama.cpp's defaults):
  --generate TEXT            prompt the model with TEXT (special-token text parsed) and print JSON
  --generate-file FILE       the prompt is FILE's text
  --generate-suffix TEXT     fill in the middle: the prompt is the text before the gap, TEXT the
                             text after it (models with FIM tokens, e.g. Qwen2.5-Coder)
  -n N                       tokens to generate at most (default 128)
  --temp T                   temperature; 0 is greedy (default 0.8)
  --top-k K                  keep the K most likely tokens; 0 keeps all (default 40)
  --top-p P                  nucleus sampling, in (0, 1] (default 0.95)
  --min-p P                  drop tokens below P x the best probability (default 0.05)
  --repeat-penalty R         penalise the last --repeat-last-n tokens, prompt included (default 1.0 = off)
  --repeat-last-n N          0 off, -1 the whole context (default 64)
  --presence-penalty P       (default 0)
  --frequency-penalty F      (default 0)
  --seed S                   same seed, same text (default: a fresh seed)
  --logit-bias ID+B|ID-B     add B to token ID's logit before the other samplers; ID-inf bans it
                             (may be given several times)
  --stop STR                 stop before STR (may be given several times)
  --ignore-eos               keep generating past end-of-generation tokens
  --json-object              JSON mode: sample only tokens that keep the text one JSON object,
                             stop when it closes
  --json-schema SCHEMA       the same for a value of this JSON schema (text; the subset the README
                             lists)
  --generate-output PATH     write the JSON there instead of standard output

server options:
  --host H                   address to listen on (default 127.0.0.1)
  --port P                   port (default 8080; 0 picks a free one)
  --parallel N, -np          sequences decoded at once (default 4)
  --api-key KEY              require `Authorization: Bearer KEY`
  --pooling P                how /v1/embeddings pools a text's rows: mean, cls or last (default: the
                             GGUF's pooling type; generative models name none)
  --alias NAME, -a           the model id in /v1/models (default: the file name)
  --chat-template T          the chat template: Jinja source, or chatml (default: the GGUF's
                             tokenizer.chat_template; ChatML when it has none, as llama-server)
  --chat-template-file FILE  the chat template's Jinja source from FILE
  --no-slots                 GET /slots answers 501 (default: it answers, as llama-server's --slots;
                             prompts and answers shown only when LLAMA_SERVER_SLOTS_DEBUG=1)
  --slot-save-path DIR       POST /slots/ID?action=save|restore|erase writes a slot's cache to a
                             file in DIR and reads it back (made if missing; default: no actions)

other:
  --quiet                    no progress on stderr
  --help                     this text
";

#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Serve,
    Generate(GenerateSource),
    Tokenize(PathBuf),
    Perplexity(PathBuf),
    PerplexityTokens(PathBuf),
    PerplexityPairs(PathBuf),
    /// `--perplexity-merge SHARD...`
    PerplexityMerge(Vec<PathBuf>),
}

/// Where a `--generate` prompt comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum GenerateSource {
    Text(String),
    File(PathBuf),
}

/// `--host` … `--alias`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeOptions {
    pub host: String,
    pub port: u16,
    pub parallel: usize,
    pub api_key: Option<String>,
    pub alias: Option<String>,
    /// `--chat-template` (Jinja source, or `chatml`) or the text of `--chat-template-file`.
    pub chat_template: Option<String>,
    /// `--pooling`: how embeddings pool (else the model's own).
    pub pooling: Option<lse_engine::Pooling>,
    /// `GET /slots` answers (`--slots`, the default; `--no-slots`).
    pub slots: bool,
    /// `--slot-save-path`: where slot actions write and read slot files (none: no actions).
    pub slot_save_path: Option<PathBuf>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { host: "127.0.0.1".into(), port: 8080, parallel: 4, api_key: None, alias: None, chat_template: None, pooling: None, slots: true, slot_save_path: None }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Args {
    pub help: bool,
    pub model: Option<PathBuf>,
    /// The engine options (`--dialect` … `--no-cpu-fallback`).
    pub engine: EngineOptions,
    pub no_mtp: bool,
    pub mode: Option<Mode>,
    pub tokenize_no_special: bool,
    pub tokenize_no_parse_special: bool,
    pub tokenize_output: Option<PathBuf>,
    /// The perplexity options (`--perplexity-method` … `--perplexity-windows`); its input is filled
    /// from the mode's file once the options have been checked.
    pub request: PerplexityRequest,
    pub output: Option<PathBuf>,
    /// The generation options; its prompt is filled from `--generate`/`--generate-file`.
    pub generate: GenerateRequest,
    pub generate_output: Option<PathBuf>,
    /// `--generate-suffix`: the text after the gap of a fill-in-the-middle prompt.
    pub generate_suffix: Option<String>,
    pub serve: ServeOptions,
    pub quiet: bool,
}

/// Options that take a value.
const VALUED: &[&str] = &[
    "--model", "--pool", "--dialect", "--simd", "--threads", "--batch-size", "--ubatch-size", "--kv-cache-dtype", "--kv-len",
    "--FlashPrefillV2", "--huge-pages", "--tokenize", "--tokenize-output", "--perplexity", "--perplexity-tokens", "--perplexity-pairs",
    "--perplexity-method", "--perplexity-ctx", "--perplexity-stride", "--perplexity-chunks",
    "--perplexity-kld-base-out", "--perplexity-kld-top-k", "--perplexity-kld", "--perplexity-output",
    "--perplexity-shard", "--perplexity-merge", "--generate", "--generate-file", "--generate-suffix", "-n", "--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n",
    "--presence-penalty", "--frequency-penalty", "--seed", "--logit-bias", "--stop", "--json-schema", "--generate-output",
    "--host", "--port", "--parallel", "--api-key", "--alias", "--chat-template", "--chat-template-file", "--pooling", "--slot-save-path",
];
/// Flags.
const FLAGS: &[&str] = &[
    "--no-cpu-fallback", "--no-mtp", "--tokenize-no-special", "--tokenize-no-parse-special", "--perplexity-token-ids", "--perplexity-windows",
    "--ignore-eos", "--json-object", "--quiet", "--help", "-h", "--slots", "--no-slots",
];
const GENERATE_ONLY: &[&str] = &[
    "--generate-suffix", "-n", "--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--presence-penalty",
    "--frequency-penalty", "--seed", "--logit-bias", "--stop", "--ignore-eos", "--json-object", "--json-schema", "--generate-output",
];
const SERVE_ONLY: &[&str] =
    &["--host", "--port", "--parallel", "--api-key", "--alias", "--chat-template", "--chat-template-file", "--pooling", "--slots", "--no-slots", "--slot-save-path"];
const TOKENIZE_ONLY: &[&str] = &["--tokenize-no-special", "--tokenize-no-parse-special", "--tokenize-output"];
const PERPLEXITY_ONLY: &[&str] = &[
    "--perplexity-method", "--perplexity-ctx", "--perplexity-stride", "--perplexity-chunks", "--perplexity-kld-base-out",
    "--perplexity-kld-top-k", "--perplexity-kld", "--perplexity-output", "--perplexity-token-ids", "--perplexity-windows",
    "--perplexity-shard",
];
/// What `--perplexity-merge` takes besides its shard files (the shards carry the plan and the model's facts).
const MERGE_ALLOWED: &[&str] = &[
    "--perplexity-merge", "--perplexity-output", "--perplexity-kld-base-out", "--perplexity-windows", "--perplexity-token-ids",
    "--quiet", "--help", "-h",
];

fn number<T: std::str::FromStr>(opt: &str, v: &str, what: &str) -> Result<T, String> {
    v.trim().parse::<T>().map_err(|_| format!("{opt} must be {what}, got '{v}'"))
}

/// `ID+BIAS` or `ID-BIAS` (llama.cpp's `--logit-bias` syntax; `ID-inf` bans the token).
fn logit_bias(v: &str) -> Result<(u32, f32), String> {
    let bad = || format!("--logit-bias must be TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1, 2-inf), got '{v}'");
    let v = v.trim();
    let at = v.find(['+', '-']).ok_or_else(bad)?;
    let id = v[..at].parse::<u32>().map_err(|_| bad())?;
    let bias = v[at..].parse::<f32>().map_err(|_| bad())?;
    Ok((id, bias))
}

fn positive(opt: &str, v: &str) -> Result<usize, String> {
    match v.trim().parse::<i128>() {
        Ok(n) if n >= 1 && n <= usize::MAX as i128 => Ok(n as usize),
        Ok(_) => Err(format!("{opt} must be a positive integer, got {v}")),
        Err(_) => Err(format!("{opt} must be a positive integer, got '{v}'")),
    }
}

/// llama.cpp's short spellings of the options that mean the same here (`-c` does not: llama-server
/// splits its context over the slots, `--kv-len` is per session).
fn long_name(name: &str) -> &str {
    match name {
        "-m" => "--model",
        "-t" => "--threads",
        "-b" => "--batch-size",
        "-ub" => "--ubatch-size",
        "-np" => "--parallel",
        "-a" => "--alias",
        _ => name,
    }
}

/// Parses the command line (without the program name).
pub fn parse(argv: &[String]) -> Result<Args, String> {
    let mut a = Args::default();
    let mut seen: Vec<String> = Vec::new();
    let mut modes: Vec<String> = Vec::new();
    let mut huge_pages: Option<bool> = None;
    let mut i = 0;
    while i < argv.len() {
        let raw = &argv[i];
        i += 1;
        if !raw.starts_with('-') || raw == "-" {
            return Err(format!("unexpected argument '{raw}' (options start with --; see --help)"));
        }
        let (name, inline) = match raw.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (raw.clone(), None),
        };
        let name = long_name(&name).to_string();
        let value = if VALUED.contains(&name.as_str()) {
            match inline {
                Some(v) => v,
                None => {
                    if i >= argv.len() {
                        return Err(format!("{name} needs a value (see --help)"));
                    }
                    i += 1;
                    argv[i - 1].clone()
                }
            }
        } else if FLAGS.contains(&name.as_str()) {
            if inline.is_some() {
                return Err(format!("{name} takes no value"));
            }
            String::new()
        } else {
            return Err(format!("unknown option {name} (see --help)"));
        };
        if seen.contains(&name) && name != "--help" && name != "-h" && name != "--stop" && name != "--logit-bias" {
            return Err(format!("{name} given twice"));
        }
        seen.push(name.clone());
        let v = value.as_str();
        match name.as_str() {
            "--help" | "-h" => a.help = true,
            "--model" => a.model = Some(PathBuf::from(v)),
            "--pool" => match v {
                "cpu" => {}
                _ if v.starts_with("cuda") => {
                    return Err(format!("--pool {v} is not available in this build (allowed: cpu)"))
                }
                _ => return Err(format!("unknown --pool '{v}' (allowed: cpu)")),
            },
            "--dialect" => {
                a.engine.dialect =
                    parse_dialect(v).ok_or_else(|| format!("unknown --dialect '{v}' (allowed: simd, scalar)"))?
            }
            "--simd" => {
                a.engine.simd = Some(
                    lse_engine::parse_simd_level(v)
                        .ok_or_else(|| format!("unknown --simd '{v}' (allowed: avx512, avx2, neon, scalar)"))?,
                )
            }
            "--threads" => a.engine.threads = positive(&name, v)?,
            "--batch-size" => a.engine.batch_size = positive(&name, v)?,
            "--ubatch-size" => a.engine.ubatch_size = positive(&name, v)?,
            "--kv-cache-dtype" => {
                a.engine.kv_dtype = KvDtype::parse(v)
                    .ok_or_else(|| format!("unknown --kv-cache-dtype '{v}' (allowed: f32, f16, bf16, q8_0)"))?
            }
            "--kv-len" => a.engine.kv_len = Some(positive(&name, v)?),
            "--huge-pages" => {
                huge_pages = Some(match v {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("unknown --huge-pages value '{v}' (allowed: on, off)")),
                })
            }
            "--FlashPrefillV2" => {
                a.engine.flash_attention = match v {
                    "on" => true,
                    "off" => false,
                    _ => return Err(format!("unknown --FlashPrefillV2 value '{v}' (allowed: on, off)")),
                }
            }
            "--no-cpu-fallback" => a.engine.cpu_fallback_allowed = false,
            "--no-mtp" => a.no_mtp = true,
            "--tokenize" => {
                modes.push(name.clone());
                a.mode = Some(Mode::Tokenize(PathBuf::from(v)))
            }
            "--tokenize-no-special" => a.tokenize_no_special = true,
            "--tokenize-no-parse-special" => a.tokenize_no_parse_special = true,
            "--tokenize-output" => a.tokenize_output = Some(PathBuf::from(v)),
            "--perplexity" => {
                modes.push(name.clone());
                a.mode = Some(Mode::Perplexity(PathBuf::from(v)))
            }
            "--perplexity-tokens" => {
                modes.push(name.clone());
                a.mode = Some(Mode::PerplexityTokens(PathBuf::from(v)))
            }
            "--perplexity-pairs" => {
                modes.push(name.clone());
                a.mode = Some(Mode::PerplexityPairs(PathBuf::from(v)))
            }
            "--perplexity-method" => a.request.method = Some(Method::parse(v).map_err(|e| e.to_string())?),
            "--perplexity-ctx" => a.request.ctx = Some(positive(&name, v)?),
            "--perplexity-stride" => a.request.stride = Some(positive(&name, v)?),
            "--perplexity-chunks" => a.request.chunks = Some(positive(&name, v)?),
            "--perplexity-kld-base-out" => a.request.kld_base_out = Some(PathBuf::from(v)),
            "--perplexity-kld-top-k" => {
                let k = v.trim().parse::<i64>().map_err(|_| format!("--perplexity-kld-top-k must be an integer between 1 and 32, got '{v}'"))?;
                if !(1..=32).contains(&k) {
                    return Err(format!("--perplexity-kld-top-k must be between 1 and 32, got {k}"));
                }
                a.request.kld_top_k = Some(k as usize)
            }
            "--perplexity-kld" => a.request.kld_base = Some(PathBuf::from(v)),
            "--perplexity-output" => a.output = Some(PathBuf::from(v)),
            "--perplexity-token-ids" => a.request.include_token_ids = true,
            "--perplexity-windows" => a.request.include_windows = true,
            "--perplexity-shard" => {
                a.request.shard = Some(lse_eval::ShardSpec::parse(v, |k| std::env::var(k).ok()).map_err(|e| e.to_string())?)
            }
            "--perplexity-merge" => {
                // the shard files: this value and every following argument up to the next option
                let mut files = vec![PathBuf::from(v)];
                while i < argv.len() && !argv[i].starts_with("--") {
                    files.push(PathBuf::from(&argv[i]));
                    i += 1;
                }
                modes.push(name.clone());
                a.mode = Some(Mode::PerplexityMerge(files))
            }
            "--generate" => {
                modes.push(name.clone());
                a.mode = Some(Mode::Generate(GenerateSource::Text(v.to_string())))
            }
            "--generate-file" => {
                modes.push(name.clone());
                a.mode = Some(Mode::Generate(GenerateSource::File(PathBuf::from(v))))
            }
            "-n" => a.generate.max_tokens = number(&name, v, "an integer")?,
            "--temp" => a.generate.sampling.temperature = number(&name, v, "a number")?,
            "--top-k" => a.generate.sampling.top_k = number(&name, v, "an integer")?,
            "--top-p" => a.generate.sampling.top_p = number(&name, v, "a number")?,
            "--min-p" => a.generate.sampling.min_p = number(&name, v, "a number")?,
            "--repeat-penalty" => a.generate.sampling.repeat_penalty = number(&name, v, "a number")?,
            "--repeat-last-n" => a.generate.sampling.repeat_last_n = number(&name, v, "an integer")?,
            "--presence-penalty" => a.generate.sampling.presence_penalty = number(&name, v, "a number")?,
            "--frequency-penalty" => a.generate.sampling.frequency_penalty = number(&name, v, "a number")?,
            "--seed" => a.generate.sampling.seed = Some(number(&name, v, "a non-negative integer")?),
            "--logit-bias" => {
                let (id, bias) = logit_bias(v)?;
                lse_engine::generation::logit_bias::add(&mut a.generate.sampling.logit_bias, id, bias);
            }
            "--stop" => a.generate.stop.push(v.to_string()),
            "--ignore-eos" => a.generate.ignore_eos = true,
            "--json-object" => a.generate.json_object = true,
            "--json-schema" => {
                a.generate.json_schema = Some(serde_json::from_str(v).map_err(|e| format!("--json-schema: not JSON: {e}"))?);
            }
            "--generate-output" => a.generate_output = Some(PathBuf::from(v)),
            "--generate-suffix" => a.generate_suffix = Some(v.to_string()),
            "--host" => a.serve.host = v.to_string(),
            "--port" => a.serve.port = number(&name, v, "a port number (0 to 65535)")?,
            "--parallel" => a.serve.parallel = positive(&name, v)?,
            "--api-key" => a.serve.api_key = Some(v.to_string()),
            "--alias" => a.serve.alias = Some(v.to_string()),
            "--pooling" => a.serve.pooling = Some(lse_engine::Pooling::parse(v).map_err(|e| format!("--pooling: {e}"))?),
            "--chat-template" | "--chat-template-file" if a.serve.chat_template.is_some() => {
                return Err("give one of --chat-template and --chat-template-file".into())
            }
            // checked here, and `chatml` resolved to its source, like every other option
            "--chat-template" => a.serve.chat_template = Some(crate::http::template::from_option(v)?.to_string()),
            "--chat-template-file" => {
                let text = lse_eval::read_text_file_verbatim(std::path::Path::new(v)).map_err(|e| format!("--chat-template-file: {e}"))?;
                if text.trim().is_empty() {
                    return Err(format!("chat template file {v} is empty (--chat-template-file takes the template's Jinja source)"));
                }
                if !crate::http::template::is_jinja(&text) {
                    return Err(format!("--chat-template-file {v} holds no Jinja ({{{{ … }}}} or {{% … %}}): it is not a template"));
                }
                crate::http::template::check(&text).map_err(|e| format!("--chat-template-file {v}: {e}"))?;
                a.serve.chat_template = Some(text);
            }
            "--quiet" => a.quiet = true,
            "--slots" => a.serve.slots = true,
            "--no-slots" => a.serve.slots = false,
            "--slot-save-path" => a.serve.slot_save_path = Some(PathBuf::from(v)),
            _ => unreachable!("listed option {name}"),
        }
    }
    if a.help {
        return Ok(a);
    }
    if modes.len() > 1 {
        return Err(format!("{} and {} cannot be used together: choose one mode", modes[0], modes[1]));
    }
    let mode = a.mode.get_or_insert(Mode::Serve).clone();
    a.engine.huge_pages = huge_pages.unwrap_or(matches!(mode, Mode::Serve | Mode::Generate(_)));
    if let Mode::PerplexityMerge(_) = mode {
        if let Some(s) = seen.iter().find(|s| !MERGE_ALLOWED.contains(&s.as_str())) {
            return Err(format!("{s} does not apply to --perplexity-merge (the shard files carry the plan and the model's facts)"));
        }
        check_outputs(&a)?;
        return Ok(a);
    }
    let perplexity = matches!(mode, Mode::Perplexity(_) | Mode::PerplexityTokens(_) | Mode::PerplexityPairs(_));
    for s in &seen {
        let s = s.as_str();
        if !perplexity && PERPLEXITY_ONLY.contains(&s) {
            return Err(format!("{s} applies to the perplexity modes only"));
        }
        if !matches!(mode, Mode::Tokenize(_)) && TOKENIZE_ONLY.contains(&s) {
            return Err(format!("{s} applies to --tokenize only"));
        }
        if !matches!(mode, Mode::Generate(_)) && GENERATE_ONLY.contains(&s) {
            return Err(format!("{s} applies to --generate only"));
        }
        if mode != Mode::Serve && SERVE_ONLY.contains(&s) {
            return Err(format!("{s} applies to serving only (no --perplexity, --tokenize or --generate)"));
        }
    }
    if let Mode::Generate(_) = mode {
        // the prompt is checked once read; everything else now
        let probe = GenerateRequest { prompt: lse_engine::Prompt::Text("x".into()), ..a.generate.clone() };
        probe.validate()?;
    }
    if a.model.is_none() {
        return Err("--model PATH is required (a .gguf file or a folder holding one)".into());
    }
    a.engine.validate().map_err(|e| e.to_string())?;
    check_outputs(&a)?;
    Ok(a)
}

/// Refuses an output path that names one of the run's input files or another output: the report
/// would silently replace the text, the model, a KL base or a shard being read.
fn check_outputs(a: &Args) -> Result<(), String> {
    let mut inputs: Vec<(&str, &Path)> = Vec::new();
    if let Some(m) = &a.model {
        inputs.push(("--model", m));
    }
    match &a.mode {
        Some(Mode::Tokenize(p)) => inputs.push(("--tokenize", p)),
        Some(Mode::Perplexity(p)) => inputs.push(("--perplexity", p)),
        Some(Mode::PerplexityTokens(p)) => inputs.push(("--perplexity-tokens", p)),
        Some(Mode::PerplexityPairs(p)) => inputs.push(("--perplexity-pairs", p)),
        Some(Mode::PerplexityMerge(shards)) => inputs.extend(shards.iter().map(|p| ("--perplexity-merge", p.as_path()))),
        Some(Mode::Generate(GenerateSource::File(p))) => inputs.push(("--generate-file", p)),
        _ => {}
    }
    if let Some(p) = &a.request.kld_base {
        inputs.push(("--perplexity-kld", p));
    }
    let outputs: Vec<(&str, &Path)> = [
        ("--perplexity-output", &a.output),
        ("--tokenize-output", &a.tokenize_output),
        ("--generate-output", &a.generate_output),
        ("--perplexity-kld-base-out", &a.request.kld_base_out),
    ]
    .into_iter()
    .filter_map(|(n, p)| p.as_deref().map(|p| (n, p)))
    .collect();
    let same = lse_eval::atomic::same_file;
    for (i, (on, o)) in outputs.iter().enumerate() {
        if let Some((n, _)) = inputs.iter().find(|(_, p)| same(p, o)) {
            return Err(format!("{on} {} is the {n} input: choose another path", o.display()));
        }
        if let Some((n, _)) = outputs[i + 1..].iter().find(|(_, p)| same(p, o)) {
            return Err(format!("{on} and {n} name the same file {}", o.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_everything() {
        let a = p("--model m.gguf --pool cpu --dialect scalar --threads 3 --batch-size 1024 --ubatch-size=256 \
                   --kv-cache-dtype bf16 --kv-len 4096 --FlashPrefillV2=off --no-cpu-fallback --no-mtp \
                   --perplexity t.txt --perplexity-method sliding --perplexity-ctx 256 --perplexity-stride 64 \
                   --perplexity-chunks 3 --perplexity-kld-base-out b.kld --perplexity-kld-top-k 8 \
                   --perplexity-output o.json --perplexity-token-ids --perplexity-windows --quiet")
        .unwrap();
        let e = &a.engine;
        assert_eq!(e.dialect, lse_engine::Dialect::Scalar);
        assert_eq!((e.threads, e.batch_size, e.ubatch_size, e.kv_len), (3, 1024, 256, Some(4096)));
        assert_eq!(e.kv_dtype, KvDtype::Bf16);
        assert!(!e.flash_attention && !e.cpu_fallback_allowed && a.no_mtp && a.request.include_token_ids && a.request.include_windows && a.quiet);
        assert_eq!(a.mode, Some(Mode::Perplexity("t.txt".into())));
        let r = &a.request;
        assert_eq!((r.ctx, r.stride, r.chunks, r.kld_top_k), (Some(256), Some(64), Some(3), Some(8)));
    }

    /// Huge pages where decode streams the weights (serving, --generate), not for scoring.
    #[test]
    fn huge_pages_follow_the_mode() {
        for (cmd, want) in [
            ("--model m", true),
            ("--model m --generate hi", true),
            ("--model m --perplexity t", false),
            ("--model m --tokenize t", false),
            ("--model m --huge-pages off", false),
            ("--model m --perplexity t --huge-pages on", true),
        ] {
            assert_eq!(p(cmd).unwrap().engine.huge_pages, want, "{cmd}");
        }
        assert!(p("--model m --huge-pages yes").unwrap_err().contains("allowed: on, off"));
    }

    #[test]
    fn llama_cpp_short_options() {
        let a = p("-m m.gguf -t 3 -b 1024 -ub 256 -np 6 -a smol").unwrap();
        assert_eq!(a.model.as_deref(), Some(std::path::Path::new("m.gguf")));
        assert_eq!((a.engine.threads, a.engine.batch_size, a.engine.ubatch_size), (3, 1024, 256));
        assert_eq!((a.serve.parallel, a.serve.alias.as_deref()), (6, Some("smol")));
        assert!(p("-m a -m b").unwrap_err().contains("--model given twice"));
    }

    #[test]
    fn logit_bias_takes_llama_cpp_syntax_and_repeats() {
        let a = p("--model m --generate hi --logit-bias 15043+1 --logit-bias 2-inf --logit-bias 7-0.5 --logit-bias 2+1.5 --logit-bias 7+2")
            .unwrap();
        let b = &a.generate.sampling.logit_bias;
        assert_eq!(b, &lse_engine::LogitBias::from([(2, f32::NEG_INFINITY), (7, 1.5), (15043, 1.0)]));
    }

    #[test]
    fn outputs_never_name_inputs() {
        for (cmd, want) in [
            ("--model m --perplexity t.txt --perplexity-output t.txt", "--perplexity input"),
            ("--model m --perplexity t --perplexity-kld b.kld --perplexity-output b.kld", "--perplexity-kld input"),
            ("--model m --perplexity t --perplexity-kld-base-out x --perplexity-output x", "name the same file"),
            ("--perplexity-merge s0 s1 --perplexity-output s1", "--perplexity-merge input"),
            ("--model m.gguf --generate hi --generate-output m.gguf", "--model input"),
        ] {
            let e = p(cmd).unwrap_err();
            assert!(e.contains(want), "{cmd}: {e}");
        }
        assert!(p("--model m --perplexity t --perplexity-kld b.kld --perplexity-output o.json").is_ok());
    }

    #[test]
    fn shard_and_merge() {
        let a = p("--model m --perplexity t --perplexity-shard 1/3 --perplexity-output s1").unwrap();
        assert_eq!(a.request.shard, Some(lse_eval::ShardSpec { index: 1, count: 3 }));
        let a = p("--perplexity-merge s0 s1 s2 --perplexity-output r.json --perplexity-windows").unwrap();
        assert_eq!(a.mode, Some(Mode::PerplexityMerge(vec!["s0".into(), "s1".into(), "s2".into()])));
        assert!(a.request.include_windows && a.model.is_none());
    }

    #[test]
    fn refusals_name_the_option() {
        for (cmd, phrase) in [
            ("--model m --perplexity t --batch-size 0", "--batch-size"),
            ("--model m --perplexity t --ubatch-size -3", "--ubatch-size"),
            ("--model m --perplexity t --batch-size 256 --ubatch-size 512", "must not exceed --batch-size"),
            ("--model m --perplexity t --kv-cache-dtype f8", "f32, f16, bf16, q8_0"),
            ("--model m --perplexity t --dialect avx", "simd, scalar"),
            ("--model m --perplexity t --pool gpu", "allowed: cpu"),
            ("--model m --perplexity t --FlashPrefillV2=maybe", "on, off"),
            ("--model m --perplexity t --perplexity-method best", "chunks, sliding"),
            ("--model m --perplexity t --perplexity-kld-top-k 33", "between 1 and 32"),
            ("--model m --perplexity t --perplexity-kld-top-k 0", "between 1 and 32"),
            ("--model m --perplexity t --perplexity-ctx 0", "--perplexity-ctx"),
            ("--model m --perplexity t --bogus", "unknown option --bogus"),
            ("--model m --generate hi -n -1", "-n"),
            ("--model m --generate hi --temp -1", "temperature"),
            ("--model m --generate hi --top-p 0", "top-p"),
            ("--model m --generate hi --top-p 1.5", "top-p"),
            ("--model m --generate hi --top-k -2", "top-k"),
            ("--model m --generate hi --chat-template chatml", "serving only"),
            ("--model m --chat-template-file /nonexistent/t.jinja", "--chat-template-file: cannot read /nonexistent/t.jinja"),
            ("--model m --chat-template chatml --chat-template-file /dev/null", "one of --chat-template"),
            ("--model m --chat-template-file /dev/null", "chat template file /dev/null is empty"),
            ("--model m --generate hi --logit-bias 5", "--logit-bias"),
            ("--model m --generate hi --logit-bias x+1", "--logit-bias"),
            ("--model m --generate hi --logit-bias 5+x", "--logit-bias"),
            ("--model m --generate hi --logit-bias 5+nan", "logit bias of token 5"),
            ("--model m --generate hi --logit-bias 5+inf", "logit bias of token 5"),
            ("--model m --perplexity t -n 5", "--generate only"),
            ("--model m --generate hi --port 9", "serving only"),
            ("--model m --perplexity t --threads 100000", "--threads"),
            ("--perplexity t", "--model"),
            ("--model m --perplexity t --tokenize u", "cannot be used together"),
            ("--model m --tokenize t --perplexity-ctx 5", "perplexity modes only"),
            ("--model m --perplexity t --tokenize-output x", "--tokenize only"),
            ("--model m --perplexity", "needs a value"),
            ("--model m --perplexity t --threads 0", "--threads"),
            ("--model m --perplexity t --perplexity-shard 3/3", "below the count"),
            ("--model m --perplexity t --perplexity-shard 3", "I/N"),
            ("--model m --tokenize t --perplexity-shard 0/2", "perplexity modes only"),
            ("--perplexity-merge a b --perplexity-ctx 5", "does not apply to --perplexity-merge"),
            ("--perplexity-merge a --model m", "does not apply to --perplexity-merge"),
            ("--model m --perplexity t --perplexity-merge a", "cannot be used together"),
            ("--perplexity-merge", "needs a value"),
        ] {
            let e = p(cmd).unwrap_err();
            assert!(e.contains(phrase), "{cmd}: {e}");
        }
        let empty = std::env::temp_dir().join(format!("lse-args-empty-{}.jinja", std::process::id()));
        std::fs::write(&empty, b"").unwrap();
        let e = p(&format!("--model m --chat-template-file {}", empty.display())).unwrap_err();
        assert!(e.contains(&format!("chat template file {} is empty", empty.display())), "{e}");
        std::fs::remove_file(&empty).unwrap();
    }
}
