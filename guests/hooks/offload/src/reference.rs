//! The reference text that replaces an offloaded output. Pure functions, so the exact text
//! is tested natively as well as through the host.

use hookhost_formats as formats;
use serde_json::Value;
use std::fmt::Write;

/// Outputs longer than this many characters are offloaded.
pub const DEFAULT_THRESHOLD: usize = 10_000;
/// Lines of the output shown in the reference.
pub const DEFAULT_PREVIEW_LINES: usize = 20;
/// Tools whose output is never offloaded: paging tools would offload their own pages.
pub const DEFAULT_EXCLUDED: &[&str] = &["read_file", "write_file", "edit_file"];
/// Where offloaded files go, as the model sees the path.
pub const DEFAULT_DIR: &str = "/artifacts/tool-results";
/// A preview line longer than this is cut, so one minified line cannot flood the context.
pub const PREVIEW_LINE_CHARS: usize = 200;
/// How deep the JSON structure summary descends.
const SUMMARY_DEPTH: usize = 3;
/// Keys listed for one object in the summary before the rest are counted.
const SUMMARY_KEYS: usize = 40;
/// Keys named inline for a nested object.
const INLINE_KEYS: usize = 8;

/// The hook's settings, from the operator's config.
#[derive(Debug, Clone)]
pub struct Settings {
    pub threshold: usize,
    pub preview_lines: usize,
    pub excluded: Vec<String>,
    pub dir: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            threshold: DEFAULT_THRESHOLD,
            preview_lines: DEFAULT_PREVIEW_LINES,
            excluded: DEFAULT_EXCLUDED.iter().map(|s| s.to_string()).collect(),
            dir: DEFAULT_DIR.to_string(),
        }
    }
}

impl Settings {
    /// Reads settings through `get`; a missing or unparsable value keeps its default.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Settings {
        let mut s = Settings::default();
        if let Some(v) = get("threshold").and_then(|v| v.trim().parse().ok()) {
            s.threshold = v;
        }
        if let Some(v) = get("preview_lines").and_then(|v| v.trim().parse().ok()) {
            s.preview_lines = v;
        }
        if let Some(v) = get("exclude_tools") {
            s.excluded = parse_list(&v);
        }
        if let Some(v) = get("dir") {
            let v = v.trim().trim_end_matches('/');
            if v.starts_with('/') && v.len() > 1 {
                s.dir = v.to_string();
            }
        }
        s
    }

    /// Whether a call with `arguments` (its JSON text) reads a file this hook wrote: they
    /// name a path ending in `DIR/TOOL/NAME` (`DIR` the last name of [`Settings::dir`], as
    /// the model sees it or as an agent's tools see it on the host) for which `exists`
    /// says there is a file in the hook's directory. Such a call pages or searches an
    /// offloaded output, which must reach the model as it is: offloading it again would
    /// hand the model a reference to a reference.
    pub fn reads_own_file(&self, arguments: &str, exists: impl Fn(&str) -> bool) -> bool {
        let base = self.dir.rsplit('/').next().unwrap_or_default();
        let marker = format!("{base}/");
        arguments.match_indices(&marker).any(|(at, _)| {
            let rest = &arguments[at + marker.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
                .unwrap_or(rest.len());
            let mut names = rest[..end].split('/');
            match (names.next(), names.next()) {
                (Some(tool), Some(name))
                    if [tool, name]
                        .iter()
                        .all(|n| file_name(n) == *n && !n.starts_with('.')) =>
                {
                    exists(&format!("{}/{tool}/{name}", self.dir))
                }
                _ => false,
            }
        })
    }

    /// The output's shape when this output of this tool is offloaded: the tool is not
    /// excluded and the output is longer than the threshold in characters.
    pub fn offloads(&self, tool: &str, output: &str) -> Option<Shape> {
        if self.excluded.iter().any(|t| t == tool) || output.len() <= self.threshold {
            return None;
        }
        Some(Shape::of(output)).filter(|shape| shape.chars > self.threshold)
    }
}

/// An output's characters and lines (as an editor counts them: a final line without a
/// newline counts), found in one pass over its bytes, eight at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub chars: usize,
    pub lines: usize,
}

impl Shape {
    pub fn of(s: &str) -> Shape {
        const HIGH: u64 = 0x8080_8080_8080_8080;
        const LOW: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        const NEWLINES: u64 = 0x0a0a_0a0a_0a0a_0a0a;
        let (words, rest) = s.as_bytes().as_chunks::<8>();
        let (mut continuation, mut newlines) = (0, 0);
        for word in words {
            let w = u64::from_le_bytes(*word);
            // A UTF-8 continuation byte is 0b10xx_xxxx: bit 7 set, bit 6 (shifted up) clear.
            continuation += (w & !(w << 1) & HIGH).count_ones() as usize;
            // A byte of `x` is non-zero iff its low seven bits carry into bit 7 or bit 7 is set.
            let x = w ^ NEWLINES;
            newlines += 8 - ((((x & LOW) + LOW) | x) & HIGH).count_ones() as usize;
        }
        for &b in rest {
            continuation += usize::from(b & 0xc0 == 0x80);
            newlines += usize::from(b == b'\n');
        }
        Shape {
            chars: s.len() - continuation,
            lines: newlines + usize::from(!s.is_empty() && !s.ends_with('\n')),
        }
    }
}

/// A JSON array of strings, or a comma-separated list.
fn parse_list(v: &str) -> Vec<String> {
    match serde_json::from_str::<Vec<String>>(v) {
        Ok(list) => list,
        Err(_) => v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    }
}

/// An output on its way to a file.
pub struct Offloaded {
    /// The path the model sees, e.g. `/artifacts/tool-results/bash/<id>.txt`.
    pub path: String,
    json: Option<Value>,
}

impl Offloaded {
    pub fn new(settings: &Settings, tool: &str, call_id: &str, output: &str) -> Offloaded {
        let json = serde_json::from_str::<Value>(output).ok();
        let ext = if json.is_some() { "json" } else { "txt" };
        let path = format!(
            "{}/{}/{}.{ext}",
            settings.dir,
            file_name(tool),
            file_name(call_id)
        );
        Offloaded { path, json }
    }

    /// The text the model sees instead of `output`.
    pub fn reference(&self, settings: &Settings, output: &str, shape: Shape) -> String {
        let Shape { chars, lines } = shape;
        let path = &self.path;
        let mut r = String::new();
        let _ = writeln!(r, "{}", formats::offload_header(chars, settings.threshold));
        let _ = writeln!(r, "{}{path}", formats::FULL_OUTPUT);
        let _ = writeln!(r, "{}", formats::size_line(output.len(), lines));
        let _ = writeln!(r, "{}", formats::read_hint(path));
        if let Some(value) = &self.json {
            let _ = write!(r, "\nStructure (JSON): ");
            summarize_top(&mut r, value);
        }
        let shown = lines.min(settings.preview_lines);
        if shown > 0 {
            let _ = writeln!(r, "\nPreview (first {shown} of {lines} lines):");
            for line in output.lines().take(shown) {
                push_preview_line(&mut r, line);
            }
        }
        r
    }
}

/// A name safe as one path segment inside the guest's mount: the characters
/// `[A-Za-z0-9._-]` are kept, others become `_`, and `.`/`..`/empty become `_`.
pub fn file_name(s: &str) -> String {
    let name: String = s
        .chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        "_".to_string()
    } else {
        name
    }
}

fn push_preview_line(r: &mut String, line: &str) {
    let mut chars = line.char_indices();
    match chars.nth(PREVIEW_LINE_CHARS) {
        None => r.push_str(line),
        Some((cut, _)) => {
            let rest = line[cut..].chars().count();
            let _ = write!(r, "{}…[+{rest} characters]", &line[..cut]);
        }
    }
    r.push('\n');
}

fn summarize_top(r: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let _ = writeln!(r, "object with {} keys", map.len());
            for (key, v) in map.iter().take(SUMMARY_KEYS) {
                let _ = writeln!(r, "  {}: {}", Value::String(key.clone()), describe(v, 1));
            }
            if map.len() > SUMMARY_KEYS {
                let _ = writeln!(r, "  … {} more keys", map.len() - SUMMARY_KEYS);
            }
        }
        other => {
            let _ = writeln!(r, "{}", describe(other, 0));
        }
    }
}

/// A one-line shape of `value`: types, array lengths and key names, `depth`-capped.
pub fn describe(value: &Value, depth: usize) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(_) => "number".into(),
        Value::String(s) => format!("string ({} characters)", s.chars().count()),
        Value::Array(items) if items.is_empty() => "empty array".into(),
        Value::Array(items) if depth >= SUMMARY_DEPTH => format!("array of {}", items.len()),
        Value::Array(items) => format!(
            "array of {} × {}",
            items.len(),
            describe(&items[0], depth + 1)
        ),
        Value::Object(map) if depth >= SUMMARY_DEPTH || map.is_empty() => {
            format!("object with {} keys", map.len())
        }
        Value::Object(map) => {
            let mut keys: Vec<&str> = map.keys().take(INLINE_KEYS).map(String::as_str).collect();
            if map.len() > INLINE_KEYS {
                keys.push("…");
            }
            format!("object with {} keys {{{}}}", map.len(), keys.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_counts_characters_not_bytes() {
        let s = Settings {
            threshold: 3,
            ..Settings::default()
        };
        assert_eq!(s.offloads("bash", "ééé"), None);
        assert_eq!(
            s.offloads("bash", "éééé"),
            Some(Shape { chars: 4, lines: 1 })
        );
        assert_eq!(s.offloads("read_file", "éééé"), None);
    }

    #[test]
    fn lines_count_a_final_partial_line() {
        let lines = |s| Shape::of(s).lines;
        assert_eq!(lines(""), 0);
        assert_eq!(lines("a"), 1);
        assert_eq!(lines("a\n"), 1);
        assert_eq!(lines("a\nb"), 2);
    }

    #[test]
    fn one_pass_counts_agree_with_std_at_every_alignment() {
        let text = "ascii\n\n€uro ✓ 𝄞 clef\nÿ\u{7f}\u{80}\n\n\n\n\n\n\n\n\nend".repeat(5);
        for start in text.char_indices().map(|(i, _)| i) {
            let s = &text[start..];
            let newlines = s.bytes().filter(|&b| b == b'\n').count();
            let naive = Shape {
                chars: s.chars().count(),
                lines: newlines + usize::from(!s.is_empty() && !s.ends_with('\n')),
            };
            assert_eq!(Shape::of(s), naive, "at {start}");
        }
    }

    #[test]
    fn a_read_of_an_offloaded_file_is_recognised_by_its_path() {
        let s = Settings::default();
        let ours = |p: &str| p == "/artifacts/tool-results/bash/call-1.txt";
        let read = |args: &str| s.reads_own_file(args, ours);
        // As the model sees it, as an agent's shell sees it on the host, quoted.
        assert!(read(
            r#"{"path":"/artifacts/tool-results/bash/call-1.txt"}"#
        ));
        assert!(read(
            r#"{"command":"sed -n '104,206p' '/data/a b/sessions/s/artifacts/tool-results/bash/call-1.txt'"}"#
        ));
        // Not a file of its: another name, a file that is not there, a way out.
        assert!(!read(r#"{"command":"seq 1 100000"}"#));
        assert!(!read(
            r#"{"command":"cat /x/tool-results/bash/call-2.txt"}"#
        ));
        assert!(!read(
            r#"{"command":"cat /artifacts/tool-results/../../etc/passwd"}"#
        ));
        assert!(!read(r#"{"command":"cat tool-results/bash"}"#));
    }

    #[test]
    fn file_names_cannot_traverse() {
        assert_eq!(file_name(".."), "_");
        assert_eq!(file_name("../../etc"), ".._.._etc");
        assert_eq!(file_name("a/b"), "a_b");
        assert_eq!(file_name(""), "_");
    }

    #[test]
    fn settings_parse_lists_both_ways() {
        let s = Settings::from_lookup(|k| (k == "exclude_tools").then(|| r#"["a","b"]"#.into()));
        assert_eq!(s.excluded, ["a", "b"]);
        let s = Settings::from_lookup(|k| (k == "exclude_tools").then(|| "a, b".into()));
        assert_eq!(s.excluded, ["a", "b"]);
    }

    #[test]
    fn json_summary_names_keys_and_lengths() {
        let v: Value = serde_json::json!({"items": [{"id": 1, "name": "x"}], "total": 1});
        assert_eq!(
            describe(&v["items"], 1),
            "array of 1 × object with 2 keys {id, name}"
        );
    }
}
