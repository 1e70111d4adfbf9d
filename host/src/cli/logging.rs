//! What hookhost says about itself: log lines on stderr, as text or JSON, and spans over
//! OTLP when a collector is configured.

use anyhow::{Context, Result};
use hookhost::config::Plan;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The filter directive that keeps rmcp's per-answer warnings out of the log (see
/// [`init`]); `HOOKHOST_LOG` replaces the whole filter, so it names it too to keep it.
pub const QUIET_RMCP: &str = "rmcp::service=error";

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event (coloured on a terminal).
    #[default]
    Text,
    /// One JSON object per line, for a log shipper: `timestamp`, `level`, `target`,
    /// `fields.message` and the event's fields, and the spans it happened in (a call's
    /// `tool`, `tenant`, `session`).
    Json,
}

/// Where spans go: `[telemetry] otlp_endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`; both
/// are base URLs (`http://collector:4318`) to which `/v1/traces` is added.
pub fn otlp_endpoint(plan: Option<&Plan>) -> Option<String> {
    plan.and_then(|p| p.otlp_endpoint.clone())
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok())
        .filter(|e| !e.is_empty())
}

/// Logs to stderr: warnings by default, hookhost's own info (`-v`) or debug (`-vv`) events
/// with other crates' warnings (wasmtime and cranelift are noisy below that); colours only
/// on a terminal. With an OTLP endpoint, hookhost's spans (a call, each layer phase) are
/// exported too, whatever the log level: the [`Spans`] returned must be finished at exit
/// to send the last ones.
///
/// rmcp's service loop logs a warning for every error a handler answers (`response
/// error`, in Rust's `Debug` form): each is hookhost's own answer — a call over its rate,
/// an unknown tool — which hookhost says itself, once, at `info`; so by default rmcp's
/// service warns only of errors ([`QUIET_RMCP`]).
pub fn init(verbose: u8, format: LogFormat, otlp: Option<&str>) -> Option<Spans> {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let default = match verbose {
        0 => format!("warn,{QUIET_RMCP}"),
        1 => format!("warn,hookhost=info,{QUIET_RMCP}"),
        _ => format!("warn,hookhost=debug,{QUIET_RMCP}"),
    };
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("HOOKHOST_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&default))
    };
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(filter())
    });
    let json = (format == LogFormat::Json).then(|| {
        hookhost::announce::use_json();
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .with_filter(filter())
    });
    let spans = otlp.and_then(|endpoint| match Spans::start(endpoint) {
        Ok(spans) => Some(spans),
        Err(e) => {
            hookhost::announce::warning(&format!("spans will not be exported: {e:#}"));
            None
        }
    });
    let otel = spans.as_ref().map(|spans| {
        use opentelemetry::trace::TracerProvider;
        tracing_opentelemetry::layer()
            .with_tracer(spans.provider.tracer("hookhost"))
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("hookhost", tracing::Level::INFO),
            )
    });
    tracing_subscriber::registry()
        .with(text)
        .with(json)
        .with(otel)
        .init();
    spans
}

/// Spans exported over OTLP/HTTP (protobuf), in batches from their own thread.
pub struct Spans {
    provider: SdkTracerProvider,
    endpoint: String,
    /// Why an export failed, the first time one did.
    failed: Arc<Mutex<Option<String>>>,
}

impl Spans {
    fn start(endpoint: &str) -> Result<Spans> {
        use opentelemetry_otlp::{Protocol, WithExportConfig};
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url)
            .build()
            .context("cannot build the OTLP exporter")?;
        let failed = Arc::new(Mutex::new(None));
        let exporter = Reporting {
            inner: exporter,
            failed: failed.clone(),
        };
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("hookhost")
                    .build(),
            )
            .build();
        Ok(Spans {
            provider,
            endpoint: endpoint.to_string(),
            failed,
        })
    }

    /// Sends the spans not sent yet, waiting at most `flush` — or the standard
    /// `OTEL_BSP_EXPORT_TIMEOUT` (milliseconds) when set: a collector that is down or slow
    /// must not hold up the exit — and says once on stderr if spans were lost.
    pub fn finish(self, flush: Duration) {
        let flush = std::env::var("OTEL_BSP_EXPORT_TIMEOUT")
            .ok()
            .and_then(|ms| ms.trim().parse().ok())
            .map_or(flush, Duration::from_millis);
        let shut = self.provider.shutdown_with_timeout(flush);
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner()).take();
        let endpoint = &self.endpoint;
        match (shut, failed) {
            (Err(e), _) => hookhost::announce::warning(&format!(
                "the last spans were not sent to {endpoint} within {} ms: {e}",
                flush.as_millis()
            )),
            (Ok(()), Some(why)) => hookhost::announce::warning(&format!(
                "spans could not be sent to {endpoint}: {why}"
            )),
            (Ok(()), None) => {}
        }
    }
}

/// An exporter that remembers why its first failed export failed: the batch processor
/// drops a failed batch without a word.
#[derive(Debug)]
struct Reporting<E> {
    inner: E,
    failed: Arc<Mutex<Option<String>>>,
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            failed.get_or_insert_with(|| e.to_string());
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
}
