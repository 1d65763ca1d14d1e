//! Continuous batching over HTTP: 16 concurrent streaming clients all finish, each greedy result
//! is bit-identical to the same request run alone, forwards carry many rows, a client that goes
//! away frees its sequence, and SIGTERM with a stream in flight still exits 0.

mod http;

use http::{model, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn body(i: usize, stream: bool) -> Value {
    let topics = ["the sea", "a robot", "winter", "a small town", "music", "the moon", "a cat", "bread"];
    json!({
        "prompt": format!("Write one sentence about {} number {i}:", topics[i % topics.len()]),
        "max_tokens": 24,
        "temperature": 0,
        "logprobs": 1,
        "ignore_eos": true,
        "stream": stream,
    })
}

/// (text, token strings, token log-probs) of a streamed completion.
fn streamed(events: &[Value]) -> (String, Vec<Value>, Vec<Value>) {
    let mut text = String::new();
    let (mut toks, mut lps) = (Vec::new(), Vec::new());
    for e in events {
        let c = &e["choices"][0];
        text.push_str(c["text"].as_str().unwrap_or_default());
        if let Some(t) = c["logprobs"]["tokens"].as_array() {
            toks.extend(t.iter().cloned());
            lps.extend(c["logprobs"]["token_logprobs"].as_array().unwrap().iter().cloned());
        }
    }
    (text, toks, lps)
}

/// llama-server's `llamacpp:*` series after the 16 streams of 24 tokens (and nothing else), in
/// the first scrape after them.
fn llamacpp_series_agree(s: &Server) {
    let lens: Vec<f64> = (0..16)
        .map(|i| {
            let t = s.post("/tokenize", &json!({"content": body(i, false)["prompt"], "add_special": true})).json();
            t["tokens"].as_array().unwrap().len() as f64
        })
        .collect();
    let m = s.scrape();
    assert_eq!(m["llamacpp:tokens_predicted_total"], 16.0 * 24.0);
    // every prompt token was either fed or found in a session another stream had fed
    assert_eq!(m["llamacpp:prompt_tokens_total"] + m["llamacpp:prompt_tokens_cached_total"], lens.iter().sum::<f64>());
    // at the end a sequence holds its prompt and 23 tokens (the last one sampled is never fed)
    assert_eq!(m["llamacpp:n_tokens_max"], lens.iter().fold(0.0f64, |a, &b| a.max(b)) + 23.0);
    // a forward per token at least (the first comes with the prompt), one per stream's token at most
    let forwards = m["llamacpp:n_decode_total"];
    assert!((24.0..=16.0 * 24.0).contains(&forwards), "{forwards} forwards");
    let busy = m["llamacpp:n_busy_slots_per_decode"];
    assert!(busy > 1.0 && busy <= 16.0, "busy sequences per forward {busy}");
    assert!(m["llamacpp:prompt_seconds_total"] > 0.0 && m["llamacpp:tokens_predicted_seconds_total"] > 0.0);
    // the rates cover the time since the previous scrape: this one saw the streams, the next nothing
    assert!(m["llamacpp:prompt_tokens_seconds"] > 0.0 && m["llamacpp:predicted_tokens_seconds"] > 0.0);
    let next = s.scrape();
    assert_eq!((next["llamacpp:prompt_tokens_seconds"], next["llamacpp:predicted_tokens_seconds"]), (0.0, 0.0));
}

#[test]
fn sixteen_concurrent_streams_match_their_solo_runs() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--parallel", "16"]);
    let t = Instant::now();
    let results: Vec<(String, Vec<Value>, Vec<Value>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..16).map(|i| {
            let s = &s;
            sc.spawn(move || streamed(&s.stream("/v1/completions", &body(i, true))))
        }).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!("16 concurrent streams of 24 tokens: {:.2} s", t.elapsed().as_secs_f64());
    llamacpp_series_agree(&s);
    let rows = s.metric("lse_rows_per_forward");
    let max_rows = s.metric("lse_rows_per_forward_max");
    eprintln!("rows per forward: mean {rows:.2}, max {max_rows}");
    assert!(rows > 1.0, "forwards should batch several sequences, mean rows {rows}");
    assert!(s.metric("lse_decode_tokens_per_second") > 0.0);
    // the scheduler retires a finished sequence after its last chunk is sent: give it a moment
    let t0 = Instant::now();
    while s.metric("lse_busy_sequences") != 0.0 && t0.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(s.metric("lse_busy_sequences"), 0.0);
    for (i, (text, toks, lps)) in results.iter().enumerate() {
        assert_eq!(toks.len(), 24, "stream {i}");
        let solo = s.post("/v1/completions", &body(i, false)).json();
        let c = &solo["choices"][0];
        assert_eq!(c["text"].as_str().unwrap(), text, "stream {i}: text");
        assert_eq!(c["logprobs"]["tokens"].as_array().unwrap(), toks, "stream {i}: tokens");
        let bits = |v: &[Value]| v.iter().map(|x| x.as_f64().unwrap().to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(c["logprobs"]["token_logprobs"].as_array().unwrap()), bits(lps), "stream {i}: log-probs not bit-identical");
    }
    // memory stays bounded: more waves of requests leave the resident set where the first left it
    let first = rss_kib(&s);
    for wave in 0..3 {
        std::thread::scope(|sc| {
            for i in 0..16 {
                let s = &s;
                sc.spawn(move || s.post("/v1/completions", &body(i, false)).json());
            }
        });
        eprintln!("wave {wave}: {} MiB", rss_kib(&s) / 1024);
    }
    let (before, after) = (first, rss_kib(&s));
    eprintln!("resident set: {} MiB after the 16 streams and their solo runs, {} MiB after 3 more waves of 16", before / 1024, after / 1024);
    assert!(after <= before + 64 * 1024, "resident set grew from {before} to {after} KiB");
}

/// The server process's resident set (KiB).
fn rss_kib(s: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.child.id())).unwrap_or_default();
    status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[test]
fn a_client_that_leaves_frees_its_sequence_and_sigterm_exits_0() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    // open a long stream, read one event, hang up
    let long = json!({"prompt": "Tell a long story:", "max_tokens": 1500, "ignore_eos": true, "temperature": 0, "stream": true});
    drop(s.first_event("/v1/completions", &long));
    let t = Instant::now();
    while s.metric("lse_busy_sequences") > 0.0 {
        assert!(t.elapsed() < Duration::from_secs(20), "the abandoned sequence is still running");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(s.metric("lse_tokens_predicted_total") < 1500.0);
    s.health_ok("a client hung up");
    // SIGTERM while a stream is in flight: the stream ends, the server exits 0
    let base = s.base.clone();
    let reader = std::thread::spawn(move || {
        let long = json!({"prompt": "Tell another long story:", "max_tokens": 1500, "ignore_eos": true, "stream": true});
        let resp = ureq::post(&format!("{base}/v1/completions")).send_string(&long.to_string()).unwrap();
        http::read_all(resp.into_reader())
    });
    let t = Instant::now();
    while s.metric("lse_busy_sequences") < 1.0 {
        assert!(t.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.terminate(), Some(0));
    let body = reader.join().unwrap();
    assert!(body.contains("shutting down") || body.contains("[DONE]"), "{body}");
}
