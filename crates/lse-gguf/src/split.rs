//! Models split over several GGUF files ("shards"), as llama.cpp's gguf-split writes them:
//! `<prefix>-00001-of-00003.gguf`, ..., each with `split.no` (0-based), `split.count` and, in
//! the first, `split.tensors.count`. Metadata lives in the first shard; tensors are spread over all.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::{GgufError, GgufFile, TensorInfo};

pub const SPLIT_NO_KEY: &str = "split.no";
pub const SPLIT_COUNT_KEY: &str = "split.count";
pub const SPLIT_TENSORS_COUNT_KEY: &str = "split.tensors.count";

/// One model in one or more GGUF files, with a tensor index over all of them.
pub struct GgufSplit {
    files: Vec<GgufFile>,
    /// Tensor name -> (file, position in that file's table).
    index: HashMap<String, (usize, usize)>,
}

fn split_err(msg: String) -> GgufError {
    GgufError::Split(msg)
}

/// `(prefix, shard number (1-based), count)` of a shard file name such as
/// `model-00002-of-00003.gguf`.
fn parse_shard_name(path: &Path) -> Option<(String, u32, u32)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    let (head, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = head.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(no) || !digits(count) {
        return None;
    }
    Some((prefix.to_owned(), no.parse().ok()?, count.parse().ok()?))
}

/// The file names of all `count` shards of the split model `path` belongs to (llama.cpp's
/// naming), or `None` when the name does not follow it or names another count.
pub fn shard_paths(path: &Path, count: u32) -> Option<Vec<PathBuf>> {
    let (prefix, _, named) = parse_shard_name(path)?;
    if named != count {
        return None;
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    Some(
        (1..=count)
            .map(|i| dir.join(format!("{prefix}-{i:05}-of-{count:05}.gguf")))
            .collect(),
    )
}

/// Every file of the model `path` belongs to, in shard order (`file`: `path`, opened): `path`
/// alone for an unsplit model, else the shards its name and `split.count` give.
pub fn model_paths(path: &Path, file: &GgufFile) -> Result<Vec<PathBuf>, GgufError> {
    let count = split_count(file)?;
    if count <= 1 {
        return Ok(vec![path.to_path_buf()]);
    }
    shard_paths(path, count).ok_or_else(|| {
        let no = split_no(file).map_or_else(|_| "a shard".to_string(), |no| format!("shard {}", no + 1));
        split_err(format!("{} says it is {no} of {count}, but its name is not <prefix>-NNNNN-of-{count:05}.gguf", path.display()))
    })
}

impl GgufSplit {
    /// Opens a model from any one of its files: a plain GGUF, or any shard of a split model
    /// (the other shards are found beside it by name).
    pub fn open(path: &Path) -> Result<GgufSplit, GgufError> {
        let file = GgufFile::open(path)?;
        let paths = model_paths(path, &file)?;
        if paths.len() == 1 {
            return Self::from_files(vec![file]);
        }
        let (count, no) = (paths.len(), split_no(&file)?);
        let mut first = Some(file);
        let mut files = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            if i == no as usize {
                files.push(first.take().expect("taken once"));
            } else if !p.exists() {
                return Err(split_err(format!(
                    "shard {} of {count} is missing: {}",
                    i + 1,
                    p.display()
                )));
            } else {
                files.push(GgufFile::open(p)?);
            }
        }
        if let Some(f) = first {
            // `no` was not a valid index; let from_files report the inconsistency.
            files.push(f);
        }
        Self::from_files(files)
    }

    /// Opens the given files (in any order) as the shards of one model.
    pub fn open_shards(paths: &[PathBuf]) -> Result<GgufSplit, GgufError> {
        let files = paths
            .iter()
            .map(|p| GgufFile::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_files(files)
    }

    /// Checks that `files` form exactly one model (matching counts, each shard once, tensor
    /// names unique across shards) and orders them by shard number.
    pub fn from_files(mut files: Vec<GgufFile>) -> Result<GgufSplit, GgufError> {
        if files.is_empty() {
            return Err(split_err("no files given".into()));
        }
        let count = split_count(&files[0])?.max(1);
        if files.len() > 1 || count > 1 {
            let mut numbered = Vec::with_capacity(files.len());
            for f in files {
                if split_count(&f)? != count {
                    return Err(split_err(format!("shards disagree on {SPLIT_COUNT_KEY}")));
                }
                numbered.push((split_no(&f)?, f));
            }
            numbered.sort_by_key(|(no, _)| *no);
            let nos: Vec<u32> = numbered.iter().map(|(no, _)| *no).collect();
            if nos != (0..count).collect::<Vec<_>>() {
                return Err(split_err(format!(
                    "expected shards 0..{count} by {SPLIT_NO_KEY}, found {nos:?}"
                )));
            }
            files = numbered.into_iter().map(|(_, f)| f).collect();
        }
        let mut index = HashMap::new();
        for (fi, f) in files.iter().enumerate() {
            for (ti, t) in f.tensors().iter().enumerate() {
                if index.insert(t.name.clone(), (fi, ti)).is_some() {
                    return Err(GgufError::DuplicateTensor(t.name.clone()));
                }
            }
        }
        if let Some(v) = files[0].get(SPLIT_TENSORS_COUNT_KEY) {
            let expected = v.as_u64();
            if expected != Some(index.len() as u64) {
                return Err(split_err(format!(
                    "{SPLIT_TENSORS_COUNT_KEY} is {v:?} but the shards hold {} tensors",
                    index.len()
                )));
            }
        }
        Ok(GgufSplit { files, index })
    }

    /// The files, ordered by shard number.
    pub fn files(&self) -> &[GgufFile] {
        &self.files
    }

    /// The files, ordered by shard number (the first holds the metadata).
    pub fn into_files(self) -> Vec<GgufFile> {
        self.files
    }

    /// The first shard, which holds the model's metadata.
    pub fn first(&self) -> &GgufFile {
        &self.files[0]
    }

    /// Tensors over all shards.
    pub fn n_tensors(&self) -> usize {
        self.index.len()
    }

    /// A tensor and the file holding it.
    pub fn tensor(&self, name: &str) -> Option<(&GgufFile, &TensorInfo)> {
        let &(fi, ti) = self.index.get(name)?;
        let f = &self.files[fi];
        Some((f, &f.tensors()[ti]))
    }

    /// The bytes of a named tensor.
    pub fn tensor_data(&self, name: &str) -> Option<&[u8]> {
        self.tensor(name).map(|(f, t)| f.tensor_data(t))
    }

    /// Every tensor with the file holding it, shard by shard in file order.
    pub fn tensors(&self) -> impl Iterator<Item = (&GgufFile, &TensorInfo)> {
        self.files
            .iter()
            .flat_map(|f| f.tensors().iter().map(move |t| (f, t)))
    }
}

fn split_count(f: &GgufFile) -> Result<u32, GgufError> {
    match f.get(SPLIT_COUNT_KEY) {
        None => Ok(1),
        Some(v) => v
            .as_u64()
            .and_then(|c| u32::try_from(c).ok())
            .filter(|&c| c >= 1)
            .ok_or_else(|| split_err(format!("{SPLIT_COUNT_KEY} is {v:?}, not a positive count"))),
    }
}

fn split_no(f: &GgufFile) -> Result<u32, GgufError> {
    let v = f
        .get(SPLIT_NO_KEY)
        .ok_or_else(|| split_err(format!("a shard has no {SPLIT_NO_KEY}")))?;
    v.as_u64()
        .and_then(|c| u32::try_from(c).ok())
        .ok_or_else(|| split_err(format!("{SPLIT_NO_KEY} is {v:?}, not a shard number")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names() {
        assert_eq!(
            parse_shard_name(Path::new("/m/Qwen-7B-Q4_K_M-00002-of-00003.gguf")),
            Some(("Qwen-7B-Q4_K_M".into(), 2, 3))
        );
        assert_eq!(parse_shard_name(Path::new("model.gguf")), None);
        assert_eq!(parse_shard_name(Path::new("m-2-of-3.gguf")), None);
        let paths = shard_paths(Path::new("/m/x-00001-of-00002.gguf"), 2).unwrap();
        assert_eq!(
            paths,
            [
                PathBuf::from("/m/x-00001-of-00002.gguf"),
                PathBuf::from("/m/x-00002-of-00002.gguf")
            ]
        );
    }
}
