//! Fill in the middle over HTTP on Qwen2.5-Coder (a vocabulary with FIM tokens), against
//! llama-server's answers (data/golden/infill): `/infill` in llama-server's own answer form, whole
//! and streamed, and OpenAI's `suffix` on `/v1/completions`; requests that cannot be laid out are
//! refused. The chosen cases have no near-tie in their 48 steps, so every token must match.

mod http;

use http::Server;
use serde_json::{json, Value};

fn golden() -> Value {
    let p = lse_testdata::repo_root().join("data/golden/infill/qwen2.5-coder-0.5b-instruct-q4_k_m.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn case<'a>(g: &'a Value, kind: &str, name: &str) -> &'a Value {
    g["cases"].as_array().unwrap().iter().find(|c| c["kind"] == kind && c["name"] == name).unwrap()
}

/// The golden's `/infill` body with its greedy settings.
fn infill_body(c: &Value, n_predict: &Value) -> Value {
    let mut b = c["request"].clone();
    for (k, v) in [("n_predict", n_predict.clone()), ("temperature", json!(0)), ("return_tokens", json!(true)), ("n_probs", json!(2))] {
        b[k] = v;
    }
    b
}

#[test]
fn infill_and_suffix_answer_as_llama_server() {
    let Some(m) = lse_testdata::model("qwen25coder") else { return };
    let g = golden();
    // llama-server made the goldens with -c 4096 (the room /infill leaves for other files)
    let s = Server::start(&m.to_string_lossy(), &["--kv-len", "4096"]);
    for name in ["fib", "with_files"] {
        let c = case(&g, "infill", name);
        let r = s.post("/infill", &infill_body(c, &g["n_predict"])).json();
        for k in ["prompt", "tokens_evaluated", "stop_type"] {
            assert_eq!(r[k], c[k], "{name} {k}: {r}");
        }
        assert_eq!((&r["tokens"], &r["content"]), (&c["ids"], &c["text"]), "{name}");
        assert_eq!((r["stop"].as_bool(), r["tokens_predicted"].as_u64()), (Some(true), Some(48)), "{name}");
        let probs = r["completion_probabilities"].as_array().unwrap();
        assert_eq!(probs.len(), 48, "{name}");
        let best: Vec<&Value> = probs.iter().map(|p| &p["top_logprobs"][0]["id"]).collect();
        assert_eq!(best, c["ids"].as_array().unwrap().iter().collect::<Vec<_>>(), "{name}: greedy picks the best token");
    }
    // streamed: llama-server's chunks (ids always carried), the stats last, no [DONE]
    let c = case(&g, "infill", "javascript");
    let mut body = infill_body(c, &g["n_predict"]);
    body["stream"] = json!(true);
    body["return_tokens"] = json!(false);
    let chunks = s.stream_native("/infill", &body);
    let (last, deltas) = chunks.split_last().unwrap();
    assert!(deltas.iter().all(|d| d["stop"] == false), "{chunks:?}");
    let text: String = deltas.iter().map(|d| d["content"].as_str().unwrap()).collect();
    let ids: Vec<Value> = deltas.iter().flat_map(|d| d["tokens"].as_array().unwrap().clone()).collect();
    assert_eq!((json!(text), json!(ids)), (c["text"].clone(), c["ids"].clone()));
    assert_eq!((&last["stop"], &last["stop_type"], &last["prompt"]), (&json!(true), &c["stop_type"], &c["prompt"]), "{last}");
    // OpenAI's suffix: the single-file layout
    for name in ["javascript", "normalise"] {
        let c = case(&g, "suffix", name);
        let body = json!({"prompt": c["request"]["prefix"], "suffix": c["request"]["suffix"], "max_tokens": 48, "temperature": 0});
        let r = s.post("/v1/completions", &body).json();
        assert_eq!(r["choices"][0]["text"], c["text"], "{name}: {r}");
        assert_eq!(r["usage"]["prompt_tokens"], c["tokens_evaluated"], "{name}: {r}");
    }
    let refused = [
        ("/infill", json!({"input_suffix": "x"}), "input_prefix"),
        ("/infill", json!({"input_prefix": "a", "input_suffix": "b", "input_extra": [{"filename": 3, "text": "t"}]}), "input_extra"),
        ("/v1/completions", json!({"prompt": [1, 2], "suffix": "b"}), "must be text"),
        ("/v1/completions", json!({"prompt": "a", "suffix": "b", "echo": true}), "echo"),
    ];
    for (path, body, what) in refused {
        let r = s.post(path, &body);
        r.assert_error(400, what);
        assert!(r.text.contains(what), "{what}: {}", r.text);
    }
}
