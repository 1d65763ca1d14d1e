//! Sharded scoring against a llama.cpp `_logits_` base (each shard skips to its chunks' rows), on
//! the real engine with the synthetic llama-tiny model: 3 shards merged equal the single run.

use lse_engine::{Engine, EngineOptions};
use lse_eval::{merge, run_perplexity, MergeRequest, NoProgress, PerplexityInput, PerplexityRequest, ShardSpec};
use serde_json::Value;

fn strip(mut v: Value) -> String {
    let o = v.as_object_mut().unwrap();
    o.remove("elapsed_seconds");
    o.remove("prefill_tokens_per_second");
    for w in o.get_mut("windows").and_then(Value::as_array_mut).unwrap() {
        w.as_object_mut().unwrap().remove("seconds");
    }
    v.to_string()
}

#[test]
fn llama_cpp_base_shards_merge_to_the_single_run() {
    let e = Engine::load(&lse_testdata::golden("synthetic/llama-tiny.gguf"), EngineOptions::default()).unwrap();
    let text = lse_eval::read_text_file(&lse_testdata::data("wiki.test.raw")).unwrap();
    let req = PerplexityRequest {
        input: PerplexityInput::Text(text),
        ctx: Some(128),
        chunks: Some(8),
        kld_base: Some(lse_testdata::golden("synthetic/llama-tiny.llamacpp.kld")),
        include_windows: true,
        ..Default::default()
    };
    let single = run_perplexity(&e, &req, &mut NoProgress).unwrap();
    assert!(single["kld"]["mean_kld"].as_f64().unwrap() < 1e-3);
    let dir = std::env::temp_dir().join(format!("lse-eval-shard-llama-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut shards = Vec::new();
    for i in 0..3 {
        let out = dir.join(format!("s{i}.lseshard"));
        let r = PerplexityRequest { shard: Some(ShardSpec { index: i, count: 3 }), shard_out: Some(out.clone()), ..req.clone() };
        run_perplexity(&e, &r, &mut NoProgress).unwrap();
        shards.push(out);
    }
    let merged = merge(&MergeRequest { shards, ..Default::default() }).unwrap();
    assert_eq!(strip(merged), strip(single));
    std::fs::remove_dir_all(&dir).unwrap();
}
