//! Greedy generation with `logit_bias` against llama.cpp's `llama-server` (data/golden/
//! generation-logit-bias, made by scripts/make-logit-bias-goldens.py): each synthetic model, 3
//! prompts, a banned token (−∞) and a raised one, with repeat penalty 1.0 and 1.5; llama.cpp adds
//! the bias before the penalties, so the penalized cases check the order too. All cases of a model
//! run together, one batched forward per step.

use lse_engine::{Engine, EngineOptions, GenerateRequest, Prompt, SamplingParams, Sequence};
use serde_json::Value;

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

#[test]
fn synthetic_greedy_with_logit_bias_equals_llama_cpp() {
    for stem in ["llama-tiny", "llama-tiny-q8_0", "llama-tiny-q4_0", "qwen2-tiny", "qwen3-tiny", "gemma3-tiny", "qwen35-tiny"] {
        let path = lse_testdata::repo_root().join(format!("data/golden/generation-logit-bias/{stem}.json"));
        let g: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let e = Engine::load(&lse_testdata::golden(&format!("synthetic/{stem}.gguf")), EngineOptions { threads: 2, ..Default::default() }).unwrap();
        let cases = g["cases"].as_array().unwrap();
        let mut seqs: Vec<Sequence> = cases
            .iter()
            .map(|c| {
                let req = GenerateRequest {
                    prompt: Prompt::Tokens(u32s(&c["prompt_ids"])),
                    max_tokens: c["n_predict"].as_i64().unwrap(),
                    sampling: SamplingParams {
                        temperature: 0.0,
                        repeat_penalty: c["repeat_penalty"].as_f64().unwrap() as f32,
                        repeat_last_n: c["repeat_last_n"].as_i64().unwrap(),
                        // llama-server's `[[id, bias]]` as a request carries it
                        logit_bias: lse_engine::generation::logit_bias::deserialize(&c["logit_bias"]).unwrap(),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                e.start_sequence(&req).unwrap()
            })
            .collect();
        while seqs.iter().any(|s| !s.is_done()) {
            e.step(&mut seqs.iter_mut().collect::<Vec<_>>(), 512).unwrap();
        }
        // A choice decided by less than the two implementations' rounding distance may go either
        // way (generation_golden.rs measures it: ~0.006 nats f32/f16, ~0.06 quantized).
        let tie = if stem.contains("-q") { 0.12 } else { 0.012 };
        for (c, s) in cases.iter().zip(&seqs) {
            let (want, got) = (u32s(&c["ids"]), s.ids());
            let banned = c["logit_bias"][0][0].as_u64().unwrap() as u32;
            assert!(!got.contains(&banned), "{stem} {}: generated the banned token {banned}", c["name"]);
            assert_ne!(got, u32s(&c["plain_ids"]), "{stem} {}: the bias changed nothing", c["name"]);
            let cut = (0..want.len().min(got.len())).find(|&i| want[i] != got[i]);
            if let Some(i) = cut {
                let m = s.steps[i].choice_margin;
                assert!(m < tie, "{stem} {}: step {i} differs from llama.cpp (our margin {m:.2e}): ours {got:?}\nllama.cpp {want:?}", c["name"]);
            } else {
                assert_eq!(want.len(), got.len(), "{stem} {}", c["name"]);
            }
        }
    }
}
