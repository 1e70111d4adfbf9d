//! A guest's stderr, kept for the log.

use crate::limits::GUEST_STDERR_BYTES;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// What a guest writes to stderr, bounded by [`GUEST_STDERR_BYTES`] between two reads by
/// the host. A write never fails: what does not fit is dropped and counted. (wasmtime's
/// `MemoryOutputPipe` reports itself closed once full, and a guest whose write fails may
/// fail with it — Rust's `eprintln!` panics — so a per-session instance that logs would
/// start trapping once it had written 64 KiB in its life.) The host drains it when it logs
/// it, after each phase.
#[derive(Clone, Default)]
pub struct GuestLog {
    inner: Arc<Mutex<Kept>>,
}

#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    dropped: usize,
}

impl GuestLog {
    fn append(&self, bytes: &[u8]) {
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = GUEST_STDERR_BYTES.saturating_sub(kept.bytes.len());
        let (fits, over) = bytes.split_at(bytes.len().min(room));
        kept.bytes.extend_from_slice(fits);
        kept.dropped += over.len();
    }

    /// What was written since the last [`GuestLog::take`], without taking it.
    pub fn peek(&self) -> String {
        let kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        text(&kept)
    }

    /// What was written since the last time, taken: the room is free again.
    pub fn take(&self) -> String {
        let mut kept = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let taken = text(&kept);
        *kept = Kept::default();
        taken
    }
}

fn text(kept: &Kept) -> String {
    let mut text = String::from_utf8_lossy(&kept.bytes).into_owned();
    if kept.dropped > 0 {
        text.push_str(&format!("\n[{} more bytes dropped]", kept.dropped));
    }
    text
}

#[async_trait::async_trait]
impl OutputStream for GuestLog {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always room: what does not fit is dropped, not refused.
        Ok(GUEST_STDERR_BYTES)
    }
}

#[async_trait::async_trait]
impl Pollable for GuestLog {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_never_fail_and_taking_frees_the_room() {
        let mut log = GuestLog::default();
        for _ in 0..3 {
            for _ in 0..10 {
                log.write(bytes::Bytes::from(vec![b'x'; 10_000])).unwrap();
            }
            let taken = log.take();
            assert!(taken.starts_with(&"x".repeat(GUEST_STDERR_BYTES)));
            assert!(taken.ends_with(&format!(
                "[{} more bytes dropped]",
                100_000 - GUEST_STDERR_BYTES
            )));
            assert_eq!(log.peek(), "");
        }
    }
}
