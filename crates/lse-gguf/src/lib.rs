//! GGUF v2/v3 reading by memory map, and a small writer for test fixtures.
//!
//! [`GgufFile::open`] validates everything a later reader might trip over — counts, string and
//! array lengths, tensor shapes, types and data ranges — so a corrupt file is one [`GgufError`]
//! line and a successfully opened file can be sliced without further checks.
//! [`GgufSplit`] joins the shards of a split model. [`GgmlType`] is the workspace's single table
//! of ggml type ids and block layouts.

mod cursor;
mod error;
mod file;
mod ggml_type;
mod parse;
mod split;
mod storage;
mod value;
mod writer;

pub use error::GgufError;
pub use file::{GgufFile, TensorInfo};
pub use ggml_type::GgmlType;
pub use split::{model_paths, shard_paths, GgufSplit, SPLIT_COUNT_KEY, SPLIT_NO_KEY, SPLIT_TENSORS_COUNT_KEY};
pub use value::Value;
pub use writer::GgufWriter;
