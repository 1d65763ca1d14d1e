//! Tool calls with "auto" on a model whose chat template offers tools (Qwen2.5-Coder's Hermes
//! form): the real server, greedy answers. A weather question becomes a `get_weather` call (the
//! model writes the call as a bare JSON object), whole and streamed with finish reason
//! "tool_calls"; a coding question stays text (streamed as it comes); "required" with several
//! tools answers with one call of the fitting one (its arguments held to its parameters), whole
//! and streamed.

mod http;

use http::Server;
use serde_json::{json, Value};

#[test]
fn auto_tool_calls_are_read_out_of_the_answer() {
    let Some(m) = lse_testdata::model("qwen25coder") else { return };
    let s = Server::start(&m.to_string_lossy(), &[]);
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]);
    let ask = |q: &str| json!({"messages": [{"role": "user", "content": q}], "tools": tools, "max_tokens": 80, "temperature": 0});
    let r = s.post("/v1/chat/completions", &ask("What is the weather like in Paris today?")).json();
    let c = &r["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls", "{r}");
    assert!(c["message"]["content"].is_null(), "{r}");
    let call = &c["message"]["tool_calls"][0];
    assert_eq!((call["type"].as_str(), call["function"]["name"].as_str()), (Some("function"), Some("get_weather")), "{r}");
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris"}));
    // streamed: the call comes whole at the end, then the finish reason
    let mut body = ask("What is the weather like in Paris today?");
    body["stream"] = json!(true);
    let chunks = s.stream("/v1/chat/completions", &body);
    let deltas: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"].get(0)).collect();
    let streamed: Vec<&Value> = deltas.iter().filter_map(|d| d["delta"]["tool_calls"].as_array()).flatten().collect();
    assert_eq!(streamed.len(), 1, "{chunks:?}");
    assert_eq!(streamed[0]["function"], call["function"]);
    assert_eq!(deltas.last().unwrap()["finish_reason"], "tool_calls");
    // a question no tool answers stays text
    let r = s.post("/v1/chat/completions", &ask("Write a Python function that adds two numbers.")).json();
    let c = &r["choices"][0];
    assert!(c["message"]["tool_calls"].is_null() && c["message"]["content"].as_str().is_some_and(|t| !t.is_empty()), "{r}");
    assert_ne!(c["finish_reason"], "tool_calls");
    // streamed, that text goes out as it comes (it cannot start a call), not held to the end
    let mut body = ask("Write a Python function that adds two numbers.");
    body["stream"] = json!(true);
    let chunks = s.stream("/v1/chat/completions", &body);
    let texts: Vec<&str> = chunks.iter().filter_map(|c| c["choices"].get(0)?["delta"]["content"].as_str()).filter(|t| !t.is_empty()).collect();
    assert!(texts.len() > 10, "{chunks:?}");
    assert_eq!(texts.concat(), c["message"]["content"].as_str().unwrap());
    // "required" with two tools: the model picks by the question, the arguments follow that tool
    let time = json!({"type": "function", "function": {"name": "get_time", "description": "The time in a time zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "integer"}}}}});
    let required = |q: &str| {
        let mut b = ask(q);
        b["tools"].as_array_mut().unwrap().push(time.clone());
        b["tool_choice"] = json!("required");
        b
    };
    for (q, name, args) in [("What is the weather like in Paris today?", "get_weather", json!({"city": "Paris"})), ("What time is it in UTC+2?", "get_time", json!({"zone": 2}))] {
        let r = s.post("/v1/chat/completions", &required(q)).json();
        let c = &r["choices"][0];
        let call = &c["message"]["tool_calls"][0]["function"];
        assert_eq!((&c["finish_reason"], &call["name"]), (&json!("tool_calls"), &json!(name)), "{r}");
        assert_eq!(serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(), args, "{r}");
    }
    let mut body = required("What time is it in UTC+2?");
    body["stream"] = json!(true);
    let chunks = s.stream("/v1/chat/completions", &body);
    let streamed: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"].get(0)?["delta"]["tool_calls"].as_array()).flatten().collect();
    assert_eq!((streamed.len(), &streamed[0]["function"]["name"]), (1, &json!("get_time")), "{chunks:?}");
    // "required" with one tool (a forced call) says "tool_calls" too, whole and streamed; its
    // arguments carry no white space around the object (a token may close it with a line break)
    let mut one = ask("What is the weather like in Paris today?");
    one["tool_choice"] = json!("required");
    let r = s.post("/v1/chat/completions", &one).json();
    let c = &r["choices"][0];
    let args = c["message"]["tool_calls"][0]["function"]["arguments"].as_str().unwrap().to_string();
    assert_eq!((&c["finish_reason"], args.trim() == args), (&json!("tool_calls"), true), "{r}");
    one["stream"] = json!(true);
    let chunks = s.stream("/v1/chat/completions", &one);
    let deltas: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"].get(0)).collect();
    let streamed: String = deltas.iter().filter_map(|d| d["delta"]["tool_calls"][0]["function"]["arguments"].as_str()).collect();
    assert_eq!((streamed, &deltas.last().unwrap()["finish_reason"]), (args, &json!("tool_calls")));
}

/// A follow-up turn: the call's arguments, sent back as JSON text (OpenAI's clients), reach the
/// template as the object it writes out with `tojson` (they were a string in a string).
#[test]
fn a_call_sent_back_is_shown_to_the_template_as_an_object() {
    let Some(m) = lse_testdata::model("qwen25coder") else { return };
    let s = Server::start(&m.to_string_lossy(), &[]);
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let call = json!({"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}});
    let msgs = json!([{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": "c1", "content": "18C"}]);
    let prompt = s.post("/apply-template", &json!({"messages": msgs, "tools": tools})).json()["prompt"].as_str().unwrap().to_string();
    assert!(prompt.contains(r#""arguments": {"city": "Paris"}"#) && !prompt.contains(r#"\"city"#), "{prompt}");
}
