//! What the model reads that several parts of hookhost write or read, in one place so that
//! they change together: the offload hook's reference to an offloaded output, the
//! `read_file` tool's page trailer, and the MCP instructions that describe both. The offload
//! hook and `read_file` (guests) and the host depend on this crate; the Python test client
//! parses the same texts and is checked against them by the MCP tests.

/// The page size `read_file` uses when a call gives no `limit`, and that a reference
/// suggests.
pub const PAGE_BYTES: u64 = 4096;

/// The largest page `read_file` returns.
pub const MAX_PAGE_BYTES: u64 = 256 * 1024;

/// How the line of an offload reference that names the file begins.
pub const FULL_OUTPUT: &str = "Full output: ";

/// The first line of an offload reference: `chars` characters did not fit in `threshold`.
pub fn offload_header(chars: usize, threshold: usize) -> String {
    format!(
        "[Output offloaded: {chars} characters, more than the {threshold} that fit in the context.]"
    )
}

/// The path an offload reference names, if `text` is one.
pub fn offloaded_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix(FULL_OUTPUT))
}

/// How a reference tells the model to read the file at `path`.
pub fn read_hint(path: &str) -> String {
    format!(
        "To read it, call read_file with {{\"path\": \"{path}\", \"offset\": 0, \"limit\": {PAGE_BYTES}}}, \
         then again with the offset each page reports, until the end."
    )
}

/// The end of a `read_file` page of bytes `start..end` of a file of `size` bytes that does
/// not reach its end: where to continue.
pub fn page_trailer(start: u64, end: u64, size: u64) -> String {
    format!("\n\n[bytes {start}-{end} of {size}; to continue reading use offset={end}]")
}

/// Splits a page of the built-in `read_file` into its text and the offset its last line says
/// to continue from (`[bytes A-B of T; to continue reading use offset=B]`); `None` on the
/// last page. A page whose text merely looks like a trailer but does not end with a
/// well-formed one is all text.
pub fn split_page(page: &str) -> (&str, Option<u64>) {
    if let Some(at) = page.rfind("\n\n[bytes ")
        && let Some(next) = page[at..]
            .strip_suffix(']')
            .and_then(|t| t.rsplit_once("use offset="))
            .and_then(|(_, n)| n.parse().ok())
    {
        return (&page[..at], Some(next));
    }
    (page, None)
}

/// The most lines an agent's line-paging reader is told to read at once.
pub const PAGE_LINES: u64 = 2000;

/// The line of an offload reference that gives the file's size.
pub fn size_line(bytes: usize, lines: usize) -> String {
    format!("Size: {bytes} bytes, {lines} lines")
}

/// How an agent is told to page an offloaded file: each page under the threshold the
/// output was offloaded over, so a page fits where the output did not (and a read of the
/// file is never offloaded again: see the offload hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// This many lines at once.
    Lines(u64),
    /// This many bytes at once: lines too long for a page of lines (one line of JSON).
    Bytes(u64),
}

impl Page {
    /// The page for the file an offload `reference` names, from its size line and its
    /// threshold: lines when an average line fits four fifths of the threshold (at most
    /// [`PAGE_LINES`]), else bytes. `None` when `reference` is not one.
    pub fn of_reference(reference: &str) -> Option<Page> {
        let threshold: u64 = reference
            .lines()
            .next()?
            .split_once("more than the ")?
            .1
            .split(' ')
            .next()?
            .parse()
            .ok()?;
        let (bytes, lines) = reference.lines().find_map(|line| {
            let (bytes, lines) = line.strip_prefix("Size: ")?.split_once(" bytes, ")?;
            Some((
                bytes.parse::<u64>().ok()?,
                lines.strip_suffix(" lines")?.parse::<u64>().ok()?,
            ))
        })?;
        let budget = (threshold * 4 / 5).max(1);
        let per_line = bytes.div_ceil(lines.max(1)).max(1);
        Some(match budget / per_line {
            0 => Page::Bytes(budget),
            n => Page::Lines(n.min(PAGE_LINES)),
        })
    }
}

/// `path` as one word of a POSIX shell command line: in single quotes, a quote in it
/// closed, escaped and reopened.
pub fn shell_quoted(path: &str) -> String {
    format!("'{}'", path.replace('\'', r"'\''"))
}

/// How a reference tells an agent whose reader pages by lines (Claude Code's `Read`) to
/// read the file at `path` in pages of `lines`: `tool` with `path_key`, `offset` (the
/// first line, from 1) and `limit`.
pub fn line_read_hint(tool: &str, path_key: &str, path: &str, lines: u64) -> String {
    let path = path.replace('\\', r"\\").replace('"', r#"\""#);
    format!(
        "To read it, call {tool} with {{\"{path_key}\": \"{path}\", \"offset\": 1, \"limit\": {lines}}} \
         (lines), then with the next offset, until the end; or search it with grep."
    )
}

/// How a reference tells an agent to read the file at `path` with its shell, in pages of
/// `page`, the path quoted for the shell.
pub fn shell_read_hint(path: &str, page: Page) -> String {
    let path = shell_quoted(path);
    let (first, second) = match page {
        Page::Lines(n) => (
            format!("sed -n '1,{n}p' {path}"),
            format!("sed -n '{},{}p' {path}", n + 1, 2 * n),
        ),
        Page::Bytes(n) => (
            format!("head -c {n} {path}"),
            format!("tail -c +{} {path} | head -c {n}", n + 1),
        ),
    };
    format!(
        "To read it, run `{first}`, then `{second}` and so on, until the end; or search it \
         with grep."
    )
}

/// An offload `reference` as an agent that runs its own tools reads it: the file named by
/// `host_path` (where its tools find it) instead of `virtual_path`, and `hint` instead of
/// how to page it with `read_file`.
pub fn for_agent(reference: &str, virtual_path: &str, host_path: &str, hint: &str) -> String {
    let standard = read_hint(virtual_path);
    reference
        .split('\n')
        .map(|line| {
            if line.strip_prefix(FULL_OUTPUT) == Some(virtual_path) {
                format!("{FULL_OUTPUT}{host_path}")
            } else if line == standard {
                hint.to_string()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the model is told at MCP `initialize` when offload is in its chain.
pub fn instructions() -> String {
    format!(
        "Tool outputs longer than the context can take are offloaded: the full output is saved \
         to a file under /artifacts/tool-results/ and the result you receive is a reference \
         instead. It starts with \"[Output offloaded: …]\", then gives the file's path \
         (\"{FULL_OUTPUT}PATH\"), its size in bytes and lines, and a preview of its first lines \
         (and, for JSON, a summary of its structure). The preview may be enough; when it is \
         not, read the file with the read_file tool: {{\"path\": PATH, \"offset\": 0, \"limit\": \
         {PAGE_BYTES}}} returns the first {PAGE_BYTES} bytes, and each page that does not reach \
         the end closes with \"[bytes A-B of T; to continue reading use offset=B]\": call \
         read_file again with that offset. Read only the pages you need; prefer a larger limit \
         (up to {MAX_PAGE_BYTES}) over many small pages when you need much of the file."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_names_its_path_and_a_trailer_its_next_offset() {
        let reference = format!(
            "{}\n{FULL_OUTPUT}/artifacts/x.txt\n{}",
            offload_header(20_000, 10_000),
            read_hint("/artifacts/x.txt")
        );
        assert_eq!(offloaded_path(&reference), Some("/artifacts/x.txt"));
        assert!(reference.starts_with("[Output offloaded: 20000 characters"));
        assert_eq!(
            page_trailer(0, 4096, 10_000),
            "\n\n[bytes 0-4096 of 10000; to continue reading use offset=4096]"
        );
        let page = format!("text{}", page_trailer(0, 4, 10));
        assert_eq!(split_page(&page), ("text", Some(4)));
        assert_eq!(split_page("last page"), ("last page", None));
        let lookalike = "x\n\n[bytes are fun]";
        assert_eq!(split_page(lookalike), (lookalike, None));
    }

    #[test]
    fn an_agent_reads_the_host_path_with_its_own_reader() {
        let reference = format!(
            "{}\n{FULL_OUTPUT}/artifacts/x.txt\n{}\nPreview",
            offload_header(20_000, 10_000),
            read_hint("/artifacts/x.txt")
        );
        let hint = line_read_hint("Read", "file_path", "/data/x.txt", 2000);
        let agent = for_agent(&reference, "/artifacts/x.txt", "/data/x.txt", &hint);
        assert_eq!(offloaded_path(&agent), Some("/data/x.txt"));
        assert!(
            agent.contains("call Read with {\"file_path\": \"/data/x.txt\""),
            "{agent}"
        );
        assert!(!agent.contains("read_file"), "{agent}");
        assert!(agent.ends_with("\nPreview"));
    }

    #[test]
    fn pages_fit_the_threshold_and_paths_survive_the_shell() {
        let reference = |bytes, lines| {
            format!(
                "{}\n{FULL_OUTPUT}/a\n{}\n",
                offload_header(30_000, 10_000),
                size_line(bytes, lines)
            )
        };
        // 3,000 lines of 76 characters: pages of 103 lines, under 8,000 bytes each.
        assert_eq!(
            Page::of_reference(&reference(231_000, 3000)),
            Some(Page::Lines(103))
        );
        assert_eq!(
            Page::of_reference(&reference(588_895, 100_000)),
            Some(Page::Lines(1333))
        );
        assert_eq!(
            Page::of_reference(&reference(8, 4)),
            Some(Page::Lines(PAGE_LINES))
        );
        // One line of JSON: pages of bytes.
        assert_eq!(
            Page::of_reference(&reference(18_800, 1)),
            Some(Page::Bytes(8000))
        );
        assert_eq!(Page::of_reference("no reference"), None);

        let hint = shell_read_hint("/data/a b/it's.txt", Page::Lines(10));
        assert!(
            hint.contains(r"`sed -n '11,20p' '/data/a b/it'\''s.txt'`"),
            "{hint}"
        );
        let hint = shell_read_hint("/x", Page::Bytes(8000));
        assert!(
            hint.contains("`tail -c +8001 '/x' | head -c 8000`"),
            "{hint}"
        );
        let hint = line_read_hint("Read", "file_path", r#"/a "b"\c"#, 5);
        assert!(
            hint.contains(r#"{"file_path": "/a \"b\"\\c", "offset": 1, "limit": 5}"#),
            "{hint}"
        );
    }

    #[test]
    fn the_instructions_describe_the_texts_as_written() {
        let said = instructions();
        assert!(said.contains("[Output offloaded: "));
        assert!(said.contains(FULL_OUTPUT));
        assert!(said.contains("; to continue reading use offset="));
        assert!(said.contains(&MAX_PAGE_BYTES.to_string()));
        assert!(said.contains(&format!("\"limit\": {PAGE_BYTES}")));
    }
}
