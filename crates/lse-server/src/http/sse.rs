//! Server-sent events: `data: {json}` chunks from a channel, ending with `data: [DONE]`.
//! When the client goes away the body is dropped, the channel closes, and the producer (and
//! through it the scheduler) notices.

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// A channel whose receiver is the SSE body; send JSON chunks, then `done()`.
pub struct SseSender(mpsc::Sender<Result<Event, Infallible>>);

impl SseSender {
    /// `false` when the client has gone.
    pub async fn json(&self, v: &serde_json::Value) -> bool {
        self.0.send(Ok(Event::default().data(v.to_string()))).await.is_ok()
    }

    pub async fn done(self) {
        let _ = self.0.send(Ok(Event::default().data("[DONE]"))).await;
    }
}

/// The response and the sender that feeds it.
pub fn channel() -> (Response, SseSender) {
    let (tx, rx) = mpsc::channel(64);
    let resp = Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response();
    (resp, SseSender(tx))
}
