//! A tool component: its descriptor (name, description, input schema as MCP needs
//! them), and one call.

use super::{CheckOptions, Report, Verdict, bytes, failed, first_line, millis};
use crate::Runtime;
use crate::component::ComponentRef;
use crate::limits::Limits;
use crate::sessions::Session;
use crate::tools::guest::GuestTool;
use std::time::Instant;

/// A tool: its descriptor, and one call.
pub(super) async fn check(
    runtime: &Runtime,
    component: &ComponentRef,
    session: &Session,
    options: &CheckOptions,
    report: &mut Report,
) {
    let descriptor = match runtime
        .loader()
        .tool(component, options.allow_unknown_imports)
    {
        Ok(pre) => {
            GuestTool::describe(
                &pre,
                &runtime.sandbox(),
                &options
                    .settings
                    .iter()
                    .map(|(k, v)| (k.clone(), crate::config::setting_text(v)))
                    .collect(),
                &Default::default(),
            )
            .await
        }
        Err(e) => {
            report.add(Verdict::Fail, format!("does not load: {e}"));
            return;
        }
    };
    let descriptor = match descriptor {
        Ok(d) => d,
        Err(failure) => {
            report.add(
                Verdict::Fail,
                format!(
                    "its descriptor: {}",
                    failed("describe", &failure, &Limits::default())
                ),
            );
            return;
        }
    };
    let name_ok = !descriptor.name.is_empty()
        && descriptor.name.len() <= 64
        && descriptor
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    report.add(
        if name_ok {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        if name_ok {
            format!("describes itself as `{}`", descriptor.name)
        } else {
            format!(
                "names itself {:?}: a tool name is 1 to 64 letters, digits, `_` or `-`",
                descriptor.name
            )
        },
    );
    if descriptor.description.trim().is_empty() {
        report.add(
            Verdict::Fail,
            "has an empty description: the model chooses tools by it",
        );
    }
    match schema_problem(&descriptor.input_schema) {
        None => report.add(
            Verdict::Pass,
            "its input schema is a JSON Schema of an object",
        ),
        Some(problem) => report.add(Verdict::Fail, format!("its input schema {problem}")),
    }
    let arguments = options.call.clone().unwrap_or_else(|| "{}".into());
    let started = Instant::now();
    match runtime.call(session, "checked", &arguments).await {
        Ok(result) => report.add(
            Verdict::Pass,
            format!(
                "a call with {arguments} returned {}{} in {}: {}",
                bytes(result.output.len()),
                if result.is_error { " (an error)" } else { "" },
                millis(started.elapsed()),
                first_line(&result.output)
            ),
        ),
        Err(e) => report.add(Verdict::Fail, format!("a call with {arguments}: {e}")),
    }
}

/// What is wrong with a tool's input schema, if anything: MCP wants the JSON Schema of an
/// object, whose `properties` are schemas and whose `required` names some of them.
fn schema_problem(schema: &str) -> Option<String> {
    let value: serde_json::Value = match serde_json::from_str(schema) {
        Ok(v) => v,
        Err(e) => return Some(format!("is not JSON: {e}")),
    };
    let Some(object) = value.as_object() else {
        return Some("is not a JSON object".into());
    };
    if object.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Some("must say `\"type\": \"object\"` (arguments are a JSON object)".into());
    }
    let properties = match object.get("properties") {
        None => None,
        Some(serde_json::Value::Object(p)) => Some(p),
        Some(_) => return Some("has `properties` that is not an object".into()),
    };
    if let Some((name, _)) = properties
        .into_iter()
        .flatten()
        .find(|(_, s)| !s.is_object() && !s.is_boolean())
    {
        return Some(format!(
            "has property `{name}` whose schema is not an object"
        ));
    }
    match object.get("required") {
        None => None,
        Some(serde_json::Value::Array(names)) => names.iter().find_map(|n| match n.as_str() {
            Some(n) if properties.is_some_and(|p| p.contains_key(n)) => None,
            Some(n) => Some(format!("requires `{n}`, which is not among its properties")),
            None => Some("has a `required` entry that is not a string".into()),
        }),
        Some(_) => Some("has `required` that is not a list".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_schemas_are_judged_as_mcp_needs_them() {
        assert_eq!(schema_problem(r#"{"type":"object"}"#), None);
        assert_eq!(
            schema_problem(
                r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#
            ),
            None
        );
        for (bad, says) in [
            ("{", "is not JSON"),
            ("[]", "is not a JSON object"),
            (r#"{"type":"string"}"#, "type"),
            (r#"{"type":"object","properties":[]}"#, "`properties`"),
            (r#"{"type":"object","properties":{"a":1}}"#, "`a`"),
            (r#"{"type":"object","required":["x"]}"#, "requires `x`"),
        ] {
            let problem = schema_problem(bad).unwrap_or_default();
            assert!(problem.contains(says), "{bad}: {problem}");
        }
    }
}
