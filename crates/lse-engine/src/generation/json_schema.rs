//! JSON schema mode (OpenAI's `response_format` `json_schema`) and JSON mode (`json_object`: the
//! schema [`Schema::any_object`]): whether a text is the start of a JSON value that follows a
//! schema, byte by byte. The schema is compiled once into nodes; a run of the machine is a stack
//! of frames (one per open object, array, string, number or literal), and the state is the runs
//! still alive: one, until `anyOf` alternatives that can start alike are both possible, when each
//! goes on in a run of its own until the text tells them apart. Objects
//! are written with every property of the schema, in the schema's order (an instance that names
//! every property is valid whatever `required` says), as OpenAI's strict mode writes them.
//! Supported: `type` object (`properties`, `required`; without `properties` any keys, their values
//! `additionalProperties`'s schema or any), array (`items`,
//! `minItems`, `maxItems`), string (`minLength`, `maxLength`, in characters; or a `format`: date,
//! time, date-time, uuid, as llama.cpp's grammar writes them), integer (`minimum`,
//! `maximum`, `exclusiveMinimum`, `exclusiveMaximum`), number (`minimum` 0), boolean, null, a list of
//! types (one alternative each); `enum` and `const`; `anyOf` / `oneOf` (pydantic's unions and `Optional[X]`, or one
//! of several tool calls); `$ref` to `#/$defs/..` or
//! `#/definitions/..` (what pydantic writes for nested models, recursion included); a schema with
//! no type, enum, const or alternatives (`{}`, pydantic's `Any`) is any JSON value; `title`,
//! `description`, `default`, `examples` and a `format` on another type than string are ignored.
//! Anything else is refused when compiled, rather than sampled unchecked.

use super::string_format::{self, Alternatives};
use serde_json::Value;

/// Longest run of whitespace between tokens of the grammar (llama.cpp's JSON grammar bounds it
/// too, so a model cannot loop on blanks).
const MAX_BLANKS: u8 = 32;
/// Longest number, in bytes.
const MAX_NUMBER: u8 = 32;
/// Most objects and arrays open at once.
const MAX_OPEN: usize = 128;

/// Most runs alive at once (alternatives that start alike); past it the latest are dropped, so a
/// schema ambiguous that long keeps only its first alternatives.
const MAX_RUNS: usize = 16;
/// Most values one `enum` may list (one bit of a `u64` each).
const MAX_LITERALS: usize = 64;
/// Deepest nesting of the schema's objects and arrays.
const MAX_DEPTH: usize = 64;

/// Where a number is: after `-`, a leading `0`, integer digits, `.`, fraction digits, `e`, the
/// exponent's sign, exponent digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

impl Num {
    /// The state after a number's first byte `b`, if a number starts with it.
    fn first(b: u8) -> Option<Num> {
        match b {
            b'-' => Some(Num::Minus),
            b'0' => Some(Num::Zero),
            b'1'..=b'9' => Some(Num::Int),
            _ => None,
        }
    }

    /// Whether a number may end here.
    fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::Exp)
    }

    /// The state after byte `b`, if `b` continues the number.
    fn next(self, b: u8) -> Option<Num> {
        let digit = b.is_ascii_digit();
        match (self, b) {
            (Num::Minus, b'0') => Some(Num::Zero),
            (Num::Minus, _) if digit => Some(Num::Int),
            (Num::Int, _) if digit => Some(Num::Int),
            (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
            (Num::Dot | Num::Frac, _) if digit => Some(Num::Frac),
            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::E),
            (Num::E, b'+' | b'-') => Some(Num::ESign),
            (Num::E | Num::ESign | Num::Exp, _) if digit => Some(Num::Exp),
            _ => None,
        }
    }
}

#[derive(Debug)]
enum Node {
    /// Each property's key as JSON text (quoted, escaped) and its node.
    Object(Vec<(Vec<u8>, usize)>),
    /// Items' node, fewest and most items.
    Array(usize, usize, usize),
    /// Fewest and most characters.
    String(usize, usize),
    /// A string of a `format`: its quoted alternatives.
    Format(Alternatives),
    /// `low`: the lower bound the first byte keeps (pydantic's `ge=0`); `range`: an integer's bounds.
    Number { integer: bool, low: Low, range: Option<IntRange> },
    /// The values allowed, as compact JSON texts (enum, const, boolean, null).
    Literals(Vec<Vec<u8>>),
    /// Alternatives, told apart by their first byte.
    AnyOf(Vec<usize>),
    /// An object with any keys (a string node) whose values follow one node (JSON mode).
    Map { keys: usize, values: usize },
}

impl Node {
    /// Of a literal or format node: its alternatives among `cand` (bits) whose byte `pos` can be `b`.
    fn matching(&self, cand: u128, pos: usize, b: u8) -> u128 {
        let fits = |i: usize| match self {
            Node::Literals(lits) => lits[i].get(pos) == Some(&b),
            Node::Format(alts) => alts[i].get(pos).is_some_and(|c| c.has(b)),
            _ => unreachable!("only literals and formats are matched byte by byte"),
        };
        (0..self.alternatives()).filter(|&i| cand >> i & 1 == 1 && fits(i)).fold(0, |m, i| m | 1 << i)
    }

    /// Whether one of its alternatives among `cand` is `pos` bytes long.
    fn ends(&self, cand: u128, pos: usize) -> bool {
        let len = |i: usize| match self {
            Node::Literals(lits) => lits[i].len(),
            Node::Format(alts) => alts[i].len(),
            _ => unreachable!("only literals and formats are matched byte by byte"),
        };
        (0..self.alternatives()).any(|i| cand >> i & 1 == 1 && len(i) == pos)
    }

    fn alternatives(&self) -> usize {
        match self {
            Node::Literals(lits) => lits.len(),
            Node::Format(alts) => alts.len(),
            _ => 0,
        }
    }

    /// The bytes a value of this node can start with (of `nodes`, for alternatives, which are
    /// never alternatives themselves once compiled: see `Schema::flatten_alternatives`).
    fn first_bytes(&self, nodes: &[Node]) -> [bool; 256] {
        let mut set = [false; 256];
        match self {
            Node::Object(_) | Node::Map { .. } => set[b'{' as usize] = true,
            Node::Array(..) => set[b'[' as usize] = true,
            Node::String(..) | Node::Format(_) => set[b'"' as usize] = true,
            Node::Number { low, range, .. } => {
                for &b in low.first() {
                    set[b as usize] = range.is_none_or(|r| r.reachable(b == b'-', (b != b'-').then(|| u128::from(b - b'0')), b > b'0'));
                }
            }
            Node::Literals(lits) => lits.iter().filter_map(|l| l.first()).for_each(|&b| set[b as usize] = true),
            Node::AnyOf(alts) => {
                for &a in alts {
                    let sub = nodes[a].first_bytes(nodes);
                    (0..256).for_each(|b| set[b] |= sub[b]);
                }
            }
        }
        set
    }
}

/// A number's lower bound, as far as its first byte decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Low {
    None,
    /// At least 0: no minus sign.
    Zero,
}

impl Low {
    /// The bytes a number under this bound can start with.
    fn first(self) -> &'static [u8] {
        match self {
            Low::None => b"-0123456789",
            Low::Zero => b"0123456789",
        }
    }
}

/// An integer's inclusive bounds (`None`: unbounded on that side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IntRange {
    lo: Option<i128>,
    hi: Option<i128>,
}

impl IntRange {
    /// From a schema's `minimum` / `exclusiveMinimum` / `maximum` / `exclusiveMaximum`.
    fn of(min: Option<f64>, xmin: Option<f64>, max: Option<f64>, xmax: Option<f64>) -> IntRange {
        // past ±1e33 a bound excludes nothing a number of MAX_NUMBER bytes can write
        let clamp = |v: f64| v.clamp(-1e33, 1e33);
        let lo = [min.map(|v| clamp(v).ceil()), xmin.map(|v| clamp(v).floor() + 1.0)].into_iter().flatten().reduce(f64::max);
        let hi = [max.map(|v| clamp(v).floor()), xmax.map(|v| clamp(v).ceil() - 1.0)].into_iter().flatten().reduce(f64::min);
        IntRange { lo: lo.map(|v| v as i128), hi: hi.map(|v| v as i128) }
    }

    fn holds(self, v: i128) -> bool {
        self.lo.is_none_or(|lo| v >= lo) && self.hi.is_none_or(|hi| v <= hi)
    }

    /// Whether an integer of the range starts with the text so far: a minus sign (`neg`), then
    /// the digits' value `mag` (`None`: no digit yet), to which digits may be added when `more`.
    fn reachable(self, neg: bool, mag: Option<u128>, more: bool) -> bool {
        let Some(mag) = mag else {
            // "-" alone: "-0" or any negative integer
            return self.lo.is_none_or(|lo| lo <= 0);
        };
        // with k more digits the magnitude is in [mag·10^k, mag·10^k + 10^k − 1]
        let (mut a, mut b) = (mag as i128, mag as i128);
        for _ in 0..=MAX_NUMBER {
            let (v0, v1) = if neg { (-b, -a) } else { (a, b) };
            if self.lo.is_none_or(|lo| v1 >= lo) && self.hi.is_none_or(|hi| v0 <= hi) {
                return true;
            }
            // past every clamped bound, more digits only go further
            if !more || a > 10i128.pow(33) {
                return false;
            }
            (a, b) = (a * 10, b * 10 + 9);
        }
        false
    }
}

/// A compiled schema.
#[derive(Debug)]
pub struct Schema {
    nodes: Vec<Node>,
    root: usize,
    /// Per node, the bytes its values can start with.
    first: Vec<[bool; 256]>,
}

/// What compiling needs besides the nodes: the schema's definitions and the nodes of those
/// compiled so far (a `$ref` to one being compiled is its node already: recursion).
struct Defs<'a> {
    /// The root's `$defs` and `definitions`.
    src: &'a Value,
    done: std::collections::HashMap<String, usize>,
    /// The `$ref`s being followed whose definitions are themselves a `$ref` (an alias names no
    /// node of its own: a chain of them back to one of these names no value at all).
    aliases: Vec<String>,
    /// The node of any JSON value, once one is needed.
    any: Option<usize>,
}

impl Schema {
    /// JSON mode: any one JSON object (RFC 8259), its values any JSON values.
    pub fn any_object() -> Schema {
        let mut s = Schema { nodes: Vec::new(), root: 0, first: Vec::new() };
        s.root = s.any_value().1;
        s.first_bytes();
        s
    }

    /// Adds the nodes of any JSON value; returns (the value's node, the any-object node).
    fn any_value(&mut self) -> (usize, usize) {
        let b = self.nodes.len();
        self.nodes.extend([
            Node::Map { keys: b + 3, values: b + 1 },
            Node::AnyOf(vec![b, b + 2, b + 3, b + 4, b + 5]),
            Node::Array(b + 1, 0, usize::MAX),
            Node::String(0, usize::MAX),
            Node::Number { integer: false, low: Low::None, range: None },
            Node::Literals(vec![b"true".to_vec(), b"false".to_vec(), b"null".to_vec()]),
        ]);
        (b + 1, b)
    }

    /// Replaces every `anyOf`'s alternatives by the distinct nodes other than `anyOf` they reach
    /// through nested ones (a value matches the same nodes, and a byte forks each once); an
    /// `anyOf` that reaches itself before any byte of a value (left recursion) is refused.
    fn flatten_alternatives(&mut self) -> Result<(), String> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Flat,
        }
        fn visit(nodes: &mut [Node], mark: &mut [Mark], n: usize) -> Result<(), String> {
            match mark[n] {
                Mark::Flat => return Ok(()),
                Mark::Open => return Err("json_schema: an anyOf leads back to itself before a value starts (left recursion)".into()),
                Mark::New => {}
            }
            let Node::AnyOf(alts) = &nodes[n] else {
                mark[n] = Mark::Flat;
                return Ok(());
            };
            mark[n] = Mark::Open;
            let mut leaves: Vec<usize> = Vec::new();
            for a in alts.clone() {
                visit(nodes, mark, a)?;
                let reach = match &nodes[a] {
                    Node::AnyOf(sub) => sub.clone(),
                    _ => vec![a],
                };
                for l in reach {
                    if !leaves.contains(&l) {
                        leaves.push(l);
                    }
                }
            }
            nodes[n] = Node::AnyOf(leaves);
            mark[n] = Mark::Flat;
            Ok(())
        }
        let mut mark = vec![Mark::New; self.nodes.len()];
        (0..self.nodes.len()).try_for_each(|n| visit(&mut self.nodes, &mut mark, n))
    }

    fn first_bytes(&mut self) {
        self.first = self.nodes.iter().map(|n| n.first_bytes(&self.nodes)).collect();
    }

    /// Compiles `schema`; one line naming the first keyword or value that is not supported.
    pub fn compile(schema: &Value) -> Result<Schema, String> {
        let mut s = Schema { nodes: Vec::new(), root: 0, first: Vec::new() };
        let mut defs = Defs { src: schema, done: Default::default(), aliases: Vec::new(), any: None };
        s.root = s.node(schema, "the schema", 0, &mut defs)?;
        s.flatten_alternatives()?;
        s.first_bytes();
        // an object, or alternatives that are all objects (one of several tool calls)
        if (0..256).any(|b| s.first[s.root][b] != (b == b'{' as usize)) {
            return Err("json_schema: the schema must describe an object (\"type\": \"object\")".into());
        }
        Ok(s)
    }

    fn node(&mut self, v: &Value, at: &str, depth: usize, defs: &mut Defs) -> Result<usize, String> {
        let o = v.as_object().ok_or_else(|| format!("json_schema: {at} must be a JSON object"))?;
        if depth > MAX_DEPTH {
            // `at` names every level above: its start says where
            let mut shown: String = at.chars().take(80).collect();
            if shown.len() < at.len() {
                shown.push('…');
            }
            return Err(format!("json_schema: {shown} nests deeper than {MAX_DEPTH}"));
        }
        const KNOWN: [&str; 27] = [
            "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength", "maxLength", "enum",
            "const", "anyOf", "oneOf", "$ref", "$defs", "definitions", "$schema", "$id", "title", "description", "default", "examples",
            "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "format",
        ];
        if let Some(k) = o.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("json_schema: \"{k}\" (in {at}) is not supported"));
        }
        if let Some(r) = o.get("$ref") {
            let r = r.as_str().unwrap_or_default();
            let (key, name) = ["$defs", "definitions"]
                .into_iter()
                .find_map(|k| Some((k, r.strip_prefix("#/")?.strip_prefix(k)?.strip_prefix('/')?)))
                .ok_or_else(|| format!("json_schema: $ref \"{r}\" (in {at}) is not a local definition"))?;
            if let Some(&id) = defs.done.get(r) {
                return Ok(id);
            }
            let def = defs.src.get(key).and_then(|d| d.get(name)).ok_or_else(|| format!("json_schema: $ref \"{r}\" (in {at}) names no definition"))?;
            if def.get("$ref").is_some() {
                if defs.aliases.iter().any(|a| a == r) {
                    return Err(format!("json_schema: $ref \"{r}\" (in {at}) leads back to itself through $refs alone"));
                }
                defs.aliases.push(r.to_string());
                let id = self.node(def, &format!("definition \"{name}\""), depth + 1, defs)?;
                defs.aliases.pop();
                defs.done.insert(r.to_string(), id);
                return Ok(id);
            }
            // the definition's node is the next one: known before its body, so it may refer to itself
            defs.done.insert(r.to_string(), self.nodes.len());
            let id = self.node(def, &format!("definition \"{name}\""), depth + 1, defs)?;
            defs.done.insert(r.to_string(), id); // another id when the definition is itself a $ref
            return Ok(id);
        }
        let id = self.nodes.len();
        self.nodes.push(Node::Literals(Vec::new())); // a placeholder until the children are in
        let count = |k: &str, default: usize| match o.get(k) {
            None => Ok(default),
            Some(n) => n.as_u64().map(|n| n as usize).ok_or_else(|| format!("json_schema: \"{k}\" in {at} must be a count")),
        };
        let bounds = |lo: &str, hi: &str| -> Result<(usize, usize), String> {
            let (min, max) = (count(lo, 0)?, count(hi, usize::MAX)?);
            if min > max {
                return Err(format!("json_schema: {at} has {lo} above {hi}"));
            }
            Ok((min, max))
        };
        let literals = |vals: &[Value]| -> Result<Node, String> {
            if vals.is_empty() || vals.len() > MAX_LITERALS {
                return Err(format!("json_schema: {at} must allow 1 to {MAX_LITERALS} values"));
            }
            Ok(Node::Literals(vals.iter().map(|x| serde_json::to_vec(x).expect("a JSON value serializes")).collect()))
        };
        let node = if let Some(alts) = o.get("anyOf").or_else(|| o.get("oneOf")) {
            let alts = alts.as_array().filter(|a| !a.is_empty()).ok_or_else(|| format!("json_schema: \"anyOf\" in {at} must be a non-empty array"))?;
            let ids = alts.iter().enumerate().map(|(i, a)| self.node(a, &format!("alternative {i} of {at}"), depth + 1, defs)).collect::<Result<_, _>>()?;
            Node::AnyOf(ids)
        } else if let Some(Value::Array(types)) = o.get("type") {
            // a list of types ("string" or "null", OpenAI's strict mode): one alternative each
            if types.is_empty() {
                return Err(format!("json_schema: \"type\" in {at} is an empty list"));
            }
            let one = |t: &Value| Value::Object(o.iter().map(|(k, v)| (k.clone(), if k == "type" { t.clone() } else { v.clone() })).collect());
            let ids = types.iter().map(|t| self.node(&one(t), at, depth + 1, defs)).collect::<Result<_, _>>()?;
            Node::AnyOf(ids)
        } else if let Some(e) = o.get("enum") {
            literals(e.as_array().ok_or_else(|| format!("json_schema: \"enum\" in {at} must be an array"))?)?
        } else if let Some(c) = o.get("const") {
            literals(std::slice::from_ref(c))?
        } else {
            let mut any = |s: &mut Schema| *defs.any.get_or_insert_with(|| s.any_value().0);
            match o.get("type").and_then(Value::as_str) {
                // no properties: any keys (JSON schema's default), their values any or
                // `additionalProperties`'s (pydantic's dict[str, X]); `false` leaves only {}
                Some("object") if o.get("properties").is_none() && o.get("additionalProperties") != Some(&Value::Bool(false)) => {
                    let values = match o.get("additionalProperties") {
                        None | Some(Value::Bool(true)) => any(self),
                        Some(v) => self.node(v, &format!("the values of {at}"), depth + 1, defs)?,
                    };
                    self.nodes.push(Node::String(0, usize::MAX));
                    Node::Map { keys: self.nodes.len() - 1, values }
                }
                Some("object") => {
                    let mut props = Vec::new();
                    if let Some(p) = o.get("properties") {
                        let p = p.as_object().ok_or_else(|| format!("json_schema: \"properties\" in {at} must be an object"))?;
                        for (name, sub) in p {
                            let child = self.node(sub, &format!("property \"{name}\""), depth + 1, defs)?;
                            props.push((serde_json::to_vec(name).expect("a string serializes"), child));
                        }
                    }
                    let names: Vec<&String> = o.get("properties").and_then(Value::as_object).map(|p| p.keys().collect()).unwrap_or_default();
                    for r in o.get("required").and_then(Value::as_array).into_iter().flatten() {
                        if !r.as_str().is_some_and(|r| names.iter().any(|n| n.as_str() == r)) {
                            return Err(format!("json_schema: required {r} is not a property of {at}"));
                        }
                    }
                    Node::Object(props)
                }
                Some("array") => {
                    let items = o.get("items").ok_or_else(|| format!("json_schema: the array {at} needs \"items\""))?;
                    let (min, max) = bounds("minItems", "maxItems")?;
                    Node::Array(self.node(items, &format!("the items of {at}"), depth + 1, defs)?, min, max)
                }
                Some("string") => match o.get("format") {
                    None => {
                        let (min, max) = bounds("minLength", "maxLength")?;
                        Node::String(min, max)
                    }
                    Some(f) => {
                        let alts = f.as_str().and_then(string_format::compile).ok_or_else(|| {
                            format!("json_schema: the format {f} of {at} is not supported ({})", string_format::FORMATS.join(", "))
                        })?;
                        if o.contains_key("minLength") || o.contains_key("maxLength") {
                            return Err(format!("json_schema: {at} has a format and a length bound (not supported together)"));
                        }
                        Node::Format(alts)
                    }
                },
                Some(t @ ("integer" | "number")) => {
                    let integer = t == "integer";
                    let keys = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"];
                    let mut bound = [None; 4];
                    for (b, k) in bound.iter_mut().zip(keys) {
                        if let Some(v) = o.get(k) {
                            *b = Some(v.as_f64().ok_or_else(|| format!("json_schema: \"{k}\" in {at} must be a number"))?);
                        }
                    }
                    let [min, xmin, max, xmax] = bound;
                    if integer {
                        let range = (bound != [None; 4]).then(|| IntRange::of(min, xmin, max, xmax));
                        if range.is_some_and(|r| matches!((r.lo, r.hi), (Some(lo), Some(hi)) if lo > hi)) {
                            return Err(format!("json_schema: the bounds of {at} leave no integer"));
                        }
                        Node::Number { integer, low: Low::None, range }
                    } else if bound == [None; 4] || bound == [Some(0.0), None, None, None] {
                        Node::Number { integer, low: if min.is_some() { Low::Zero } else { Low::None }, range: None }
                    } else {
                        return Err(format!("json_schema: the bounds of {at} are not supported (for numbers only minimum 0; integers take any)"));
                    }
                }
                Some("boolean") => Node::Literals(vec![b"true".to_vec(), b"false".to_vec()]),
                Some("null") => Node::Literals(vec![b"null".to_vec()]),
                // no type, enum, const or alternatives: any JSON value (pydantic's Any)
                None if o.get("type").is_none() => Node::AnyOf(vec![any(self)]),
                _ => return Err(format!("json_schema: {at} needs a \"type\" (object, array, string, integer, number, boolean or null), an \"enum\" or a \"const\"")),
            }
        };
        self.nodes[id] = node;
        Ok(id)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ObjAt {
    /// After `{`.
    Open,
    /// Matching property `prop`'s key; the byte index in it.
    Key(usize),
    Colon,
    Value,
    /// After a property's value.
    After,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MapAt {
    /// After `{`: a key or `}`.
    Open,
    /// After `,`: a key.
    Key,
    /// Inside a key.
    InKey,
    Colon,
    Value,
    After,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArrAt {
    Open,
    Value,
    After,
}

#[derive(Clone, Copy, Debug)]
enum Frame {
    Object { node: usize, prop: usize, at: ObjAt },
    /// `count`: items so far.
    Array { node: usize, at: ArrAt, count: usize },
    Map { node: usize, at: MapAt },
    /// `esc`: 0 in the text, 1 after `\`, 2..=5 hex digits of `\u` to come plus one; `chars`
    /// so far (an escape is one).
    Str { node: usize, esc: u8, chars: usize },
    /// An integer's sign and digits so far (`mag`) are kept for its node's range.
    Num { node: usize, integer: bool, at: Num, len: u8, neg: bool, mag: u128 },
    /// The literals (or a format's alternatives) still matching, as bits, and how many bytes matched.
    Lit { node: usize, cand: u128, pos: usize },
}

/// How far a text has come as a value of a [`Schema`]: the machine's runs still alive.
#[derive(Clone, Debug)]
pub struct SchemaState {
    runs: Vec<Run>,
    /// Runs forked while a byte is taken (kept for its memory).
    forks: Vec<Run>,
}

impl Default for SchemaState {
    fn default() -> SchemaState {
        SchemaState { runs: vec![Run::default()], forks: Vec::new() }
    }
}

/// One run of the machine: its frames, whether the root value is closed, and the length of the
/// current whitespace run.
#[derive(Debug, Default)]
struct Run {
    stack: Vec<Frame>,
    done: bool,
    blanks: u8,
}

impl Clone for Run {
    fn clone(&self) -> Run {
        Run { stack: self.stack.clone(), done: self.done, blanks: self.blanks }
    }

    // reuses the stack's memory (a trial copy per token tried)
    fn clone_from(&mut self, o: &Run) {
        self.stack.clone_from(&o.stack);
        (self.done, self.blanks) = (o.done, o.blanks);
    }
}

fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl SchemaState {
    /// Whether the root value is closed (only whitespace may follow).
    pub fn is_complete(&self) -> bool {
        self.runs.iter().any(|r| r.done)
    }

    /// The most characters a run inside a string (past any escape) may still add to it, over
    /// the runs there; `None` when no run is. Any token of
    /// [`lse_tokenizer::Tokenizer::json_string_chars`] of at most that many characters may follow.
    pub fn open_string_room(&self, s: &Schema) -> Option<usize> {
        self.runs
            .iter()
            .filter_map(|r| match r.stack.last() {
                Some(&Frame::Str { node, esc: 0, chars }) => match s.nodes[node] {
                    Node::String(_, max) => Some(max.saturating_sub(chars)),
                    _ => None,
                },
                _ => None,
            })
            .max()
    }

    /// Whether the text followed by `bytes` still starts a value of `s`; `scratch` holds the
    /// trial state (its memory is reused from call to call).
    pub fn accepts(&self, s: &Schema, bytes: &[u8], scratch: &mut SchemaState) -> bool {
        scratch.runs.clone_from(&self.runs);
        scratch.push_all(s, bytes)
    }

    /// Feeds `bytes`; false (and the state is then meaningless) if one breaks the value.
    pub fn push_all(&mut self, s: &Schema, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.push(s, b))
    }

    /// Every run takes `b`; the runs it breaks end, the alternatives it opens join.
    fn push(&mut self, s: &Schema, b: u8) -> bool {
        let (runs, forks) = (&mut self.runs, &mut self.forks);
        runs.retain_mut(|r| r.push(s, b, forks));
        if !forks.is_empty() {
            runs.append(forks);
            runs.truncate(MAX_RUNS);
        }
        !runs.is_empty()
    }
}

impl Run {
    fn blank_run(&mut self) -> bool {
        self.blanks += 1;
        self.blanks <= MAX_BLANKS
    }

    fn set(&mut self, f: Frame) -> bool {
        *self.stack.last_mut().expect("a frame") = f;
        true
    }

    /// Pops the finished value; its container moves past it.
    fn value_done(&mut self) {
        self.stack.pop();
        match self.stack.last_mut() {
            Some(Frame::Object { at, .. }) => *at = ObjAt::After,
            Some(Frame::Array { at, count, .. }) => {
                *at = ArrAt::After;
                *count += 1;
            }
            Some(Frame::Map { at, .. }) => *at = if *at == MapAt::InKey { MapAt::Colon } else { MapAt::After },
            Some(_) => unreachable!("only objects and arrays hold values"),
            None => self.done = true,
        }
    }

    /// The first byte `b` of a value of node `node`; alternatives past the first that `b` may
    /// start go on as `forks`.
    fn start(&mut self, s: &Schema, node: usize, b: u8, forks: &mut Vec<Run>) -> bool {
        if !s.first[node][b as usize] {
            return false;
        }
        self.blanks = 0;
        let f = match (&s.nodes[node], b) {
            (Node::AnyOf(alts), _) => {
                let mut can = alts.iter().copied().filter(|&a| s.first[a][b as usize]);
                let Some(first) = can.next() else { return false };
                for a in can {
                    let mut other = self.clone();
                    if other.start(s, a, b, forks) {
                        forks.push(other);
                    }
                }
                return self.start(s, first, b, forks);
            }
            (Node::Object(_), b'{') => Frame::Object { node, prop: 0, at: ObjAt::Open },
            (Node::Array(..), b'[') => Frame::Array { node, at: ArrAt::Open, count: 0 },
            (Node::Map { .. }, b'{') => Frame::Map { node, at: MapAt::Open },
            (Node::String(..), b'"') => Frame::Str { node, esc: 0, chars: 0 },
            (Node::Number { integer, .. }, _) => match Num::first(b) {
                Some(at) => Frame::Num { node, integer: *integer, at, len: 1, neg: b == b'-', mag: u128::from(b.saturating_sub(b'0')) },
                None => return false,
            },
            (n @ (Node::Literals(_) | Node::Format(_)), _) => {
                let cand = n.matching(u128::MAX, 0, b);
                if cand == 0 {
                    return false;
                }
                Frame::Lit { node, cand, pos: 1 }
            }
            _ => return false,
        };
        // only objects and arrays are below a new frame
        if matches!(f, Frame::Object { .. } | Frame::Array { .. } | Frame::Map { .. }) && self.stack.len() >= MAX_OPEN {
            return false;
        }
        self.stack.push(f);
        true
    }

    fn push(&mut self, s: &Schema, b: u8, forks: &mut Vec<Run>) -> bool {
        let Some(&top) = self.stack.last() else {
            if blank(b) {
                return self.blank_run();
            }
            return !self.done && self.start(s, s.root, b, forks);
        };
        match top {
            Frame::Str { node, esc, chars } => {
                let Node::String(min, max) = s.nodes[node] else { unreachable!("a string frame is on a string node") };
                // a byte that starts a character (not a UTF-8 continuation byte) counts one
                let more = chars + usize::from(b & 0xC0 != 0x80);
                let to = |esc| Frame::Str { node, esc, chars };
                match (esc, b) {
                    (0, b'"') => chars >= min && {
                        self.value_done();
                        true
                    },
                    (0, 0..0x20) => false,
                    (0, _) if more > max => false,
                    (0, b'\\') => self.set(Frame::Str { node, esc: 1, chars: more }),
                    (0, _) => self.set(Frame::Str { node, esc: 0, chars: more }),
                    (1, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.set(to(0)),
                    (1, b'u') => self.set(to(5)),
                    (_, _) if esc >= 2 && b.is_ascii_hexdigit() => self.set(to(if esc == 2 { 0 } else { esc - 1 })),
                    _ => false,
                }
            }
            Frame::Num { node, integer, at, len, neg, mag } => {
                let Node::Number { range, .. } = s.nodes[node] else { unreachable!("a number frame is on a number node") };
                match at.next(b) {
                    Some(n) if !(integer && matches!(n, Num::Dot | Num::E)) && len < MAX_NUMBER => {
                        let mag = if n == Num::Int { mag * 10 + u128::from(b - b'0') } else { mag };
                        range.is_none_or(|r| r.reachable(neg, Some(mag), n == Num::Int)) && self.set(Frame::Num { node, integer, at: n, len: len + 1, neg, mag })
                    }
                    None if at.complete() && range.is_none_or(|r| r.holds(if neg { -(mag as i128) } else { mag as i128 })) => {
                        self.value_done();
                        self.push(s, b, forks)
                    }
                    _ => false,
                }
            }
            Frame::Lit { node, cand, pos } => {
                let next = s.nodes[node].matching(cand, pos, b);
                if next != 0 {
                    return self.set(Frame::Lit { node, cand: next, pos: pos + 1 });
                }
                if !s.nodes[node].ends(cand, pos) {
                    return false;
                }
                self.value_done();
                self.push(s, b, forks)
            }
            Frame::Object { node, prop, at } => {
                let Node::Object(props) = &s.nodes[node] else { unreachable!("an object frame is on an object node") };
                match at {
                    ObjAt::Key(0) | ObjAt::Open | ObjAt::Colon | ObjAt::Value | ObjAt::After if blank(b) => self.blank_run(),
                    ObjAt::Open if props.is_empty() => b == b'}' && {
                        self.value_done();
                        true
                    },
                    ObjAt::Open | ObjAt::Key(_) => {
                        let i = if let ObjAt::Key(i) = at { i } else { 0 };
                        let key = &props[prop].0;
                        self.blanks = 0;
                        b == key[i] && self.set(Frame::Object { node, prop, at: if i + 1 == key.len() { ObjAt::Colon } else { ObjAt::Key(i + 1) } })
                    }
                    ObjAt::Colon => {
                        self.blanks = 0;
                        b == b':' && self.set(Frame::Object { node, prop, at: ObjAt::Value })
                    }
                    ObjAt::Value => self.start(s, props[prop].1, b, forks),
                    ObjAt::After => {
                        self.blanks = 0;
                        if prop + 1 < props.len() {
                            b == b',' && self.set(Frame::Object { node, prop: prop + 1, at: ObjAt::Key(0) })
                        } else {
                            b == b'}' && {
                                self.value_done();
                                true
                            }
                        }
                    }
                }
            }
            Frame::Map { node, at } => {
                let Node::Map { keys, values } = s.nodes[node] else { unreachable!("a map frame is on a map node") };
                if blank(b) {
                    return self.blank_run();
                }
                self.blanks = 0;
                match (at, b) {
                    (MapAt::Open, b'}') | (MapAt::After, b'}') => {
                        self.value_done();
                        true
                    }
                    (MapAt::Open | MapAt::Key, b'"') => self.set(Frame::Map { node, at: MapAt::InKey }) && self.start(s, keys, b, forks),
                    (MapAt::Colon, b':') => self.set(Frame::Map { node, at: MapAt::Value }),
                    (MapAt::Value, _) => self.start(s, values, b, forks),
                    (MapAt::After, b',') => self.set(Frame::Map { node, at: MapAt::Key }),
                    _ => false,
                }
            }
            Frame::Array { node, at, count } => {
                let Node::Array(items, min, max) = s.nodes[node] else { unreachable!("an array frame is on an array node") };
                if blank(b) {
                    return self.blank_run();
                }
                self.blanks = 0;
                match (at, b) {
                    (ArrAt::Open | ArrAt::After, b']') if count >= min => {
                        self.value_done();
                        true
                    }
                    (ArrAt::Open, _) if max > 0 => self.start(s, items, b, forks),
                    (ArrAt::Value, _) => self.start(s, items, b, forks),
                    (ArrAt::After, b',') if count < max => self.set(Frame::Array { node, at: ArrAt::Value, count }),
                    _ => false,
                }
            }
        }
    }
}


#[cfg(test)]
mod tests {
    use super::{Schema, SchemaState};
    use serde_json::json;

    fn cat() -> Schema {
        Schema::compile(&json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "the cat's name"},
                "age": {"type": "integer"},
                "weight": {"type": "number"},
                "indoor": {"type": "boolean"},
                "color": {"enum": ["black", "white", "tabby", 7, null]},
                "toys": {"type": "array", "items": {"type": "object", "properties": {"kind": {"const": "ball"}, "n": {"type": "integer"}}}},
                "vet": {"type": "null"},
                "nested": {"type": "object", "properties": {}}
            },
            "required": ["name", "age"]
        }))
        .unwrap()
    }

    fn fed(s: &Schema, text: impl AsRef<[u8]>) -> Option<SchemaState> {
        let mut st = SchemaState::default();
        st.push_all(s, text.as_ref()).then_some(st)
    }

    #[test]
    fn accepts_every_prefix_of_instances_in_the_schema_order() {
        let s = cat();
        let compact = r#"{"name":"Tom \"the\" cat","age":3,"weight":4.25e0,"indoor":true,"color":"tabby","toys":[{"kind":"ball","n":2},{"kind":"ball","n":-1}],"vet":null,"nested":{}}"#;
        let value: serde_json::Value = serde_json::from_str(compact).unwrap();
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        for text in [compact, pretty.as_str(), &compact.replace("\"tabby\"", "7").replace("[{", "[ {")] {
            let b = text.as_bytes();
            for i in 0..b.len() {
                let st = fed(&s, &b[..i]).unwrap_or_else(|| panic!("prefix {:?} refused", String::from_utf8_lossy(&b[..i])));
                assert!(!st.is_complete() || b[i..].iter().all(u8::is_ascii_whitespace));
            }
            assert!(fed(&s, text).unwrap().is_complete(), "{text}");
        }
        // an empty array and a literal that is a prefix of nothing else
        let short = r#"{"name":"","age":0,"weight":-0.5,"indoor":false,"color":null,"toys":[],"vet":null,"nested":{ }}"#;
        assert!(fed(&s, short).unwrap().is_complete());
    }

    #[test]
    fn refuses_what_leaves_the_schema() {
        let s = cat();
        let ok = r#"{"name":"a","age":1,"weight":1,"indoor":true,"color":"black","toys":[],"vet":null,"nested":{}}"#;
        assert!(fed(&s, ok).unwrap().is_complete());
        for (from, to) in [
            (r#""name":"a","age":1"#, r#""age":1,"name":"a""#), // another order
            (r#""age":1"#, r#""age":1.5"#),                    // an integer with a fraction
            (r#""age":1"#, r#""age":"1""#),                    // a string for an integer
            (r#""indoor":true"#, r#""indoor":1"#),
            (r#""color":"black""#, r#""color":"blue""#),       // not in the enum
            (r#""color":"black""#, r#""color":"blackish""#),
            (r#""toys":[]"#, r#""toys":[1]"#),                 // items are objects
            (r#""toys":[]"#, r#""toys":[{"kind":"bat","n":1}]"#), // const
            (r#""vet":null"#, r#""vet":nul"#),
            (r#""nested":{}"#, r#""nested":{"x":1}"#),         // no such property
            (r#","nested":{}"#, ""),                            // a property left out
            (r#""name":"a""#, r#""name":"a	b""#),             // a raw tab in a string
        ] {
            let bad = ok.replacen(from, to, 1);
            assert_ne!(bad, ok);
            assert!(fed(&s, &bad).is_none(), "{bad} accepted");
        }
        assert!(fed(&s, format!("{ok} x")).is_none());
        assert!(fed(&s, "[").is_none());
    }

    #[test]
    fn array_bounds_hold() {
        let s = Schema::compile(&json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2}}})).unwrap();
        for (text, complete) in [(r#"{"a":[1]}"#, true), (r#"{"a":[1, 22 ]}"#, true), (r#"{"a":[]}"#, false), (r#"{"a":[1,2,3]}"#, false)] {
            assert_eq!(fed(&s, text).is_some_and(|st| st.is_complete()), complete, "{text}");
        }
        assert!(fed(&s, r#"{"a":[1,2"#).is_some() && fed(&s, r#"{"a":[1,2,"#).is_none());
        let none = Schema::compile(&json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "null"}, "maxItems": 0}}})).unwrap();
        assert!(fed(&none, r#"{"a":[]}"#).unwrap().is_complete());
        assert!(fed(&none, r#"{"a":[n"#).is_none());
    }

    #[test]
    fn string_lengths_count_characters() {
        let s = Schema::compile(&json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 2, "maxLength": 3}}})).unwrap();
        for (text, complete) in [
            (r#"{"a":"ab"}"#, true),
            (r#"{"a":"é✓x"}"#, true),
            (r#"{"a":"\n\u00e9z"}"#, true),
            (r#"{"a":"a"}"#, false),
            (r#"{"a":"abcd"}"#, false),
            (r#"{"a":"éé✓✓"}"#, false),
        ] {
            assert_eq!(fed(&s, text).is_some_and(|st| st.is_complete()), complete, "{text}");
        }
    }

    /// What the openai package sends for a pydantic model with a nested model, an optional field
    /// and a literal (`$defs`, `$ref`, `anyOf` with null, titles), and a recursive definition.
    #[test]
    fn follows_pydantic_schemas_with_refs_and_optionals() {
        let s = Schema::compile(&json!({
            "$defs": {"Owner": {"properties": {"name": {"title": "Name", "type": "string"}}, "required": ["name"], "title": "Owner",
                                "type": "object", "additionalProperties": false},
                      "Tree": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}},
            "properties": {"age": {"title": "Age", "type": "integer", "default": 1},
                           "color": {"enum": ["black", "white"], "title": "Color", "type": "string"},
                           "owner": {"anyOf": [{"$ref": "#/$defs/Owner"}, {"type": "null"}]},
                           "tree": {"$ref": "#/$defs/Tree"}},
            "required": ["age", "color", "owner", "tree"], "title": "Cat", "type": "object", "additionalProperties": false
        }))
        .unwrap();
        for text in [
            r#"{"age":3,"color":"white","owner":{"name":"Ann"},"tree":{"v":1,"kids":[{"v":2,"kids":[]}]}}"#,
            r#"{"age":3,"color":"black","owner":null,"tree":{"v":0,"kids":[]}}"#,
        ] {
            assert!(fed(&s, text).unwrap().is_complete(), "{text}");
        }
        for bad in [r#"{"age":3,"color":"black","owner":"Ann""#, r#"{"age":3,"color":"black","owner":{"city"#, r#"{"age":3,"color":"black","owner":null,"tree":{"v":0,"kids":[1"#] {
            assert!(fed(&s, bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn follows_alternatives_that_start_alike() {
        // one call of several tools (the name tells them apart, then each its arguments)
        let calls = Schema::compile(&json!({"anyOf": [
            {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {"type": "object", "properties": {"city": {"type": "string"}}}}},
            {"type": "object", "properties": {"name": {"const": "get_time"}, "arguments": {"type": "object", "properties": {"zone": {"type": "integer"}}}}}
        ]}))
        .unwrap();
        for ok in [r#"{"name":"get_weather","arguments":{"city":"Paris"}}"#, r#"{"name": "get_time", "arguments": {"zone": -2}}"#] {
            let b = ok.as_bytes();
            for i in 0..b.len() {
                assert!(fed(&calls, &b[..i]).is_some_and(|st| !st.is_complete()), "prefix {:?}", &ok[..i]);
            }
            assert!(fed(&calls, ok).unwrap().is_complete(), "{ok}");
        }
        for bad in [r#"{"name":"get_weather","arguments":{"zone"#, r#"{"name":"get_time","arguments":{"city"#, r#"{"name":"get_date"#] {
            assert!(fed(&calls, bad).is_none(), "{bad}");
        }
        // pydantic's int | float, and strings told apart only by their length
        let s = Schema::compile(&json!({"type": "object", "properties": {
            "a": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
            "b": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "string", "minLength": 4}]}
        }}))
        .unwrap();
        for ok in [r#"{"a":1.5,"b":"ab"}"#, r#"{"a":-3,"b":"abcd"}"#, r#"{"a":7e2,"b":""}"#] {
            assert!(fed(&s, ok).unwrap().is_complete(), "{ok}");
        }
        for bad in [r#"{"a":1,"b":"abc""#, r#"{"a":1.,"#, r#"{"a":"1""#] {
            assert!(fed(&s, bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn any_values_and_open_objects() {
        // pydantic's Any, dict[str, int], dict, and a closed empty object
        let s = Schema::compile(&json!({"type": "object", "properties": {
            "a": {"title": "A"},
            "d": {"type": "object", "additionalProperties": {"type": "integer"}},
            "e": {"type": "object"},
            "f": {"type": "object", "additionalProperties": false}
        }}))
        .unwrap();
        for ok in [r#"{"a":[1,{"x":null}],"d":{"k":1,"j":-2},"e":{"z":"w"},"f":{}}"#, r#"{"a":"s","d":{},"e":{},"f":{ }}"#] {
            assert!(fed(&s, ok).unwrap().is_complete(), "{ok}");
        }
        for bad in [r#"{"a":[1,}"#, r#"{"a":1,"d":{"k":"s""#, r#"{"a":1,"d":{},"e":{},"f":{"x"#, r#"{"a":1,"d":{"k":1.5"#] {
            assert!(fed(&s, bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn type_lists_and_lower_bounds() {
        // OpenAI strict mode's nullable fields, pydantic's ge=0 / PositiveInt
        let s = Schema::compile(&json!({"type": "object", "properties": {
            "a": {"type": ["string", "null"], "maxLength": 2},
            "n": {"type": "number", "minimum": 0},
            "i": {"type": "integer", "exclusiveMinimum": 0},
            "j": {"type": "integer", "minimum": 1.0}
        }}))
        .unwrap();
        for ok in [r#"{"a":null,"n":0.5,"i":7,"j":10}"#, r#"{"a":"ab","n":0,"i":1,"j":1}"#, r#"{"a":"","n":3e-2,"i":20,"j":99}"#] {
            assert!(fed(&s, ok).unwrap().is_complete(), "{ok}");
        }
        for bad in [r#"{"a":"abc""#, r#"{"a":1"#, r#"{"a":null,"n":-"#, r#"{"a":null,"n":1,"i":0"#, r#"{"a":null,"n":1,"i":-"#, r#"{"a":null,"n":1,"i":1,"j":0"#] {
            assert!(fed(&s, bad).is_none(), "{bad}");
        }
    }

    /// Formatted strings inside an object: every prefix of an instance is taken, the value ends
    /// at its closing quote, and a byte outside the format is refused where it is written.
    #[test]
    fn formatted_strings_follow_their_format() {
        let s = Schema::compile(&json!({"type": "object", "properties": {
            "when": {"type": "string", "format": "date-time"},
            "id": {"type": ["string", "null"], "format": "uuid"},
            "day": {"type": "string", "format": "date"}
        }}))
        .unwrap();
        let ok = r#"{"when": "2024-02-29T23:59:59.250-03:00", "id": null, "day": "1999-12-31"}"#;
        for i in 0..ok.len() {
            assert!(fed(&s, &ok[..i]).is_some_and(|st| !st.is_complete()), "prefix {:?}", &ok[..i]);
        }
        assert!(fed(&s, ok).unwrap().is_complete());
        assert!(fed(&s, r#"{"when": "2024-02-29T23:59:59Z", "id": "123e4567-e89b-12d3-a456-426614174000", "day": "2000-01-01"}"#).unwrap().is_complete());
        for bad in [r#"{"when": "2024-13"#, r#"{"when": "2024-02-29T24"#, r#"{"when": "2024-02-29T23:59:59Z", "id": "12g"#] {
            assert!(fed(&s, bad).is_none(), "{bad}");
        }
        // the value ends at its quote: a longer time zone is refused
        assert!(fed(&s, r#"{"when": "2024-02-29T23:59:59Z1"#).is_none());
    }

    /// An integer's range against plain arithmetic: every integer written in a window around
    /// the bounds (and far past them) is taken whole exactly when it lies in the range, every
    /// prefix of one that does is taken, and a value's first byte is allowed exactly when some
    /// integer of the range starts with it.
    #[test]
    fn integer_ranges_take_exactly_their_integers() {
        let bounds: [(serde_json::Value, Option<i128>, Option<i128>); 9] = [
            (json!({"minimum": 5, "maximum": 120}), Some(5), Some(120)),
            (json!({"minimum": -30, "maximum": -7}), Some(-30), Some(-7)),
            (json!({"exclusiveMinimum": -1.5, "exclusiveMaximum": 10}), Some(-1), Some(9)),
            (json!({"minimum": 0.5, "maximum": 99.9}), Some(1), Some(99)),
            (json!({"maximum": -3}), None, Some(-3)),
            (json!({"minimum": 250}), Some(250), None),
            (json!({"minimum": 0, "maximum": 0}), Some(0), Some(0)),
            (json!({"minimum": -9, "maximum": 1000}), Some(-9), Some(1000)),
            (json!({"exclusiveMinimum": 0, "maximum": 1e40}), Some(1), None),
        ];
        for (b, lo, hi) in bounds {
            let mut item = b.clone();
            item["type"] = json!("integer");
            let s = Schema::compile(&json!({"type": "object", "properties": {"a": item}})).unwrap();
            let inside = |v: i128| lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
            let mut values: Vec<i128> = (-1500..=1500).collect();
            values.extend([-123456789012345678901234567890, -99999, 12345, 99999, 123456789012345678901234567890]);
            for v in values {
                let text = format!("{{\"a\":{v}}}");
                let whole = fed(&s, &text).is_some_and(|st| st.is_complete());
                assert_eq!(whole, inside(v), "{b}: {text}");
                if inside(v) {
                    for i in 1..text.len() {
                        assert!(fed(&s, &text[..i]).is_some(), "{b}: prefix {:?} of {text}", &text[..i]);
                    }
                }
            }
            assert_eq!(fed(&s, r#"{"a":-0}"#).is_some_and(|st| st.is_complete()), inside(0), "{b}: -0");
            for first in "-0123456789".bytes() {
                let starts = |v: i128| {
                    let t = v.to_string();
                    t.as_bytes()[0] == first || (first == b'-' && v == 0)
                };
                let window_has = (-1500..=1500).chain([10i128.pow(20), -(10i128.pow(20))]).any(|v| inside(v) && starts(v));
                assert_eq!(fed(&s, [br#"{"a":"#.as_slice(), &[first]].concat()).is_some(), window_has, "{b}: first byte {}", first as char);
            }
        }
    }

    #[test]
    fn refuses_schemas_it_cannot_follow() {
        for (schema, phrase) in [
            (json!({"type": "string"}), "must describe an object"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}), "\"pattern\""),
            (json!({"type": "object", "properties": {"a": {"anyOf": []}}}), "non-empty"),
            (json!({"anyOf": [{"type": "object", "properties": {}}, {"type": "string"}]}), "must describe an object"),
            (json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/B"}}}), "names no definition"),
            (json!({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}), "not a local definition"),
            (json!({"type": "object", "properties": {"a": {"allOf": []}}}), "\"allOf\""),
            (json!({"type": "object", "properties": {"a": {"type": []}}}), "empty list"),
            (json!({"type": "object", "properties": {"a": {"type": "number", "minimum": 5}}}), "bounds"),
            (json!({"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": 0}}}), "bounds"),
            (json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 3, "exclusiveMaximum": 3}}}), "leave no integer"),
            (json!({"type": "object", "properties": {"a": {"type": "integer", "exclusiveMinimum": true}}}), "must be a number"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}), "date, time, date-time, uuid"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "format": "date", "maxLength": 4}}}), "length bound"),
            (json!({"type": "object", "properties": {"a": {"type": "array"}}}), "needs \"items\""),
            (json!({"type": "object", "required": ["b"], "properties": {"a": {"type": "string"}}}), "not a property"),
            (json!({"type": "object", "properties": {"a": {"enum": []}}}), "1 to 64"),
            (json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "null"}, "minItems": 3, "maxItems": 2}}}), "minItems above"),
            (json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}}), "must be a count"),
            (json!([1]), "must be a JSON object"),
            // cycles that name no value: a definition that is its own $ref, two naming each
            // other, an anyOf that is one of its own alternatives (at the root or below)
            (json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/a"}}}), "through $refs alone"),
            (json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}), "through $refs alone"),
            (json!({"$ref": "#/$defs/r", "$defs": {"r": {"anyOf": [{"$ref": "#/$defs/r"}, {"type": "object"}]}}}), "left recursion"),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
                       "$defs": {"x": {"anyOf": [{"$ref": "#/$defs/y"}, {"type": "null"}]}, "y": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/x"}]}}}),
                "left recursion",
            ),
        ] {
            let e = Schema::compile(&schema).unwrap_err();
            assert!(e.contains(phrase), "{schema}: {e}");
        }
        // too deep: one line naming where, not every level
        let mut deep = json!({"type": "string"});
        for _ in 0..70 {
            deep = json!({"type": "array", "items": deep});
        }
        let e = Schema::compile(&json!({"type": "object", "properties": {"a": deep}})).unwrap_err();
        assert!(e.contains("nests deeper than 64") && e.len() < 200, "{e}");
    }

    /// Alternatives of alternatives that reach the same values by 2^30 paths: one fork each.
    #[test]
    fn nested_alternatives_fork_once_per_value() {
        let mut defs = serde_json::Map::new();
        for i in 0..30 {
            let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
            defs.insert(format!("d{i}"), json!({"anyOf": [next.clone(), next]}));
        }
        defs.insert("d30".into(), json!({"anyOf": [{"type": "integer"}, {"type": "string"}]}));
        let s = Schema::compile(&json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs})).unwrap();
        for text in [r#"{"a":12}"#, r#"{"a":"x"}"#] {
            assert!(fed(&s, text).unwrap().is_complete(), "{text}");
        }
        assert!(fed(&s, r#"{"a":null"#).is_none());
    }
}

/// JSON mode's tests: the any-object schema.
#[cfg(test)]
mod object_tests {
    use super::{Schema, SchemaState};

    /// The text so far against [`Schema::any_object`].
    struct JsonObject(Schema, SchemaState);

    impl Default for JsonObject {
        fn default() -> Self {
            JsonObject(Schema::any_object(), SchemaState::default())
        }
    }

    impl JsonObject {
        fn push_all(&mut self, bytes: &[u8]) -> bool {
            self.1.push_all(&self.0, bytes)
        }

        fn is_complete(&self) -> bool {
            self.1.is_complete()
        }
    }

    fn fed(text: impl AsRef<[u8]>) -> Option<JsonObject> {
        let mut j = JsonObject::default();
        j.push_all(text.as_ref()).then_some(j)
    }

    /// Every prefix of a JSON object serde_json parses is accepted, incomplete until its closing
    /// brace; the whole is complete.
    #[test]
    fn accepts_every_prefix_of_objects_and_completes_at_the_end() {
        let objects = [
            r#"{}"#,
            r#" { "a" : 1 } "#,
            r#"{"name":"Alice","age":30,"tags":["x","y"],"ok":true,"none":null,"f":false}"#,
            r#"{"n":-0.5e+10,"m":0,"k":12.25E-3,"z":[0,-1,2e5]}"#,
            r#"{"s":"quote \" backslash \\ slash \/ \b\f\n\r\t \u00e9 é ✓"}"#,
            "{\n  \"nested\": {\"deep\": [[[{}]], []], \"e\": {}},\n  \"last\": \"x\"\n}",
        ];
        for o in objects {
            let v: serde_json::Value = serde_json::from_str(o).unwrap();
            assert!(v.is_object());
            let end = o.trim_end().len();
            let b = o.as_bytes();
            for i in 0..b.len() {
                let j = fed(&b[..i]).unwrap_or_else(|| panic!("prefix {:?} refused", String::from_utf8_lossy(&b[..i])));
                assert_eq!(j.is_complete(), i >= end, "{:?}", String::from_utf8_lossy(&b[..i]));
            }
            assert!(fed(o).unwrap().is_complete(), "{o}");
        }
    }

    /// Texts that no JSON object starts with are refused at the byte that breaks them.
    #[test]
    fn refuses_what_breaks_an_object() {
        for bad in [
            "[1]", "\"x\"", "1", "{a:1}", "{'a':1}", "{\"a\" 1}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1]", "{\"a\":[1}",
            "{\"a\":01}", "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":+1}", "{\"a\":tru}x", "{\"a\":nul1}",
            "{\"a\":\"\\x\"}", "{\"a\":\"\\u12g4\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"line\nbreak\"}", "{}x",
            "{},", "{\"a\":1}}", "{\"a\":1 2}", "{\"a\"::1}", "{,}",
        ] {
            assert!(fed(bad).is_none(), "{bad:?} accepted");
            let v: Result<serde_json::Value, _> = serde_json::from_str(bad);
            assert!(!v.is_ok_and(|v| v.is_object()), "{bad:?} is an object to serde_json");
        }
    }

    /// Long runs of blanks or digits and nesting past the depth bound are refused.
    #[test]
    fn bounds_blanks_numbers_and_depth() {
        assert!(fed(format!("{{{}\"a\":1}}", " ".repeat(32))).is_some());
        assert!(fed(format!("{{{}", " ".repeat(33))).is_none());
        assert!(fed(format!("{{\"a\":{}}}", "9".repeat(32))).is_some());
        assert!(fed(format!("{{\"a\":{}", "9".repeat(33))).is_none());
        let deep = format!("{{\"a\":{}", "[".repeat(127));
        assert!(fed(&deep).is_some());
        assert!(fed(format!("{deep}[")).is_none());
        // a deep nesting closes level by level, each with its own kind
        let mixed = "{\"a\":[{\"b\":[[{}]]},{\"c\":[]}]}";
        assert!(fed(mixed).unwrap().is_complete());
        assert!(fed("{\"a\":[{\"b\":[[{}]}").is_none());
    }

    /// Random mutations of objects: whatever the machine calls a complete object, serde_json
    /// parses as one (an independent parser as the oracle).
    #[test]
    fn what_it_completes_serde_json_parses() {
        let base = br#"{"k":[1,-2.5e3,true,null,{"s":"a\"b\u0041"}],"t":false}"#;
        let alphabet = b"{}[]:,\"\\-+.eE0129truefalsnul ux";
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut complete = 0;
        for _ in 0..20000 {
            let mut t = base.to_vec();
            for _ in 0..1 + next() % 3 {
                let i = (next() % t.len() as u64) as usize;
                match next() % 3 {
                    0 => t[i] = alphabet[(next() % alphabet.len() as u64) as usize],
                    1 => _ = t.remove(i),
                    _ => t.insert(i, alphabet[(next() % alphabet.len() as u64) as usize]),
                }
            }
            let mut j = JsonObject::default();
            if j.push_all(&t) && j.is_complete() {
                complete += 1;
                let v: serde_json::Value = serde_json::from_slice(&t).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(&t)));
                assert!(v.is_object());
            }
        }
        assert!(complete > 100, "only {complete} mutants complete");
    }
}
