//! Native part of the `lse` Python package (`lse._lse`).
//!
//! The Python wrapper (`python/lse/__init__.py`) turns whatever the caller passed (numpy arrays of
//! any float dtype, nested lists, objects with `__array__`) into C-contiguous numpy arrays of the
//! types below and checks their shapes; the functions here do the math and the remaining checks.
//! Every bad argument becomes a `ValueError` whose message names the argument.

use lse_eval::conditional::{conditional_perplexity, ConditionalError, LogitValue};
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::sync::Mutex;

fn value_error(e: ConditionalError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn conditional<L: LogitValue + numpy::Element + Sync>(
    py: Python<'_>,
    logits: PyReadonlyArray3<'_, L>,
    target_ids: PyReadonlyArray2<'_, i64>,
    response_mask: PyReadonlyArray2<'_, i64>,
) -> PyResult<(f64, f64, usize)> {
    let shape = logits.shape();
    let (b, t, v) = (shape[0], shape[1], shape[2]);
    let l = logits
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("logits: {e}")))?;
    let ids = target_ids
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("target_ids: {e}")))?;
    let mask = response_mask
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("response_mask: {e}")))?;
    let r = py
        .allow_threads(|| conditional_perplexity(l, b, t, v, ids, mask))
        .map_err(value_error)?;
    Ok((
        r.negative_log_likelihood,
        r.perplexity,
        r.selected_token_count,
    ))
}

/// `(nll, perplexity, selected)` for float32 logits `[B, T, V]`, int64 ids and mask `[B, T]`.
#[pyfunction]
fn conditional_perplexity_f32(
    py: Python<'_>,
    logits: PyReadonlyArray3<'_, f32>,
    target_ids: PyReadonlyArray2<'_, i64>,
    response_mask: PyReadonlyArray2<'_, i64>,
) -> PyResult<(f64, f64, usize)> {
    conditional(py, logits, target_ids, response_mask)
}

/// `(nll, perplexity, selected)` for float64 logits `[B, T, V]`, int64 ids and mask `[B, T]`.
#[pyfunction]
fn conditional_perplexity_f64(
    py: Python<'_>,
    logits: PyReadonlyArray3<'_, f64>,
    target_ids: PyReadonlyArray2<'_, i64>,
    response_mask: PyReadonlyArray2<'_, i64>,
) -> PyResult<(f64, f64, usize)> {
    conditional(py, logits, target_ids, response_mask)
}

// ------------------------------------------------------------------------------------------ engine

/// A scoring run's progress that looks for a pending Python signal after each window (the GIL is
/// released while the model works, so Ctrl-C would otherwise wait for the whole run); the run
/// then ends before its next window and the signal's exception is raised.
struct Interruptible(Option<PyErr>);

impl lse_eval::Progress for Interruptible {
    fn update(&mut self, _: &lse_eval::ProgressInfo) {
        if self.0.is_none() {
            self.0 = Python::with_gil(|py| py.check_signals()).err();
        }
    }
    fn cancelled(&self) -> bool {
        self.0.is_some()
    }
}

/// The error as Python's exception; options named as the keyword arguments name them.
fn eval_error(e: lse_eval::EvalError) -> PyErr {
    use lse_eval::EvalError as E;
    let message = lse_eval::in_field_terms(&e.to_string());
    match e {
        E::InvalidOption(_)
        | E::Input(_)
        | E::TooShort(_)
        | E::WindowTooLarge(_)
        | E::KldBase(_) => PyValueError::new_err(message),
        E::Output(_) => pyo3::exceptions::PyOSError::new_err(message),
        E::Engine(_) | E::Cancelled => PyRuntimeError::new_err(message),
    }
}

fn engine_error(e: lse_engine::EngineError) -> PyErr {
    use lse_engine::EngineError as E;
    let message = lse_eval::in_field_terms(&e.to_string());
    match e {
        E::InvalidOption(_)
        | E::InvalidRequest(_)
        | E::PromptTooLong { .. }
        | E::InvalidToken { .. }
        | E::WindowTooLong { .. } => PyValueError::new_err(message),
        E::ModelPath(..) => pyo3::exceptions::PyOSError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// A loaded model (`lse._lse.NativeEngine`; the Python `lse.Engine` wraps it). Calls on one
/// engine are serialised; the GIL is released while the model works.
#[pyclass(module = "lse._lse", frozen)]
struct NativeEngine {
    engine: lse_engine::Engine,
    /// The model as opened (a file or a folder), for a shard's model-file SHA-256.
    model: std::path::PathBuf,
    busy: Mutex<()>,
}

impl NativeEngine {
    fn serial<T>(&self, f: impl FnOnce(&lse_engine::Engine) -> T) -> T {
        let _guard = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        f(&self.engine)
    }
}

#[pymethods]
impl NativeEngine {
    /// Opens a model from the engine options object (the C API's `lse_engine_open` JSON), read
    /// and checked by `lse_engine::OpenOptions`.
    #[new]
    fn new(py: Python<'_>, options_json: &str) -> PyResult<NativeEngine> {
        let o = lse_engine::OpenOptions::parse(options_json).map_err(PyValueError::new_err)?;
        let model = o.model.clone();
        let engine = py
            .allow_threads(|| lse_engine::Engine::load(&o.model, o.engine))
            .map_err(engine_error)?;
        Ok(NativeEngine {
            engine,
            model,
            busy: Mutex::new(()),
        })
    }

    /// Runs a SPEC §7 request (JSON text) and returns the SPEC §4 report as JSON text; Ctrl-C
    /// stops the run at its next window (KeyboardInterrupt).
    fn perplexity_json(&self, py: Python<'_>, request: &str) -> PyResult<String> {
        let v: serde_json::Value = serde_json::from_str(request)
            .map_err(|e| PyValueError::new_err(format!("request: {e}")))?;
        let mut req = lse_eval::PerplexityRequest::from_json(&v).map_err(eval_error)?;
        let mut watch = Interruptible(None);
        let report = py
            .allow_threads(|| {
                if req.shard.is_some() && req.model_sha256.is_none() {
                    // a shard's fingerprint names the model's files
                    req.model_sha256 = Some(lse_eval::model_sha256(&self.model)?);
                }
                self.serial(|e| lse_eval::run_perplexity(e, &req, &mut watch))
            })
            .map_err(|e| watch.0.take().unwrap_or_else(|| eval_error(e)))?;
        // a signal that came during the last window
        if let Some(e) = watch.0.take() {
            return Err(e);
        }
        serde_json::to_string(&report).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// Runs a generation request (JSON text, the C API's `lse_generate` object) and returns the
    /// `lse.generation` object as JSON text. Options are validated by the engine, not here.
    fn generate_json(&self, py: Python<'_>, request: &str) -> PyResult<String> {
        let req = lse_engine::GenerateRequest::from_json(request).map_err(PyValueError::new_err)?;
        let report = py.allow_threads(|| self.serial(|e| e.generate(&req))).map_err(engine_error)?;
        serde_json::to_string(&report).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// Full logits `[T, V]` (float32) for `tokens`, run as one fresh session through the same
    /// prefill a prompt gets; row `i` is the prediction after `tokens[..=i]`.
    fn logits<'py>(
        &self,
        py: Python<'py>,
        tokens: Vec<u32>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let v = self.engine.n_vocab();
        lse_engine::check_token_ids(&tokens, v)
            .map_err(|e| PyValueError::new_err(format!("tokens: {e}")))?;
        if tokens.is_empty() {
            return Ok(PyArray2::zeros(py, [0, v], false));
        }
        let n = tokens.len();
        let data = py
            .allow_threads(|| {
                self.serial(|e| {
                    let positions: Vec<usize> = (0..n).collect();
                    let rows = e.prefill(&tokens, &positions)?;
                    e.head_logits(&rows)
                })
            })
            .map_err(engine_error)?;
        let arr = numpy::ndarray::Array2::from_shape_vec((n, v), data)
            .map_err(|e| PyRuntimeError::new_err(format!("logits: {e}")))?;
        Ok(arr.into_pyarray(py))
    }

    /// Runs an embeddings request (JSON text, the C API's `lse_embed` object); returns the
    /// vectors as `[N, n_embd]` float32.
    fn embed_json<'py>(&self, py: Python<'py>, request: &str) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let req = lse_engine::EmbedRequest::from_json(request).map_err(PyValueError::new_err)?;
        let report = py.allow_threads(|| self.serial(|e| e.embed_request(&req))).map_err(engine_error)?;
        let (n, e) = (report.embeddings.len(), self.engine.n_embd());
        let arr = numpy::ndarray::Array2::from_shape_vec((n, e), report.embeddings.concat()).map_err(|e| PyRuntimeError::new_err(format!("embed: {e}")))?;
        Ok(arr.into_pyarray(py))
    }

    /// Token ids of `text` (special tokens added as the vocabulary asks when `add_special`).
    #[pyo3(signature = (text, add_special=true, parse_special=false))]
    fn tokenize(
        &self,
        py: Python<'_>,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Vec<u32> {
        py.allow_threads(|| {
            self.engine
                .tokenizer()
                .tokenize(text, add_special, parse_special)
        })
    }

    #[getter]
    fn n_vocab(&self) -> usize {
        self.engine.n_vocab()
    }

    #[getter]
    fn architecture(&self) -> String {
        self.engine.architecture().to_string()
    }

    #[getter]
    fn model_name(&self) -> String {
        self.engine.model_name().to_string()
    }

    #[getter]
    fn kv_capacity(&self) -> usize {
        self.engine.kv_capacity()
    }

    #[getter]
    fn load_notes(&self) -> Vec<String> {
        self.engine.tokenizer().load_notes().to_vec()
    }

    /// The SPEC §4 `config` object as JSON text, as a report writes it.
    fn config_json(&self) -> String {
        lse_eval::Scorer::config_json(&self.engine).to_string()
    }
}

/// Merges shard files (`{"shards": [paths], "kld_base_out", "include_windows",
/// "include_token_ids"}` as JSON text) into the SPEC §4 report (JSON text), as
/// `lse-server --perplexity-merge` does; writes the merged KL base when the shards recorded one.
#[pyfunction]
fn merge_shards_json(py: Python<'_>, request: &str) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(request)
        .map_err(|e| PyValueError::new_err(format!("merge request: {e}")))?;
    let req = lse_eval::MergeRequest::from_json(&v).map_err(eval_error)?;
    let report = py.allow_threads(|| lse_eval::merge(&req)).map_err(eval_error)?;
    serde_json::to_string(&report).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

#[pymodule]
fn _lse(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(merge_shards_json, m)?)?;
    m.add_function(wrap_pyfunction!(conditional_perplexity_f32, m)?)?;
    m.add_function(wrap_pyfunction!(conditional_perplexity_f64, m)?)?;
    m.add_class::<NativeEngine>()?;
    Ok(())
}
