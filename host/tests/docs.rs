//! The README and the book (`docs/`, built with mdBook by `.ci/run`) lead only to what
//! exists: every relative link names a file of the repository, every `#anchor` a heading
//! of its page; every page of the book is in its `SUMMARY.md`; the README stays a front
//! door.

use std::path::{Path, PathBuf};

/// The README's length at most: what it is, the two commands, a tour, the book's chapters.
const README_MAX_LINES: usize = 300;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The README and every page of the book.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, repo().join("README.md"));
    pages
}

/// The lines of `text` outside fenced code, with their numbers, inline code removed.
fn prose(text: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let outside_code: String = line.split('`').step_by(2).collect();
            lines.push((n + 1, outside_code));
        }
    }
    lines
}

/// The targets of `text`'s links (`[…](target)`), with their lines.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    for (n, line) in prose(text) {
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            links.push((n, rest[..end].to_string()));
            rest = &rest[end..];
        }
    }
    links
}

/// The anchor GitHub and mdBook give a heading: lower case, spaces as hyphens, no
/// punctuation but hyphens and underscores.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of the headings of `text`.
fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .into_iter()
        .filter_map(|(_, line)| {
            let heading = line.trim_start_matches('#');
            (heading.len() < line.len() && heading.starts_with(' ')).then(|| anchor(heading))
        })
        .collect()
}

#[test]
fn every_link_of_the_readme_and_the_book_leads_somewhere() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for (line, target) in links(&text) {
            if target.starts_with("http://")
                || target.starts_with("https://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                dir.join(path)
            };
            let at = format!("{}:{line}: {target}", page.display());
            if !file.exists() {
                broken.push(format!("{at}: no such file"));
                continue;
            }
            if let Some(fragment) = fragment {
                let headings = std::fs::read_to_string(&file).map(|t| anchors(&t));
                if !headings.is_ok_and(|h| h.iter().any(|a| a == fragment)) {
                    broken.push(format!("{at}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let summary = std::fs::read_to_string(repo().join("docs/SUMMARY.md")).unwrap();
    let listed: Vec<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    for page in pages().iter().skip(1) {
        let name = page.file_name().unwrap().to_str().unwrap();
        assert!(
            name == "SUMMARY.md" || listed.iter().any(|l| l == name),
            "docs/{name} is not in docs/SUMMARY.md"
        );
    }
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; what is past the front door belongs in the book (docs/)"
    );
    // It opens with the two set-up commands.
    let first_block: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .collect();
    assert_eq!(first_block.len(), 2, "{first_block:?}");
    assert_eq!(first_block[1], "bash .ci/run");
    // The book's introduction gives the same two.
    let intro = std::fs::read_to_string(repo().join("docs/introduction.md")).unwrap();
    assert!(
        intro.contains(&first_block.join("\n")),
        "docs/introduction.md"
    );
}

/// The README's first command installs bubblewrap when it is missing, as root without
/// `sudo` (a container, a CI image) and as a user with it, after reading the package lists
/// (a fresh image has none): its installing part is run with `apt-get` and `sudo` stubs
/// that log what they are asked.
#[test]
fn the_first_command_installs_bubblewrap_with_or_without_sudo() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let first = readme
        .lines()
        .find(|l| l.starts_with("rustup toolchain install"))
        .unwrap();
    let install = first
        .strip_prefix("rustup toolchain install && ")
        .and_then(|rest| rest.strip_suffix(" && cargo run --release -- demo"))
        .expect("rustup, then the bubblewrap step, then the demo");
    let stub = |dir: &Path, name: &str, body: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    for (sudo, bwrap, expected) in [
        (
            false,
            false,
            "apt-get update -q\napt-get install -y bubblewrap\n",
        ),
        (
            true,
            false,
            "sudo\napt-get update -q\nsudo\napt-get install -y bubblewrap\n",
        ),
        (true, true, ""),
    ] {
        let bin = tempfile::tempdir().unwrap();
        let log = bin.path().join("log");
        let log_line = format!("echo \"${{0##*/}} $*\" >> {}", log.display());
        stub(bin.path(), "apt-get", &log_line);
        if sudo {
            stub(
                bin.path(),
                "sudo",
                &format!("echo sudo >> {}\nexec \"$@\"", log.display()),
            );
        }
        if bwrap {
            stub(bin.path(), "bwrap", "exit 0");
        }
        let out = std::process::Command::new("/bin/bash")
            .args(["-c", install])
            .env("PATH", bin.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "sudo {sudo}, bwrap {bwrap}: {out:?}");
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(logged, expected, "sudo {sudo}, bwrap {bwrap}");
    }
}

/// The book's page of limits and defaults is what `hookhost config reference` prints from
/// the code (`HOOKHOST_BLESS=1` writes it anew).
#[test]
fn the_limits_page_is_what_the_code_defines() {
    generated_page(&[], "docs/limits.md", "host/src/limits.rs");
}

/// The book's page of config keys is what `hookhost config reference --keys` prints from
/// the config's types.
#[test]
fn the_config_keys_page_is_what_the_code_reads() {
    generated_page(&["--keys"], "docs/config-keys.md", "the config's types");
}

/// `hookhost config reference FLAGS` is the page `name` (`HOOKHOST_BLESS=1` writes it).
fn generated_page(flags: &[&str], name: &str, from: &str) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .args(["config", "reference"])
        .args(flags)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    let page = repo().join(name);
    if std::env::var_os("HOOKHOST_BLESS").is_some() {
        std::fs::write(&page, &generated).unwrap();
    }
    let written = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        written == generated,
        "{name} is stale: `HOOKHOST_BLESS=1 cargo test --release -p hookhost --test docs` writes it from {from}"
    );
}
