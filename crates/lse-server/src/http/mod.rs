//! The HTTP server (SPEC §11): OpenAI-compatible routes on tokio + axum, one scheduler thread
//! that batches every running sequence through the engine (continuous batching).
//!
//! Start-up: bind, print the address, load the model in the background (`/health` answers 503
//! until it is ready), then serve. SIGINT/SIGTERM: stop accepting, end the jobs in flight, exit 0.

mod auth;
mod body;
mod errors;
mod generate;
mod metrics;
mod native;
mod openai;
mod options;
mod prompts;
mod routes;
mod scheduler;
mod scoring;
mod session_cache;
mod slot_files;
mod slots;
mod sse;
mod state;
pub(crate) mod template;
mod tools;

use crate::args::Args;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use errors::ApiError;
use scheduler::Scheduler;
use state::{App, AppState, Ready};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Largest request body (a long token-id prompt fits easily).
const MAX_BODY: usize = 8 * 1024 * 1024;
/// Jobs that may wait for the scheduler beyond the running ones.
const QUEUE: usize = 256;

pub fn serve(args: &Args, model: &Path) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("lse-http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    rt.block_on(run(args, model))
}

fn router(app: AppState) -> Router {
    Router::new()
        .route("/health", get(routes::info::health))
        .route("/v1/health", get(routes::info::health))
        .route("/v1/models", get(routes::info::models))
        .route("/models", get(routes::info::models))
        .route("/v1/completions", post(routes::completions::completions))
        .route("/completions", post(routes::completions::completions))
        .route("/v1/chat/completions", post(routes::chat::chat))
        .route("/chat/completions", post(routes::chat::chat))
        .route("/completion", post(routes::completion::completion))
        .route("/infill", post(routes::infill::infill))
        .route("/v1/embeddings", post(routes::embeddings::embeddings))
        .route("/embeddings", post(routes::embeddings::embeddings))
        .route("/embedding", post(routes::embeddings::embedding))
        .route("/tokenize", post(routes::tokens::tokenize))
        .route("/detokenize", post(routes::tokens::detokenize))
        .route("/tokenizer_info", get(routes::info::tokenizer_info))
        .route("/props", get(routes::info::props))
        .route("/apply-template", post(routes::chat::apply_template))
        .route("/v1/perplexity", post(routes::perplexity::perplexity))
        .route("/metrics", get(routes::info::metrics))
        .route("/slots", get(routes::info::slots))
        .route("/slots/{id_slot}", post(routes::slot_action::slot_action))
        .fallback(|| async { ApiError::new(axum::http::StatusCode::NOT_FOUND, "no such endpoint") })
        .method_not_allowed_fallback(|| async { ApiError::new(axum::http::StatusCode::METHOD_NOT_ALLOWED, "this endpoint does not take that method") })
        .layer(axum::middleware::from_fn_with_state(app.clone(), auth::require_key))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(route_panic))
        // outermost: a browser's preflight is answered before the API key is asked for, as
        // llama-server does, and every answer (errors too) lets any origin read it
        .layer(tower_http::cors::CorsLayer::permissive())
        .with_state(app)
}

/// A panic inside a route fails that request with a 500; the server goes on.
fn route_panic(p: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "panic".into());
    eprintln!("lse-server: internal error in a request (the server goes on): {msg}");
    ApiError::internal(format!("internal error: {msg}")).into_response()
}

/// Loads the engine and starts the scheduler; on failure the process ends (nothing to serve).
fn load(app: AppState, args: Args, model: std::path::PathBuf) -> Option<std::thread::JoinHandle<()>> {
    let fail = |e: String| -> ! {
        eprintln!("lse-server: {e}");
        std::process::exit(1);
    };
    let engine = Arc::new(crate::engine_modes::load_engine(&model, &args).unwrap_or_else(|e| fail(e)));
    let gguf_template = lse_engine::open_model_metadata(&model).ok().and_then(|f| f.get_str("tokenizer.chat_template").map(str::to_string));
    let chat_template = template::choose(args.serve.chat_template.as_deref(), gguf_template).unwrap_or_else(|e| fail(e));
    let parallel = args.serve.parallel.max(1);
    if let Some(dir) = &args.serve.slot_save_path {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| fail(format!("--slot-save-path {}: {e}", dir.display())));
    }
    let (scheduler, handle) = Scheduler::start(engine.clone(), parallel, QUEUE, app.metrics.clone());
    let pooling = args.serve.pooling.or(engine.model_pooling());
    let ready = Ready { engine, scheduler, model_id: app.model_id(), chat_template, pooling, parallel, slots_endpoint: args.serve.slots, slot_save_path: args.serve.slot_save_path.clone() };
    if app.ready.set(ready).is_err() {
        return None;
    }
    eprintln!("lse-server: model loaded, serving");
    Some(handle)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

async fn run(args: &Args, model: &Path) -> Result<(), String> {
    let s = &args.serve;
    let listener = tokio::net::TcpListener::bind((s.host.as_str(), s.port))
        .await
        .map_err(|e| format!("cannot listen on {}:{}: {e}", s.host, s.port))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let model_file = model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| model.display().to_string());
    let app: AppState = Arc::new(App { ready: OnceLock::new(), metrics: Default::default(), api_key: s.api_key.clone(), alias: s.alias.clone(), model_file });
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "lse-server: listening on http://{addr}");
        let _ = out.flush();
    }
    let loader = {
        let (app, args, model) = (app.clone(), args.clone(), model.to_path_buf());
        std::thread::Builder::new().name("lse-load".into()).spawn(move || load(app, args, model)).map_err(|e| e.to_string())?
    };
    let stopping = {
        let app = app.clone();
        async move {
            shutdown_signal().await;
            eprintln!("lse-server: shutting down");
            if let Some(r) = app.ready.get() {
                r.scheduler.shutdown();
            }
        }
    };
    axum::serve(listener, router(app.clone()))
        .with_graceful_shutdown(stopping)
        .await
        .map_err(|e| format!("the server failed: {e}"))?;
    // a model still loading is abandoned (the process exits); a running scheduler is joined
    if loader.is_finished() {
        if let Ok(Some(h)) = loader.join() {
            if let Some(r) = app.ready.get() {
                r.scheduler.shutdown();
            }
            let _ = h.join();
        }
    }
    Ok(())
}
