//! The built-in read_file tool: paging, boundaries, and staying inside its grants.

use hookhost_formats::split_page;
use hookhost_tests::TestHost;
use serde_json::json;

/// Pages `path` back with `limit`-byte reads and returns the pages put together.
async fn page_back(
    host: &TestHost,
    s: &hookhost::Session,
    path: &str,
    limit: u64,
) -> (String, usize) {
    let (mut whole, mut offset, mut pages) = (String::new(), 0, 0);
    loop {
        let r = host
            .call(
                s,
                "read_file",
                json!({"path": path, "offset": offset, "limit": limit}),
            )
            .await;
        assert!(!r.is_error, "{}", r.output);
        pages += 1;
        let (text, next) = split_page(&r.output);
        whole.push_str(text);
        match next {
            Some(n) => offset = n,
            None => return (whole, pages),
        }
    }
}

#[tokio::test]
async fn an_offloaded_bash_output_pages_back_byte_for_byte() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let r = host
        .call(&s, "bash", json!({"command": "seq 1 5000"}))
        .await;
    let path = r
        .output
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .expect("offloaded")
        .to_string();
    assert!(path.starts_with("/artifacts/tool-results/bash/") && path.ends_with(".txt"));
    let preview: Vec<&str> = r
        .output
        .split("lines):\n")
        .nth(1)
        .unwrap()
        .lines()
        .collect();
    assert_eq!(preview, (1..=20).map(|i| i.to_string()).collect::<Vec<_>>());

    let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    let (whole, pages) = page_back(&host, &s, &path, 4096).await;
    assert_eq!(whole, expected);
    assert_eq!(pages, expected.len().div_ceil(4096));
}

#[tokio::test]
async fn pages_never_split_a_character() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let workspace = s.host_dir("/workspace").unwrap();
    std::fs::create_dir_all(workspace).unwrap();
    let text = "aé€😀\n".repeat(2_000);
    std::fs::write(workspace.join("utf8.txt"), &text).unwrap();
    for limit in [7, 4096] {
        let (whole, _) = page_back(&host, &s, "/workspace/utf8.txt", limit).await;
        assert_eq!(whole, text, "limit {limit}");
    }
}

#[tokio::test]
async fn boundary_messages() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let workspace = s.host_dir("/workspace").unwrap();
    std::fs::create_dir_all(workspace).unwrap();
    std::fs::write(workspace.join("f.txt"), "0123456789").unwrap();

    let r = host
        .call(&s, "read_file", json!({"path": "f.txt", "limit": 4}))
        .await;
    assert_eq!(
        r.output,
        "0123\n\n[bytes 0-4 of 10; to continue reading use offset=4]"
    );
    let r = host
        .call(
            &s,
            "read_file",
            json!({"path": "f.txt", "offset": 8, "limit": 4}),
        )
        .await;
    assert_eq!(r.output, "89");
    for offset in [10, 11, 1_000_000] {
        let r = host
            .call(&s, "read_file", json!({"path": "f.txt", "offset": offset}))
            .await;
        assert_eq!(
            r.output,
            format!("[offset={offset} exceeds file size (10 bytes), nothing to read.]")
        );
        assert!(!r.is_error, "reading past the end is not an error");
    }
    let r = host
        .call(&s, "read_file", json!({"path": "f.txt", "offset": -1}))
        .await;
    assert!(r.is_error && r.output.contains("`offset` must be a non-negative integer"));
    let r = host
        .call(&s, "read_file", json!({"path": "missing.txt"}))
        .await;
    assert!(
        r.is_error
            && r.output
                .starts_with("read_file: cannot open /workspace/missing.txt")
    );
}

#[tokio::test]
async fn reads_stay_inside_the_grants() {
    let host = TestHost::builtin().await;
    let s = host.session().await;
    let workspace = s.host_dir("/workspace").unwrap();
    std::fs::create_dir_all(workspace).unwrap();
    let secret = host.data.path().join("secret.txt");
    std::fs::write(&secret, "SECRET").unwrap();
    std::os::unix::fs::symlink(&secret, workspace.join("planted")).unwrap();
    std::os::unix::fs::symlink("../../../../../secret.txt", workspace.join("relative")).unwrap();
    for path in [
        "/etc/passwd",
        "../../../../secret.txt",
        "/workspace/../../../../../secret.txt",
        "/artifacts/../workspace/planted",
        "planted",
        "relative",
        "/session/../../../secret.txt",
    ] {
        let r = host.call(&s, "read_file", json!({ "path": path })).await;
        assert!(r.is_error, "{path} must be refused, got {:?}", r.output);
        assert!(
            !r.output.contains("SECRET") && !r.output.contains("root:"),
            "{path}"
        );
    }
}
