//! Bad input gives one clear `EngineError`, never a panic.

use lse_engine::{Engine, EngineError, EngineOptions, KvDtype};
use lse_gguf::{GgufFile, GgufWriter, Value};
use std::path::PathBuf;

fn tiny() -> PathBuf {
    lse_testdata::golden("synthetic/llama-tiny.gguf")
}

fn opts() -> EngineOptions {
    EngineOptions { threads: 1, batch_size: 128, ubatch_size: 128, kv_len: Some(64), ..EngineOptions::default() }
}

/// llama-tiny rewritten with `edit` applied to its metadata and tensor list.
fn rewritten(tag: &str, edit: impl Fn(&mut Vec<(String, Value)>, &mut Vec<String>)) -> PathBuf {
    rewritten_with(tag, edit, |t, data| (t.ggml_type, data.to_vec()))
}

/// As [`rewritten`], each tensor's type and bytes given by `tensor`.
fn rewritten_with(
    tag: &str,
    edit: impl Fn(&mut Vec<(String, Value)>, &mut Vec<String>),
    tensor: impl Fn(&lse_gguf::TensorInfo, &[u8]) -> (lse_gguf::GgmlType, Vec<u8>),
) -> PathBuf {
    rewritten_from(&tiny(), tag, edit, tensor)
}

/// The model at `src` rewritten as [`rewritten_with`] says.
fn rewritten_from(
    src: &std::path::Path,
    tag: &str,
    edit: impl Fn(&mut Vec<(String, Value)>, &mut Vec<String>),
    tensor: impl Fn(&lse_gguf::TensorInfo, &[u8]) -> (lse_gguf::GgmlType, Vec<u8>),
) -> PathBuf {
    let f = GgufFile::open(src).unwrap();
    let mut kv: Vec<(String, Value)> = f.metadata().iter().filter(|(k, _)| k != "general.alignment").cloned().collect();
    let mut names: Vec<String> = f.tensors().iter().map(|t| t.name.clone()).collect();
    edit(&mut kv, &mut names);
    let mut w = GgufWriter::new();
    for (k, v) in kv {
        w.add_kv(k, v);
    }
    for n in names {
        let t = f.tensor(&n).unwrap();
        let (ty, data) = tensor(t, f.tensor_data(t));
        w.add_tensor(n.clone(), &t.dims, ty, data);
    }
    let path = std::env::temp_dir().join(format!("lse-engine-test-{}-{tag}.gguf", std::process::id()));
    w.write(&path).unwrap();
    path
}

#[test]
fn invalid_options_are_refused_before_loading() {
    let e = Engine::load(&tiny(), EngineOptions { batch_size: 64, ubatch_size: 128, ..opts() }).err().unwrap();
    assert!(matches!(e, EngineError::InvalidOption(_)), "{e}");
    assert!(e.to_string().contains("--ubatch-size"), "{e}");
    let e = Engine::load(&tiny(), EngineOptions { threads: 0, ..opts() }).err().unwrap();
    assert!(e.to_string().contains("--threads"), "{e}");
}

#[test]
fn missing_model_path() {
    let e = Engine::load(&PathBuf::from("/nonexistent/model.gguf"), opts()).err().unwrap();
    assert!(matches!(e, EngineError::ModelPath(..)), "{e}");
}

#[test]
fn unsupported_architecture() {
    let p = rewritten("arch", |kv, _| {
        for (k, v) in kv.iter_mut() {
            if k == "general.architecture" {
                *v = Value::String("mamba".into());
            }
        }
    });
    let e = Engine::load(&p, opts()).err().unwrap();
    let _ = std::fs::remove_file(&p);
    assert!(matches!(e, EngineError::UnsupportedArchitecture(_)), "{e}");
    assert!(e.to_string().contains("mamba"), "{e}");
}

#[test]
fn missing_tensor() {
    let p = rewritten("tensor", |_, names| names.retain(|n| n != "blk.2.attn_k.weight"));
    let e = Engine::load(&p, opts()).err().unwrap();
    let _ = std::fs::remove_file(&p);
    assert!(matches!(&e, EngineError::MissingTensor(n) if n == "blk.2.attn_k.weight"), "{e}");
}

#[test]
fn window_longer_than_kv_capacity_and_bad_ids() {
    let engine = Engine::load(&tiny(), opts()).unwrap();
    assert_eq!(engine.kv_capacity(), 64);
    let e = engine.prefill(&[1u32; 65], &[64]).err().unwrap();
    assert!(matches!(e, EngineError::WindowTooLong { tokens: 65, capacity: 64 }), "{e}");
    let e = engine.prefill(&[1, 2, 99999], &[2]).err().unwrap();
    assert!(matches!(e, EngineError::InvalidToken { id: 99999, index: 2, .. }), "{e}");
    let e = engine.prefill(&[1, 2, 3], &[2, 1]).err().unwrap();
    assert!(matches!(e, EngineError::InvalidRequest(_)), "{e}");
    let h = engine.prefill(&[1, 2, 3], &[1, 2]).unwrap();
    let e = engine.head_reduce(&h, &[]).err().unwrap();
    assert!(matches!(e, EngineError::InvalidRequest(_)), "{e}");
}

#[test]
fn q8_0_cache_needs_head_dim_multiple_of_32() {
    // llama-tiny has head_dim 16
    let e = Engine::load(&tiny(), EngineOptions { kv_dtype: KvDtype::Q8_0, ..opts() }).err().unwrap();
    assert!(matches!(e, EngineError::InvalidOption(_)), "{e}");
    assert!(e.to_string().contains("q8_0"), "{e}");
}

#[test]
fn config_reports_the_options() {
    let engine = Engine::load(&tiny(), EngineOptions { flash_attention: false, kv_dtype: KvDtype::Bf16, ..opts() }).unwrap();
    let c = engine.config();
    assert_eq!(c.prefill_attention, "dense");
    assert_eq!(c.kv_cache_dtype, "bf16");
    assert_eq!(c.kv_capacity, 64);
    assert_eq!(c.head_rows, 128);
    assert!((c.prefill_attention_scale - 0.25).abs() < 1e-7, "1/sqrt(16)");
    assert_eq!(engine.architecture(), "llama");
    assert_eq!(engine.n_vocab(), 32000);
}

#[test]
fn engine_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Engine>();
}

/// Corrupt hyper-parameters are refused at load: a block count past the file's tensors (it once
/// sized arrays: a 4294967295 count aborted on a 34 GB allocation), and a rope base or rotary
/// width that would give numbers without meaning (a NaN base scored perplexity 73836 for 25.6).
#[test]
fn corrupt_hyperparameters_are_refused() {
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        ("blocks", "llama.block_count", Value::U32(u32::MAX), "block_count"),
        ("base-nan", "llama.rope.freq_base", Value::F32(f32::NAN), "rope.freq_base"),
        ("base-neg", "llama.rope.freq_base", Value::F32(-1.0), "rope.freq_base"),
        ("rot0", "llama.rope.dimension_count", Value::U32(0), "rope.dimension_count"),
        // optional keys of the wrong type or value were read as absent, or used as they were
        ("rot-str", "llama.rope.dimension_count", Value::String("16".into()), "rope.dimension_count must be a non-negative integer"),
        ("keylen-neg", "llama.attention.key_length", Value::I32(-1), "attention.key_length"),
        ("ctx-float", "llama.context_length", Value::F32(2048.0), "context_length"),
        ("scale-nan", "llama.rope.scaling.factor", Value::F32(f32::NAN), "rope.scaling.factor"),
        ("scale-neg", "llama.rope.scaling.factor", Value::F32(-2.0), "rope.scaling.factor"),
        ("eps-inf", "llama.attention.layer_norm_rms_epsilon", Value::F32(f32::INFINITY), "layer_norm_rms_epsilon"),
        ("type-int", "llama.rope.scaling.type", Value::U32(1), "rope.scaling.type must be a string"),
        ("window-str", "llama.attention.sliding_window", Value::String("512".into()), "sliding_window"),
        // was read as absent ("has no general.architecture key")
        ("arch-int", "general.architecture", Value::U32(7), "general.architecture must be a string, not u32 7"),
        // fewer blocks than the file holds: the rest were left out
        ("blocks-3", "llama.block_count", Value::U32(3), "'blk.3."),
    ];
    for (tag, key, val, want) in cases {
        let p = rewritten(tag, |kv, _| {
            kv.retain(|(k, _)| k != key);
            kv.push((key.to_string(), val.clone()));
        });
        let e = Engine::load(&p, opts()).err();
        let _ = std::fs::remove_file(&p);
        let e = e.unwrap_or_else(|| panic!("{key} = {val:?} loaded"));
        assert!(matches!(e, EngineError::Metadata(_)) && e.to_string().contains(want), "{tag}: {e}");
    }
}

#[test]
fn a_bias_that_bans_every_token_is_refused() {
    use lse_engine::{GenerateRequest, Prompt};
    let engine = Engine::load(&tiny(), opts()).unwrap();
    let n = engine.n_vocab() as u32;
    let ban = |ids: &mut dyn Iterator<Item = u32>| ids.map(|id| (id, f32::NEG_INFINITY)).collect();
    let req = |bias, min_tokens| GenerateRequest {
        prompt: Prompt::Tokens(vec![1, 2, 3]),
        max_tokens: 4,
        min_tokens,
        sampling: lse_engine::SamplingParams { logit_bias: bias, ..Default::default() },
        ..Default::default()
    };
    let all = ban(&mut (0..n));
    let e = engine.start_sequence(&req(all, 0)).err().unwrap();
    assert!(matches!(&e, EngineError::InvalidRequest(m) if m.contains("every token")), "{e}");
    // every token but those that end the answer, which min_tokens holds back
    let eog = engine.tokenizer().eog_ids().to_vec();
    assert!(!eog.is_empty());
    let but_eog = ban(&mut (0..n).filter(|id| !eog.contains(id)));
    let e = engine.start_sequence(&req(but_eog, 2)).err().unwrap();
    assert!(matches!(&e, EngineError::InvalidRequest(m) if m.contains("min_tokens")), "{e}");
    // without min_tokens the end of the answer may come at once; one open token is enough
    let but_eog = ban(&mut (0..n).filter(|id| !eog.contains(id)));
    assert!(engine.start_sequence(&req(but_eog, 0)).is_ok());
    let but_one = ban(&mut (0..n).filter(|&id| id != 7));
    assert!(engine.start_sequence(&req(but_one, 2)).is_ok());
}

/// JSON mode beside a bias: no token the constraint allows first is left (a 400; a banned token
/// was sampled), or none is left after the first (the answer ends there, never with a banned
/// token or one that breaks the JSON).
#[test]
fn a_bias_that_leaves_json_mode_no_token_stops_it() {
    use lse_engine::{GenerateRequest, Prompt};
    let engine = Engine::load(&tiny(), opts()).unwrap();
    let tk = engine.tokenizer();
    let n = engine.n_vocab() as u32;
    let req = |banned: &dyn Fn(&[u8]) -> bool, seed| GenerateRequest {
        prompt: Prompt::Tokens(vec![1, 2, 3]),
        max_tokens: 6,
        json_object: true,
        sampling: lse_engine::SamplingParams {
            temperature: 1.0,
            seed: Some(seed),
            logit_bias: (0..n).filter(|&id| banned(tk.piece(id, false))).map(|id| (id, f32::NEG_INFINITY)).collect(),
            ..Default::default()
        },
        ..Default::default()
    };
    // every token with text: only the end tokens are left, which cannot start an object
    let e = engine.start_sequence(&req(&|p| !p.is_empty(), 1)).err().unwrap();
    assert!(matches!(&e, EngineError::InvalidRequest(m) if m.contains("bans every token the JSON constraint allows first")), "{e}");
    // "{" alone may start it; nothing may follow it (a key's quote, "}", white space)
    let open = |p: &[u8]| p == b"{";
    assert!((0..n).any(|id| open(tk.piece(id, false))), "the vocabulary has no bare {{");
    let after = |p: &[u8]| p.first().is_some_and(|b| b"\"} \t\n\r".contains(b) || (*b == b'{' && p.len() > 1));
    for seed in 1..4 {
        let r = engine.generate(&req(&after, seed)).unwrap();
        assert_eq!((r.text.as_str(), r.finish_reason), ("{", "length"), "seed {seed}");
    }
    // the tokens both allow ("{", and its byte token where there is one) are stop ids that
    // min_tokens holds back
    let braces: Vec<u32> = (0..n).filter(|&id| open(tk.piece(id, false))).collect();
    let held = GenerateRequest { stop_token_ids: braces, min_tokens: 2, ..req(&|p| !p.is_empty() && !open(p), 1) };
    let e = engine.start_sequence(&held).err().unwrap();
    assert!(matches!(&e, EngineError::InvalidRequest(m) if m.contains("bans every token the JSON constraint allows first")), "{e}");
}

/// A vocabulary of another size than the embedding table (scored as if it fitted), and a norm
/// vector in a type nothing dequantizes (a caught panic), are refused at load.
#[test]
fn a_vocabulary_that_does_not_fit_the_embeddings_and_a_norm_without_kernels_are_refused() {
    let p = rewritten("vocab", |kv, _| {
        for (k, v) in kv.iter_mut() {
            if let (true, Value::Array(a)) = (k.starts_with("tokenizer.ggml.") && k != "tokenizer.ggml.merges", v) {
                a.truncate(1000);
            }
        }
    });
    let e = Engine::load(&p, opts()).err();
    let _ = std::fs::remove_file(&p);
    let e = e.expect("a 1000-token vocabulary over 32000 embedding rows loaded").to_string();
    assert!(e.contains("the tokenizer has 1000 tokens but token_embd.weight has 32000 rows"), "{e}");

    let p = rewritten_with("norm-i8", |_, _| {}, |t, data| match t.name.as_str() {
        "output_norm.weight" => (lse_gguf::GgmlType::I8, vec![1u8; 64]),
        _ => (t.ggml_type, data.to_vec()),
    });
    let e = Engine::load(&p, opts()).err();
    let _ = std::fs::remove_file(&p);
    let e = e.expect("an i8 norm loaded");
    assert!(matches!(&e, EngineError::UnsupportedTensorType(n, _) if n == "output_norm.weight"), "{e}");
}

/// A FIFO as the model (its open would wait for a writer forever) is refused at once.
#[cfg(unix)]
#[test]
fn a_fifo_is_not_a_model() {
    let dir = lse_testdata::tmp("engine", "fifo-model");
    let fifo = dir.join("model.gguf");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let e = Engine::load(&fifo, opts()).err().expect("a FIFO loaded").to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

/// A generation request's bad field is named (serde alone says only "expected u64" and where).
#[test]
fn a_generation_request_names_its_bad_field() {
    for (req, field) in [
        (r#"{"prompt": "hi", "seed": -1}"#, "seed"),
        (r#"{"prompt": "hi", "top_logprobs": -1}"#, "top_logprobs"),
        (r#"{"prompt": "hi", "max_tokens": 1e30}"#, "max_tokens"),
        (r#"{"prompt": 5, "seed": 1}"#, "prompt"),
    ] {
        let e = lse_engine::GenerateRequest::from_json(req).unwrap_err();
        assert!(e.contains(&format!("field \"{field}\"")), "{req}: {e}");
    }
    let e = lse_engine::GenerateRequest::from_json(r#"{"prompt": 5}"#).unwrap_err();
    assert!(e.contains("prompt must be a string, an array of token ids"), "{e}");
}

/// An integer beyond 64 bits (which JSON parsers read as a float) is called out of range, not
/// "a fractional number".
#[test]
fn an_engine_option_beyond_64_bits_is_out_of_range() {
    let e = lse_engine::OpenOptions::parse(r#"{"model": "m.gguf", "threads": 18446744073709551616}"#).expect_err("parsed");
    assert!(e.contains("out of range") && !e.contains("fractional"), "{e}");
}

/// An embeddings request's bad field is named too (it read like a JSON syntax error).
#[test]
fn an_embeddings_request_names_its_bad_field() {
    let e = lse_engine::EmbedRequest::from_json(r#"{"input": "hi", "pooling": 1}"#).unwrap_err();
    assert!(e.contains("field \"pooling\""), "{e}");
    let e = lse_engine::EmbedRequest::from_json(r#"{"input": "hi", "normalize": "2"}"#).unwrap_err();
    assert!(e.contains("field \"normalize\""), "{e}");
}

/// `attention.sliding_window_pattern` as llama.cpp's `load_swa_pattern` reads it: one flag per
/// layer, or a period `p` whose last layer is global (0: every layer slides). gemma3-tiny holds
/// 3 over 4 layers and a 32-token window, so a 100-token window sees the difference.
#[test]
fn a_sliding_window_pattern_is_read_as_llama_cpp_reads_it() {
    let src = lse_testdata::golden("synthetic/gemma3-tiny.gguf");
    let key = "gemma3.attention.sliding_window_pattern";
    let flags = |f: &[bool]| Value::Array(f.iter().map(|&b| Value::Bool(b)).collect());
    let logits = |tag: &str, v: Option<Value>| -> Result<Vec<u32>, EngineError> {
        let p = rewritten_from(
            &src,
            tag,
            |kv, _| {
                kv.retain(|(k, _)| k != key);
                if let Some(v) = &v {
                    kv.push((key.to_string(), v.clone()));
                }
            },
            |t, data| (t.ggml_type, data.to_vec()),
        );
        let e = Engine::load(&p, EngineOptions { kv_len: Some(128), ..opts() });
        let _ = std::fs::remove_file(&p);
        let e = e?;
        let tokens: Vec<u32> = (0..100u32).map(|i| (i * 37 + 11) % e.n_vocab() as u32).collect();
        let mut s = e.new_session(None)?;
        let mut batch = lse_engine::Batch::new();
        batch.add_tokens(0, 0, &tokens, |i| i + 1 == tokens.len());
        Ok(e.head_logits(&e.forward(&mut [&mut s], &batch.rows)?)?.iter().map(|x| x.to_bits()).collect())
    };
    let period3 = logits("swa-3", Some(Value::U32(3))).unwrap();
    assert!(period3 == logits("swa-flags", Some(flags(&[true, true, false, true]))).unwrap(), "period 3 = layers 0, 1, 3 slide");
    let all = logits("swa-all", Some(flags(&[true; 4]))).unwrap();
    assert!(all == logits("swa-0", Some(Value::U32(0))).unwrap(), "period 0 = every layer slides");
    assert!(all != period3, "the window must matter here");
    // absent: gemma3's default period 6 (layers 0-3 all slide)
    assert!(all == logits("swa-none", None).unwrap());
    for (tag, v, want) in [
        ("swa-str", Value::String("3".into()), "sliding_window_pattern is not an integer"),
        ("swa-short", flags(&[true, false]), "sliding_window_pattern must hold 4 flags"),
    ] {
        let e = logits(tag, Some(v)).err().unwrap_or_else(|| panic!("{tag} loaded"));
        assert!(matches!(e, EngineError::Metadata(_)) && e.to_string().contains(want), "{tag}: {e}");
    }
}

/// The first id at or past the vocabulary's size is named with its index; ids below pass.
#[test]
fn token_ids_are_checked_against_the_vocabulary() {
    assert!(lse_engine::check_token_ids(&[0, 5, 3], 6).is_ok());
    let e = lse_engine::check_token_ids(&[1, 5, 6, 9], 6).unwrap_err();
    assert!(matches!(e, EngineError::InvalidToken { id: 6, index: 2, n_vocab: 6 }), "{e}");
    assert_eq!(e.to_string(), "token id 6 at index 2 is outside the vocabulary of 6");
}
