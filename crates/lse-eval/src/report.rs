//! Small helpers for the JSON report.

use serde_json::Value;

/// An f32 as the JSON number a person would write (its shortest decimal form), not its f64 expansion.
pub fn f32_json(x: f32) -> Value {
    let s = format!("{x}");
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        _ => Value::Null,
    }
}

/// A finite f64 as JSON (non-finite values never reach here: the run refuses them first).
pub fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn f32_shortest() {
        assert_eq!(f32_json(0.125).to_string(), "0.125");
        assert_eq!(f32_json(1.0 / 80f32.sqrt()).to_string(), "0.1118034");
    }
}
