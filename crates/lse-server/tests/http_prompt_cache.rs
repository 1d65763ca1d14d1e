//! Prompt caching over HTTP (llama-server's `cache_prompt`, on by default): a request whose prompt
//! starts with what an ended request left in its session runs only the rest, reports the kept
//! tokens as `usage.prompt_tokens_details.cached_tokens`, and returns exactly what it returns with
//! `cache_prompt: false`; the sessions kept never outnumber `--parallel`.

mod http;

use http::{model, wiki, Server};
use serde_json::{json, Value};

/// (text, tokens, log-prob bits) of a completion or chat answer.
fn answer(v: &Value) -> (String, Vec<Value>, Vec<u64>) {
    let c = &v["choices"][0];
    if let Some(t) = c["text"].as_str() {
        let lp = &c["logprobs"];
        let bits = lp["token_logprobs"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap().to_bits()).collect();
        return (t.to_string(), lp["tokens"].as_array().unwrap().clone(), bits);
    }
    let content = c["logprobs"]["content"].as_array().unwrap();
    let bits = content.iter().map(|x| x["logprob"].as_f64().unwrap().to_bits()).collect();
    (c["message"]["content"].as_str().unwrap().to_string(), content.iter().map(|x| x["token"].clone()).collect(), bits)
}

fn cached(v: &Value) -> u64 {
    v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or_else(|| panic!("no cached_tokens: {v}"))
}

fn completion(prompt: Value, max_tokens: usize, cache: bool) -> Value {
    json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logprobs": 1, "ignore_eos": true, "cache_prompt": cache})
}

/// Asserts that `body` gives the same answer with and without the cache, and returns the cached
/// answer's reply.
fn same_with_and_without_cache(s: &Server, route: &str, body: &Value) -> Value {
    let with = s.post(route, body).json();
    let mut off = body.clone();
    off["cache_prompt"] = json!(false);
    let without = s.post(route, &off).json();
    assert_eq!(cached(&without), 0, "cache_prompt false kept tokens");
    assert_eq!(answer(&with), answer(&without), "{route}: the cached prompt changed the answer");
    with
}

#[test]
fn a_continued_prompt_runs_only_its_new_tokens_and_answers_the_same() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--parallel", "2"]);
    let first = "The history of the city of Paris begins";
    let p = s.n_tokens(first);
    let a = s.post("/v1/completions", &completion(json!(first), 8, true)).json();
    assert_eq!(cached(&a), 0, "a new server has nothing kept");
    // the same prompt again: everything but its last token is kept
    let again = same_with_and_without_cache(&s, "/v1/completions", &completion(json!(first), 8, true));
    assert_eq!(cached(&again), p as u64 - 1);
    // the prompt continued by the answer and more text: the prompt and (up to) the 7 answer
    // tokens fed before the 8th was sampled are kept
    let next = format!("{first}{} and then", answer(&a).0);
    let b = same_with_and_without_cache(&s, "/v1/completions", &completion(json!(next), 12, true));
    let k = cached(&b);
    assert!(k >= p as u64 && k <= p as u64 + 7, "cached {k} of the continued prompt ({} prompt tokens)", p);
    assert_eq!(b["usage"]["prompt_tokens"].as_u64().unwrap(), s.n_tokens(&next) as u64);
    // a chat's next turn starts with the first turn's prompt
    let turn1 = json!([{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Name a colour."}]);
    let chat = |msgs: &Value| json!({"messages": msgs, "max_tokens": 10, "temperature": 0, "logprobs": true, "cache_prompt": true});
    let r1 = s.post("/v1/chat/completions", &chat(&turn1)).json();
    let n1 = r1["usage"]["prompt_tokens"].as_u64().unwrap();
    let mut turn2 = turn1.as_array().unwrap().clone();
    turn2.push(json!({"role": "assistant", "content": answer(&r1).0}));
    turn2.push(json!({"role": "user", "content": "And another?"}));
    let r2 = same_with_and_without_cache(&s, "/v1/chat/completions", &chat(&json!(turn2)));
    assert!(cached(&r2) >= n1, "turn 2 kept {} tokens; turn 1's prompt has {n1}", cached(&r2));
    let reported: u64 = [&a, &again, &b, &r1, &r2].iter().map(|v| cached(v)).sum();
    assert_eq!(s.metric("lse_prompt_tokens_cached_total"), reported as f64);
}

#[test]
fn kept_sessions_stay_within_parallel() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--parallel", "1"]);
    let (x, y) = ("A short story about a lighthouse:", "Ten facts about volcanoes:");
    s.post("/v1/completions", &completion(json!(x), 4, true)).json();
    assert!(cached(&s.post("/v1/completions", &completion(json!(x), 4, true)).json()) > 0);
    // one session only: an unrelated prompt empties it, so the first prompt is not kept anymore
    assert_eq!(cached(&s.post("/v1/completions", &completion(json!(y), 4, true)).json()), 0);
    assert_eq!(cached(&s.post("/v1/completions", &completion(json!(x), 4, true)).json()), 0);
    // streamed answers keep theirs too, and report it in the usage chunk
    let events = s.stream("/v1/completions", &json!({"prompt": x, "max_tokens": 4, "temperature": 0, "stream": true, "stream_options": {"include_usage": true}}));
    let usage = events.iter().rev().find(|e| e["usage"].is_object()).expect("a usage chunk");
    assert!(cached(usage) > 0, "{usage}");
}

/// lm-eval's log-likelihoods: `echo` + `logprobs` of several continuations of one context.
#[test]
fn echoed_log_probs_of_a_shared_context_are_computed_once() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let ids = |t: &str| -> Vec<u64> { s.post("/tokenize", &json!({"content": t})).json()["tokens"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect() };
    let context = ids("Question: which planet is known as the red planet? Answer:");
    let score = |cont: &str, cache: bool| {
        let mut p = context.clone();
        p.extend(ids(cont));
        let r = s.post("/v1/completions", &json!({"prompt": p, "max_tokens": 0, "echo": true, "logprobs": 1, "cache_prompt": cache})).json();
        let lp = &r["choices"][0]["logprobs"];
        let bits: Vec<Option<u64>> = lp["token_logprobs"].as_array().unwrap().iter().map(|x| x.as_f64().map(f64::to_bits)).collect();
        (bits, lp["top_logprobs"].clone(), cached(&r), p.len())
    };
    let (_, _, first, _) = score(" Mars", true);
    assert_eq!(first, 0);
    for cont in [" Venus", " Jupiter", " Mars"] {
        let (bits, top, k, n) = score(cont, true);
        let (want_bits, want_top, k0, _) = score(cont, false);
        assert_eq!(k0, 0);
        assert!(k as usize >= context.len() - 1 && (k as usize) < n, "{cont}: kept {k} of {n} ({} context tokens)", context.len());
        assert_eq!(bits, want_bits, "{cont}: log-probs differ with the kept context");
        assert_eq!(top, want_top, "{cont}: top log-probs differ with the kept context");
    }
}

/// A prompt that shares its first tokens with a long prompt still being fed starts in a fork of
/// that session (it waits until the shared part is in), with the answer of a new session.
#[test]
fn a_prefix_shared_with_a_prompt_being_fed_is_forked() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let head = wiki(500, 300);
    let long = format!("{head}{}", wiki(10_000, 7000));
    let n_long = s.n_tokens(&long);
    assert!((1200..2000).contains(&n_long), "{n_long}");
    let short = format!("{head} In short,");
    std::thread::scope(|sc| {
        let a = sc.spawn(|| s.stream("/v1/completions", &json!({"prompt": long, "max_tokens": 2, "temperature": 0, "stream": true})));
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = s.post("/v1/completions", &completion(json!(short), 2, true)).json();
        assert!(cached(&b) >= 60, "the short prompt kept {} tokens", cached(&b));
        let without = s.post("/v1/completions", &completion(json!(short), 2, false)).json();
        assert_eq!(answer(&b), answer(&without));
        a.join().unwrap();
    });
}
