//! What hookhost says on stderr whatever the log level: where a server listens (so that a
//! caller that asked for port 0 learns the port), the one wait a user notices, and why a
//! command failed. A line
//! of text (`hookhost: serving MCP at URL`), or, once [`use_json`] is called (`--log-format
//! json`), one JSON object as the log's own lines are (`timestamp`, `level`, `target`,
//! `fields.message`, and `fields.url` for an address), so that every line of the stream
//! parses.

use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);

/// Says the lines as JSON from now on.
pub fn use_json() {
    JSON.store(true, Ordering::Relaxed);
}

/// `hookhost: serving WHAT at URL`.
pub fn serving(what: &str, url: &str) {
    say("INFO", &format!("serving {what} at {url}"), Some(url));
}

/// `hookhost: MESSAGE`.
pub fn note(message: &str) {
    say("INFO", message, None);
}

/// `hookhost: warning: MESSAGE`.
pub fn warning(message: &str) {
    say("WARN", message, None);
}

/// `hookhost: error: MESSAGE`.
pub fn error(message: &str) {
    say("ERROR", message, None);
}

fn say(level: &str, message: &str, url: Option<&str>) {
    if !JSON.load(Ordering::Relaxed) {
        // A message may carry what a peer said (a registry's error, a server's reason):
        // its control characters are shown escaped, never sent to the terminal.
        let message: String = message
            .chars()
            .map(|c| match c {
                '\n' | '\t' => c.to_string(),
                c if c.is_control() => c.escape_default().to_string(),
                c => c.to_string(),
            })
            .collect();
        match level {
            "WARN" => eprintln!("hookhost: warning: {message}"),
            "ERROR" => eprintln!("hookhost: error: {message}"),
            _ => eprintln!("hookhost: {message}"),
        }
        return;
    }
    let mut fields = serde_json::json!({ "message": message });
    if let Some(url) = url {
        fields["url"] = url.into();
    }
    let line = serde_json::json!({
        "timestamp": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
        "level": level,
        "target": "hookhost",
        "fields": fields,
    });
    eprintln!("{line}");
}
