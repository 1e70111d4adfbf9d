//! Argument parsing and page text: pure functions, tested natively and through the host.

use tool_support::{Args, resolve_path};

/// Bytes read when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = hookhost_formats::PAGE_BYTES;
/// The largest `limit` accepted: one page must fit comfortably in a model's context.
pub const MAX_LIMIT: u64 = hookhost_formats::MAX_PAGE_BYTES;

/// A parsed `read_file` call.
#[derive(Debug, PartialEq)]
pub struct Request {
    /// The path to open (relative paths resolved inside `/workspace`).
    pub path: String,
    pub offset: u64,
    pub limit: u64,
}

impl Request {
    /// Parses the call's JSON arguments; the error is the message the model sees.
    pub fn parse(arguments: &str) -> Result<Request, String> {
        let args = Args::parse("read_file", arguments)?;
        let path = resolve_path(args.string("path", false)?);
        let offset = args.uint("offset")?.unwrap_or(0);
        let limit = args.uint("limit")?.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_LIMIT {
            return Err(format!(
                "read_file: `limit` must be between 1 and {MAX_LIMIT} bytes"
            ));
        }
        Ok(Request {
            path,
            offset,
            limit,
        })
    }
}

/// The text of one page: `bytes` read at `offset` from a file of `size` bytes.
///
/// The page is cut back to the last whole UTF-8 character, and when the file goes on, a
/// last line says where: `[bytes A-B of T; to continue reading use offset=B]`.
pub fn page_text(offset: u64, size: u64, bytes: &[u8]) -> String {
    if offset >= size && size > 0 {
        return format!("[offset={offset} exceeds file size ({size} bytes), nothing to read.]");
    }
    let (mut text, used) = match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), bytes.len()),
        // A character split by the page's end: stop before it, the next page starts there.
        Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => {
            let used = e.valid_up_to();
            (
                String::from_utf8(bytes[..used].to_vec()).expect("valid prefix"),
                used,
            )
        }
        // Not text: show it, lossily, and move on by whole pages.
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), bytes.len()),
    };
    let end = offset + used as u64;
    if end < size {
        text.push_str(&hookhost_formats::page_trailer(offset, end, size));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let r = Request::parse(r#"{"path":"a.txt"}"#).unwrap();
        assert_eq!((r.offset, r.limit), (0, DEFAULT_LIMIT));
        assert_eq!(r.path, "/workspace/a.txt");
        assert!(Request::parse(r#"{"path":"a","limit":0}"#).is_err());
        assert!(Request::parse(r#"{"path":"a","offset":-1}"#).is_err());
        assert!(Request::parse(r#"{"offset":1}"#).is_err());
    }

    #[test]
    fn past_the_end_is_not_an_error() {
        assert_eq!(
            page_text(10, 5, b""),
            "[offset=10 exceeds file size (5 bytes), nothing to read.]"
        );
        assert_eq!(page_text(0, 0, b""), "");
    }

    #[test]
    fn split_characters_move_to_the_next_page() {
        let bytes = "aé".as_bytes(); // 3 bytes; a 2-byte page splits the é
        assert_eq!(
            page_text(0, 3, &bytes[..2]),
            "a\n\n[bytes 0-1 of 3; to continue reading use offset=1]"
        );
        assert_eq!(page_text(1, 3, &bytes[1..]), "é");
    }
}
