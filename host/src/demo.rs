//! `hookhost demo`: the main job, end to end, through the real chain.
//!
//! A session's `bash` call prints more than the context can take; the offload hook moves
//! it to a file and returns a reference; `read_file` pages that file back, and the pages
//! put together are checked against the file byte for byte.

use anyhow::{Context, Result, bail, ensure};
use hookhost::{Runtime, TenantId};
use hookhost_formats::{PAGE_BYTES, split_page};

const COMMAND: &str = "seq 1 5000";

pub async fn run(runtime: &Runtime) -> Result<()> {
    let session = runtime
        .sessions()
        .create(TenantId::default_tenant(), None, None)
        .await?;
    println!("session {}\n", session.id);

    let arguments = serde_json::json!({ "command": COMMAND }).to_string();
    println!(
        "$ hookhost call --session {} bash '{arguments}'",
        session.id
    );
    let offloaded = runtime.call(&session, "bash", &arguments).await?;
    println!("{}", offloaded.output);
    ensure!(!offloaded.is_error, "bash failed");
    let path = hookhost_formats::offloaded_path(&offloaded.output)
        .context("the output was not offloaded (is the offload hook in the chain?)")?
        .to_string();

    let mut pages = Vec::new();
    let mut offset = 0;
    loop {
        let args = serde_json::json!({ "path": path, "offset": offset, "limit": PAGE_BYTES });
        let page = runtime
            .call(&session, "read_file", &args.to_string())
            .await?;
        ensure!(!page.is_error, "read_file failed: {}", page.output);
        if pages.is_empty() {
            println!(
                "$ hookhost call --session {} read_file '{args}'",
                session.id
            );
            print_abridged(&page.output);
        }
        match split_page(&page.output) {
            (text, Some(next)) => {
                pages.push(text.to_string());
                offset = next;
            }
            (text, None) => {
                pages.push(text.to_string());
                break;
            }
        }
    }

    let whole: String = pages.concat();
    let relative = path
        .strip_prefix("/artifacts/")
        .context("offloaded outside /artifacts")?;
    let host_file = session
        .host_dir("/artifacts")
        .context("no /artifacts mount")?
        .join(relative);
    let on_disk =
        std::fs::read(&host_file).with_context(|| format!("reading {}", host_file.display()))?;
    if whole.as_bytes() != on_disk.as_slice() {
        bail!("the pages do not reassemble the offloaded file");
    }
    println!(
        "Paged {} back in {} read_file calls of {PAGE_BYTES} bytes: {} bytes, identical to the offloaded file.",
        path,
        pages.len(),
        whole.len()
    );
    println!("On the host: {}", host_file.display());
    Ok(())
}

/// Prints the first lines of a page and its last line (where to continue).
fn print_abridged(page: &str) {
    let lines: Vec<&str> = page.lines().collect();
    if lines.len() <= 12 {
        println!("{page}\n");
        return;
    }
    for line in &lines[..5] {
        println!("{line}");
    }
    println!("[… {} lines …]", lines.len() - 6);
    println!("{}\n", lines[lines.len() - 1]);
}
