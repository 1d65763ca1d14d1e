//! JSON request bodies: read as bytes (size-limited by the router), parsed as a JSON object, and
//! every failure turned into the API's error shape (400 malformed, 413 too large, 415 never:
//! a missing content type is accepted, as clients such as curl often omit it).

use super::errors::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde_json::{Map, Value};

/// A request body that is a JSON object.
pub struct JsonObject(pub Map<String, Value>);

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            let status = r.status();
            if status == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(status, "the request body is too large")
            } else {
                ApiError::new(status, format!("cannot read the request body: {}", r.body_text()))
            }
        })?;
        json_object(&bytes).map(JsonObject)
    }
}

/// A request body's bytes as a JSON object.
pub fn json_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))? {
        Value::Object(m) => Ok(m),
        _ => Err(ApiError::bad_request("the request body must be a JSON object")),
    }
}

/// Typed access to optional fields; each error names the field.
pub struct Fields<'a>(pub &'a Map<String, Value>);

impl<'a> Fields<'a> {
    /// The field, or `None` when absent or null.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    pub fn f32(&self, key: &str) -> Result<Option<f32>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if (x as f32).is_infinite() => Err(ApiError::bad_request(format!("\"{key}\" is out of range: {v}"))),
                Some(x) => Ok(Some(x as f32)),
                None => Err(wrong(key, "a number")),
            },
        }
    }

    pub fn i64(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match (v.as_i64(), v.as_f64()) {
                (Some(i), _) => Ok(Some(i)),
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9e15 => Ok(Some(f as i64)),
                (None, Some(f)) if f.fract() == 0.0 || !f.is_finite() => Err(ApiError::bad_request(format!("\"{key}\" is out of range: {v}"))),
                _ => Err(wrong(key, "an integer")),
            },
        }
    }

    pub fn u64(&self, key: &str) -> Result<Option<u64>, ApiError> {
        match self.i64(key)? {
            None => Ok(None),
            Some(i) if i >= 0 => Ok(Some(i as u64)),
            Some(i) => Err(ApiError::bad_request(format!("\"{key}\" must be 0 or more, got {i}"))),
        }
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| wrong(key, "true or false")),
        }
    }

    pub fn str(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_str().map(Some).ok_or_else(|| wrong(key, "a string")),
        }
    }
}

pub fn wrong(key: &str, what: &str) -> ApiError {
    ApiError::bad_request(format!("\"{key}\" must be {what}"))
}

/// Token ids from a JSON array (each an integer in u32 range).
pub fn token_ids(key: &str, v: &Value) -> Result<Vec<u32>, ApiError> {
    let arr = v.as_array().ok_or_else(|| wrong(key, "an array of token ids"))?;
    arr.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_u64()
                .filter(|&t| t <= u32::MAX as u64)
                .map(|t| t as u32)
                .ok_or_else(|| ApiError::bad_request(format!("\"{key}\"[{i}] is not a token id (an integer 0 or more): {x}")))
        })
        .collect()
}
