//! Chat tools. With `tool_choice` naming a function (or "required" with a single tool) the answer
//! is that function's arguments, sampled as an instance of its `parameters` schema (JSON schema
//! mode), as vLLM answers a named tool choice. With "auto" (the default when tools are given) the
//! model answers freely with the tools in its chat template (streamed: text as it comes, what may
//! be a call held to the end, [`CallStream`]), and calls are read out of the answer:
//! `<tool_call>{"name": .., "arguments": {..}}</tool_call>` blocks (the Hermes form Qwen's and
//! many templates ask for), or an answer that is nothing but such an object (small models drop
//! the tags). "required" with several tools is "auto" with the answer held to one call object of
//! one of them (JSON schema mode over their alternatives: the name picks the function, its
//! `parameters` the arguments). "none" hides the tools.

use super::body::{wrong, Fields};
use super::errors::{ApiError, ApiResult};
use serde_json::{json, Value};

/// The tools of a request and how they may be called.
pub enum Tools {
    None,
    /// The function a request forces and its `parameters`; `required`: forced by "required"
    /// (one tool), whose answer says "tool_calls" as the calls "required" reads out of an answer
    /// do, where a named function's says "stop" (OpenAI's).
    Forced { name: String, parameters: Value, tools: Value, required: bool },
    /// Calls read out of the answer: a free one, or with `required` (`schema`) one call object.
    Auto { names: Vec<String>, tools: Value, required: Option<Value> },
}

impl Tools {
    /// The tools list for the chat template, when the model is to see it.
    pub fn for_template(&self) -> Option<&Value> {
        match self {
            Tools::None => None,
            Tools::Forced { tools, .. } | Tools::Auto { tools, .. } => Some(tools),
        }
    }
}

/// The tools of `f` and `tool_choice`.
pub fn of(f: &Fields) -> ApiResult<Tools> {
    let tools = match f.get("tools") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(t)) => t.as_slice(),
        Some(_) => return Err(wrong("tools", "a list of {\"type\": \"function\", \"function\": {..}} objects")),
    };
    let mut names = Vec::with_capacity(tools.len());
    for (i, t) in tools.iter().enumerate() {
        let name = t.get("function").filter(|_| t.get("type").and_then(Value::as_str) == Some("function")).and_then(|g| g.get("name")).and_then(Value::as_str);
        let Some(name) = name else { return Err(ApiError::bad_request(format!("\"tools\"[{i}] must be {{\"type\": \"function\", \"function\": {{\"name\": ..}}}}"))) };
        names.push(name.to_string());
    }
    let parameters = |i: usize| tools[i]["function"].get("parameters").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let forced = |i: usize, required| Ok(Tools::Forced { name: names[i].clone(), parameters: parameters(i), tools: Value::Array(tools.to_vec()), required });
    let auto = |required: Option<Value>| Tools::Auto { names: names.clone(), tools: Value::Array(tools.to_vec()), required };
    match f.get("tool_choice") {
        Some(Value::String(c)) if c == "none" => Ok(Tools::None),
        None | Some(Value::Null) if tools.is_empty() => Ok(Tools::None),
        None | Some(Value::Null) => Ok(auto(None)),
        Some(Value::String(c)) if c == "auto" => Ok(if tools.is_empty() { Tools::None } else { auto(None) }),
        Some(Value::String(c)) if c == "required" => match tools.len() {
            1 => forced(0, true),
            0 => Err(ApiError::bad_request("\"tool_choice\" is \"required\" but there are no tools")),
            n => Ok(auto(Some(one_call_of((0..n).map(|i| (names[i].as_str(), parameters(i))))?))),
        },
        Some(Value::Object(o)) => {
            let n = o.get("function").and_then(|g| g.get("name")).and_then(Value::as_str);
            let n = n.ok_or_else(|| wrong("tool_choice", "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ..}}"))?;
            match names.iter().position(|m| m == n) {
                Some(i) => forced(i, false),
                None => Err(ApiError::bad_request(format!("\"tool_choice\" names \"{n}\", which is not in \"tools\""))),
            }
        }
        Some(_) => Err(wrong("tool_choice", "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ..}}")),
    }
}

/// How a streamed answer with tools goes out: text that cannot start a call is sent as it comes;
/// from a `<tool_call>` tag on, or when the whole answer may be a call (it opens with `{`, `[` or a
/// marker), the rest is held and read for calls when the answer ends.
#[derive(Default)]
pub struct CallStream {
    held: String,
    /// In text: sending what comes.
    text: bool,
    /// Holding everything from here to the end.
    holding: bool,
}

const TAG: &str = "<tool_call>";

impl CallStream {
    /// Takes a piece of the answer; returns the text that can go out now.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        if self.holding {
            return String::new();
        }
        if !self.text {
            let t = self.held.trim_start();
            let starts = ["{", "[", TAG, CALL_PREFIXES[0], CALL_PREFIXES[1]];
            if starts.iter().any(|p| t.starts_with(p)) {
                self.holding = true;
            }
            // undecided while it is blank or the start of a marker
            if self.holding || t.is_empty() || starts.iter().any(|p| p.starts_with(t)) {
                return String::new();
            }
            self.text = true;
        }
        if let Some(i) = self.held.find(TAG) {
            self.holding = true;
            let rest = self.held.split_off(i);
            return std::mem::replace(&mut self.held, rest);
        }
        // keep back an end that may begin the tag (ASCII, so the cut is a character boundary)
        let keep = (1..TAG.len()).rev().find(|&k| self.held.ends_with(&TAG[..k])).unwrap_or(0);
        let rest = self.held.split_off(self.held.len() - keep);
        std::mem::replace(&mut self.held, rest)
    }

    /// What was held when the answer ends (to read for calls; text otherwise).
    pub fn rest(self) -> String {
        self.held
    }
}

/// The schema of one call object of one of `tools` (name, parameters): their alternatives, each
/// its name as a constant and its parameters; the definitions each `parameters` carries (pydantic's
/// `$defs`) move to the root, where their `$ref`s point.
fn one_call_of<'a>(tools: impl Iterator<Item = (&'a str, Value)>) -> ApiResult<Value> {
    let mut root = serde_json::Map::new();
    let mut alts = Vec::new();
    for (name, mut params) in tools {
        for key in ["$defs", "definitions"] {
            let Some(Value::Object(defs)) = params.as_object_mut().and_then(|p| p.remove(key)) else { continue };
            let into = root.entry(key).or_insert_with(|| json!({})).as_object_mut().expect("an object");
            for (k, v) in defs {
                if into.get(&k).is_some_and(|old| *old != v) {
                    return Err(ApiError::bad_request(format!("the tools' parameters define \"{k}\" differently: \"required\" with several tools needs distinct definitions")));
                }
                into.insert(k, v);
            }
        }
        alts.push(json!({"type": "object", "properties": {"name": {"const": name}, "arguments": params}}));
    }
    root.insert("anyOf".into(), Value::Array(alts));
    Ok(Value::Object(root))
}

/// A forced call's arguments streamed: white space around the object held back (a token may
/// close it with a line break: `}\r\n`), inner white space sent with what follows it.
#[derive(Default)]
pub struct ArgsStream {
    started: bool,
    held: String,
}

impl ArgsStream {
    /// The part of `text` to send now.
    pub fn push(&mut self, text: &str) -> String {
        let text = if self.started { text } else { text.trim_start() };
        self.started |= !text.is_empty();
        self.held.push_str(text);
        let keep = self.held.len() - self.held.trim_end().len();
        let now = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..now.len());
        now
    }
}

/// A choice's `tool_calls` entry: the call's id, the function's name and the arguments' text.
pub fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// Markers some templates' models put before a whole-answer call when the vocabulary renders
/// them as text: Mistral's `[TOOL_CALLS]` (a list of calls follows), Llama 3.1's `<|python_tag|>`.
const CALL_PREFIXES: [&str; 2] = ["[TOOL_CALLS]", "<|python_tag|>"];

/// The calls in a free answer, as (name, arguments text), and the text outside them (trimmed);
/// `None` when the answer holds no call of one of `names` that parses. Read: Hermes
/// `<tool_call>{..}</tool_call>` blocks among text; or an answer that is nothing but one call
/// object (`arguments`, or Llama 3's `parameters`) or a list of them (Mistral's form), after an
/// optional marker.
pub fn read_calls(text: &str, names: &[String]) -> Option<(Vec<(String, String)>, String)> {
    let call = |v: &Value| -> Option<(String, String)> {
        let name = v.get("name")?.as_str()?;
        let args = v.get("arguments").or_else(|| v.get("parameters"))?;
        if !names.iter().any(|n| n == name) || !args.is_object() {
            return None;
        }
        Some((name.to_string(), args.to_string()))
    };
    let one = |s: &str| -> Option<(String, String)> { call(&serde_json::from_str(s.trim()).ok()?) };
    if !text.contains("<tool_call>") {
        let body = CALL_PREFIXES.iter().fold(text.trim(), |t, p| t.strip_prefix(p).unwrap_or(t));
        let calls = match serde_json::from_str::<Value>(body.trim()).ok()? {
            Value::Array(list) if !list.is_empty() => list.iter().map(call).collect::<Option<Vec<_>>>()?,
            v => vec![call(&v)?],
        };
        return Some((calls, String::new()));
    }
    let (mut calls, mut rest, mut at) = (Vec::new(), String::new(), text);
    while let Some(i) = at.find("<tool_call>") {
        rest.push_str(&at[..i]);
        let body = &at[i + "<tool_call>".len()..];
        let end = body.find("</tool_call>");
        calls.push(one(&body[..end.unwrap_or(body.len())])?);
        at = end.map_or("", |e| &body[e + "</tool_call>".len()..]);
    }
    rest.push_str(at);
    Some((calls, rest.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::{one_call_of, read_calls, CallStream};
    use serde_json::json;

    /// The pieces a stream sends, then what it holds at the end.
    fn streamed(pieces: &[&str]) -> (Vec<String>, String) {
        let mut c = CallStream::default();
        let sent = pieces.iter().map(|p| c.push(p)).filter(|s| !s.is_empty()).collect();
        (sent, c.rest())
    }

    #[test]
    fn streamed_text_goes_out_and_calls_are_held() {
        // text streams, a tag's start is kept back until it is known
        let (sent, rest) = streamed(&["Let me", " check.", "\n<tool", "_call>", "{\"name\"", ": \"add\"}</tool_call>"]);
        assert_eq!((sent, rest.as_str()), (vec!["Let me".to_string(), " check.".into(), "\n".into()], "<tool_call>{\"name\": \"add\"}</tool_call>"));
        let (sent, rest) = streamed(&["Use <to", "ols> here"]);
        assert_eq!((sent.concat(), rest.as_str()), ("Use <tools> here".to_string(), ""));
        // an answer that may be a call object or list is held whole; blanks and a marker's start wait
        for pieces in [&[" ", "{\"name\"", ": 1}"][..], &["[TOOL", "_CALLS][]"], &["<tool_call>", "x"], &["\n", "[", "1]"]] {
            let (sent, rest) = streamed(pieces);
            assert!(sent.is_empty(), "{pieces:?}: {sent:?}");
            assert_eq!(rest, pieces.concat());
        }
        let (sent, rest) = streamed(&["  Paris", " is sunny"]);
        assert_eq!((sent.concat(), rest.as_str()), ("  Paris is sunny".to_string(), ""));
    }

    #[test]
    fn one_call_schema_moves_definitions_to_the_root() {
        let addr = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let p = |extra: serde_json::Value| json!({"type": "object", "properties": {"to": {"$ref": "#/$defs/Addr"}, "x": extra}, "$defs": {"Addr": addr}});
        let s = one_call_of([("send", p(json!({"type": "integer"}))), ("ship", p(json!({"type": "string"})))].into_iter()).unwrap();
        assert_eq!(s["$defs"], json!({"Addr": addr}));
        assert_eq!(s["anyOf"][1]["properties"]["name"], json!({"const": "ship"}));
        assert!(s["anyOf"][0]["properties"]["arguments"].get("$defs").is_none());
        lse_engine::generation::Schema::compile(&s).unwrap();
        let other = json!({"type": "object", "properties": {"to": {"$ref": "#/$defs/Addr"}}, "$defs": {"Addr": {"type": "string"}}});
        let e = one_call_of([("send", p(json!({"type": "integer"}))), ("ship", other)].into_iter()).unwrap_err();
        assert!(e.message.contains("\"Addr\" differently"), "{}", e.message);
    }

    #[test]
    fn reads_tagged_bare_and_listed_calls() {
        let names = ["get_weather".to_string(), "add".to_string()];
        let tagged = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}}</tool_call>";
        let (calls, rest) = read_calls(tagged, &names).unwrap();
        assert_eq!(calls, [("get_weather".to_string(), r#"{"city":"Paris"}"#.to_string()), ("add".to_string(), r#"{"a":1}"#.to_string())]);
        assert_eq!(rest, "Let me check.");
        let bare = read_calls(" {\"name\": \"add\", \"arguments\": {\"a\": 2}} ", &names).unwrap();
        assert_eq!(bare, (vec![("add".to_string(), r#"{"a":2}"#.to_string())], String::new()));
        // an unclosed last block (the answer ended inside it) still counts when it parses
        assert!(read_calls("<tool_call>{\"name\": \"add\", \"arguments\": {}}", &names).is_some());
        // Llama 3's parameters, Mistral's list after its marker, a marker rendered as text
        let llama = read_calls("{\"type\": \"function\", \"name\": \"add\", \"parameters\": {\"a\": 3}}", &names).unwrap();
        assert_eq!(llama.0, [("add".to_string(), r#"{"a":3}"#.to_string())]);
        let mistral = read_calls("[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 4}}, {\"name\": \"get_weather\", \"arguments\": {}}]", &names).unwrap();
        assert_eq!(mistral.0, [("add".to_string(), r#"{"a":4}"#.to_string()), ("get_weather".to_string(), "{}".to_string())]);
        let tagged = read_calls("<|python_tag|>{\"name\": \"add\", \"parameters\": {}}", &names).unwrap();
        assert_eq!(tagged.0, [("add".to_string(), "{}".to_string())]);
        for free in [
            "Paris is sunny.",
            "{\"name\": \"other\", \"arguments\": {}}",
            "<tool_call>{\"name\": \"add\"</tool_call>",
            "{\"name\": \"add\", \"arguments\": 3}",
            "[]",
            "[1, 2]",
            "[{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"other\", \"arguments\": {}}]",
        ] {
            assert!(read_calls(free, &names).is_none(), "{free}");
        }
    }
}
