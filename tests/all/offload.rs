//! The built-in offload hook, through the host, around the echo tool and real tools.

use hookhost_tests::{TestHost, host_path};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// The `Full output: PATH` line of a reference: a path under `/artifacts`.
fn offloaded_path(output: &str) -> &str {
    let path = output
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .unwrap_or_else(|| panic!("not a reference:\n{output}"));
    assert!(path.starts_with("/artifacts/"), "under /artifacts: {path}");
    path
}

fn offload_only(settings: &str, access: &str) -> String {
    format!(
        "[[hooks]]\nname = \"offload\"\ncomponent = \"builtin:offload\"\ngrants = {{ \"/artifacts\" = {access:?} }}\nsettings = {{ {settings} }}\n"
    )
}

#[tokio::test]
async fn outputs_up_to_the_threshold_pass_unchanged() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    for len in [9_999, 10_000] {
        let text = "é".repeat(len); // characters, not bytes, count
        let r = host.call(&s, "echo", json!({ "output": text })).await;
        assert_eq!(r.output, text, "{len} characters must pass unchanged");
    }
    let text = "é".repeat(10_001);
    let r = host.call(&s, "echo", json!({ "output": text })).await;
    assert!(
        r.output.starts_with("[Output offloaded: 10001 characters"),
        "{}",
        r.output
    );
}

#[tokio::test]
async fn the_reference_text_is_exact_and_the_file_is_whole_and_private() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let output: String = (1..=200)
        .map(|i| format!("row {i:05}: {}\n", "x".repeat(50)))
        .collect();
    assert_eq!(output.len(), 12_400);
    let r = host.call(&s, "echo", json!({ "output": output })).await;
    assert!(!r.is_error);

    let path = offloaded_path(&r.output).to_string();
    let id = path
        .strip_prefix("/artifacts/tool-results/echo/")
        .and_then(|p| p.strip_suffix(".txt"))
        .unwrap_or_else(|| panic!("unexpected path {path}"));
    assert_eq!(id.len(), 36, "the call id is a UUID: {id}");

    let mut expected = format!(
        "[Output offloaded: 12400 characters, more than the 10000 that fit in the context.]\n\
         Full output: {path}\n\
         Size: 12400 bytes, 200 lines\n\
         To read it, call read_file with {{\"path\": \"{path}\", \"offset\": 0, \"limit\": 4096}}, \
         then again with the offset each page reports, until the end.\n\
         \n\
         Preview (first 20 of 200 lines):\n"
    );
    for i in 1..=20 {
        expected.push_str(&format!("row {i:05}: {}\n", "x".repeat(50)));
    }
    assert_eq!(r.output, expected);

    let file = host_path(&s, &path);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), output);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600, "file mode");
    assert_eq!(mode(file.parent().unwrap()), 0o700, "directory mode");
}

#[tokio::test]
async fn json_gets_a_json_file_and_a_structure_summary() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let items: Vec<_> = (0..400)
        .map(|i| json!({"id": i, "name": format!("item-{i}")}))
        .collect();
    let output = json!({"items": items, "total": 400, "next": null}).to_string();
    let r = host.call(&s, "echo", json!({ "output": output })).await;

    let path = offloaded_path(&r.output).to_string();
    assert!(path.ends_with(".json"), "{path}");
    let rest = r
        .output
        .split_once("\n\nStructure (JSON): ")
        .expect("a structure summary")
        .1;
    let chars = output.chars().count() - 200;
    let expected = format!(
        "object with 3 keys\n  \"items\": array of 400 × object with 2 keys {{id, name}}\n  \"total\": number\n  \"next\": null\n\
         \n\
         Preview (first 1 of 1 lines):\n{}…[+{chars} characters]\n",
        &output[..200]
    );
    assert_eq!(rest, expected);
    assert_eq!(
        std::fs::read_to_string(host_path(&s, &path)).unwrap(),
        output
    );
}

#[tokio::test]
async fn excluded_tools_are_never_offloaded() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let workspace = s.host_dir("/workspace").unwrap();
    std::fs::create_dir_all(workspace).unwrap();
    let text = "y".repeat(30_000);
    std::fs::write(workspace.join("big.txt"), &text).unwrap();
    let r = host
        .call(&s, "read_file", json!({"path": "big.txt", "limit": 30_000}))
        .await;
    assert_eq!(r.output, text, "read_file is excluded by default");
}

#[tokio::test]
async fn settings_come_from_the_config() {
    let host = TestHost::new(&offload_only(
        "threshold = 100, preview_lines = 2, exclude_tools = [\"bash\"]",
        "rw",
    ))
    .await;
    let s = host.session().await;
    let output = "a\nb\nc\n".repeat(30);
    let r = host.call(&s, "echo", json!({ "output": output })).await;
    assert!(
        r.output.contains("more than the 100 that fit"),
        "{}",
        r.output
    );
    assert!(
        r.output.ends_with("Preview (first 2 of 90 lines):\na\nb\n"),
        "{}",
        r.output
    );
}

#[tokio::test]
async fn a_failed_write_lets_the_output_through() {
    let host = TestHost::new(&offload_only("threshold = 10", "ro")).await;
    let s = host.session().await;
    let output = "z".repeat(100);
    let r = host.call(&s, "echo", json!({ "output": output })).await;
    assert_eq!(r.output, output, "fail-open");
    assert!(!r.is_error);
}

#[tokio::test]
async fn an_offload_stopped_at_any_point_leaves_no_torn_file() {
    // Deadlines from 1 ms up stop the hook before, during or after its write; whatever the
    // moment, a file under its final name is whole (the rename publishes it).
    let output = "z".repeat(900_000);
    let mut published = 0;
    for deadline in 1..=24 {
        let config = format!(
            "{}limits = {{ deadline_ms = {deadline} }}\n",
            offload_only("threshold = 1000", "rw")
        );
        let host = TestHost::new(&config).await;
        let s = host.session().await;
        let r = host.call(&s, "echo", json!({ "output": output })).await;
        if r.output.starts_with("[Output offloaded") {
            published += 1;
        } else {
            assert_eq!(r.output, output, "fail-open passes the output whole");
        }
        let dir = s.host_dir("/artifacts").unwrap().join("tool-results/echo");
        for entry in std::fs::read_dir(&dir).into_iter().flatten() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if !name.starts_with('.') {
                assert_eq!(
                    entry.metadata().unwrap().len(),
                    output.len() as u64,
                    "deadline {deadline} ms: {name} is torn"
                );
            }
        }
    }
    assert!(published > 0, "some deadline was long enough to publish");
}
