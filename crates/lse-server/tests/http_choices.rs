//! `n` choices per prompt: index `prompt · n + choice`; a seeded request gives choice j the
//! seed plus j, so its choices are the single-choice requests with those seeds and the whole
//! request repeats; the usage counts each prompt once; streams carry every choice to its finish.

mod http;

use http::{model, wiki, Server};
use serde_json::{json, Value};

fn texts(v: &Value, key: &str) -> Vec<(u64, String)> {
    v["choices"].as_array().unwrap().iter().map(|c| (c["index"].as_u64().unwrap(), c[key].as_str().map(str::to_string).unwrap_or_else(|| c["message"]["content"].as_str().unwrap().to_string()))).collect()
}

#[test]
fn seeded_choices_are_the_single_requests_with_seed_plus_j() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let prompts = ["Once upon a time", "The sky over the harbour"];
    let body = |prompt: Value, n: usize, seed: u64| json!({"prompt": prompt, "max_tokens": 8, "n": n, "temperature": 1.0, "seed": seed, "ignore_eos": true});
    let r = s.post("/v1/completions", &body(json!(prompts), 3, 40)).json();
    let got = texts(&r, "text");
    assert_eq!(got.iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4, 5]);
    for (k, (_, text)) in got.iter().enumerate() {
        let one = s.post("/v1/completions", &body(json!(prompts[k / 3]), 1, 40 + (k % 3) as u64)).json();
        assert_eq!(&texts(&one, "text")[0].1, text, "choice {k}");
    }
    assert_ne!(got[0].1, got[1].1, "seeded choices should differ");
    assert_eq!(texts(&s.post("/v1/completions", &body(json!(prompts), 3, 40)).json(), "text"), got, "the request repeats");
    // each prompt counts once, every choice's tokens count
    assert_eq!(r["usage"]["prompt_tokens"].as_u64(), Some((s.n_tokens(prompts[0]) + s.n_tokens(prompts[1])) as u64));
    assert_eq!(r["usage"]["completion_tokens"].as_u64(), Some(6 * 8));
    // chat: n answers, streamed to their finish
    let chat = json!({"messages": [{"role": "user", "content": "Name a fruit."}], "max_tokens": 6, "n": 2, "temperature": 1.0, "seed": 3, "ignore_eos": true});
    let whole = texts(&s.post("/v1/chat/completions", &chat).json(), "content");
    assert_eq!(whole.iter().map(|c| c.0).collect::<Vec<_>>(), vec![0, 1]);
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let events = s.stream("/v1/chat/completions", &streamed);
    let mut text = [String::new(), String::new()];
    let mut finished = [false, false];
    for e in &events {
        for c in e["choices"].as_array().unwrap() {
            let j = c["index"].as_u64().unwrap() as usize;
            text[j].push_str(c["delta"]["content"].as_str().unwrap_or_default());
            finished[j] |= c["finish_reason"].as_str() == Some("length");
        }
    }
    assert_eq!(finished, [true, true]);
    assert_eq!(text.to_vec(), whole.iter().map(|c| c.1.clone()).collect::<Vec<_>>());
    let usage = &events.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"].as_u64(), Some(12), "{usage}");
}

/// The choices of a long prompt share its prefill: the first runs the prompt, the others start in
/// forks of its session once the prompt is in and run only its last token; each equals the
/// single request with its seed in a new session.
#[test]
fn choices_of_a_long_prompt_share_its_prefill() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let prompt = wiki(2000, 1200);
    let n_prompt = s.n_tokens(&prompt) as u64;
    assert!(n_prompt > 200, "{n_prompt}");
    let body = |n: usize, seed: u64, cache: bool| json!({"prompt": prompt, "max_tokens": 6, "n": n, "temperature": 1.0, "seed": seed, "ignore_eos": true, "logprobs": 1, "cache_prompt": cache});
    let rows_before = s.metric("lse_batch_prompt_rows_total");
    let r = s.post("/v1/completions", &body(3, 40, true)).json();
    assert_eq!(s.metric("lse_batch_prompt_rows_total") - rows_before, (n_prompt + 2) as f64, "prompt rows fed for 3 choices");
    assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64(), Some(n_prompt - 1));
    for (j, c) in r["choices"].as_array().unwrap().iter().enumerate() {
        let one = s.post("/v1/completions", &body(1, 40 + j as u64, false)).json();
        let o = &one["choices"][0];
        assert_eq!(c["text"], o["text"], "choice {j}");
        assert_eq!(c["logprobs"]["token_logprobs"], o["logprobs"]["token_logprobs"], "choice {j}: log-probs");
    }
}
