//! llama-server's `POST /slots/{id}?action=save|restore|erase` (with `--slot-save-path`): a
//! slot's cache saved to a file (`{"filename"}`), restored from one, or erased; answered in its
//! form (`n_saved`/`n_written`, `n_restored`/`n_read`, `n_erased`). See `http::slot_files`.

use crate::http::body::{json_object, Fields};
use crate::http::errors::{ApiError, ApiResult};
use crate::http::scheduler::Job;
use crate::http::slot_files::{valid_filename, SlotFileAction};
use crate::http::state::AppState;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use std::collections::HashMap;

pub async fn slot_action(State(app): State<AppState>, Path(id): Path<String>, Query(q): Query<HashMap<String, String>>, body: Bytes) -> ApiResult<Json<Value>> {
    let r = app.ready()?;
    let Some(dir) = &r.slot_save_path else {
        return Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "This server does not support slots action. Start it with `--slot-save-path`"));
    };
    let slot = id.parse::<usize>().ok().filter(|&s| s < r.parallel).ok_or_else(|| ApiError::bad_request(format!("Invalid slot ID {id:?}: the slots are 0 to {}", r.parallel - 1)))?;
    // save and restore name a file; erase takes no body
    let filename = || -> ApiResult<String> {
        let body = json_object(&body)?;
        let name = Fields(&body).str("filename")?.ok_or_else(|| ApiError::bad_request("\"filename\" is required"))?;
        if !valid_filename(name) {
            return Err(ApiError::bad_request(format!("Invalid filename {name:?}: one plain file name inside --slot-save-path")));
        }
        Ok(name.to_string())
    };
    let (action, name) = match q.get("action").map(String::as_str) {
        Some("save") => filename().map(|n| (SlotFileAction::Save(dir.join(&n)), Some(n)))?,
        Some("restore") => filename().map(|n| (SlotFileAction::Restore(dir.join(&n)), Some(n)))?,
        Some("erase") => (SlotFileAction::Erase, None),
        _ => return Err(ApiError::bad_request("Invalid action: ?action= takes save, restore or erase")),
    };
    let restore = matches!(action, SlotFileAction::Restore(_));
    let done = r.scheduler.ask(|tx| Job::SlotFile { slot, action, tx }).await?;
    Ok(Json(match name {
        None => json!({"id_slot": slot, "n_erased": done.n_tokens}),
        Some(name) if restore => json!({"id_slot": slot, "filename": name, "n_restored": done.n_tokens, "n_read": done.n_bytes, "timings": {"restore_ms": done.ms}}),
        Some(name) => json!({"id_slot": slot, "filename": name, "n_saved": done.n_tokens, "n_written": done.n_bytes, "timings": {"save_ms": done.ms}}),
    }))
}
