//! `lse-server` serving HTTP (SPEC §11), end to end: the real binary on port 0 with SmolLM2,
//! a real client. Bad input gets a JSON error with the right status and never takes the server
//! down; `/v1/perplexity` equals the CLI's report; echo + logprobs equal `--perplexity-pairs`;
//! llama-server's own `/completion` answers as that server does.

mod http;

use lse_testdata::Tmp;
use http::{cli_json, model, Server};
use serde_json::{json, Value};

#[test]
fn bad_inputs_get_json_errors_and_the_server_stays_up() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let long: Vec<u32> = (0..2100).map(|i| 100 + i % 1000).collect();
    let cases: Vec<(&str, &str, Vec<u8>, u16)> = vec![
        ("malformed JSON", "/v1/completions", b"{\"prompt\": ".to_vec(), 400),
        ("not an object", "/v1/completions", b"[1, 2]".to_vec(), 400),
        ("prompt of the wrong type", "/v1/completions", br#"{"prompt": 5}"#.to_vec(), 400),
        ("temperature of the wrong type", "/v1/completions", br#"{"prompt": "hi", "temperature": "hot"}"#.to_vec(), 400),
        ("n of 0", "/v1/completions", br#"{"prompt": "hi", "n": 0}"#.to_vec(), 400),
        ("n above 16", "/v1/chat/completions", br#"{"messages": [{"role": "user", "content": "hi"}], "n": 17}"#.to_vec(), 400),
        ("best_of above n", "/v1/completions", br#"{"prompt": "hi", "n": 2, "best_of": 3}"#.to_vec(), 400),
        ("negative max_tokens", "/v1/completions", br#"{"prompt": "hi", "max_tokens": -3}"#.to_vec(), 400),
        ("top_p out of range", "/v1/completions", br#"{"prompt": "hi", "top_p": 1.5}"#.to_vec(), 400),
        ("logprobs above 20", "/v1/completions", br#"{"prompt": "hi", "logprobs": 21}"#.to_vec(), 400),
        ("id outside the vocabulary", "/v1/completions", br#"{"prompt": [1, 49152]}"#.to_vec(), 400),
        ("negative id", "/v1/completions", br#"{"prompt": [1, -4]}"#.to_vec(), 400),
        ("empty prompt list", "/v1/completions", br#"{"prompt": []}"#.to_vec(), 400),
        ("more prompts than the queue holds", "/v1/completions", json!({"prompt": vec!["a"; 300], "max_tokens": 1}).to_string().into_bytes(), 400),
        ("missing prompt", "/v1/completions", br#"{"max_tokens": 2}"#.to_vec(), 400),
        ("prompt longer than the context", "/v1/completions", json!({"prompt": long, "max_tokens": 1}).to_string().into_bytes(), 400),
        ("echo scoring longer than the context", "/v1/completions", json!({"prompt": long, "max_tokens": 0, "echo": true, "logprobs": 1}).to_string().into_bytes(), 400),
        ("prompt longer than the context, nothing to generate", "/v1/completions", json!({"prompt": long, "max_tokens": 0}).to_string().into_bytes(), 400),
        ("stream of the wrong type", "/v1/completions", br#"{"prompt": "hi", "stream": "yes"}"#.to_vec(), 400),
        ("stop of the wrong type", "/v1/completions", br#"{"prompt": "hi", "stop": 3}"#.to_vec(), 400),
        ("chat without messages", "/v1/chat/completions", br#"{"max_tokens": 2}"#.to_vec(), 400),
        ("chat message without role", "/v1/chat/completions", br#"{"messages": [{"content": "hi"}]}"#.to_vec(), 400),
        ("chat content of the wrong type", "/v1/chat/completions", br#"{"messages": [{"role": "user", "content": 7}]}"#.to_vec(), 400),
        ("chat user turn without content", "/v1/chat/completions", br#"{"messages": [{"role": "user", "content": null}]}"#.to_vec(), 400),
        (
            "schema that is its own $ref",
            "/v1/completions",
            br##"{"prompt": "hi", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/a"}}}}}}"##.to_vec(),
            400,
        ),
        (
            "schema with an anyOf among its own alternatives",
            "/v1/chat/completions",
            br##"{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "#/$defs/r", "$defs": {"r": {"anyOf": [{"$ref": "#/$defs/r"}, {"type": "object"}]}}}}}}"##.to_vec(),
            400,
        ),
        ("detokenize of a bad id", "/detokenize", br#"{"tokens": [1, 999999]}"#.to_vec(), 400),
        ("perplexity with an unknown field", "/v1/perplexity", br#"{"text": "hello", "bogus": 1}"#.to_vec(), 400),
        ("perplexity of too short a text", "/v1/perplexity", br#"{"text": "hello", "ctx": 64}"#.to_vec(), 400),
        ("perplexity writing a server file", "/v1/perplexity", br#"{"text": "hello", "kld_base_out": "/tmp/x.kld"}"#.to_vec(), 400),
        ("perplexity reading a server file", "/v1/perplexity", br#"{"text": "hello", "kld_base": "/etc/passwd"}"#.to_vec(), 400),
        ("infill on a model without FIM tokens", "/infill", br#"{"input_prefix": "a", "input_suffix": "b"}"#.to_vec(), 400),
        ("suffix on a model without FIM tokens", "/v1/completions", br#"{"prompt": "a", "suffix": "b"}"#.to_vec(), 400),
        ("embeddings without a pooling", "/v1/embeddings", br#"{"input": "hi"}"#.to_vec(), 400),
        ("unknown endpoint", "/v1/nothing", b"{}".to_vec(), 404),
    ];
    for (what, path, body, status) in &cases {
        let r = s.post_raw(path, body);
        r.assert_error(*status, what);
        s.health_ok(what);
    }
    // the messages name what is wrong and where
    for (path, body, says) in [
        ("/v1/completions", json!({"prompt": "hi", "temperature": 1e300}), "\"temperature\" is out of range"),
        ("/v1/completions", json!({"prompt": [1, "a", {"x": 1}]}), "\"prompt\"[2] must be a text or a token id"),
        ("/v1/completions", json!({"prompt": ["hi", long], "max_tokens": 1}), "prompt 1: the prompt has"),
        ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": 5}]}), "[1].tool_calls must be a list"),
        // llama-server's samplers LSE lacks: refused when on (they were ignored)
        ("/v1/completions", json!({"prompt": "hi", "mirostat": 2}), "\"mirostat\" is not supported"),
        ("/completion", json!({"prompt": "hi", "dry_multiplier": 0.8}), "\"dry_multiplier\" is not supported"),
        ("/v1/completions", json!({"prompt": "hi", "mirostat": false}), "\"mirostat\" must be a number"),
        ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}}), "only allowed when \"stream\" is true"),
        // the scorer's checks, shared with the CLI, name the request's fields (were its flags)
        ("/v1/perplexity", json!({"text": "hello", "stride": 3}), "stride applies to method sliding only (chunks use stride = ctx = 512), got 3"),
        ("/v1/perplexity", json!({"text": "hello", "method": "sliding", "ctx": 8, "stride": 9}), "stride must be between 1 and ctx (8), got 9"),
    ] {
        let r = s.post(path, &body);
        r.assert_error(400, says);
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        // the server's own flags (--kv-len) are its operator's terms; a request's are its fields
        assert!(message.contains(says) && !(path == "/v1/perplexity" && message.contains("--")), "{says}: {}", r.text);
    }
    // a prompt beyond the context: llama-server's error type and counts, whichever check finds it
    let n_long = long.len();
    for (path, body) in [
        ("/v1/completions", json!({"prompt": long, "max_tokens": 1})),
        ("/v1/completions", json!({"prompt": ["hi", long], "max_tokens": 1})),
        ("/completion", json!({"prompt": long, "n_predict": 1})),
        ("/v1/completions", json!({"prompt": long, "max_tokens": 0, "echo": true, "logprobs": 1})),
    ] {
        let e = &s.post(path, &body).json()["error"];
        assert_eq!((&e["type"], &e["code"], &e["n_prompt_tokens"], &e["n_ctx"]), (&json!("exceed_context_size_error"), &json!(400), &json!(n_long), &json!(2048)), "{path}: {e}");
    }
    // ... and accepted when off, as llama-server's web UI sends them
    let off = json!({"prompt": "hi", "max_tokens": 1, "mirostat": 0, "typical_p": 1.0, "xtc_probability": 0.5, "xtc_threshold": 0.9,
                     "dry_multiplier": 0.8, "dry_base": 0.5, "top_n_sigma": -1.0, "dynatemp_range": 0.0});
    assert_eq!(s.post("/v1/completions", &off).status, 200);
    let r = s.get("/v1/completions");
    r.assert_error(405, "GET of a POST endpoint");
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    // oversized body: 413, and the server still answers
    let r = s.oversized_post("/v1/completions", 9 * 1024 * 1024);
    r.assert_error(413, "oversized body");
    s.health_ok("oversized body");
    // the server still generates
    let r = s.post("/v1/completions", &json!({"prompt": "Hello", "max_tokens": 2, "temperature": 0}));
    assert_eq!(r.status, 200, "{}", r.text);
    // a conversation with a tool call: the assistant's turn has null content (OpenAI's clients)
    let call = json!({"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}});
    let history = json!([{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [call]},
                         {"role": "tool", "tool_call_id": "c1", "content": "18C"}]);
    let r = s.post("/v1/chat/completions", &json!({"messages": history, "max_tokens": 2, "temperature": 0}));
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(s.metric("lse_requests_failed_total") >= 20.0);
    assert_eq!(s.terminate(), Some(0), "SIGTERM should end the server with status 0");
}

#[test]
fn api_key_is_required_except_for_health() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--api-key", "sekrit", "--alias", "smol"]);
    s.get("/v1/models").assert_error(401, "no key");
    s.get_with("/v1/models", ("Authorization", "Bearer wrong")).assert_error(401, "wrong key");
    let r = s.get_with("/v1/models", ("Authorization", "Bearer sekrit"));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["data"][0]["id"], "smol");
    let r = s.post_with("/v1/completions", &json!({"prompt": "Hi", "max_tokens": 1}), ("Authorization", "Bearer wrong"));
    r.assert_error(401, "completion with a wrong key");
    // the scheme's name in any case
    assert_eq!(s.get_with("/v1/models", ("Authorization", "bearer sekrit")).status, 200);
    // a browser's preflight is answered without the key; answers let any origin read them
    let origin = ("Origin", "http://localhost:8000");
    let (status, allow) = s.header_of("OPTIONS", "/v1/chat/completions", &[origin, ("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "authorization,content-type")], "access-control-allow-origin");
    assert_eq!((status, allow.as_deref()), (200, Some("*")));
    let (status, allow) = s.header_of("GET", "/v1/models", &[origin, ("Authorization", "Bearer sekrit")], "access-control-allow-origin");
    assert_eq!((status, allow.as_deref()), (200, Some("*")));
    s.health_ok("401s");
}

#[test]
fn info_routes_and_tokenizer_round_trip() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let models = s.get("/v1/models").json();
    let d = &models["data"][0];
    assert_eq!(d["id"], "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(d["meta"]["n_vocab"], 49152);
    assert_eq!(d["meta"]["n_ctx"], 2048);
    assert_eq!(d["meta"]["architecture"], "llama");
    let info = s.get("/tokenizer_info").json();
    assert_eq!(info["eos_token"], "<|im_end|>");
    // llama-server's /props and /apply-template (its answer for these messages, taken from it)
    let props = s.get("/props").json();
    assert_eq!((&props["default_generation_settings"]["n_ctx"], &props["total_slots"], &props["eos_token"]), (&json!(2048), &json!(4), &json!("<|im_end|>")), "{props}");
    assert_eq!(props["chat_template"], info["chat_template"]);
    let messages = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]);
    let t = s.post("/apply-template", &json!({"messages": messages})).json();
    assert_eq!(t["prompt"], "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
    let chat = s.post("/v1/chat/completions", &json!({"messages": messages, "max_tokens": 1})).json();
    assert_eq!(chat["usage"]["prompt_tokens"].as_u64(), Some(s.n_tokens(t["prompt"].as_str().unwrap()) as u64), "the chat prompt is the template's");
    // a last assistant turn is continued, as llama-server does: the turns before it with the
    // assistant's turn opened, its text after (llama-server's prompt for such a list ends
    // "assistant\nYo"); the answer and its stream start with that text (llama-server's), or
    // hold the new text only with "continue_final_message": true (vLLM's)
    let head = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
    let mut cont = messages.as_array().unwrap().clone();
    cont.push(json!({"role": "assistant", "content": "The answer is"}));
    let t = s.post("/apply-template", &json!({"messages": cont})).json();
    assert_eq!(t["prompt"], format!("{head}The answer is"));
    let closed = s.post("/apply-template", &json!({"messages": cont, "continue_final_message": false})).json();
    assert_eq!(closed["prompt"], format!("{head}The answer is<|im_end|>\n<|im_start|>assistant\n"));
    let body = json!({"messages": cont, "max_tokens": 4, "temperature": 0});
    let chat = s.post("/v1/chat/completions", &body).json();
    assert_eq!(chat["usage"]["prompt_tokens"].as_u64(), Some(s.n_tokens(&format!("{head}The answer is")) as u64), "{chat}");
    let content = chat["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let all: String = s.stream("/v1/chat/completions", &streamed).iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_string)).collect();
    assert!(content.starts_with("The answer is") && all == content, "{chat} / {all:?}");
    let mut vllm = body.clone();
    vllm["continue_final_message"] = json!(true);
    let r = s.post("/v1/chat/completions", &vllm).json();
    assert_eq!(r["choices"][0]["message"]["content"].as_str().map(|c| format!("The answer is{c}")), Some(content.clone()), "{r}");
    // a JSON answer continues the JSON the turn began: the constraint reads it first
    let mut opened = messages.as_array().unwrap().clone();
    opened.push(json!({"role": "assistant", "content": "{\"answer\":"}));
    let json_mode = json!({"messages": opened, "max_tokens": 24, "temperature": 0, "response_format": {"type": "json_object"}});
    let r = s.post("/v1/chat/completions", &json_mode).json();
    let content = r["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.starts_with("{\"answer\":") && serde_json::from_str::<Value>(content).is_ok_and(|v| v.is_object()), "{r}");
    opened.pop();
    opened.push(json!({"role": "assistant", "content": "[1, 2"}));
    let json_mode = json!({"messages": opened, "max_tokens": 4, "response_format": {"type": "json_object"}});
    s.post("/v1/chat/completions", &json_mode).assert_error(400, "not the start of an unfinished JSON value");
    // a turn of calls cannot go on (llama-server's 400)
    let mut calls = messages.as_array().unwrap().clone();
    calls.push(json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}));
    s.post("/v1/chat/completions", &json!({"messages": calls})).assert_error(400, "holds tool calls");
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}]);
    s.post("/v1/chat/completions", &json!({"messages": cont, "tools": tools, "tool_choice": "required"})).assert_error(400, "exclude each other");
    cont.push(json!({"role": "assistant", "content": "Four."}));
    s.post("/v1/chat/completions", &json!({"messages": cont})).assert_error(400, "two assistant messages");
    assert!(info["chat_template"].as_str().unwrap().contains("im_start"));
    let t = s.post("/tokenize", &json!({"prompt": "Hello world", "add_special_tokens": false})).json();
    let ids = t["tokens"].as_array().unwrap().clone();
    assert!(!ids.is_empty());
    let (_dir, file) = write_tmp("tok", "Hello world");
    let cli = cli_json(&["--model", &m, "--tokenize", &file.to_string_lossy()]);
    assert_eq!(json!(ids), cli["ids"], "the server tokenizes as the CLI");
    let p = s.post("/tokenize", &json!({"content": "Hello world", "with_pieces": true})).json();
    let pieces: Vec<&Value> = p["tokens"].as_array().unwrap().iter().collect();
    assert_eq!(pieces.iter().map(|t| t["id"].clone()).collect::<Vec<_>>(), ids);
    assert_eq!(pieces.iter().map(|t| t["piece"].as_str().unwrap()).collect::<String>(), "Hello world");
    // a piece that is not whole UTF-8 comes as its bytes (an emoji is split over byte tokens)
    let e = s.post("/tokenize", &json!({"content": "🍕", "with_pieces": true})).json();
    let bytes: Vec<u64> = e["tokens"].as_array().unwrap().iter().flat_map(|t| match &t["piece"] {
        Value::String(s) => s.bytes().map(u64::from).collect::<Vec<_>>(),
        b => b.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect(),
    }).collect();
    assert_eq!(bytes, "🍕".bytes().map(u64::from).collect::<Vec<_>>());
    assert!(e["tokens"].as_array().unwrap().iter().any(|t| t["piece"].is_array()), "{e}");
    let d = s.post("/detokenize", &json!({"tokens": ids})).json();
    assert_eq!(d["prompt"], "Hello world");
    assert_eq!(d["content"], "Hello world");
    let c = s.post("/tokenize", &json!({"content": "<|im_start|>user"})).json();
    assert_eq!(c["tokens"][0], 1, "special-token text is parsed by default");
    // llama-server's mixed content: ids kept in place, each text tokenized on its own
    let tok = |text: &str| s.post("/tokenize", &json!({"content": text})).json()["tokens"].as_array().unwrap().clone();
    let mixed = s.post("/tokenize", &json!({"content": ["Hello", 282, " world"]})).json();
    let want: Vec<Value> = tok("Hello").into_iter().chain([json!(282)]).chain(tok(" world")).collect();
    assert_eq!(mixed["tokens"], json!(want));
    s.post("/tokenize", &json!({"content": ["Hello", 99999999]})).assert_error(400, "an id past the vocabulary");
    s.post("/tokenize", &json!({"content": 5})).assert_error(400, "a number as content");
    // nothing to tokenize or detokenize: llama-server's empty answers
    assert_eq!(s.post("/tokenize", &json!({})).json(), json!({"tokens": []}));
    assert_eq!(s.post("/detokenize", &json!({})).json()["content"], "");
}

fn tmp(name: &str) -> Tmp {
    lse_testdata::tmp("http", name)
}

/// A temp folder holding `text` as input.txt, and that file's path.
fn write_tmp(name: &str, text: &str) -> (Tmp, std::path::PathBuf) {
    let d = tmp(name);
    let p = d.join("input.txt");
    std::fs::write(&p, text).unwrap();
    (d, p)
}

#[test]
fn completions_chat_and_streams_agree() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let body = json!({"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "logprobs": 2});
    let r = s.post("/v1/completions", &body).json();
    let c = &r["choices"][0];
    let text = c["text"].as_str().unwrap().to_string();
    assert!(!text.is_empty());
    assert_eq!(r["usage"]["completion_tokens"], 8);
    assert_eq!(c["logprobs"]["tokens"].as_array().unwrap().len(), 8);
    assert_eq!(c["logprobs"]["top_logprobs"][0].as_object().unwrap().len(), 2);
    // the same request streamed gives the same text and log-probs
    let mut sb = body.clone();
    sb["stream"] = json!(true);
    let events = s.stream("/v1/completions", &sb);
    let streamed: String = events.iter().filter_map(|e| e["choices"][0]["text"].as_str()).collect();
    assert_eq!(streamed, text);
    let lps: Vec<Value> = events.iter().flat_map(|e| e["choices"][0]["logprobs"]["token_logprobs"].as_array().cloned().unwrap_or_default()).collect();
    assert_eq!(json!(lps), c["logprobs"]["token_logprobs"]);
    assert_eq!(events.last().unwrap()["choices"][0]["finish_reason"], "length");
    // token-id prompts and a list of prompts: one choice each, in order
    let ids = s.post("/tokenize", &json!({"prompt": "The capital of France is"})).json()["tokens"].clone();
    let r2 = s.post("/v1/completions", &json!({"prompt": [ids, "The capital of France is"], "max_tokens": 8, "temperature": 0})).json();
    assert_eq!(r2["choices"][0]["text"], text.as_str());
    assert_eq!(r2["choices"][1]["text"], text.as_str());
    assert_eq!(r2["choices"][1]["index"], 1);
    // stop strings cut the text
    let word = text.split_whitespace().next().unwrap().to_string();
    let r3 = s.post("/v1/completions", &json!({"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, "stop": [word.clone()]})).json();
    assert_eq!(r3["choices"][0]["finish_reason"], "stop");
    assert!(!r3["choices"][0]["text"].as_str().unwrap().contains(&word));
    // chat, plain and streamed
    let chat = json!({"messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 12, "temperature": 0});
    let r4 = s.post("/v1/chat/completions", &chat).json();
    let answer = r4["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    assert_eq!(r4["choices"][0]["message"]["role"], "assistant");
    assert!(!answer.is_empty());
    let mut cs = chat.clone();
    cs["stream"] = json!(true);
    cs["stream_options"] = json!({"include_usage": true});
    let ev = s.stream("/v1/chat/completions", &cs);
    let streamed: String = ev.iter().filter_map(|e| e["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(streamed, answer);
    assert_eq!(ev.last().unwrap()["usage"]["completion_tokens"], r4["usage"]["completion_tokens"]);
    // text offsets count characters of the text, never go back, and a whole token's text is
    // found at its offset (tokens that split a character show U+FFFD: skipped), streamed too
    let echo = json!({"prompt": "漢字漢字 🙂 and é:", "max_tokens": 6, "temperature": 0, "logprobs": 0, "echo": true});
    let r5 = s.post("/v1/completions", &echo).json();
    let c5 = &r5["choices"][0]["logprobs"];
    let chars: Vec<char> = r5["choices"][0]["text"].as_str().unwrap().chars().collect();
    let offsets: Vec<usize> = c5["text_offset"].as_array().unwrap().iter().map(|o| o.as_u64().unwrap() as usize).collect();
    assert!(offsets.windows(2).all(|w| w[0] <= w[1]) && *offsets.last().unwrap() <= chars.len(), "{offsets:?} over {} chars", chars.len());
    let mut whole = 0;
    for (tok, &at) in c5["tokens"].as_array().unwrap().iter().zip(&offsets) {
        let tok: Vec<char> = tok.as_str().unwrap().chars().collect();
        if !tok.contains(&'\u{fffd}') && at + tok.len() <= chars.len() {
            assert_eq!(chars[at..at + tok.len()], tok[..], "token {tok:?} at {at}");
            whole += 1;
        }
    }
    assert!(whole >= 6 && offsets.len() > whole, "{whole} whole tokens of {}", offsets.len());
    let mut es = echo.clone();
    es["stream"] = json!(true);
    let streamed: Vec<Value> = s.stream("/v1/completions", &es).iter().flat_map(|e| e["choices"][0]["logprobs"]["text_offset"].as_array().cloned().unwrap_or_default()).collect();
    assert_eq!(json!(streamed), c5["text_offset"]);
    // chat logprobs' `bytes` are the token's own, part of a character too (were U+FFFD's)
    let pieces = s.post("/tokenize", &json!({"content": "漢", "with_pieces": true})).json()["tokens"].clone();
    let part = pieces.as_array().unwrap().iter().find(|t| t["piece"].is_array()).expect("a byte token of 漢").clone();
    let forced = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "logprobs": true,
                        "logit_bias": {part["id"].to_string(): 100}});
    let r6 = s.post("/v1/chat/completions", &forced).json();
    assert_eq!(r6["choices"][0]["logprobs"]["content"][0]["bytes"], part["piece"], "{r6}");
    s.post("/v1/chat/completions", &json!({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})).assert_error(400, "top_logprobs without logprobs");
    // seeded sampling is reproducible
    let sampled = json!({"prompt": "Once upon a time", "max_tokens": 10, "temperature": 0.9, "seed": 42});
    assert_eq!(s.post("/v1/completions", &sampled).json()["choices"][0]["text"], s.post("/v1/completions", &sampled).json()["choices"][0]["text"]);
}

#[test]
fn perplexity_endpoint_equals_the_cli_report() {
    let Some(m) = model() else { return };
    let raw = std::fs::read_to_string(lse_testdata::data("wiki.test.raw")).unwrap();
    let text: String = raw.chars().take(3000).collect::<String>().trim_end().to_string();
    let (_dir, file) = write_tmp("ppl", &text);
    let cli = cli_json(&["--model", &m, "--perplexity", &file.to_string_lossy(), "--perplexity-ctx", "128", "--perplexity-chunks", "3", "--perplexity-windows"]);
    let s = Server::start(&m, &[]);
    let r = s.post("/v1/perplexity", &json!({"text": text, "ctx": 128, "chunks": 3, "include_windows": true}));
    assert_eq!(r.status, 200, "{}", r.text);
    let h = r.json();
    assert_eq!(h["token_ids_sha256"], cli["token_ids_sha256"]);
    let bits = |v: &Value| v.as_f64().unwrap().to_bits();
    assert_eq!(bits(&h["mean_nll"]), bits(&cli["mean_nll"]), "mean_nll {} vs {}", h["mean_nll"], cli["mean_nll"]);
    assert_eq!(bits(&h["perplexity"]), bits(&cli["perplexity"]));
    let (hw, cw) = (h["windows"].as_array().unwrap(), cli["windows"].as_array().unwrap());
    assert_eq!(hw.len(), 3);
    assert_eq!(hw.len(), cw.len());
    for (a, b) in hw.iter().zip(cw) {
        assert_eq!(bits(&a["nll_sum"]), bits(&b["nll_sum"]), "window {}", a["index"]);
    }
}

#[test]
fn echo_logprobs_equal_the_pairs_scores() {
    let Some(m) = model() else { return };
    let pairs = [("Question: what is the capital of France?\nAnswer:", " Paris is the capital."), ("The quick brown fox", " jumps over the lazy dog.")];
    let d = tmp("pairs");
    let f = d.join("pairs.jsonl");
    let lines: Vec<String> = pairs.iter().map(|(p, r)| json!({"prompt": p, "response": r}).to_string()).collect();
    std::fs::write(&f, lines.join("\n") + "\n").unwrap();
    let cli = cli_json(&["--model", &m, "--perplexity-pairs", &f.to_string_lossy(), "--perplexity-windows"]);
    let s = Server::start(&m, &[]);
    for (i, (p, resp)) in pairs.iter().enumerate() {
        // the scorer's tokenization: the prompt as a prompt, the response without specials
        let pi = s.post("/tokenize", &json!({"content": p, "add_special": true, "parse_special": false})).json()["tokens"].as_array().unwrap().clone();
        let ri = s.post("/tokenize", &json!({"content": resp, "add_special": false, "parse_special": false})).json()["tokens"].as_array().unwrap().clone();
        let ids: Vec<Value> = pi.iter().chain(&ri).cloned().collect();
        let want = -cli["windows"][i]["nll_sum"].as_f64().unwrap();
        for max_tokens in [0, 1] {
            let r = s.post("/v1/completions", &json!({"prompt": ids, "echo": true, "logprobs": 1, "max_tokens": max_tokens, "temperature": 0}));
            assert_eq!(r.status, 200, "{}", r.text);
            let v = r.json();
            let lp = &v["choices"][0]["logprobs"];
            let tl = lp["token_logprobs"].as_array().unwrap();
            assert_eq!(tl.len(), ids.len() + max_tokens);
            assert!(tl[0].is_null(), "the first prompt token has no log-prob");
            let got: f64 = tl[pi.len()..ids.len()].iter().map(|x| x.as_f64().unwrap()).sum();
            assert!((got - want).abs() < 1e-6, "pair {i}: echo {got} vs pairs {want}");
            // a greedy token's log-prob is its top-1's
            let top = &lp["top_logprobs"][1];
            assert_eq!(top.as_object().unwrap().len(), 1);
        }
    }
}

#[test]
fn a_model_that_fails_to_load_ends_the_server_with_one_line() {
    let d = tmp("badmodel");
    let f = d.join("broken.gguf");
    std::fs::write(&f, b"GGUF\x03\x00\x00\x00garbage that is not a model").unwrap();
    let o = std::process::Command::new(http::BIN).args(["--model", &f.to_string_lossy(), "--port", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("lse-server: listening on http://127.0.0.1:"), "binds before loading: {out:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("lse-server: ") && !err.contains("panicked"), "{err}");
}

#[test]
fn perplexity_waits_behind_generation_and_both_finish() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let raw = std::fs::read_to_string(lse_testdata::data("wiki.test.raw")).unwrap();
    let text: String = raw.chars().take(1500).collect();
    let (g, p) = std::thread::scope(|sc| {
        let g = sc.spawn(|| s.post("/v1/completions", &json!({"prompt": "Count: one, two,", "max_tokens": 40, "ignore_eos": true, "temperature": 0})));
        std::thread::sleep(std::time::Duration::from_millis(100));
        let p = sc.spawn(|| s.post("/v1/perplexity", &json!({"text": text, "ctx": 128, "chunks": 2})));
        (g.join().unwrap(), p.join().unwrap())
    });
    assert_eq!(g.status, 200, "{}", g.text);
    assert_eq!(g.json()["usage"]["completion_tokens"], 40);
    assert_eq!(p.status, 200, "{}", p.text);
    assert!(p.json()["perplexity"].as_f64().unwrap() > 1.0);
}

/// A completion sent while a long scoring job runs (a 16-window perplexity, then a 2000-token
/// echo) steps between its windows or slices and answers first; the scores equal those of the
/// same jobs run alone.
#[test]
fn generation_runs_between_the_windows_of_a_long_scoring_job() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--pooling", "mean"]);
    let ppl = json!({"text": http::wiki(0, 60000), "ctx": 256, "chunks": 16});
    // 400 texts, ~6000 tokens: several forward passes
    let chars: Vec<char> = http::wiki(0, 400 * 61).chars().collect();
    let texts: Vec<String> = chars.chunks(61).map(|c| c.iter().collect()).collect();
    let embed = json!({"input": texts});
    let ids: Vec<u32> = (0..2000).map(|i| 200 + (i * 7919) % 40000).collect();
    let echo = json!({"prompt": ids, "echo": true, "logprobs": 1, "max_tokens": 0, "cache_prompt": false});
    let quick = json!({"prompt": "The capital of France is", "max_tokens": 6, "ignore_eos": true, "temperature": 0});
    for (path, job) in [("/v1/perplexity", &ppl), ("/v1/completions", &echo), ("/v1/embeddings", &embed)] {
        let started = s.metric("lse_scoring_requests_total");
        let order = std::sync::Mutex::new(Vec::new());
        let (long, short) = std::thread::scope(|sc| {
            let long = sc.spawn(|| {
                let r = s.post(path, job);
                order.lock().unwrap().push("scoring");
                r
            });
            // the scoring job has begun before the completion is sent
            let t = std::time::Instant::now();
            while s.metric("lse_scoring_requests_total") == started {
                assert!(t.elapsed().as_secs() < 60, "{path} never started");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let short = s.post("/v1/completions", &quick);
            order.lock().unwrap().push("completion");
            (long.join().unwrap(), short)
        });
        assert_eq!(short.status, 200, "{}", short.text);
        assert_eq!(short.json()["usage"]["completion_tokens"], 6);
        assert_eq!(long.status, 200, "{path}: {}", long.text);
        assert_eq!(*order.lock().unwrap(), ["completion", "scoring"], "{path}: the completion waited for the scoring job");
        let alone = s.post(path, job);
        assert_eq!(alone.status, 200);
        if path == "/v1/perplexity" {
            assert_eq!(long.json()["perplexity"].as_f64().unwrap().to_bits(), alone.json()["perplexity"].as_f64().unwrap().to_bits());
        } else if path == "/v1/embeddings" {
            assert_eq!(long.json()["data"], alone.json()["data"]);
        } else {
            let lps = |r: &http::Reply| r.json()["choices"][0]["logprobs"]["token_logprobs"].clone();
            assert_eq!(lps(&long), lps(&alone));
        }
    }
}

#[test]
fn health_is_503_while_the_model_loads_then_ok_and_a_rich_chat_template_renders() {
    // Qwen2.5-Coder takes seconds to load here: long enough to see the loading state
    let Some(m) = lse_testdata::model("qwen25coder").map(|p| p.to_string_lossy().into_owned()) else { return };
    let s = Server::spawn(&m, &[]);
    s.get("/health").assert_error(503, "health while loading");
    s.post("/v1/completions", &json!({"prompt": "hi"})).assert_error(503, "completion while loading");
    s.wait_ready();
    s.health_ok("loading");
    // Qwen's template (tools, loops, string methods) renders; the answer is generated
    let r = s.post("/v1/chat/completions", &json!({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say yes."}], "max_tokens": 4, "temperature": 0}));
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["choices"][0]["message"]["role"], "assistant");
    assert!(r.json()["usage"]["prompt_tokens"].as_u64().unwrap() > 10);
}

/// A model without `tokenizer.chat_template` chats in ChatML (llama-server's fallback);
/// `--chat-template` and `--chat-template-file` replace the GGUF's template. Each chat prompt must
/// be the completion prompt written out by hand.
#[test]
fn chat_template_falls_back_to_chatml_and_can_be_set() {
    let chat = json!({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 6, "temperature": 0});
    let chatml = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    // the chat reply equals a completion of `prompt` (special text parsed, as chat prompts are)
    let same_as = |s: &Server, prompt: &str| {
        let r = s.post("/v1/chat/completions", &chat);
        assert_eq!(r.status, 200, "{}", r.text);
        let ids = s.post("/tokenize", &json!({"content": prompt, "add_special": true, "parse_special": true})).json()["tokens"].clone();
        let c = s.post("/v1/completions", &json!({"prompt": ids.clone(), "max_tokens": 6, "temperature": 0})).json();
        assert_eq!(r.json()["usage"]["prompt_tokens"].as_u64(), Some(ids.as_array().unwrap().len() as u64));
        assert_eq!(r.json()["choices"][0]["message"]["content"], c["choices"][0]["text"]);
    };
    let tiny = lse_testdata::golden("synthetic/llama-tiny.gguf").to_string_lossy().into_owned();
    let s = Server::start(&tiny, &[]);
    same_as(&s, chatml);
    drop(s);
    // a GGUF template that does not parse: ChatML too (it was a 500 on every chat request)
    let f = lse_gguf::GgufFile::open(std::path::Path::new(&tiny)).unwrap();
    let w = lse_gguf::GgufWriter::copy_of(&f, &[], &[("tokenizer.chat_template", lse_gguf::Value::String("{% if %}broken".into()))]);
    let dir = tmp("broken-template");
    let broken = dir.join("tiny-broken-template.gguf");
    w.write(&broken).unwrap();
    let s = Server::start(broken.to_str().unwrap(), &[]);
    same_as(&s, chatml);
    drop(s);
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--chat-template", "chatml"]);
    same_as(&s, chatml);
    drop(s);
    let dir = tmp("chat-template");
    let file = dir.join("t.jinja");
    std::fs::write(&file, "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}[ASSISTANT]").unwrap();
    let s = Server::start(&m, &["--chat-template-file", file.to_str().unwrap()]);
    same_as(&s, "[SYSTEM] Be brief.\n[USER] Hi\n[ASSISTANT]");
}

/// llama-server's own `/completion`: a text prompt tokenized as that server does, the answer in its
/// form; the cases of data/golden/generation whose greedy answers equal llama-server's to the end
/// (translate_japanese: 64 tokens; question_sky and list_fruits: to the end-of-generation token).
#[test]
fn native_completion_answers_as_llama_server() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let p = lse_testdata::repo_root().join("data/golden/generation/SmolLM2-135M-Instruct.Q4_1.json");
    let g: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    for name in ["translate_japanese", "question_sky", "list_fruits"] {
        let c = g["cases"].as_array().unwrap().iter().find(|c| c["name"] == name && c["repeat_penalty"] == 1.0).unwrap();
        let body = json!({"prompt": c["prompt"], "n_predict": c["n_predict"], "temperature": 0, "return_tokens": true, "n_probs": 2});
        let r = s.post("/completion", &body).json();
        assert_eq!((&r["tokens"], &r["content"], &r["stop_type"]), (&c["ids"], &c["text"], &c["stop_type"]), "{name}: {r}");
        assert_eq!(r["tokens_evaluated"].as_u64(), Some(c["prompt_ids"].as_array().unwrap().len() as u64), "{name}");
        assert_eq!(r["completion_probabilities"].as_array().map(Vec::len), Some(c["ids"].as_array().unwrap().len()), "{name}");
    }
    // ids work as the prompt too; several prompts are /v1/completions' job
    let c = &g["cases"][0];
    let r = s.post("/completion", &json!({"prompt": c["prompt_ids"], "n_predict": 3, "temperature": 0, "return_tokens": true})).json();
    assert_eq!(r["tokens_evaluated"].as_u64(), Some(c["prompt_ids"].as_array().unwrap().len() as u64), "{r}");
    s.post("/completion", &json!({"prompt": ["a", "b"]})).assert_error(400, "several prompts");
    // texts among token ids: one prompt, as llama-server reads it (a first text with the
    // vocabulary's special tokens, later ones without)
    let tokenize = |text: &str, special: bool| s.post("/tokenize", &json!({"content": text, "add_special": special})).json()["tokens"].as_array().unwrap().clone();
    let mut ids = tokenize("The capital", true);
    ids.extend([json!(282), json!(4649)]);
    ids.extend(tokenize(" is", false));
    let mixed = s.post("/completion", &json!({"prompt": ["The capital", 282, 4649, " is"], "n_predict": 4, "temperature": 0})).json();
    let plain = s.post("/completion", &json!({"prompt": ids, "n_predict": 4, "temperature": 0})).json();
    assert_eq!((&mixed["tokens_evaluated"], &mixed["content"]), (&plain["tokens_evaluated"], &plain["content"]), "{mixed}");
}

/// llama-server's `n_probs` has no bound of 20 (OpenAI's routes keep theirs): 50 alternatives
/// extend the 5 of a smaller request, and one past the vocabulary gives the whole distribution,
/// whose probabilities sum to 1; an answer holds at most 2^24 alternatives.
#[test]
fn native_n_probs_past_twenty_up_to_the_vocabulary() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let ask = |n: u64, n_predict: u64| s.post("/completion", &json!({"prompt": "The capital of France is", "n_predict": n_predict, "temperature": 0, "n_probs": n})).json();
    let top = |r: &Value, step: usize| r["completion_probabilities"][step]["top_logprobs"].as_array().unwrap().clone();
    let (five, fifty) = (ask(5, 2), ask(50, 2));
    assert_eq!(five["content"], fifty["content"]);
    for step in 0..2 {
        let (a, b) = (top(&five, step), top(&fifty, step));
        assert_eq!((a.len(), b.len()), (5, 50), "{fifty}");
        assert_eq!(&b[..5], &a[..], "step {step}");
        let lps: Vec<f64> = b.iter().map(|e| e["logprob"].as_f64().unwrap()).collect();
        assert!(lps.windows(2).all(|w| w[0] >= w[1]), "{lps:?}");
    }
    let whole = ask(1_000_000, 1);
    assert_eq!(whole["generation_settings"]["n_probs"], json!(1_000_000), "as asked, as llama-server reports it");
    let all = top(&whole, 0);
    assert_eq!(all.len(), 49152, "the vocabulary's size");
    let mass: f64 = all.iter().map(|e| e["logprob"].as_f64().unwrap().exp()).sum();
    assert!((mass - 1.0).abs() < 1e-6, "{mass}");
    let mut ids: Vec<u64> = all.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 49152, "every token once");
    // the whole vocabulary for 400 tokens would hold 19.7 M alternatives
    let r = s.post("/completion", &json!({"prompt": "Hi", "n_predict": 400, "n_probs": 49152}));
    r.assert_error(400, "too many alternatives");
    assert!(r.text.contains("must be at most 16777216"), "{}", r.text);
    let chat = json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "logprobs": true, "top_logprobs": 21});
    for (route, body, says) in [("/v1/chat/completions", chat, "\"top_logprobs\" must be at most 20"), ("/v1/completions", json!({"prompt": "Hi", "max_tokens": 1, "logprobs": 21}), "\"logprobs\" must be at most 20")] {
        let r = s.post(route, &body);
        r.assert_error(400, says);
        assert!(r.json()["error"]["message"].as_str().unwrap().contains(says), "{}", r.text);
    }
}

/// llama-server's fields beside the text: `stopping_word` (the earliest stop string in the text,
/// across tokens; found here with `str::find` on the unstopped text), `has_new_line`, `timings`
/// (on `/completion`, its stream's last chunk, and one-choice OpenAI answers); its leniencies: an
/// empty `grammar` is none, a negative temperature on `/completion` is greedy.
#[test]
fn native_fields_stop_word_and_timings() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let prompt = "The capital of France is";
    let free = s.post("/completion", &json!({"prompt": prompt, "n_predict": 24, "temperature": 0})).json();
    let text = free["content"].as_str().unwrap().to_string();
    assert!(text.is_ascii() && text.len() > 12, "{text:?}");
    assert!(free["stop_type"] != "word" && free["stopping_word"] == "", "{free}");
    assert_eq!(free["has_new_line"], json!(text.contains('\n')), "{free}");
    let t = &free["timings"];
    assert_eq!(t["predicted_n"], free["tokens_predicted"], "{t}");
    assert_eq!(t["prompt_n"].as_u64().unwrap() + t["cache_n"].as_u64().unwrap(), free["tokens_evaluated"].as_u64().unwrap(), "{t}");
    for k in ["prompt_ms", "predicted_ms", "prompt_per_second", "predicted_per_second", "predicted_per_token_ms"] {
        assert!(t[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {t}");
    }
    // two stops that both occur; the earlier in the text wins whatever the list's order
    let (a, b) = (text[7..10].to_string(), text[3..5].to_string());
    let (ia, ib) = (text.find(&a).unwrap(), text.find(&b).unwrap());
    let (cut, word) = if ia <= ib { (ia, &a) } else { (ib, &b) };
    let r = s.post("/completion", &json!({"prompt": prompt, "n_predict": 24, "temperature": -1, "stop": [a, b], "grammar": "", "seed": 7})).json();
    assert_eq!((&r["content"], &r["stop_type"], &r["stopping_word"]), (&json!(text[..cut]), &json!("word"), &json!(word)), "{r}");
    // what it ran with: greedy, the stops, the seed
    let g = &r["generation_settings"];
    assert_eq!((&g["n_predict"], &g["temperature"], &g["stop"], &g["seed"]), (&json!(24), &json!(0.0), &json!([a, b]), &json!(7)), "{g}");
    let last = s.stream_native("/completion", &json!({"prompt": prompt, "n_predict": 24, "temperature": 0, "stream": true, "stop": [word]}));
    let last = last.last().unwrap();
    assert_eq!((&last["stopping_word"], &last["has_new_line"]), (&json!(word), &json!(text[..cut].contains('\n'))), "{last}");
    assert_eq!(last["timings"]["predicted_n"], last["tokens_predicted"], "{last}");
    // OpenAI's routes: one choice's times beside the answer and on the stream's last chunk
    let r = s.post("/v1/completions", &json!({"prompt": prompt, "max_tokens": 4, "temperature": 0})).json();
    assert_eq!(r["timings"]["predicted_n"], r["usage"]["completion_tokens"], "{r}");
    let r = s.post("/v1/completions", &json!({"prompt": prompt, "max_tokens": 4, "temperature": 0, "n": 2})).json();
    assert!(r.get("timings").is_none(), "{r}");
    let chat = json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0});
    let r = s.post("/v1/chat/completions", &chat).json();
    assert_eq!(r["timings"]["predicted_n"], r["usage"]["completion_tokens"], "{r}");
    let mut body = chat.clone();
    body["stream"] = json!(true);
    let chunks = s.stream("/v1/chat/completions", &body);
    let ends: Vec<&Value> = chunks.iter().filter(|c| c.get("timings").is_some()).collect();
    assert!(ends.len() == 1 && !ends[0]["choices"][0]["finish_reason"].is_null(), "{chunks:?}");
    s.post("/completion", &json!({"prompt": prompt, "grammar": "root ::= \"a\""})).assert_error(400, "grammar");
}

/// llama-server's `post_sampling_probs`: `prob` and `top_probs` are the sampler chain's
/// candidates. With top-k 5 at temperature 0.7 (top-p and min-p off) the first step's are the
/// model's five best (from a plain `n_probs` request) with probabilities exp(lp / 0.7)
/// renormalised, worked out here from those log-probs; greedy gives the pick alone at 1; the
/// default chain at temperature 1 keeps what llama-server's own test asks (all in (0, 1], fewer
/// than asked only when they sum to 1); the stream carries the same fields.
#[test]
fn post_sampling_probs_are_the_chains_candidates() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &[]);
    let prompt = "Today was the day. Today I would finally become a";
    let plain = s.post("/completion", &json!({"prompt": prompt, "n_predict": 1, "temperature": 0, "n_probs": 5})).json();
    let best = &plain["completion_probabilities"][0]["top_logprobs"];
    let lps: Vec<f64> = best.as_array().unwrap().iter().map(|e| e["logprob"].as_f64().unwrap()).collect();
    let w: Vec<f64> = lps.iter().map(|lp| ((lp - lps[0]) / 0.7).exp()).collect();
    let total: f64 = w.iter().sum();
    let body = json!({"prompt": prompt, "n_predict": 6, "temperature": 0.7, "top_k": 5, "top_p": 1, "min_p": 0, "seed": 3,
                      "n_probs": 5, "post_sampling_probs": true});
    let r = s.post("/completion", &body).json();
    assert_eq!(r["generation_settings"]["post_sampling_probs"], json!(true), "{r}");
    let steps = r["completion_probabilities"].as_array().unwrap();
    assert_eq!(steps.len(), 6, "{r}");
    let first = steps[0]["top_probs"].as_array().unwrap();
    assert_eq!(first.len(), 5, "{r}");
    for (i, e) in first.iter().enumerate() {
        assert_eq!(e["id"], best[i]["id"], "{r}");
        let want = w[i] / total;
        assert!((e["prob"].as_f64().unwrap() - want).abs() < 1e-5, "candidate {i}: {e} against {want}");
    }
    for st in steps {
        assert!(st.get("logprob").is_none() && st.get("top_logprobs").is_none(), "{st}");
        let top = st["top_probs"].as_array().unwrap();
        let sum: f64 = top.iter().map(|e| e["prob"].as_f64().unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-9, "top-k 5 keeps 5: {st}");
        let chosen = top.iter().find(|e| e["id"] == st["id"]).expect("the pick is a candidate");
        assert_eq!(chosen["prob"], st["prob"], "{st}");
    }
    // greedy: the pick alone, probability 1; the stream says the same
    let greedy = json!({"prompt": prompt, "n_predict": 4, "temperature": 0, "n_probs": 3, "post_sampling_probs": true});
    let r = s.post("/completion", &greedy).json();
    let chunks = s.stream_native("/completion", &json!({"stream": true, "prompt": prompt, "n_predict": 4, "temperature": 0, "n_probs": 3, "post_sampling_probs": true}));
    let streamed: Vec<Value> = chunks.iter().filter_map(|c| c.get("completion_probabilities")).flat_map(|p| p.as_array().unwrap().clone()).collect();
    assert_eq!(streamed.len(), 4, "{chunks:?}");
    for (st, sst) in r["completion_probabilities"].as_array().unwrap().iter().zip(&streamed) {
        assert_eq!(st["prob"], json!(1.0), "{st}");
        assert_eq!(st["top_probs"], json!([{"id": st["id"], "token": st["token"], "bytes": st["bytes"], "prob": 1.0}]), "{st}");
        assert_eq!(st, sst);
    }
    // OpenAI's routes keep OpenAI's log-probs
    s.post("/v1/completions", &json!({"prompt": prompt, "max_tokens": 2, "logprobs": 2, "post_sampling_probs": true})).assert_error(400, "post_sampling_probs on /v1/completions");
    s.post("/v1/chat/completions", &json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "post_sampling_probs": true})).assert_error(400, "post_sampling_probs on chat");
    // llama-server's test: the default chain at temperature 1
    let r = s.post("/completion", &json!({"prompt": prompt, "n_predict": 5, "temperature": 1.0, "n_probs": 10, "post_sampling_probs": true})).json();
    for st in r["completion_probabilities"].as_array().unwrap() {
        let top = st["top_probs"].as_array().unwrap();
        assert!(top.iter().all(|e| e["prob"].as_f64().is_some_and(|p| p > 0.0 && p <= 1.0)), "{st}");
        let sum: f64 = top.iter().map(|e| e["prob"].as_f64().unwrap()).sum();
        assert!(top.len() == 10 || (sum - 1.0).abs() < 1e-9, "{st}");
    }
}

/// `/v1/embeddings` with `--pooling last`: llama-server's vectors (data/golden/embedding; the float
/// distance is the engine test's, so here only that the route serves them: cosine >= 0.999), and
/// its bad requests refused.
#[test]
fn embeddings_serve_the_pooled_vectors_and_refuse_bad_requests() {
    let Some(m) = model() else { return };
    let s = Server::start(&m, &["--pooling", "last"]);
    let p = lse_testdata::repo_root().join("data/golden/embedding/SmolLM2-135M-Instruct.Q4_1.json");
    let g: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let want = g["cases"].as_array().unwrap().iter().find(|c| c["pooling"] == "last").unwrap();
    let r = s.post("/embeddings", &json!({"input": g["inputs"], "encoding_format": "float"})).json();
    assert_eq!((&r["object"], &r["usage"]["prompt_tokens"]), (&json!("list"), &want["prompt_tokens"]), "{r}");
    for (i, d) in r["data"].as_array().unwrap().iter().enumerate() {
        let (a, b) = (d["embedding"].as_array().unwrap(), want["embeddings"][i].as_array().unwrap());
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x.as_f64().unwrap() * y.as_f64().unwrap()).sum();
        assert!(d["index"] == i && dot >= 0.999, "input {i}: cosine {dot} (both of length 1)");
    }
    // llama-server's /embedding: its own form, the same vectors
    let native = s.post("/embedding", &json!({"content": g["inputs"]})).json();
    let rows = native.as_array().unwrap();
    assert_eq!(rows.len(), r["data"].as_array().unwrap().len(), "{native}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!((&row["index"], &row["embedding"]), (&json!(i), &json!([r["data"][i]["embedding"]])), "input {i}");
    }
    for (body, what) in [
        (json!({"input": "hi", "encoding_format": "int8"}), "encoding_format"),
        (json!({"input": "hi", "dimensions": 64}), "dimensions"),
        (json!({"input": []}), "empty"),
        (json!({"input": "hi", "embd_normalize": -2}), "normalize must be"),
        (json!({"input": vec![100u32; 2100]}), "context"),
        (json!({"input": [json!("hi"), json!(vec![100u32; 2100])]}), "input 1 has 2100 tokens"),
        (json!({"input": vec!["hi"; 2049]}), "at most 2048 a request"),
    ] {
        let r = s.post("/v1/embeddings", &body);
        r.assert_error(400, what);
        assert!(r.json()["error"]["message"].as_str().unwrap().contains(what), "{what}: {}", r.text);
    }
}
