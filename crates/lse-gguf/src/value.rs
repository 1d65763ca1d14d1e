//! Metadata values and their GGUF type ids.

/// One metadata value. Arrays may nest.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

/// GGUF's value type ids.
pub(crate) mod type_id {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// The fewest bytes one value of a type occupies in a file, or `None` for an unknown id.
/// Used to refuse counts that could not possibly fit before anything is allocated for them.
pub(crate) fn min_encoded_size(id: u32) -> Option<u64> {
    use type_id::*;
    Some(match id {
        U8 | I8 | BOOL => 1,
        U16 | I16 => 2,
        U32 | I32 | F32 => 4,
        U64 | I64 | F64 => 8,
        STRING => 8,
        ARRAY => 12,
        _ => return None,
    })
}

impl Value {
    /// The GGUF type id of this value.
    pub fn type_id(&self) -> u32 {
        use type_id::*;
        match self {
            Value::U8(_) => U8,
            Value::I8(_) => I8,
            Value::U16(_) => U16,
            Value::I16(_) => I16,
            Value::U32(_) => U32,
            Value::I32(_) => I32,
            Value::U64(_) => U64,
            Value::I64(_) => I64,
            Value::F32(_) => F32,
            Value::F64(_) => F64,
            Value::Bool(_) => BOOL,
            Value::String(_) => STRING,
            Value::Array(_) => ARRAY,
        }
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "u8",
            Value::I8(_) => "i8",
            Value::U16(_) => "u16",
            Value::I16(_) => "i16",
            Value::U32(_) => "u32",
            Value::I32(_) => "i32",
            Value::U64(_) => "u64",
            Value::I64(_) => "i64",
            Value::F32(_) => "f32",
            Value::F64(_) => "f64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "array",
        }
    }

    /// Any integer that is non-negative.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer that fits an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// A float, or an integer converted to one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self
                .as_i64()
                .map(|v| v as f64)
                .or_else(|| self.as_u64().map(|v| v as f64)),
        }
    }

    /// A float, or an integer converted to one (f64 values are rounded to f32).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            _ => self.as_f64().map(|v| v as f32),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}
