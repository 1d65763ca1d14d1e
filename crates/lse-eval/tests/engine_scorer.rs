//! `run_perplexity` on the real engine with the synthetic llama-tiny model (ctx 128, 8 chunks)
//! against llama.cpp's outputs in data/golden/synthetic.

use lse_engine::{Engine, EngineOptions};
use lse_eval::{run_perplexity, NoProgress, PerplexityInput, PerplexityRequest, Scorer};
use serde_json::Value;

fn shared(rel: &str) -> std::path::PathBuf {
    lse_testdata::shared(rel)
}

fn engine() -> Engine {
    Engine::load(&shared("golden/synthetic/llama-tiny.gguf"), EngineOptions::default()).unwrap()
}

fn wiki() -> String {
    lse_eval::read_text_file(&shared("data/wiki.test.raw")).unwrap()
}

fn request(text: String) -> PerplexityRequest {
    PerplexityRequest { input: PerplexityInput::Text(text), ctx: Some(128), chunks: Some(8), ..Default::default() }
}

#[test]
fn llama_tiny_ppl_and_kld_vs_llama_cpp() {
    let e = engine();
    let g: Value = serde_json::from_slice(&std::fs::read(shared("golden/synthetic/llama-tiny.ppl.json")).unwrap()).unwrap();
    let mut req = request(wiki());
    req.kld_base = Some(shared("golden/synthetic/llama-tiny.llamacpp.kld"));
    let rep = run_perplexity(&e, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["tokens"], g["n_tokens"]);
    assert_eq!(rep["token_ids_sha256"], g["tokens_sha256_u32le"]);
    assert_eq!(rep["scored_tokens"], 8 * 63);
    let want = g["chunk_ppl"][7].as_f64().unwrap();
    let got = rep["perplexity"].as_f64().unwrap();
    eprintln!("llama-tiny: PPL {got} vs llama.cpp {want}; kld {}", rep["kld"]);
    assert!((got / want - 1.0).abs() < 1e-3, "PPL {got} vs {want}");
    assert!(rep["kld"]["mean_kld"].as_f64().unwrap() < 1e-3);
    assert!(rep["kld"]["same_top"].as_f64().unwrap() >= 0.98);
}

/// Writes a llama.cpp `_logits_` base from the engine's own full logits (this test's quantizer,
/// reference §4) and compares the engine against it: only the 16-bit storage noise remains.
#[test]
fn llama_tiny_against_its_own_llama_cpp_format_base() {
    let e = engine();
    let text = wiki();
    let toks = e.tokenize(&text, true);
    let (ctx, n_chunk, v) = (128usize, 3usize, e.n_vocab());
    let dir = std::env::temp_dir().join(format!("lse-eval-engine-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("own.logits");
    let mut out = Vec::new();
    out.extend_from_slice(b"_logits_");
    for x in [ctx as i32, v as i32, n_chunk as i32] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    for &t in &toks[..n_chunk * ctx] {
        out.extend_from_slice(&t.to_le_bytes());
    }
    for c in 0..n_chunk {
        let mut input = toks[c * ctx..(c + 1) * ctx].to_vec();
        input[0] = e.bos_id().unwrap();
        let pos: Vec<usize> = (ctx / 2..ctx - 1).collect();
        let rows = Scorer::prefill(&e, &input, &pos).unwrap();
        let logits = Scorer::head_logits(&e, &rows, 0..pos.len()).unwrap();
        for r in logits.chunks_exact(v) {
            let mx = r.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let mn = r.iter().cloned().fold(f32::INFINITY, f32::min).max(mx - 16.0);
            let s: f64 = r.iter().map(|&x| (x - mx).exp() as f64).sum();
            let scale = (mx - mn) / 65535.0;
            out.extend_from_slice(&scale.to_le_bytes());
            out.extend_from_slice(&(mn - mx - s.ln() as f32).to_le_bytes());
            for &x in r {
                let q = if x > mn { ((1.0 / scale) * (x - mn)).round_ties_even() as u16 } else { 0 };
                out.extend_from_slice(&q.to_le_bytes());
            }
            if v % 2 == 1 {
                out.extend_from_slice(&[0, 0]);
            }
        }
    }
    std::fs::write(&path, out).unwrap();
    let mut req = request(text);
    req.chunks = None;
    req.kld_base = Some(path);
    let rep = run_perplexity(&e, &req, &mut NoProgress).unwrap();
    let k = &rep["kld"];
    assert_eq!(rep["windows_scored"], 3);
    assert_eq!(k["top_k"], v);
    assert!(k["mean_kld"].as_f64().unwrap().abs() < 1e-6, "{k}");
    assert_eq!(k["same_top"], 1.0);
    assert!((k["mean_log_ratio"].as_f64().unwrap()).abs() < 1e-3, "{k}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn request_json_runs() {
    let e = engine();
    let req = PerplexityRequest::from_json(&serde_json::json!({
        "tokens": e.tokenize(&wiki(), true)[..600].to_vec(), "method": "sliding", "ctx": 128, "stride": 64,
        "include_windows": true
    }))
    .unwrap();
    let rep = run_perplexity(&e, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["scored_tokens"], 599);
}
