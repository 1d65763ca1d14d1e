//! Tool calls a chat request forces: `tool_choice` naming a function, or "required" with a single
//! tool. The answer is then that function's arguments, sampled as an instance of its `parameters`
//! schema (JSON schema mode) and returned as the message's `tool_calls`, as vLLM does for a named
//! tool choice. LSE does not look for tool calls in free text, so tools with `tool_choice` "auto"
//! (or none given) are refused; "none" ignores the tools.

use super::body::{wrong, Fields};
use super::errors::{ApiError, ApiResult};
use serde_json::{json, Value};

/// The function a request forces, and the tools for the chat template.
pub struct ForcedTool {
    pub name: String,
    pub parameters: Value,
    pub tools: Value,
}

/// The tool call `f` forces, if any.
pub fn forced(f: &Fields) -> ApiResult<Option<ForcedTool>> {
    let choice = f.get("tool_choice");
    let tools = match f.get("tools") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(t)) => t.as_slice(),
        Some(_) => return Err(wrong("tools", "a list of {\"type\": \"function\", \"function\": {..}} objects")),
    };
    let named = match choice {
        None | Some(Value::Null) if tools.is_empty() => return Ok(None),
        Some(Value::String(c)) if c == "none" => return Ok(None),
        Some(Value::String(c)) if c == "required" && tools.len() == 1 => None,
        Some(Value::Object(o)) => Some(
            o.get("function")
                .and_then(|g| g.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| wrong("tool_choice", "\"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ..}}"))?,
        ),
        _ => {
            return Err(ApiError::bad_request(
                "\"tools\" need a \"tool_choice\" that names the function (or \"required\" with one tool), or \"none\": LSE does not look for tool calls in free text",
            ))
        }
    };
    let mut found = None;
    for (i, t) in tools.iter().enumerate() {
        let g = t.get("function").filter(|_| t.get("type").and_then(Value::as_str) == Some("function"));
        let name = g.and_then(|g| g.get("name")).and_then(Value::as_str);
        let Some(name) = name else { return Err(ApiError::bad_request(format!("\"tools\"[{i}] must be {{\"type\": \"function\", \"function\": {{\"name\": ..}}}}"))) };
        if named.is_none_or(|n| n == name) && found.is_none() {
            let parameters = g.and_then(|g| g.get("parameters")).cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            found = Some(ForcedTool { name: name.to_string(), parameters, tools: Value::Array(tools.to_vec()) });
        }
    }
    match (found, named) {
        (Some(t), _) => Ok(Some(t)),
        (None, Some(n)) => Err(ApiError::bad_request(format!("\"tool_choice\" names \"{n}\", which is not in \"tools\""))),
        (None, None) => Err(ApiError::bad_request("\"tool_choice\" is \"required\" but there are no tools")),
    }
}

/// A choice's `tool_calls` entry: the call's id, the function's name and the arguments' text.
pub fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}
