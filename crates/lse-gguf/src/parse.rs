//! Parsing and validating the header, metadata and tensor table of a GGUF file.

use std::collections::HashMap;

use crate::cursor::Cursor;
use crate::value::{min_encoded_size, type_id};
use crate::{GgmlType, GgufError, TensorInfo, Value};

pub(crate) const MAGIC: &[u8; 4] = b"GGUF";
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;
pub(crate) const ALIGNMENT_KEY: &str = "general.alignment";
pub(crate) const MAX_DIMS: usize = 4;
/// Deeper nesting than this is refused so a hostile file cannot exhaust the stack.
const MAX_ARRAY_DEPTH: usize = 8;
/// Reserve at most this many items up front (counts are bounded by the file size, but a value
/// takes more memory than its encoding); longer lists grow as they are read.
const MAX_RESERVE: u64 = 1 << 20;
/// Fewest bytes of one tensor table entry: name length, n_dims, type, offset.
const MIN_TENSOR_INFO: u64 = 8 + 4 + 4 + 8;
/// Fewest bytes of one key/value pair: key length, value type, a one-byte value.
const MIN_KV: u64 = 8 + 4 + 1;

pub(crate) struct Parsed {
    pub version: u32,
    pub alignment: u64,
    pub metadata: Vec<(String, Value)>,
    pub metadata_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub tensor_index: HashMap<String, usize>,
    pub data_start: u64,
}

pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, GgufError> {
    let mut cur = Cursor::new(bytes);
    let magic = cur.take(4, || "magic".into())?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic {
            found: magic.to_vec(),
        });
    }
    let version = cur.u32(|| "version".into())?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let n_tensors = cur.count(MIN_TENSOR_INFO, || "tensor".into())?;
    let n_kv = cur.count(MIN_KV, || "metadata key/value".into())?;

    let (metadata, metadata_index) = read_metadata(&mut cur, n_kv)?;
    let alignment = match metadata_index.get(ALIGNMENT_KEY) {
        None => DEFAULT_ALIGNMENT,
        Some(&i) => check_alignment(&metadata[i].1)?,
    };
    let (tensors, tensor_index) = read_tensor_table(&mut cur, n_tensors)?;

    let data_start = align_up(cur.pos(), alignment).ok_or_else(|| GgufError::BadMetadata {
        key: ALIGNMENT_KEY.into(),
        reason: format!("alignment {alignment} puts the data section past any file size"),
    })?;
    if !tensors.is_empty() && data_start > cur.file_len() {
        return Err(GgufError::Truncated {
            what: "padding before the data section".into(),
            need: data_start - cur.pos(),
            offset: cur.pos(),
            file_len: cur.file_len(),
        });
    }
    for t in &tensors {
        check_tensor_range(t, data_start, alignment, cur.file_len())?;
    }
    Ok(Parsed {
        version,
        alignment,
        metadata,
        metadata_index,
        tensors,
        tensor_index,
        data_start,
    })
}

type Metadata = (Vec<(String, Value)>, HashMap<String, usize>);

fn read_metadata(cur: &mut Cursor, n_kv: u64) -> Result<Metadata, GgufError> {
    let reserve = n_kv.min(MAX_RESERVE) as usize;
    let mut metadata = Vec::with_capacity(reserve);
    let mut index = HashMap::with_capacity(reserve);
    for i in 0..n_kv {
        let key = cur.string(|| format!("metadata key #{i}"))?;
        let ty = cur.u32(|| format!("value type of metadata key '{key}'"))?;
        let value = read_value(cur, ty, &key, 0)?;
        if index.insert(key.clone(), metadata.len()).is_some() {
            return Err(GgufError::DuplicateKey(key));
        }
        metadata.push((key, value));
    }
    Ok((metadata, index))
}

fn read_value(cur: &mut Cursor, ty: u32, key: &str, depth: usize) -> Result<Value, GgufError> {
    let what = || format!("value of metadata key '{key}'");
    Ok(match ty {
        type_id::U8 => Value::U8(cur.u8(what)?),
        type_id::I8 => Value::I8(cur.u8(what)? as i8),
        type_id::U16 => Value::U16(cur.u16(what)?),
        type_id::I16 => Value::I16(cur.u16(what)? as i16),
        type_id::U32 => Value::U32(cur.u32(what)?),
        type_id::I32 => Value::I32(cur.u32(what)? as i32),
        type_id::U64 => Value::U64(cur.u64(what)?),
        type_id::I64 => Value::I64(cur.u64(what)? as i64),
        type_id::F32 => Value::F32(f32::from_bits(cur.u32(what)?)),
        type_id::F64 => Value::F64(f64::from_bits(cur.u64(what)?)),
        type_id::BOOL => match cur.u8(what)? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => {
                return Err(GgufError::BadMetadata {
                    key: key.into(),
                    reason: format!("bool value is {b}, not 0 or 1"),
                })
            }
        },
        type_id::STRING => Value::String(cur.string(what)?),
        type_id::ARRAY => read_array(cur, key, depth)?,
        id => {
            return Err(GgufError::UnknownValueType {
                key: key.into(),
                id,
            })
        }
    })
}

fn read_array(cur: &mut Cursor, key: &str, depth: usize) -> Result<Value, GgufError> {
    if depth >= MAX_ARRAY_DEPTH {
        return Err(GgufError::NestingTooDeep {
            key: key.into(),
            max_depth: MAX_ARRAY_DEPTH,
        });
    }
    let elem_ty = cur.u32(|| format!("array element type of metadata key '{key}'"))?;
    let min = min_encoded_size(elem_ty).ok_or_else(|| GgufError::UnknownValueType {
        key: key.into(),
        id: elem_ty,
    })?;
    let n = cur.count(min, || format!("array element of metadata key '{key}'"))?;
    if let Some(items) = read_fixed_size_items(cur, elem_ty, n, key)? {
        return Ok(Value::Array(items));
    }
    let mut items = Vec::with_capacity(n.min(MAX_RESERVE) as usize);
    for _ in 0..n {
        items.push(read_value(cur, elem_ty, key, depth + 1)?);
    }
    Ok(Value::Array(items))
}

/// Arrays of numbers and bools, decoded from one bounds-checked slice (vocab-sized score and
/// token-type arrays make the per-element path measurably slow). `None` for other element types.
fn read_fixed_size_items(
    cur: &mut Cursor,
    elem_ty: u32,
    n: u64,
    key: &str,
) -> Result<Option<Vec<Value>>, GgufError> {
    use type_id::*;
    let size = match elem_ty {
        U8 | I8 | BOOL => 1,
        U16 | I16 => 2,
        U32 | I32 | F32 => 4,
        U64 | I64 | F64 => 8,
        _ => return Ok(None),
    };
    // `count` already proved n * size fits in the file.
    let bytes = cur.take(n * size, || format!("array of metadata key '{key}'"))?;
    let chunks = bytes.chunks_exact(size as usize);
    let b2 = |c: &[u8]| [c[0], c[1]];
    let b4 = |c: &[u8]| [c[0], c[1], c[2], c[3]];
    let b8 = |c: &[u8]| [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
    Ok(Some(match elem_ty {
        U8 => chunks.map(|c| Value::U8(c[0])).collect(),
        I8 => chunks.map(|c| Value::I8(c[0] as i8)).collect(),
        U16 => chunks
            .map(|c| Value::U16(u16::from_le_bytes(b2(c))))
            .collect(),
        I16 => chunks
            .map(|c| Value::I16(i16::from_le_bytes(b2(c))))
            .collect(),
        U32 => chunks
            .map(|c| Value::U32(u32::from_le_bytes(b4(c))))
            .collect(),
        I32 => chunks
            .map(|c| Value::I32(i32::from_le_bytes(b4(c))))
            .collect(),
        F32 => chunks
            .map(|c| Value::F32(f32::from_le_bytes(b4(c))))
            .collect(),
        U64 => chunks
            .map(|c| Value::U64(u64::from_le_bytes(b8(c))))
            .collect(),
        I64 => chunks
            .map(|c| Value::I64(i64::from_le_bytes(b8(c))))
            .collect(),
        F64 => chunks
            .map(|c| Value::F64(f64::from_le_bytes(b8(c))))
            .collect(),
        _ => {
            if let Some(pos) = bytes.iter().position(|&b| b > 1) {
                return Err(GgufError::BadMetadata {
                    key: key.into(),
                    reason: format!("bool array element {pos} is {}, not 0 or 1", bytes[pos]),
                });
            }
            bytes.iter().map(|&b| Value::Bool(b == 1)).collect()
        }
    }))
}

fn check_alignment(v: &Value) -> Result<u64, GgufError> {
    let bad = |reason: String| GgufError::BadMetadata {
        key: ALIGNMENT_KEY.into(),
        reason,
    };
    let a = v.as_u64().ok_or_else(|| {
        bad(format!(
            "expected an unsigned integer, found {}",
            v.type_name()
        ))
    })?;
    if a == 0 || !a.is_power_of_two() {
        return Err(bad(format!("alignment {a} is not a nonzero power of two")));
    }
    Ok(a)
}

type TensorTable = (Vec<TensorInfo>, HashMap<String, usize>);

fn read_tensor_table(cur: &mut Cursor, n_tensors: u64) -> Result<TensorTable, GgufError> {
    let reserve = n_tensors.min(MAX_RESERVE) as usize;
    let mut tensors = Vec::with_capacity(reserve);
    let mut index = HashMap::with_capacity(reserve);
    for i in 0..n_tensors {
        let name = cur.string(|| format!("name of tensor #{i} in the tensor table"))?;
        let n_dims = cur.u32(|| format!("n_dims of tensor '{name}'"))?;
        if n_dims as usize > MAX_DIMS {
            return Err(GgufError::BadShape {
                tensor: name,
                reason: format!("n_dims {n_dims} exceeds the maximum of {MAX_DIMS}"),
            });
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(cur.u64(|| format!("dimension {d} of tensor '{name}'"))?);
        }
        let type_id = cur.u32(|| format!("type of tensor '{name}'"))?;
        let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
            tensor: name.clone(),
            id: type_id,
        })?;
        let offset = cur.u64(|| format!("data offset of tensor '{name}'"))?;
        let n_bytes = tensor_bytes(&name, &dims, ggml_type)?;
        if index.insert(name.clone(), tensors.len()).is_some() {
            return Err(GgufError::DuplicateTensor(name));
        }
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            offset,
            n_bytes,
        });
    }
    Ok((tensors, index))
}

/// Bytes of a tensor's data, with every way a shape can be nonsense refused.
pub(crate) fn tensor_bytes(name: &str, dims: &[u64], t: GgmlType) -> Result<u64, GgufError> {
    let bad = |reason: String| GgufError::BadShape {
        tensor: name.into(),
        reason,
    };
    let mut elements: u64 = 1;
    for (i, &d) in dims.iter().enumerate() {
        if d > i64::MAX as u64 {
            return Err(bad(format!(
                "dimension {i} is {d}, larger than ggml's int64 limit"
            )));
        }
        elements = elements
            .checked_mul(d)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or_else(|| bad(format!("the element count of dims {dims:?} overflows")))?;
    }
    let ne0 = dims.first().copied().unwrap_or(1);
    let bs = t.block_size() as u64;
    if !ne0.is_multiple_of(bs) {
        return Err(bad(format!(
            "row length {ne0} is not a multiple of the {} block size {bs}",
            t.name()
        )));
    }
    let rows = elements.checked_div(ne0).unwrap_or(0);
    (ne0 / bs)
        .checked_mul(t.type_size() as u64)
        .and_then(|row| row.checked_mul(rows))
        .ok_or_else(|| {
            bad(format!(
                "the byte size of dims {dims:?} as {} overflows",
                t.name()
            ))
        })
}

fn check_tensor_range(
    t: &TensorInfo,
    data_start: u64,
    alignment: u64,
    file_len: u64,
) -> Result<(), GgufError> {
    let bad = |reason: String| GgufError::BadOffset {
        tensor: t.name.clone(),
        reason,
    };
    if !t.offset.is_multiple_of(alignment) {
        return Err(bad(format!(
            "offset {} is not a multiple of the alignment {alignment}",
            t.offset
        )));
    }
    let start = data_start
        .checked_add(t.offset)
        .ok_or_else(|| bad(format!("offset {} overflows", t.offset)))?;
    match start.checked_add(t.n_bytes) {
        Some(end) if end <= file_len => Ok(()),
        _ => Err(GgufError::Truncated {
            what: format!("data of tensor '{}'", t.name),
            need: t.n_bytes,
            offset: start,
            file_len,
        }),
    }
}

pub(crate) fn align_up(pos: u64, alignment: u64) -> Option<u64> {
    Some(pos.checked_add(alignment - 1)? / alignment * alignment)
}
