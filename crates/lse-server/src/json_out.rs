//! The report as readable JSON: objects one key per line (one-space indent), arrays of scalars on
//! one line, arrays of objects one object per line.

use serde_json::Value;

pub fn pretty(v: &Value) -> String {
    let mut s = String::new();
    write(v, 0, &mut s);
    s.push('\n');
    s
}

fn scalar_or_flat(v: &Value) -> bool {
    match v {
        Value::Array(a) => a.iter().all(|x| !x.is_array() && !x.is_object()),
        Value::Object(_) => false,
        _ => true,
    }
}

fn write(v: &Value, indent: usize, s: &mut String) {
    match v {
        Value::Object(o) if !o.is_empty() => {
            s.push('{');
            let pad = " ".repeat(indent + 1);
            for (i, (k, x)) in o.iter().enumerate() {
                s.push('\n');
                s.push_str(&pad);
                s.push_str(&Value::String(k.clone()).to_string());
                s.push_str(": ");
                write(x, indent + 1, s);
                if i + 1 < o.len() {
                    s.push(',');
                }
            }
            s.push('\n');
            s.push_str(&" ".repeat(indent));
            s.push('}');
        }
        Value::Array(a) if !scalar_or_flat(v) => {
            s.push('[');
            let pad = " ".repeat(indent + 1);
            for (i, x) in a.iter().enumerate() {
                s.push('\n');
                s.push_str(&pad);
                s.push_str(&x.to_string());
                if i + 1 < a.len() {
                    s.push(',');
                }
            }
            s.push('\n');
            s.push_str(&" ".repeat(indent));
            s.push(']');
        }
        _ => s.push_str(&v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trips() {
        let v: Value = serde_json::from_str(r#"{"a":1,"b":[1,2],"c":{"d":"x"},"w":[{"i":0},{"i":1}],"e":{}}"#).unwrap();
        let p = pretty(&v);
        assert_eq!(serde_json::from_str::<Value>(&p).unwrap(), v);
        assert!(p.contains("\"b\": [1,2]"));
        assert!(p.contains("\n  {\"i\":0},"));
    }
}
