//! `logit_bias`: values added to chosen tokens' logits before any other sampler, as llama.cpp's
//! first sampler does. In JSON a map from token id (a decimal string, as OpenAI writes it) to a
//! number, or llama-server's list of `[id, bias]` pairs; `false` for a bias is "never" (−∞,
//! llama-server's spelling, since JSON has no infinity). A token named twice gets the sum, as
//! llama.cpp applies every entry of its list.

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use std::collections::BTreeMap;

/// Token id → bias, in id order.
pub type LogitBias = BTreeMap<u32, f32>;

/// One map value: a number, or `false` for −∞.
enum Value {
    Number(f32),
    Flag(bool),
}

impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        struct Bias;
        impl Visitor<'_> for Bias {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a bias: a number, or false to ban the token")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Number(v as f32))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Number(v as f32))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::Number(v as f32))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Flag(v))
            }
        }
        d.deserialize_any(Bias)
    }
}

pub fn serialize<S: Serializer>(bias: &LogitBias, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(bias.len()))?;
    for (id, &b) in bias {
        let key = id.to_string();
        if b == f32::NEG_INFINITY {
            m.serialize_entry(&key, &false)?;
        } else {
            m.serialize_entry(&key, &b)?;
        }
    }
    m.end()
}

impl Value {
    fn bias<E: serde::de::Error>(self, id: u32) -> Result<f32, E> {
        match self {
            Value::Number(b) => Ok(b),
            Value::Flag(false) => Ok(f32::NEG_INFINITY),
            Value::Flag(true) => Err(E::custom(format!("logit_bias of token {id}: true is not a bias (false bans the token)"))),
        }
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LogitBias, D::Error> {
    struct Either;
    impl<'de> Visitor<'de> for Either {
        type Value = LogitBias;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map from token id to a number or false, or a list of [token id, bias] pairs")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<LogitBias, A::Error> {
            let mut out = LogitBias::new();
            while let Some((key, value)) = a.next_entry::<String, Value>()? {
                let id = key.trim().parse::<u32>().map_err(|_| serde::de::Error::custom(format!("logit_bias key {key:?} is not a token id")))?;
                add(&mut out, id, value.bias(id)?);
            }
            Ok(out)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<LogitBias, A::Error> {
            let mut out = LogitBias::new();
            while let Some((id, value)) = a.next_element::<(i64, Value)>()? {
                let id = u32::try_from(id).map_err(|_| serde::de::Error::custom(format!("logit_bias pair [{id}, ..]: {id} is not a token id")))?;
                add(&mut out, id, value.bias(id)?);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Either)
}

/// Adds `bias` to token `id`'s entry (−∞ stays −∞).
pub fn add(bias: &mut LogitBias, id: u32, b: f32) {
    *bias.entry(id).or_insert(0.0) += b;
}

/// Refuses a bias that is NaN or +∞ (−∞ bans a token).
pub fn validate(bias: &LogitBias) -> Result<(), String> {
    match bias.iter().find(|(_, b)| b.is_nan() || **b == f32::INFINITY) {
        Some((id, b)) => Err(format!("logit bias of token {id} must be a number or -inf, got {b}")),
        None => Ok(()),
    }
}

/// Adds each bias to its token's logit (ids past the row are the caller's to refuse).
pub fn apply(bias: &LogitBias, logits: &mut [f32]) {
    for (&id, &b) in bias {
        if let Some(l) = logits.get_mut(id as usize) {
            *l += b;
        }
    }
}

/// Whether some token of `logits` is open (finite) and not banned (−∞) by `bias`: the open
/// tokens outnumber the banned ones among them (one pass over the row, one over the bias).
pub fn leaves_any(bias: &LogitBias, logits: &[f32]) -> bool {
    let open = logits.iter().filter(|l| l.is_finite()).count();
    let banned = bias.iter().filter(|&(&id, &b)| b == f32::NEG_INFINITY && logits.get(id as usize).is_some_and(|l| l.is_finite())).count();
    open > banned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Holder {
        #[serde(with = "super")]
        b: LogitBias,
    }

    #[test]
    fn json_keys_are_ids_and_false_is_minus_infinity() {
        let h: Holder = serde_json::from_str(r#"{"b": {"7": 2.5, " 3": false, "10": -100}}"#).unwrap();
        assert_eq!(h.b, LogitBias::from([(3, f32::NEG_INFINITY), (7, 2.5), (10, -100.0)]));
        // a token named twice: the sum, and a ban stays a ban
        let twice: Holder = serde_json::from_str(r#"{"b": {"2": false, "2": 1.5, "4": 1, "4": 0.5}}"#).unwrap();
        assert_eq!(twice.b, LogitBias::from([(2, f32::NEG_INFINITY), (4, 1.5)]));
        let back = serde_json::to_string(&h).unwrap();
        assert_eq!(back, r#"{"b":{"3":false,"7":2.5,"10":-100.0}}"#);
        // llama-server's list of pairs, with the same sum
        let list: Holder = serde_json::from_str(r#"{"b": [[2, false], [2, 1.5], [4, 1], [4, 0.5]]}"#).unwrap();
        assert_eq!(list.b, twice.b);
        for bad in [r#"{"b": {"x": 1}}"#, r#"{"b": {"-1": 1}}"#, r#"{"b": {"1": true}}"#, r#"{"b": {"1": "2"}}"#, r#"{"b": [[1]]}"#, r#"{"b": [["1", 2]]}"#, r#"{"b": 3}"#] {
            assert!(serde_json::from_str::<Holder>(bad).is_err(), "{bad}");
        }
        // the messages say what a bias and an id are (not serde's enum or type names)
        for (bad, phrase) in [(r#"{"b": {"1": "x"}}"#, "a number, or false"), (r#"{"b": [[-1, 1]]}"#, "-1 is not a token id")] {
            let e = serde_json::from_str::<Holder>(bad).unwrap_err().to_string();
            assert!(e.contains(phrase), "{bad}: {e}");
        }
    }

    #[test]
    fn adds_to_logits_and_refuses_nan() {
        let mut l = [1.0f32, 2.0, 3.0];
        apply(&LogitBias::from([(0, 0.5), (2, f32::NEG_INFINITY), (9, 1.0)]), &mut l);
        assert_eq!(l, [1.5, 2.0, f32::NEG_INFINITY]);
        assert!(validate(&LogitBias::from([(1, f32::NAN)])).is_err());
        assert!(validate(&LogitBias::from([(1, f32::INFINITY)])).is_err());
        assert!(validate(&LogitBias::from([(1, f32::NEG_INFINITY), (2, -3.0)])).is_ok());
    }
}
