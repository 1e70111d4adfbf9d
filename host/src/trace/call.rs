//! One call's trace in the making: its events, file changes seen around each phase,
//! metrics and spans ([`CallTrace`]).

use super::files::{self, Change, Entry, EntryType};
use super::hash::{HashBudget, Unhashed};
use super::{
    EVENTS_FILE, Event, Phase, PhaseEnd, SCHEMA_VERSION, SessionTrace, TRACE_DIR, observe,
};
use crate::limits::{INLINE_DIFF_BYTES, TRACE_TEXT_BYTES};
use crate::metrics::Metrics;
use crate::mounts::{ResolvedMount, Scope};
use crate::network::{Request, RequestLog};
use crate::persistent::{CommitReport, LoadReport, PersistentError};
use crate::sessions::{Session, SessionError};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

/// What the host observes of one call, in the making: its trace events (when its tenant
/// is traced), its metrics, and a `tracing` span per layer phase (what OpenTelemetry
/// exports).
pub struct CallTrace<'a> {
    pub(super) state: Option<Arc<SessionTrace>>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) session: &'a Session,
    pub(super) call: &'a str,
    pub(super) tool: &'a str,
    pub(super) diff_bytes: usize,
    /// What its looks may still read and hash, over all its phases and mounts.
    pub(super) budget: Arc<HashBudget>,
    /// How long its diffs may still search for the shortest edit.
    pub(super) diff_time_left: Duration,
    /// Events not yet written to the trace file.
    pub(super) lines: Vec<String>,
    /// Diff files written for this call.
    pub(super) diffs: u32,
    /// The call's components' network requests, as they end.
    pub(super) requests: Arc<RequestLog>,
    /// Whether the runtime's inotify queue was read at the end of the phase just left, no
    /// phase having run since: the next phase's looks take what that read routed to their
    /// mounts, not reading the queue again. (What something outside the chain changes in
    /// between is then the next phase's, as what it changes during a phase already is.)
    pub(super) pumped: bool,
}

/// A phase under way.
pub struct Watch {
    layer: String,
    phase: Phase,
    /// Its layer's writable mounts, looked at before it.
    writable: Vec<ResolvedMount>,
    started: Instant,
    span: tracing::Span,
}

impl<'a> CallTrace<'a> {
    /// Before a phase of `layer`, which is granted `mounts` (virtual path, writable):
    /// announces mounts first granted in the session, and records what changed in the
    /// writable ones since they were last looked at (by something outside the chain).
    pub async fn enter(&mut self, layer: &str, phase: Phase, mounts: &[(&str, bool)]) -> Watch {
        let mut watched = Vec::new();
        let pumped = std::mem::take(&mut self.pumped);
        if let Some(state) = self.state.clone() {
            // The queue read once, before the looks; not again when the end of the phase
            // just left read it, unless in a fleet (what changed between phases may be
            // another host's: taken in below, not this phase's). Should the read fail,
            // each look reads it (and walks its mount should that fail too).
            let read = (state.fleet || !pumped) && mounts.iter().any(|&(_, writable)| writable);
            let pump = read && !state.pump();
            for &(path, writable) in mounts {
                let Some(mount) = self
                    .session
                    .mounts()
                    .iter()
                    .find(|m| m.virtual_path == path)
                else {
                    continue;
                };
                let first = state.mark_mounted(path);
                if !writable {
                    if first {
                        self.mounted(layer, mount, false, None);
                    }
                    continue;
                }
                if let Some(look) = observe(&state, mount, first, pump, &self.budget).await {
                    if first {
                        self.mounted(layer, mount, true, look.size);
                    }
                    // In a fleet, what changed between phases may be another host's
                    // calls, which that host reports: taken in, not reported.
                    if !state.fleet {
                        self.changes(None, None, mount, look.changes).await;
                    }
                }
                watched.push(mount.clone());
            }
        }
        let span = tracing::info_span!(
            "layer",
            otel.name = %format_args!("{layer} {}", phase.as_str()),
            layer,
            phase = phase.as_str(),
            outcome = tracing::field::Empty,
            failure_kind = tracing::field::Empty,
        );
        Watch {
            layer: layer.to_string(),
            phase,
            writable: watched,
            started: Instant::now(),
            span,
        }
    }

    /// After a phase: its event, then what it changed in its writable mounts.
    pub async fn leave(&mut self, watch: Watch, end: PhaseEnd<'_>) {
        let elapsed = watch.started.elapsed();
        let (outcome, failure) = match &end {
            PhaseEnd::Passed { .. }
            | PhaseEnd::Executed {
                is_error: false, ..
            } => ("passed", None),
            PhaseEnd::Executed { is_error: true, .. } => ("tool-error", None),
            PhaseEnd::Refused { .. } => ("refused", None),
            PhaseEnd::Failed { failure } => ("failed", Some(failure.kind.to_string())),
        };
        watch.span.record("outcome", outcome);
        if let Some(kind) = &failure {
            watch.span.record("failure_kind", kind.as_str());
        }
        self.metrics.phase(
            &watch.layer,
            watch.phase.as_str(),
            elapsed.as_secs_f64(),
            failure.as_deref(),
        );
        if let PhaseEnd::Passed { took_out, .. } = end
            && took_out > 0
        {
            self.metrics
                .offloaded(self.session.tenant.as_str(), &watch.layer, took_out);
        }
        let Some(state) = self.state.clone() else {
            self.network(Some(watch.phase));
            return;
        };
        let duration_us = elapsed.as_micros() as u64;
        let (kind, detail) = match end {
            PhaseEnd::Passed { rewrote, .. } => (
                match watch.phase {
                    Phase::After => "hook.after",
                    _ => "hook.before",
                },
                serde_json::json!({ "duration_us": duration_us, "rewrote": rewrote }),
            ),
            PhaseEnd::Refused { message } => (
                "hook.refused",
                serde_json::json!({ "duration_us": duration_us, "message": bounded(message) }),
            ),
            PhaseEnd::Failed { failure } => (
                if watch.phase == Phase::Execute {
                    "tool.executed"
                } else {
                    "hook.failed"
                },
                serde_json::json!({
                    "duration_us": duration_us,
                    "failure": failure.kind.to_string(),
                    "detail": bounded(&failure.detail),
                    "stderr": failure.stderr.as_deref().map(bounded),
                }),
            ),
            PhaseEnd::Executed {
                is_error,
                output_bytes,
            } => (
                "tool.executed",
                serde_json::json!({
                    "duration_us": duration_us,
                    "is_error": is_error,
                    "output_bytes": output_bytes,
                }),
            ),
        };
        self.event(kind, Some(&watch.layer), Some(watch.phase.as_str()), detail);
        self.network(Some(watch.phase));
        if !watch.writable.is_empty() {
            self.pumped = state.pump();
        }
        for mount in watch.writable {
            if let Some(look) = observe(&state, &mount, false, !self.pumped, &self.budget).await {
                self.changes(Some(&watch.layer), Some(watch.phase), &mount, look.changes)
                    .await;
            }
        }
    }

    /// `persistent_dir.loaded`: a persistent directory's checkout was loaded for this call.
    pub fn persistent_loaded(&mut self, mount: &str, loaded: &LoadReport) {
        self.event(
            "persistent_dir.loaded",
            None,
            None,
            serde_json::json!({
                "mount": mount,
                "files": loaded.files,
                "bytes": loaded.bytes,
                "ms": loaded.ms,
            }),
        );
    }

    /// `persistent_dir.commit.started`, then `.succeeded` (what it published) or `.failed`
    /// (why, and the files in conflict); counted by outcome for the tenant.
    pub fn persistent_committed(
        &mut self,
        mount: &str,
        committed: Result<&CommitReport, &PersistentError>,
    ) {
        self.event(
            "persistent_dir.commit.started",
            None,
            None,
            serde_json::json!({ "mount": mount }),
        );
        let tenant = self.session.tenant.as_str();
        match committed {
            Ok(report) => {
                self.metrics.commit(tenant, "succeeded");
                self.event(
                    "persistent_dir.commit.succeeded",
                    None,
                    None,
                    serde_json::json!({
                        "mount": mount,
                        "created": report.created,
                        "updated": report.updated,
                        "deleted": report.deleted,
                        "kept_theirs": report.kept_theirs,
                        "bytes": report.bytes,
                        "ms": report.ms,
                    }),
                );
            }
            Err(e) => {
                let conflicts = match e {
                    PersistentError::Conflict(paths) => paths.as_slice(),
                    _ => &[],
                };
                let outcome = if conflicts.is_empty() {
                    "failed"
                } else {
                    "conflict"
                };
                self.metrics.commit(tenant, outcome);
                self.event(
                    "persistent_dir.commit.failed",
                    None,
                    None,
                    serde_json::json!({
                        "mount": mount,
                        "reason": e.to_string(),
                        "conflicts": conflicts,
                    }),
                );
            }
        }
    }

    /// What a session's commit did, per mount (see [`Self::persistent_committed`]): what
    /// each published (nothing for one with nothing to publish), or the one that failed.
    pub fn commits(&mut self, committed: &Result<Vec<(String, CommitReport)>, SessionError>) {
        match committed {
            Ok(committed) => {
                for (mount, report) in committed.iter().filter(|(_, r)| !r.is_empty()) {
                    self.persistent_committed(mount, Ok(report));
                }
            }
            Err(SessionError::Commit { mount, source }) => {
                self.persistent_committed(mount, Err(source));
            }
            Err(_) => {}
        }
    }

    /// Where the network requests of the call's components are recorded until its trace
    /// writes them.
    pub fn requests(&self) -> &Arc<RequestLog> {
        &self.requests
    }

    /// Writes the events of a trace that is not a call's (a commit at a turn's end).
    pub fn end(mut self) {
        self.network(None);
        self.flush();
    }

    /// `network.request`: each request the call's components made that ended since the
    /// last look, with its component as the layer (`phase` when it ended in one), and
    /// counted in the metrics.
    pub(super) fn network(&mut self, phase: Option<Phase>) {
        for request in self.requests.take() {
            let Request {
                component,
                method,
                host,
                port,
                rule,
                address,
                status,
                bytes_out,
                bytes_in,
                duration,
                outcome,
                reason,
            } = request;
            self.metrics.network(
                self.session.tenant.as_str(),
                &component,
                rule.as_deref(),
                outcome.as_str(),
                (bytes_out, bytes_in),
            );
            self.event(
                "network.request",
                Some(&component),
                phase.map(Phase::as_str),
                serde_json::json!({
                    "method": method,
                    "host": host,
                    "port": port,
                    "address": address,
                    "status": status,
                    "outcome": outcome.as_str(),
                    "reason": reason,
                    "bytes_out": bytes_out,
                    "bytes_in": bytes_in,
                    "ms": duration.as_secs_f64() * 1000.0,
                }),
            );
        }
    }

    /// The call's last event, and every event not yet written goes to the trace file.
    pub fn finish(mut self, outcome: &str, output_bytes: usize, duration: Duration) {
        self.network(None);
        self.metrics.call(
            self.session.tenant.as_str(),
            self.tool,
            outcome,
            duration.as_secs_f64(),
        );
        if self.state.is_none() {
            return;
        }
        self.event(
            "call.finished",
            None,
            None,
            serde_json::json!({
                "tool": self.tool,
                "outcome": outcome,
                "output_bytes": output_bytes,
                "duration_us": duration.as_micros() as u64,
            }),
        );
        self.flush();
    }

    fn mounted(
        &mut self,
        layer: &str,
        mount: &ResolvedMount,
        writable: bool,
        size: Option<(u64, u64, bool)>,
    ) {
        let scope = match mount.scope {
            Scope::Session => "session",
            Scope::Tenant => "tenant",
            Scope::Persistent => "persistent",
        };
        self.event(
            "filesystem.mounted",
            Some(layer),
            None,
            serde_json::json!({
                "path": mount.virtual_path,
                "scope": scope,
                "in_workdir": mount.in_workdir(),
                "writable": writable,
                "files": size.map(|s| s.0),
                "bytes": size.map(|s| s.1),
                "truncated": size.is_some_and(|s| s.2),
            }),
        );
    }

    /// One `file.*` event per change.
    async fn changes(
        &mut self,
        layer: Option<&str>,
        phase: Option<Phase>,
        mount: &ResolvedMount,
        changes: Vec<Change>,
    ) {
        let paths: Vec<String> = changes
            .iter()
            .map(|change| format!("{}/{}", mount.virtual_path, change.path))
            .collect();
        let diffs = self.diffs(&paths, &changes).await;
        for ((change, path), diff) in changes.into_iter().zip(paths).zip(diffs) {
            let kind = match (&change.before, &change.after) {
                (None, _) => "file.created",
                (Some(_), Some(_)) => "file.updated",
                (Some(_), None) => "file.deleted",
            };
            let before = Side::of(change.before.as_ref());
            let after = Side::of(change.after.as_ref());
            let appended = change.after.as_ref().and_then(|a| a.appended);
            let mut detail = FileEvent {
                path: &path,
                before_type: before.kind,
                before_bytes: before.bytes,
                before_sha256: before.sha256,
                before_sparse: before.sparse,
                before_unhashed: before.unhashed,
                before_mtime: before.mtime,
                before_text: before.text,
                before_link: before.link,
                after_type: after.kind,
                after_bytes: after.bytes,
                after_sha256: after.sha256,
                after_sparse: after.sparse,
                after_unhashed: after.unhashed,
                after_mtime: after.mtime,
                after_text: after.text,
                after_link: after.link,
                appended_from: appended.map(|a| a.from),
                appended_sha256: appended.map(|a| files::hex(&a.sha256)),
                diff: None,
                diff_bytes: None,
                diff_ref: None,
            };
            if let Some(diff) = diff.filter(|d| !d.is_empty()) {
                if diff.len() <= self.diff_bytes {
                    detail.diff = Some(diff);
                } else {
                    detail.diff_bytes = Some(diff.len());
                    detail.diff_ref = self.write_diff(&diff);
                }
            }
            self.event(kind, layer, phase.map(Phase::as_str), detail);
        }
    }

    /// The unified diff of each text change (see [`TextChange`]), searched for at most
    /// the call's [`MAX_DIFF_TIME_PER_CALL`](crate::limits::MAX_DIFF_TIME_PER_CALL) in all
    /// (past it a diff is still right, but not the shortest): on a blocking thread unless
    /// the texts total at most [`INLINE_DIFF_BYTES`], so that no tenant's texts hold an
    /// async worker.
    async fn diffs(&mut self, paths: &[String], changes: &[Change]) -> Vec<Option<String>> {
        let texts: Vec<Option<TextChange>> = paths
            .iter()
            .zip(changes)
            .map(|(path, change)| TextChange::of(path, change))
            .collect();
        let bytes: usize = texts.iter().flatten().map(TextChange::bytes).sum();
        if bytes == 0 {
            return vec![None; changes.len()];
        }
        let left = self.diff_time_left;
        let diff_all = move || {
            let deadline = Instant::now() + left;
            texts
                .iter()
                .map(|text| Some(text.as_ref()?.diff(deadline)))
                .collect::<Vec<_>>()
        };
        let started = Instant::now();
        let diffs = if bytes <= INLINE_DIFF_BYTES {
            diff_all()
        } else {
            tokio::task::spawn_blocking(diff_all)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "cannot diff a call's changes");
                    vec![None; changes.len()]
                })
        };
        self.diff_time_left = left.saturating_sub(started.elapsed());
        diffs
    }

    /// Writes a diff too large to inline under `trace/diffs/`; its virtual path.
    fn write_diff(&mut self, diff: &str) -> Option<String> {
        let state = self.state.clone()?;
        let mount = state.trace_mount.as_ref()?;
        self.diffs += 1;
        let name = format!("{TRACE_DIR}/diffs/{}-{}.diff", self.call, self.diffs);
        match state.write(&name, diff.as_bytes(), false) {
            Ok(()) => Some(format!("{}/{name}", mount.virtual_path)),
            Err(e) => {
                tracing::warn!(session = %self.session.id, error = %e, "cannot write a trace diff");
                None
            }
        }
    }

    fn event(
        &mut self,
        kind: &'static str,
        layer: Option<&str>,
        phase: Option<&'static str>,
        detail: impl Serialize,
    ) {
        let Some(state) = &self.state else {
            return;
        };
        let event = Event {
            v: SCHEMA_VERSION,
            time: humantime::format_rfc3339_micros(SystemTime::now()).to_string(),
            tenant: self.session.tenant.as_str(),
            session: self.session.id.as_str(),
            call: self.call,
            seq: state.seq.fetch_add(1, Ordering::Relaxed),
            kind,
            layer,
            phase,
        };
        // The detail's fields spliced after the common ones (serde's `flatten` would
        // buffer the whole event to do the same).
        let line = serde_json::to_string(&event).and_then(|mut line| {
            let detail = serde_json::to_string(&detail)?;
            if let Some(fields) = detail.strip_prefix('{').filter(|f| *f != "}") {
                line.pop();
                line.push(',');
                line.push_str(fields);
            }
            Ok(line)
        });
        match line {
            Ok(line) => {
                tracing::debug!(target: "hookhost::trace", kind, session = %self.session.id, call = self.call, "{line}");
                self.lines.push(line);
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode a trace event"),
        }
    }

    /// Appends the events so far to the trace file, in one write: once a call, at its end
    /// (or when it is dropped unfinished: cancelled).
    fn flush(&mut self) {
        let Some(state) = &self.state else {
            return;
        };
        if self.lines.is_empty() || state.trace_mount.is_none() {
            self.lines.clear();
            return;
        }
        let mut text = self.lines.join("\n");
        text.push('\n');
        self.lines.clear();
        if let Err(e) = state.write(EVENTS_FILE, text.as_bytes(), true) {
            tracing::warn!(session = %self.session.id, error = %e, "cannot write the trace file");
        }
    }
}

impl Drop for CallTrace<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The detail of a `file.*` event: the fields of each side present when it is (a
/// file's `sha256` null when not known: then `unhashed` says why, and `mtime` is there),
/// those of a side that is not a file left out. `sparse` only when true: the `sha256` is
/// the file's digest by extent (see [`super::hash`]).
#[derive(Serialize)]
struct FileEvent<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_type: Option<EntryType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_sha256: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_sparse: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_unhashed: Option<Unhashed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_mtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_text: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_link: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_type: Option<EntryType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_sha256: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_sparse: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_unhashed: Option<Unhashed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_mtime: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_text: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_link: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    appended_from: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    appended_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff_bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff_ref: Option<String>,
}

/// One side of a change, as its `before_*` or `after_*` fields.
#[derive(Default)]
struct Side<'a> {
    kind: Option<EntryType>,
    bytes: Option<u64>,
    sha256: Option<Option<String>>,
    sparse: Option<bool>,
    unhashed: Option<Unhashed>,
    mtime: Option<String>,
    text: Option<bool>,
    link: Option<&'a str>,
}

impl<'a> Side<'a> {
    fn of(entry: Option<&'a Entry>) -> Side<'a> {
        let Some(entry) = entry else {
            return Side::default();
        };
        let file = entry.kind == EntryType::File;
        let unhashed = entry.unhashed.filter(|_| file);
        Side {
            kind: Some(entry.kind),
            bytes: file.then_some(entry.bytes),
            sha256: file.then(|| entry.sha256.as_ref().map(files::hex)),
            sparse: (file && entry.sparse).then_some(true),
            unhashed,
            mtime: unhashed.map(|_| humantime::format_rfc3339_nanos(entry.mtime()).to_string()),
            text: entry.text.filter(|_| file),
            link: entry.link.as_deref().map(bounded),
        }
    }
}

/// A text change whose both sides' text is known (a created file counts as empty
/// before; a deleted file has none), to diff.
struct TextChange {
    /// Its virtual path.
    path: String,
    /// `None`: created.
    before: Option<Arc<str>>,
    after: Arc<str>,
}

impl TextChange {
    fn of(path: &str, change: &Change) -> Option<TextChange> {
        let after = change.after.as_ref()?.kept.clone()?;
        let before = match &change.before {
            None => None,
            Some(before) => Some(before.kept.clone()?),
        };
        Some(TextChange {
            path: path.to_string(),
            before,
            after,
        })
    }

    fn bytes(&self) -> usize {
        self.before.as_ref().map_or(0, |b| b.len()) + self.after.len()
    }

    fn diff(&self, deadline: Instant) -> String {
        unified_diff(&self.path, self.before.as_deref(), &self.after, deadline)
    }
}

/// A unified diff of `before` (`None`: created) and `after`, at `path`; past `deadline` the
/// search for the shortest one stops (the diff is still right, only longer).
fn unified_diff(path: &str, before: Option<&str>, after: &str, deadline: Instant) -> String {
    let diff = similar::TextDiff::configure()
        .deadline(deadline)
        .diff_lines(before.unwrap_or(""), after);
    let from = if before.is_some() {
        format!("a{path}")
    } else {
        "/dev/null".to_string()
    };
    diff.unified_diff()
        .context_radius(3)
        .header(&from, &format!("b{path}"))
        .to_string()
}

/// `text` cut to [`TRACE_TEXT_BYTES`] at a character boundary.
fn bounded(text: &str) -> &str {
    if text.len() <= TRACE_TEXT_BYTES {
        return text;
    }
    let mut end = TRACE_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_past_its_deadline_is_still_right() {
        // Texts that differ from their first line to their last, all along.
        let lines = |m: usize, end: &str| -> String {
            let body: String = (0..2000).map(|i| format!("{}\n", i % m)).collect();
            format!("{end}\n{body}{end}\n")
        };
        let (before, after) = (lines(7, "before"), lines(5, "after"));
        let diff = unified_diff("/w/f", Some(&before), &after, Instant::now());
        // One hunk, changes all along: its lines give both texts back whole.
        assert_eq!(diff.lines().filter(|l| l.starts_with("@@")).count(), 1);
        let side = |keep: char| -> String {
            diff.lines()
                .skip(3)
                .filter(|l| l.starts_with(' ') || l.starts_with(keep))
                .map(|l| format!("{}\n", &l[1..]))
                .collect()
        };
        assert_eq!(side('-'), before);
        assert_eq!(side('+'), after);
    }
}
