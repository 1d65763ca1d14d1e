//! What every route sees: the options, the metrics, and — once the model has loaded — the
//! engine, its scheduler and the model facts the routes report.

use super::errors::ApiError;
use super::metrics::Metrics;
use super::scheduler::Scheduler;
use lse_engine::Engine;
use std::sync::{Arc, OnceLock};

/// The loaded model.
pub struct Ready {
    pub engine: Arc<Engine>,
    pub scheduler: Scheduler,
    /// The id `/v1/models` reports and responses carry: `--alias`, else the file name.
    pub model_id: String,
    /// The chat template served (see `template::choose`).
    pub chat_template: super::template::ChatTemplate,
    /// How embeddings pool: `--pooling`, else the model's own; `None`: no embeddings.
    pub pooling: Option<lse_engine::Pooling>,
    /// `--parallel`: sequences decoded at once (llama-server's slots).
    pub parallel: usize,
    /// `GET /slots` answers (`--no-slots` turns it off).
    pub slots_endpoint: bool,
    /// `--slot-save-path`: the directory of slot files (none: slot actions answer 501).
    pub slot_save_path: Option<std::path::PathBuf>,
}

pub struct App {
    pub ready: OnceLock<Ready>,
    pub metrics: Arc<Metrics>,
    pub api_key: Option<String>,
    pub alias: Option<String>,
    pub model_file: String,
}

impl App {
    /// The loaded model, or 503 while it loads.
    pub fn ready(&self) -> Result<&Ready, ApiError> {
        self.ready.get().ok_or_else(|| ApiError::unavailable("Loading model"))
    }

    pub fn model_id(&self) -> String {
        self.alias.clone().unwrap_or_else(|| self.model_file.clone())
    }
}

pub type AppState = Arc<App>;
