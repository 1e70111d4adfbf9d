//! A tool result richer than text — MCP content blocks beside the text, structured
//! content — as the hooks see it, and as the client receives it after them.
//!
//! **Hooks see every byte the client would be given**, as one text, part by part on lines
//! of their own: a text block as it is; an image or audio block as
//! `[image: image/png] data:image/png;base64,…`; an embedded resource as
//! `[resource: URI, TYPE]` and its text on the lines after (binary: `data:` on the same
//! line); a resource link as `[resource link: URI]` — each with its other fields
//! (`annotations`, `_meta`, a link's `name`…) as JSON after its name; and structured content as
//! `[structured content] {…}` — unless it is the text's own JSON, as MCP asks servers to
//! send it, or `{"result": text}`, the Python SDK's for a function that returns a string:
//! then the text stands for it. So `offload` measures, and a redactor or a guard reads,
//! what would reach the model, and a tenant's `max_output_bytes` bounds all of it.
//!
//! **After the hooks**, when none changed that text, the client receives the tool's result
//! as it came. When one did, the hooks' text is the result: a block whose rendering the
//! text still holds verbatim is given back as the block (and taken out of the text);
//! structured content the text stood for is made again from it (its JSON, or
//! `{"result": text}`), and structured content of its own line is kept while that line
//! is (made again from it when a hook rewrote it and it is still an object); else it is
//! left out — a tool with an output schema then returns none, which a client that checks
//! results against the schema reports. Nothing a hook took out reaches the client another
//! way. Finding the blocks again is one pass over the text's lines, whatever their number
//! (a block of several lines, an embedded text resource, is searched for: at most
//! [`MULTI_LINE_RENDERINGS`] of them).

use crate::abi::ToolResult;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::{Value, json};
use std::collections::HashMap;

/// What begins the line of structured content the text does not stand for.
const STRUCTURED: &str = "[structured content] ";

/// What a tool call returned beyond the text its hooks saw: the parts to give back to the
/// client, whole when the hooks changed nothing (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Extras {
    /// The text the hooks were given.
    seen: String,
    /// The tool's content, each block with its rendering in `seen` unless it is text.
    content: Vec<(ContentBlock, Option<String>)>,
    structured: Option<(Value, Structured)>,
}

/// How structured content appears in what the hooks saw.
#[derive(Debug, Clone)]
enum Structured {
    /// As the text: its JSON (the text's, or the whole of it when there was no text).
    Text,
    /// As the text in `{"result": …}`: a string when `string`, else the text's JSON.
    Wrapped { string: bool },
    /// On a line of its own.
    Line(String),
}

/// Splits an MCP tool result into the text its hooks see and what to give back after them.
pub fn split(result: CallToolResult) -> (ToolResult, Extras) {
    let text = result
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let structured = result.structured_content.map(|value| {
        let how = structured_as(&value, &text);
        (value, how)
    });
    let mut parts: Vec<String> = Vec::with_capacity(result.content.len() + 1);
    if text.is_empty()
        && let Some((value, Structured::Text)) = &structured
    {
        parts.push(value.to_string());
    }
    let content = result
        .content
        .into_iter()
        .map(|block| {
            let rendering = match &block {
                ContentBlock::Text(text) => {
                    parts.push(text.text.clone());
                    None
                }
                other => {
                    let rendering = render(other);
                    parts.push(rendering.clone());
                    Some(rendering)
                }
            };
            (block, rendering)
        })
        .collect();
    if let Some((_, Structured::Line(line))) = &structured {
        parts.push(line.clone());
    }
    let json_only = text.is_empty() && matches!(structured, Some((_, Structured::Text)));
    let seen = parts.join("\n");
    let tool_result = ToolResult {
        output: seen.clone(),
        is_error: result.is_error.unwrap_or(false),
        media_type: (json_only && parts.len() == 1).then(|| "application/json".to_string()),
    };
    let extras = Extras {
        seen,
        content,
        structured,
    };
    (tool_result, extras)
}

/// How `value`, a result's structured content, appears beside its `text`.
fn structured_as(value: &Value, text: &str) -> Structured {
    if text.is_empty() {
        return Structured::Text;
    }
    if value.get("result").and_then(Value::as_str) == Some(text) && one_key(value) {
        return Structured::Wrapped { string: true };
    }
    if let Ok(parsed) = serde_json::from_str::<Value>(text) {
        if &parsed == value {
            return Structured::Text;
        }
        if one_key(value) && value.get("result") == Some(&parsed) {
            return Structured::Wrapped { string: false };
        }
    }
    Structured::Line(format!("{STRUCTURED}{value}"))
}

fn one_key(value: &Value) -> bool {
    value.as_object().is_some_and(|o| o.len() == 1)
}

impl Extras {
    /// The content and structured content to give the client when the hooks left
    /// `output` (see the module's documentation).
    pub fn delivered(self, output: String) -> (Vec<ContentBlock>, Option<Value>) {
        if output == self.seen {
            let content = self.content.into_iter().map(|(block, _)| block).collect();
            return (content, self.structured.map(|(value, _)| value));
        }
        // Which renderings the hooks' text still holds: one-line ones looked up among its
        // lines (one pass, however many blocks), the few of several lines searched for.
        let mut lines = Lines::of(&output);
        let mut multi_line = 0;
        let mut kept = Vec::new();
        let mut found_later = Vec::new();
        for (block, rendering) in self.content {
            let Some(rendering) = rendering else { continue };
            if !rendering.contains('\n') {
                if lines.take(&rendering) {
                    kept.push(block);
                }
            } else if multi_line < MULTI_LINE_RENDERINGS {
                multi_line += 1;
                found_later.push((block, rendering));
            }
        }
        let structured_line = match &self.structured {
            Some((_, Structured::Line(line))) => lines.take(line),
            _ => false,
        };
        let mut text = lines.rest();
        for (block, rendering) in found_later {
            if take_out(&mut text, &rendering) {
                kept.push(block);
            }
        }
        let structured = self.structured.and_then(|(value, how)| match how {
            Structured::Line(_) if structured_line => Some(value),
            Structured::Line(_) => rewritten_line(&mut text),
            Structured::Text => serde_json::from_str::<Value>(&text)
                .ok()
                .filter(Value::is_object),
            Structured::Wrapped { string: true } => Some(json!({ "result": text })),
            Structured::Wrapped { string: false } => serde_json::from_str::<Value>(&text)
                .ok()
                .map(|result| json!({ "result": result })),
        });
        let mut content = Vec::with_capacity(kept.len() + 1);
        if !text.is_empty() || kept.is_empty() {
            content.push(ContentBlock::text(text));
        }
        content.extend(kept);
        (content, structured)
    }
}

/// How many renderings of several lines (embedded text resources) are searched for in a
/// text a hook changed; past them, such blocks are left out (the text holds what a hook
/// left of them). Each search is a pass over the text.
const MULTI_LINE_RENDERINGS: usize = 8;

/// The lines of a text, some of them taken out.
struct Lines<'a> {
    lines: Vec<&'a str>,
    /// Line → where it occurs, not yet taken, last first.
    at: HashMap<&'a str, Vec<usize>>,
    taken: Vec<bool>,
}

impl<'a> Lines<'a> {
    fn of(text: &'a str) -> Lines<'a> {
        let lines: Vec<&str> = text.split('\n').collect();
        let mut at: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, line) in lines.iter().enumerate().rev() {
            at.entry(line).or_default().push(i);
        }
        let taken = vec![false; lines.len()];
        Lines { lines, at, taken }
    }

    /// Takes the first line that is `line` not yet taken; false when there is none.
    fn take(&mut self, line: &str) -> bool {
        match self.at.get_mut(line).and_then(Vec::pop) {
            Some(i) => {
                self.taken[i] = true;
                true
            }
            None => false,
        }
    }

    /// The lines not taken, joined again.
    fn rest(&self) -> String {
        let kept: Vec<&str> = (self.lines.iter().zip(&self.taken))
            .filter(|(_, taken)| !**taken)
            .map(|(line, _)| *line)
            .collect();
        kept.join("\n")
    }
}

/// The first line of `text` that is still `[structured content] ` and a JSON object after a
/// hook changed it (a redactor's rewrite), taken out.
fn rewritten_line(text: &mut String) -> Option<Value> {
    let line = text
        .split('\n')
        .find(|line| line.starts_with(STRUCTURED))?
        .to_string();
    let value = serde_json::from_str::<Value>(&line[STRUCTURED.len()..])
        .ok()
        .filter(Value::is_object)?;
    take_out(text, &line).then_some(value)
}

/// Takes the first whole-line occurrence of `part` out of `text`, with the line break that
/// joined it; false when there is none (or `part` is empty).
fn take_out(text: &mut String, part: &str) -> bool {
    let Some(step) = part.chars().next().map(char::len_utf8) else {
        return false;
    };
    let mut from = 0;
    while let Some(found) = text[from..].find(part) {
        let start = from + found;
        let end = start + part.len();
        let line_start = start == 0 || text.as_bytes()[start - 1] == b'\n';
        let line_end = end == text.len() || text.as_bytes()[end] == b'\n';
        if line_start && line_end {
            let (start, end) = match (start, end < text.len()) {
                (0, true) => (0, end + 1),
                (0, false) => (0, end),
                (start, _) => (start - 1, end),
            };
            text.replace_range(start..end, "");
            return true;
        }
        from = start + step;
    }
    false
}

/// A content block other than text as the hooks see it (a text block is its text): a line
/// naming it, what it holds, and after the name, as JSON, every other field it has
/// (`annotations`, `_meta`, a link's `name` and `description`…), so that no byte of it
/// passes the hooks unseen.
pub fn render(block: &ContentBlock) -> String {
    let rest = unrendered(block);
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => binary("image", &image.mime_type, &rest, &image.data),
        ContentBlock::Audio(audio) => binary("audio", &audio.mime_type, &rest, &audio.data),
        ContentBlock::Resource(embedded) => resource(&embedded.resource, &rest),
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]{rest}", link.uri),
        _ => format!("[content]{rest}"),
    }
}

/// What [`render`] shows of `block` as JSON after its name: every field but its kind and
/// what the rendering shows otherwise (an image's data and type, a resource's URI, type and
/// text or bytes, a link's URI); empty when nothing is left, else a space and the JSON.
fn unrendered(block: &ContentBlock) -> String {
    let Ok(Value::Object(mut fields)) = serde_json::to_value(block) else {
        return String::new();
    };
    for shown in ["type", "data", "mimeType", "uri"] {
        fields.remove(shown);
    }
    if let Some(Value::Object(resource)) = fields.get_mut("resource") {
        for shown in ["uri", "mimeType", "text", "blob"] {
            resource.remove(shown);
        }
        if resource.is_empty() {
            fields.remove("resource");
        }
    }
    match fields.is_empty() {
        true => String::new(),
        false => format!(" {}", Value::Object(fields)),
    }
}

/// A resource's contents as the hooks see them: `[resource: URI, TYPE]`, then its text on
/// the lines after, or its bytes as a `data:` URI on the same line.
pub fn contents(contents: &ResourceContents) -> String {
    resource(contents, "")
}

/// [`contents`] with `rest` (see [`unrendered`]) after the name.
fn resource(contents: &ResourceContents, rest: &str) -> String {
    match contents {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            ..
        } => format!(
            "[resource: {uri}, {}]{rest}\n{text}",
            mime_type.as_deref().unwrap_or("text/plain")
        ),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => {
            let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
            format!("[resource: {uri}, {mime}]{rest} data:{mime};base64,{blob}")
        }
        _ => format!("[resource]{rest}"),
    }
}

fn binary(kind: &str, mime: &str, rest: &str, base64: &str) -> String {
    format!("[{kind}: {mime}]{rest} data:{mime};base64,{base64}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(content: Vec<ContentBlock>, structured: Option<Value>) -> CallToolResult {
        let mut result = CallToolResult::success(content);
        result.structured_content = structured;
        result
    }

    fn image() -> ContentBlock {
        ContentBlock::image("iVBORw0KGgo=", "image/png")
    }

    #[test]
    fn hooks_see_every_part_and_an_unchanged_result_passes_as_it_came() {
        let structured = json!({"rows": 2});
        let (seen, extras) = split(result(
            vec![
                ContentBlock::text("one"),
                image(),
                ContentBlock::text("two"),
            ],
            Some(structured.clone()),
        ));
        assert_eq!(
            seen.output,
            "one\n[image: image/png] data:image/png;base64,iVBORw0KGgo=\ntwo\n\
             [structured content] {\"rows\":2}"
        );
        let (content, kept) = extras.delivered(seen.output.clone());
        assert_eq!(content.len(), 3);
        assert_eq!(kept, Some(structured));
    }

    #[test]
    fn a_rewrite_keeps_only_what_it_still_holds() {
        let (seen, extras) = split(result(
            vec![ContentBlock::text("secret"), image()],
            Some(json!({"token": "secret"})),
        ));
        let redacted = seen.output.replace("secret", "[redacted]");
        let (content, structured) = extras.clone().delivered(redacted);
        assert_eq!(content.len(), 2, "the image's line was kept: {content:?}");
        assert!(matches!(&content[0], ContentBlock::Text(t) if t.text == "[redacted]"));
        assert!(matches!(&content[1], ContentBlock::Image(_)));
        assert_eq!(
            structured,
            Some(json!({"token": "[redacted]"})),
            "its line, rewritten"
        );

        let (content, structured) = extras.delivered("offloaded to /artifacts/x".into());
        assert_eq!(content.len(), 1);
        assert_eq!(structured, None);
    }

    #[test]
    fn structured_content_the_text_stands_for_is_made_again_from_the_rewrite() {
        let big = "x".repeat(50);
        let (seen, extras) = split(result(
            vec![ContentBlock::text(big.clone())],
            Some(json!({ "result": big })),
        ));
        assert_eq!(seen.output, big, "the text stands for it");
        let (_, structured) = extras.delivered("a reference".into());
        assert_eq!(structured, Some(json!({"result": "a reference"})));

        let object = json!({"a": 1, "b": [1, 2]});
        let (seen, extras) = split(result(
            vec![ContentBlock::text(
                serde_json::to_string_pretty(&object).unwrap(),
            )],
            Some(object),
        ));
        let (_, structured) = extras.clone().delivered(seen.output.replace('1', "7"));
        assert_eq!(structured, Some(json!({"a": 7, "b": [7, 2]})));
        let (_, structured) = extras.delivered("not JSON".into());
        assert_eq!(structured, None);

        let (seen, extras) = split(result(vec![], Some(json!({"n": 3}))));
        assert_eq!(seen.output, r#"{"n":3}"#);
        assert_eq!(seen.media_type.as_deref(), Some("application/json"));
        let (_, structured) = extras.delivered(r#"{"n":4}"#.into());
        assert_eq!(structured, Some(json!({"n": 4})));
    }

    #[test]
    fn every_field_of_a_block_is_seen_and_a_redaction_of_one_keeps_the_block_out() {
        let link: ContentBlock = serde_json::from_value(json!({"type": "resource_link",
            "uri": "file:///a", "name": "a", "description": "key AKIA-SECRET"}))
        .unwrap();
        let image: ContentBlock = serde_json::from_value(json!({"type": "image",
            "data": "AAAA", "mimeType": "image/png", "_meta": {"note": "AKIA-SECRET"}}))
        .unwrap();
        let (seen, extras) = split(result(vec![ContentBlock::text("t"), link, image], None));
        assert_eq!(
            seen.output,
            "t\n[resource link: file:///a] {\"description\":\"key AKIA-SECRET\",\"name\":\"a\"}\n\
             [image: image/png] {\"_meta\":{\"note\":\"AKIA-SECRET\"}} data:image/png;base64,AAAA"
        );
        let (content, _) = extras.delivered(seen.output.replace("AKIA-SECRET", "[redacted]"));
        assert_eq!(content.len(), 1, "{content:?}");
        assert!(!serde_json::to_string(&content).unwrap().contains("AKIA"));
    }

    #[test]
    fn a_rewrite_of_many_blocks_is_one_pass() {
        // 50,000 links, each on its line: found among the hooks' lines by lookup, not by a
        // search of the text per block (which took seconds).
        let links: Vec<ContentBlock> = (0..50_000)
            .map(|i| {
                serde_json::from_value(
                    json!({"type": "resource_link", "uri": format!("u{i}"), "name": "n"}),
                )
                .unwrap()
            })
            .collect();
        let (seen, extras) = split(result(links, None));
        let (content, _) = extras.delivered(format!("{}\nfooter", seen.output));
        assert_eq!(content.len(), 50_001);
        assert!(matches!(&content[0], ContentBlock::Text(t) if t.text == "footer"));
    }

    #[test]
    fn only_whole_lines_are_taken_out() {
        let mut text = "ab\nabc\nab".to_string();
        assert!(take_out(&mut text, "abc"));
        assert_eq!(text, "ab\nab");
        let mut text = "xabc".to_string();
        assert!(!take_out(&mut text, "abc"));
        let mut text = "abc\nrest".to_string();
        assert!(take_out(&mut text, "abc"));
        assert_eq!(text, "rest");
    }
}
