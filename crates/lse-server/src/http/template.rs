//! Chat prompts: a Jinja chat template (`--chat-template`, else the GGUF's
//! `tokenizer.chat_template`, else ChatML as llama-server falls back to) rendered with minijinja,
//! Python string methods available (minijinja-contrib's pycompat) as HF templates expect, the
//! `bos_token`/`eos_token` variables, `raise_exception`, and `add_generation_prompt`.

use super::errors::{ApiError, ApiResult};
use minijinja::{Environment, Error, ErrorKind, Value};

/// The mark of an error a template raised itself (`raise_exception`): it refuses the
/// conversation, where any other error is the template's own failure.
#[derive(Debug)]
struct Raised;

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("raised by the template")
    }
}

impl std::error::Error for Raised {}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg).with_source(Raised))
}

fn raised(e: &Error) -> bool {
    std::error::Error::source(e).is_some_and(|s| s.is::<Raised>())
}

/// transformers' `tojson` (Python's `json.dumps`): `", "` and `": "` between items, non-ASCII and
/// `<`, `>`, `&` as they are, `indent` as `json.dumps(indent=…)`; minijinja's own writes compact
/// JSON with HTML escapes, which tokenizes into another prompt than the model was trained on.
fn tojson(value: &Value, indent: Option<usize>) -> Result<Value, Error> {
    let v = serde_json::to_value(value).map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("cannot write as JSON: {e}")))?;
    let mut out = String::new();
    python_json(&v, indent, 0, &mut out);
    Ok(Value::from(out))
}

/// `v` as Python's `json.dumps(v, ensure_ascii=False, indent=indent)` writes it, at nesting `level`.
fn python_json(v: &serde_json::Value, indent: Option<usize>, level: usize, out: &mut String) {
    use serde_json::Value as J;
    // what goes between items and before the closing bracket
    let (between, close) = match indent {
        Some(n) => (format!(",\n{}", " ".repeat(n * (level + 1))), format!("\n{}", " ".repeat(n * level))),
        None => (", ".to_string(), String::new()),
    };
    let open = |out: &mut String, bracket: char| {
        out.push(bracket);
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * (level + 1)));
        }
    };
    match v {
        J::Array(a) if !a.is_empty() => {
            open(out, '[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(&between);
                }
                python_json(x, indent, level + 1, out);
            }
            out.push_str(&close);
            out.push(']');
        }
        J::Object(m) if !m.is_empty() => {
            open(out, '{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(&between);
                }
                out.push_str(&J::from(k.as_str()).to_string());
                out.push_str(": ");
                python_json(x, indent, level + 1, out);
            }
            out.push_str(&close);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Python's `is iterable`: `None` is not (minijinja's test says it is, and templates that ask
/// `tools is iterable and tools | length > 0` fail when no tools are given).
fn is_iterable(v: &Value) -> bool {
    !v.is_none() && !v.is_undefined() && v.try_iter().is_ok()
}

fn strftime_now(fmt: String) -> String {
    // templates use it for "today's date"; a fixed UTC rendering without a date library
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let days = (secs / 86400) as i64;
    let (y, m, d) = civil_from_days(days);
    const MONTHS: [&str; 12] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
    fmt.replace("%Y", &y.to_string())
        .replace("%m", &format!("{m:02}"))
        .replace("%d", &format!("{d:02}"))
        .replace("%B", MONTHS[(m - 1) as usize])
        .replace("%b", &MONTHS[(m - 1) as usize][..3])
}

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

/// ChatML: each message as `<|im_start|>ROLE\nCONTENT<|im_end|>\n`, then the assistant's header.
pub const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
                          {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// The source `--chat-template` names: ChatML for `chatml`, else the Jinja text itself, refused
/// when it is not Jinja at all (a built-in name llama.cpp knows, say) or [`check`] refuses it.
pub fn from_option(option: &str) -> Result<&str, String> {
    if option == "chatml" {
        return Ok(CHATML);
    }
    if !is_jinja(option) {
        return Err(format!("--chat-template takes Jinja source or chatml, got {option:?} (a file: --chat-template-file)"));
    }
    check(option).map_err(|e| format!("--chat-template: {e}"))?;
    Ok(option)
}

/// The template to serve: `--chat-template` (resolved by [`from_option`] when the arguments are
/// parsed) or `--chat-template-file`, which must work, else the GGUF's when [`check`] takes it,
/// else ChatML (as llama-server). Says on stderr when it falls back.
pub fn choose(option: Option<&str>, gguf: Option<String>) -> Result<ChatTemplate, String> {
    let chatml = |why: String| {
        eprintln!("lse-server: {why}; chat requests use ChatML, as llama-server does (--chat-template sets one)");
        ChatTemplate::new(CHATML.to_string()).expect("ChatML parses and renders")
    };
    Ok(match (option, gguf) {
        (Some(src), _) => ChatTemplate::new(src.to_string()).map_err(|e| format!("--chat-template: {e}"))?,
        (None, Some(src)) => ChatTemplate::new(src).unwrap_or_else(|e| chatml(format!("the model's chat template cannot be used ({e})"))),
        (None, None) => chatml("the model has no chat template".into()),
    })
}

/// Whether `source` has any Jinja in it: a template without would render every conversation as
/// the same text (an empty file, a path given as the source).
pub fn is_jinja(source: &str) -> bool {
    source.contains("{{") || source.contains("{%")
}

/// Parses `template` and renders a one-message conversation with it: the one line of a template
/// that cannot work. Only a `raise_exception` may stop that render (a template may refuse some
/// conversations); any other failure there (an unknown filter, a type error) would fail every
/// chat request.
pub fn check(template: &str) -> Result<(), String> {
    ChatTemplate::new(template.to_string()).map(drop)
}

/// A chat template parsed once, when the server starts, so that a request pays only its render
/// (Qwen2.5-Coder's template with one tool: parsing 36 µs, rendering 8 µs; SmolLM2's 8 and 4).
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
}

impl ChatTemplate {
    /// Parses `source` and tries it as [`check`] says.
    pub fn new(source: String) -> Result<Self, String> {
        let env = compiled(&source).map_err(|e| format!("the chat template does not parse: {e}"))?;
        let t = ChatTemplate { env, source };
        let probe = serde_json::json!([{"role": "user", "content": "Hello"}]);
        match t.env.get_template(CHAT).and_then(|c| c.render(context(&probe, None, "", "", true))) {
            Err(e) if !raised(&e) => Err(format!("the chat template fails on a one-message conversation: {}", reason(&e))),
            _ => Ok(t),
        }
    }

    /// The Jinja text (what `/props` reports).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages` (OpenAI message objects); `tools` (OpenAI's list) for templates that
    /// show them to the model.
    pub fn render(&self, messages: &serde_json::Value, tools: Option<&serde_json::Value>, bos: &str, eos: &str, add_generation_prompt: bool) -> ApiResult<String> {
        let t = self.env.get_template(CHAT).map_err(|e| ApiError::internal(e.to_string()))?;
        t.render(context(messages, tools, bos, eos, add_generation_prompt))
            .map_err(|e| ApiError::bad_request(format!("the chat template failed on these messages: {}", reason(&e))))
    }
}

/// The name of the chat template in its environment.
const CHAT: &str = "chat";

/// An environment holding `template` (its generation marks rewritten) as [`CHAT`].
fn compiled(template: &str) -> Result<Environment<'static>, Error> {
    let mut env = env();
    env.add_template_owned(CHAT, without_generation_tags(template).into_owned())?;
    Ok(env)
}

/// What went wrong in a render: the detail a template error carries, else the error.
fn reason(e: &Error) -> String {
    e.detail().map_or_else(|| e.to_string(), str::to_string)
}

/// `template` with transformers' `{% generation %}` … `{% endgeneration %}` (marks of the
/// assistant's text for training masks, which render nothing; llama.cpp ignores them) as
/// `{% if true %}` … `{% endif %}`, whitespace control kept.
fn without_generation_tags(template: &str) -> std::borrow::Cow<'_, str> {
    if !template.contains("generation") {
        return template.into();
    }
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{%") {
        let Some(len) = rest[open..].find("%}") else { break };
        let tag = &rest[open + 2..open + len];
        let inner = tag.trim_start_matches(['-', '+']).trim_end_matches(['-', '+']).trim();
        let replacement = match inner {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        out.push_str(&rest[..open + 2]);
        match replacement {
            Some(r) => out.push_str(&tag.replacen(inner, r, 1)),
            None => out.push_str(tag),
        }
        out.push_str("%}");
        rest = &rest[open + len + 2..];
    }
    out.push_str(rest);
    out.into()
}

fn context(messages: &serde_json::Value, tools: Option<&serde_json::Value>, bos: &str, eos: &str, add_generation_prompt: bool) -> Value {
    minijinja::context! {
        messages => Value::from_serialize(messages),
        tools => tools.map(Value::from_serialize),
        add_generation_prompt => add_generation_prompt,
        bos_token => bos,
        eos_token => eos,
    }
}

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_test("iterable", is_iterable);
    env.add_filter("tojson", |v: &Value, indent: Option<usize>, kwargs: minijinja::value::Kwargs| -> Result<Value, Error> {
        let indent = indent.or(kwargs.get::<Option<usize>>("indent")?);
        kwargs.assert_all_used()?;
        tojson(v, indent)
    });
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &str, messages: &serde_json::Value, tools: Option<&serde_json::Value>, bos: &str, eos: &str, add_generation_prompt: bool) -> ApiResult<String> {
        ChatTemplate::new(t.to_string()).expect("a sound template").render(messages, tools, bos, eos, add_generation_prompt)
    }

    #[test]
    fn renders_with_python_methods_and_raise_exception() {
        let t = "{{ bos_token }}{% for m in messages %}{% if m.role not in ['user','assistant'] %}{{ raise_exception('bad role') }}{% endif %}<{{ m.role }}>{{ m.content.strip() }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
        let msgs = serde_json::json!([{"role": "user", "content": "  hi  "}]);
        assert_eq!(render(t, &msgs, None, "<s>", "</s>", true).unwrap(), "<s><user>hi<assistant>");
        let bad = serde_json::json!([{"role": "tool", "content": "x"}]);
        let e = render(t, &bad, None, "<s>", "</s>", true).unwrap_err();
        assert!(e.message.contains("bad role"), "{}", e.message);
    }

    /// transformers' generation marks render nothing (llama.cpp's parser skips them), whitespace
    /// control kept; loops may `break`; a template that cannot render one message is refused.
    #[test]
    fn generation_marks_loop_controls_and_templates_that_cannot_render() {
        let msgs = serde_json::json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]);
        let t = "{% for m in messages %}[{{ m.role }}]\n  {%- if m.role == 'assistant' %}{% generation -%}\n  {{ m.content }}{%- endgeneration %}{% endif %}{% endfor %}";
        let plain = "{% for m in messages %}[{{ m.role }}]\n  {%- if m.role == 'assistant' %}{% if true -%}\n  {{ m.content }}{%- endif %}{% endif %}{% endfor %}";
        assert!(check(t).is_ok());
        assert_eq!(render(t, &msgs, None, "", "", false).unwrap(), "[user][assistant]yes");
        assert_eq!(render(t, &msgs, None, "", "", false).unwrap(), render(plain, &msgs, None, "", "", false).unwrap());
        let first = "{% for m in messages %}{{ m.content }}{% break %}{% endfor %}";
        assert_eq!(render(first, &msgs, None, "", "", false).unwrap(), "hi");
        // parses, but fails on any conversation
        let e = check("{% for m in messages %}{{ m.content | shout }}{% endfor %}").unwrap_err();
        assert!(e.contains("fails on a one-message conversation") && e.contains("shout"), "{e}");
        // ... or on a type error (firefunction-v2's template without its `functions`)
        let e = check("{{ functions + 'x' }}{% for m in messages %}{{ m.content }}{% endfor %}").unwrap_err();
        assert!(e.contains("fails on a one-message conversation"), "{e}");
        // a template may refuse some conversations
        assert!(check("{% if messages[0].role != 'system' %}{{ raise_exception('a system message first') }}{% endif %}").is_ok());
        // Python's `is iterable`: not None (Qwen3-Coder's `tools is iterable and tools | length > 0`)
        let t = "{{ tools is iterable }} {{ 'ab' is iterable }} {{ messages is iterable }} {{ messages[0] is iterable }} {{ 3 is iterable }}";
        assert_eq!(render(t, &msgs, None, "", "", false).unwrap(), "False True True True False");
        assert!(check("{% if tools is iterable and tools | length > 0 %}{{ tools | length }}{% endif %}{{ messages[0].content }}").is_ok());
    }

    /// `tojson` writes what Python's `json.dumps` writes (transformers' filter): the keys in the
    /// request's order, `", "` and `": "`, no HTML escapes; `indent` as `json.dumps(indent=2)`.
    #[test]
    fn tojson_writes_as_python_does() {
        let msgs = serde_json::json!([{"role": "user", "content": "é<>&\n", "b": [1, 2.5, null, true], "c": {}, "a": []}]);
        let flat = r#"[{"role": "user", "content": "é<>&\n", "b": [1, 2.5, null, true], "c": {}, "a": []}]"#;
        assert_eq!(render("{{ messages | tojson }}", &msgs, None, "", "", false).unwrap(), flat);
        let indented = "[\n  {\n    \"role\": \"user\",\n    \"content\": \"é<>&\\n\",\n    \"b\": [\n      1,\n      2.5,\n      null,\n      true\n    ],\n    \"c\": {},\n    \"a\": []\n  }\n]";
        assert_eq!(render("{{ messages | tojson(indent=2) }}", &msgs, None, "", "", false).unwrap(), indented);
        assert_eq!(render("{{ messages | tojson(2) }}", &msgs, None, "", "", false).unwrap(), indented);
    }

    #[test]
    fn chatml_renders_each_message_and_the_assistant_header() {
        let msgs = serde_json::json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]);
        assert_eq!(
            render(CHATML, &msgs, None, "", "", true).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let user = serde_json::json!([msgs[1]]);
        assert_eq!(render(CHATML, &user, None, "", "", false).unwrap(), "<|im_start|>user\nHi<|im_end|>\n");
        assert_eq!(from_option("chatml"), Ok(CHATML));
        assert_eq!(choose(Some(CHATML), Some("x".into())).unwrap().source(), CHATML);
        assert_eq!(choose(None, Some("x".into())).unwrap().source(), "x");
        assert_eq!(choose(None, Some("{% for m in messages %}".into())).unwrap().source(), CHATML);
        assert!(choose(Some("{% for m in messages %}"), None).err().unwrap().starts_with("--chat-template: the chat template does not parse"));
        assert!(check("{% for m in messages %}").is_err());
        assert!(from_option("gemma").unwrap_err().contains("Jinja source or chatml"));
        assert!(from_option("{% for m in messages %}").unwrap_err().contains("does not parse"));
        assert!(check(CHATML).is_ok());
    }

    /// The tools of a forced tool call reach the template as OpenAI's list: Qwen2.5-Coder's own
    /// template lists each function (name, description, parameters) in its system prompt.
    #[test]
    fn tools_reach_the_template() {
        let Some(path) = lse_testdata::model("qwen25coder") else { return };
        let file = lse_gguf::GgufFile::open(&path).unwrap();
        let t = file.get_str("tokenizer.chat_template").expect("Qwen2.5-Coder has a chat template").to_string();
        let msgs = serde_json::json!([{"role": "user", "content": "Weather in Paris?"}]);
        let tools = serde_json::json!([{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
        let with = render(&t, &msgs, Some(&tools), "", "", true).unwrap();
        let without = render(&t, &msgs, None, "", "", true).unwrap();
        // the tool as transformers writes it (`json.dumps`: the request's key order, ", " and ": ")
        let line = r#"{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}"#;
        for part in ["<tools>", line] {
            assert!(with.contains(part) && !without.contains(part), "{part} in:\n{with}");
        }
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19723), (2024, 1, 1));
    }
}
