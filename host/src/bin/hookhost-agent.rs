//! `hookhost-agent`: the command `hookhost hook install` writes into an agent's settings
//! when it is installed beside `hookhost`. It takes `hookhost`'s own arguments
//! (`[--config FILE] [--data DIR] hook AGENT EVENT [flags]`, read as
//! [`HookCommand`] reads them) and answers the event through `serve --hooks`' socket when
//! a daemon listens in that data directory; otherwise — no daemon, one that did not
//! answer, arguments it does not read — it runs `hookhost` with the same arguments in its
//! place (`exec`), the hook input it already read given as stdin. It links none of
//! wasmtime, so it starts in about a millisecond where `hookhost` takes three or four
//! (see docs/performance.md).

use hookhost::agents::daemon::ASKED_ENV;
use hookhost::agents::invocation::HookCommand;
use hookhost::agents::{Forward, HookSettings, Offered, unanswered_input};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let hook = read(&args);
    let input = match &hook {
        Some((hook, settings, data)) => {
            let forward = Forward::new(data, hook.daemon_timeout);
            match forward.offer(hook.agent, hook.event, settings, hook.deadline) {
                Offered::Answered(answer) => return answer.emit(),
                Offered::Unanswered(bytes) => Some(bytes),
                Offered::NotAsked => None,
            }
        }
        None => None,
    };
    let why = hookhost(&args, input.as_deref());
    match (hook, input) {
        // The input read, hookhost not run: the shell's fallback could not read it again,
        // so the answer to a closed tool is given here.
        (Some((hook, settings, _)), Some(bytes)) => {
            unanswered_input(hook.agent, hook.event, &bytes, &settings, &why).emit()
        }
        _ => {
            eprintln!("hookhost-agent: {why}");
            // The shell's "cannot run": `hook install`'s fallback denies closed tools.
            ExitCode::from(127)
        }
    }
}

/// The hook event `args` name, how it runs and its data directory, when this program
/// reads them as `hookhost` would; `None` leaves them to `hookhost`.
fn read(args: &[OsString]) -> Option<(HookCommand, HookSettings, std::path::PathBuf)> {
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    let hook = HookCommand::parse(&args)?;
    let settings = hook.settings()?;
    // A log format `hookhost` refuses is its to report.
    let format = std::env::var_os("HOOKHOST_LOG_FORMAT");
    if format.is_some_and(|f| f != "text" && f != "json") {
        return None;
    }
    let data = hook.data_dir(|name| std::env::var_os(name))?;
    Some((hook, settings, data))
}

/// Runs `hookhost` (beside this program, else on `PATH`) with `args` in this process's
/// place, with `input` as its stdin when this process read the hook input already (and
/// offered it to the daemon: `hookhost` does not ask again). Returns only when it cannot,
/// with why.
fn hookhost(args: &[OsString], input: Option<&[u8]>) -> String {
    let beside = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("hookhost"))
        .filter(|path| path.is_file());
    let mut command = std::process::Command::new(beside.unwrap_or_else(|| "hookhost".into()));
    command.args(args);
    if let Some(bytes) = input {
        match unnamed_file(bytes) {
            Ok(file) => command.stdin(file).env(ASKED_ENV, "1"),
            Err(e) => return format!("cannot keep the hook input for hookhost: {e}"),
        };
    }
    format!("cannot run hookhost: {}", command.exec())
}

/// A file in memory holding `bytes`, read from its start.
fn unnamed_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::{Seek, Write};
    let fd = rustix::fs::memfd_create("hook-input", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file)
}
