//! The engine options as a JSON object (SPEC §2 names without the leading dashes, `_` for `-`):
//! the C API's `lse_engine_open` and the Python package both open engines from it, so the object
//! is read and checked here, once, before any model work.

use crate::{parse_dialect, EngineOptions, KvDtype};
use serde_json::Value;
use std::path::PathBuf;

/// The engine options of one `lse_engine_open` call; a field left out or null takes the SPEC default.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenOptions {
    /// A `.gguf` file, or a folder holding one model (required).
    pub model: PathBuf,
    /// `dialect` … `no_cpu_fallback`.
    pub engine: EngineOptions,
    pub no_mtp: bool,
}

/// Every field the options object may hold.
pub const FIELDS: &[&str] = &[
    "model",
    "pool",
    "dialect",
    "simd",
    "threads",
    "batch_size",
    "ubatch_size",
    "kv_cache_dtype",
    "kv_len",
    "flash_prefill_v2",
    "no_cpu_fallback",
    "no_mtp",
    "huge_pages",
];

fn positive(key: &str, v: &Value) -> Result<Option<usize>, String> {
    if v.is_null() {
        return Ok(None);
    }
    match v.as_u64() {
        Some(n) if n >= 1 && n <= usize::MAX as u64 => Ok(Some(n as usize)),
        Some(n) => Err(format!("engine option {key} must be a positive integer, got {n}")),
        None => Err(format!("engine option {key} must be a positive integer, got {}", describe(v))),
    }
}

fn string<'a>(key: &str, v: &'a Value, allowed: &str) -> Result<Option<&'a str>, String> {
    if v.is_null() {
        return Ok(None);
    }
    v.as_str().map(Some).ok_or_else(|| format!("engine option {key} must be a string ({allowed}), got {}", describe(v)))
}

fn flag(key: &str, v: &Value) -> Result<Option<bool>, String> {
    if v.is_null() {
        return Ok(None);
    }
    v.as_bool().map(Some).ok_or_else(|| format!("engine option {key} must be true or false, got {}", describe(v)))
}

/// A short description of a JSON value for error messages (its type and, when short, its text).
pub fn describe(v: &Value) -> String {
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() && n.as_i64().unwrap_or(0) < 0 => "a negative number",
        // integers beyond 64 bits parse as floats
        Value::Number(n) if n.as_f64().is_some_and(|x| x.fract() == 0.0 && x.abs() >= 9.2e18) => "a number out of range",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let text = v.to_string();
    if text.len() <= 40 {
        format!("{kind} ({text})")
    } else {
        kind.to_string()
    }
}

impl OpenOptions {
    /// Parses the options JSON text. Errors name the field and the allowed values.
    pub fn parse(json: &str) -> Result<OpenOptions, String> {
        let v: Value = serde_json::from_str(json).map_err(|e| format!("engine options are not valid JSON: {e}"))?;
        Self::from_json(&v)
    }

    /// Reads the options object. Unknown fields are refused (a misspelt option must not be ignored).
    pub fn from_json(v: &Value) -> Result<OpenOptions, String> {
        let o = v.as_object().ok_or_else(|| format!("engine options must be a JSON object, got {}", describe(v)))?;
        let mut model = None;
        let mut opts = OpenOptions { model: PathBuf::new(), engine: EngineOptions::default(), no_mtp: false };
        let e = &mut opts.engine;
        for (k, x) in o {
            match k.as_str() {
                "model" => model = string(k, x, "a .gguf file or a folder holding one")?.map(PathBuf::from),
                "pool" => match string(k, x, "cpu")? {
                    None | Some("cpu") => {}
                    Some(p) if p.starts_with("cuda") => {
                        return Err(format!("engine option pool \"{p}\" is not available in this build (allowed: cpu)"))
                    }
                    Some(p) => return Err(format!("unknown engine option pool \"{p}\" (allowed: cpu)")),
                },
                "dialect" => {
                    if let Some(d) = string(k, x, "simd or scalar")? {
                        e.dialect = parse_dialect(d)
                            .ok_or_else(|| format!("unknown engine option dialect \"{d}\" (allowed: simd, scalar)"))?;
                    }
                }
                "simd" => {
                    if let Some(s) = string(k, x, "avx512, avx2, neon or scalar")? {
                        e.simd = Some(lse_kernels::simd::parse_level(s).ok_or_else(|| {
                            format!("unknown engine option simd \"{s}\" (allowed: avx512, avx2, neon, scalar)")
                        })?);
                    }
                }
                "threads" => e.threads = positive(k, x)?.unwrap_or(e.threads),
                "batch_size" => e.batch_size = positive(k, x)?.unwrap_or(e.batch_size),
                "ubatch_size" => e.ubatch_size = positive(k, x)?.unwrap_or(e.ubatch_size),
                "kv_cache_dtype" => {
                    if let Some(t) = string(k, x, "f32, f16, bf16 or q8_0")? {
                        e.kv_dtype = KvDtype::parse(t).ok_or_else(|| {
                            format!("unknown engine option kv_cache_dtype \"{t}\" (allowed: f32, f16, bf16, q8_0)")
                        })?;
                    }
                }
                "kv_len" => e.kv_len = positive(k, x)?,
                "flash_prefill_v2" => {
                    // true/false, or the CLI's spelling "on"/"off"
                    e.flash_attention = match x {
                        Value::String(s) if s == "on" => true,
                        Value::String(s) if s == "off" => false,
                        _ => flag(k, x)
                            .map_err(|_| {
                                format!("engine option flash_prefill_v2 must be true or false (or \"on\"/\"off\"), got {}", describe(x))
                            })?
                            .unwrap_or(true),
                    }
                }
                "no_cpu_fallback" => e.cpu_fallback_allowed = !flag(k, x)?.unwrap_or(false),
                "no_mtp" => opts.no_mtp = flag(k, x)?.unwrap_or(false),
                "huge_pages" => e.huge_pages = flag(k, x)?.unwrap_or(false),
                other => {
                    return Err(format!("unknown engine option \"{other}\" (allowed: {})", FIELDS.join(", ")));
                }
            }
        }
        opts.model = model.ok_or_else(|| "engine option model is required (a .gguf file or a folder holding one)".to_string())?;
        if opts.model.as_os_str().is_empty() {
            return Err("engine option model is empty (a .gguf file or a folder holding one)".into());
        }
        // the engine's checks name its flags: here, this object's fields
        opts.engine.validate().map_err(|e| match e {
            crate::EngineError::InvalidOption(m) => format!("engine option {}", crate::respell(&m, crate::spelling::ENGINE_FIELDS)),
            e => e.to_string(),
        })?;
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_options() {
        let o = OpenOptions::parse(
            r#"{"model": "m.gguf", "pool": "cpu", "dialect": "scalar", "threads": 3, "batch_size": 1024,
                "ubatch_size": 256, "kv_cache_dtype": "bf16", "kv_len": 4096, "flash_prefill_v2": false,
                "no_cpu_fallback": true, "no_mtp": true, "huge_pages": true}"#,
        )
        .unwrap();
        assert_eq!(o.model, PathBuf::from("m.gguf"));
        let e = &o.engine;
        assert_eq!(e.dialect, crate::Dialect::Scalar);
        assert_eq!(e.threads, 3);
        assert_eq!((e.batch_size, e.ubatch_size), (1024, 256));
        assert_eq!(e.kv_dtype, KvDtype::Bf16);
        assert_eq!(e.kv_len, Some(4096));
        assert!(!e.flash_attention && !e.cpu_fallback_allowed && o.no_mtp && e.huge_pages);
    }

    #[test]
    fn defaults_and_nulls() {
        let o = OpenOptions::parse(r#"{"model": "m.gguf", "threads": null, "flash_prefill_v2": "on"}"#).unwrap();
        let e = &o.engine;
        assert_eq!(e.threads, crate::physical_cores());
        assert_eq!((e.batch_size, e.ubatch_size), (2048, 512));
        assert_eq!(e.kv_dtype, KvDtype::F16);
        assert_eq!(e.dialect, crate::Dialect::Simd);
        assert!(e.flash_attention);
        let o = OpenOptions::parse(r#"{"model": "m.gguf", "flash_prefill_v2": "off"}"#).unwrap();
        assert!(!o.engine.flash_attention);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (r#"{"model": 3}"#, "model"),
            (r#"{}"#, "model is required"),
            (r#"{"model": ""}"#, "model is empty"),
            (r#"{"model": "m", "threads": "2"}"#, "threads must be a positive integer"),
            (r#"{"model": "m", "threads": 0}"#, "threads must be a positive integer, got 0"),
            (r#"{"model": "m", "threads": -1}"#, "threads"),
            (r#"{"model": "m", "threads": 1.5}"#, "threads"),
            (r#"{"model": "m", "batch_size": true}"#, "batch_size"),
            (r#"{"model": "m", "batch_size": 8, "ubatch_size": 16}"#, "ubatch_size (16) must not exceed batch_size (8)"),
            (r#"{"model": "m", "kv_cache_dtype": "q4_0"}"#, "kv_cache_dtype \"q4_0\" (allowed: f32, f16, bf16, q8_0)"),
            (r#"{"model": "m", "kv_cache_dtype": 16}"#, "kv_cache_dtype must be a string"),
            (r#"{"model": "m", "kv_len": 0}"#, "kv_len"),
            (r#"{"model": "m", "kv_len": 5000000000}"#, "engine option kv_len 5000000000 is beyond any context"),
            (r#"{"model": "m", "threads": 100000}"#, "engine option threads 100000 is far more than"),
            (r#"{"model": "m", "dialect": "avx"}"#, "dialect \"avx\" (allowed: simd, scalar)"),
            (r#"{"model": "m", "pool": "cuda:0"}"#, "not available in this build"),
            (r#"{"model": "m", "pool": "gpu"}"#, "pool \"gpu\""),
            (r#"{"model": "m", "flash_prefill_v2": 1}"#, "flash_prefill_v2 must be true or false"),
            (r#"{"model": "m", "no_mtp": "yes"}"#, "no_mtp must be true or false"),
            (r#"{"model": "m", "huge_pages": 1}"#, "huge_pages must be true or false"),
            (r#"{"model": "m", "thread": 2}"#, "unknown engine option \"thread\""),
            (r#"[1, 2]"#, "must be a JSON object"),
            (r#"{"model": "m""#, "not valid JSON"),
        ];
        for (json, want) in cases {
            let e = OpenOptions::parse(json).unwrap_err();
            assert!(e.contains(want), "{json}: {e:?} lacks {want:?}");
            assert!(!e.contains('\n'), "{e:?} is not one line");
            assert!(!e.contains("--"), "{e:?} names a flag where the object has a field");
        }
    }
}
