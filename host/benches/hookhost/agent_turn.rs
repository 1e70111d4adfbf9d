//! The `agent-turn` rows: what hookhost costs a whole agent turn. The real Claude Code CLI
//! (`claude -p`, from target/ci-agents, which `.ci/run` installs) works through 20 tool
//! calls of its everyday tools (Bash, Write, Read, Edit, Grep: 43 hook events with the
//! session's) against the scripted model of tests/agents/model.py (`turn`), in a fresh
//! project each run: without hooks, with hooks that only read their input (`cat`), and
//! with hookhost's hooks as `hook install` writes them — answered in each hook process,
//! forwarded to `serve --hooks`, or posted by Claude Code to `serve --http` (`--url`). The
//! forms alternate within each round, so that the machine's drift is shared; each figure
//! is the median of the rounds. Skipped (no rows) when the CLI is not installed.

use super::{Count, Killed, Row, median, ratio};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs of each form.
const ROUNDS: Count = Count::new(9, 1);
/// How long one turn may take before the bench gives up on it.
const TURN_TIMEOUT: Duration = Duration::from_secs(120);

/// The hooks of one form: the project's `.claude/settings.json` (none without hooks).
struct Form {
    name: &'static str,
    settings: Option<String>,
}

pub fn rows(scratch: &Path) -> Result<Vec<Row>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let claude = root.join("target/ci-agents/node_modules/.bin/claude");
    if !claude.exists() {
        eprintln!(
            "agent-turn: skipped: {} is missing (`.ci/run` installs it)",
            claude.display()
        );
        return Ok(Vec::new());
    }
    let exe = Path::new(env!("CARGO_BIN_EXE_hookhost"));
    let dir = scratch.join("agent-turn");
    let project = dir.join("project");
    let home = dir.join("home");
    std::fs::create_dir_all(&home)?;

    let mut model = Killed(
        Command::new("python3")
            .arg(root.join("tests/agents/model.py"))
            .arg(dir.join("requests.jsonl"))
            .args(["claude-code", "turn"])
            .arg(&project)
            .stdout(Stdio::piped())
            .spawn()
            .context("starting tests/agents/model.py")?,
    );
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(model.0.stdout.take().context("stdout")?),
        &mut first,
    )?;
    let port = first
        .trim()
        .strip_prefix("listening ")
        .context("the model did not say its port")?;
    let model_url = format!("http://127.0.0.1:{port}");

    // The daemons, each with its own data directory.
    let socket_data = dir.join("data-socket");
    let hooks_daemon = Killed(
        Command::new(exe)
            .arg("--data")
            .arg(&socket_data)
            .args(["serve", "--hooks"])
            .stderr(Stdio::null())
            .spawn()?,
    );
    let socket = hookhost::agents::daemon::socket_path(&socket_data);
    for _ in 0..600 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    anyhow::ensure!(socket.exists(), "serve --hooks made no socket within 60 s");
    let url_data = dir.join("data-url");
    let mut http = Command::new(exe)
        .arg("--data")
        .arg(&url_data)
        .args(["serve", "--http", "127.0.0.1:0", "--unauthenticated-bash"])
        .stderr(Stdio::piped())
        .spawn()?;
    let url = super::announced(&mut http)?;
    let http_daemon = Killed(http);

    let install = |data: &Path, extra: &[&str]| -> Result<String> {
        let into = dir.join("install");
        std::fs::create_dir_all(&into)?;
        let out = Command::new(exe)
            .arg("--data")
            .arg(data)
            .args(["hook", "install", "claude-code", "--print", "--project"])
            .arg(&into)
            .args(extra)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "hook install: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?)
    };
    let forms = [
        Form {
            name: "none",
            settings: None,
        },
        Form {
            name: "cat",
            settings: Some(cat_hooks()),
        },
        Form {
            name: "command",
            settings: Some(install(&dir.join("data-command"), &[])?),
        },
        Form {
            name: "socket",
            settings: Some(install(&socket_data, &[])?),
        },
        Form {
            name: "url",
            settings: Some(install(&url_data, &["--url", &url])?),
        },
    ];

    let mut took: Vec<Vec<Duration>> = vec![Vec::new(); forms.len()];
    // A first turn of each form, unmeasured: caches filled, sessions' tables made.
    let rounds = ROUNDS.get();
    for round in 0..=rounds {
        for (form, took) in forms.iter().zip(took.iter_mut()) {
            let turn = run_turn(&claude, &project, &home, &model_url, form)
                .with_context(|| format!("a turn with the {} hooks", form.name))?;
            if round > 0 {
                took.push(turn);
            }
        }
    }
    drop((hooks_daemon, http_daemon));

    let medians: Vec<Duration> = took.into_iter().map(median).collect();
    let none = medians[0];
    let seconds = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let what = [
        "",
        "hooks that only read their input (`cat > /dev/null`)",
        "hookhost's hooks without a daemon (`hookhost-agent` running `hookhost`, which answers)",
        "hookhost's hooks, `hookhost-agent` forwarding to `serve --hooks`",
        "hookhost's hooks, Claude Code's `http` hooks posting to `serve --http` (`--url`)",
    ];
    let goal = ["", "", "", "≤ 1.10×", ""];
    Ok((1..forms.len())
        .map(|i| Row {
            what: format!(
                "agent turn: `claude -p`, 20 tool calls (43 hook events), {} (median of {rounds})",
                what[i]
            ),
            hookhost: seconds(medians[i]),
            native: format!("{} (no hooks)", seconds(none)),
            ratio: ratio(medians[i].as_secs_f64(), none.as_secs_f64()),
            goal: goal[i],
        })
        .collect())
}

/// Settings whose every event runs a hook that reads its input and says nothing.
fn cat_hooks() -> String {
    use hookhost::agents::{Agent, Event};
    let hook = serde_json::json!([{"type": "command", "command": "cat > /dev/null"}]);
    let hooks: serde_json::Map<String, serde_json::Value> = Event::ALL
        .iter()
        .filter_map(|event| {
            let name = Agent::ClaudeCode.event_name(*event)?;
            let entry = match event.is_tool() {
                true => serde_json::json!([{"matcher": "*", "hooks": hook}]),
                false => serde_json::json!([{ "hooks": hook }]),
            };
            Some((name.to_string(), entry))
        })
        .collect();
    serde_json::json!({ "hooks": hooks }).to_string()
}

/// One turn in a fresh `project` with `form`'s hooks: how long `claude -p` took.
fn run_turn(
    claude: &Path,
    project: &Path,
    home: &Path,
    model: &str,
    form: &Form,
) -> Result<Duration> {
    if project.exists() {
        std::fs::remove_dir_all(project)?;
    }
    std::fs::create_dir_all(project.join(".claude"))?;
    if let Some(settings) = &form.settings {
        std::fs::write(project.join(".claude/settings.json"), settings)?;
    }
    let out: PathBuf = project.with_extension("out");
    let start = Instant::now();
    let mut child = Command::new(claude)
        .args(["-p", "Work on the notes.", "--allowedTools"])
        .arg("Bash,Read,Write,Edit,Grep,Glob")
        .args(["--output-format", "json"])
        .current_dir(project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("ANTHROPIC_BASE_URL", model)
        .env("ANTHROPIC_API_KEY", "bench-key")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out)?)
        .stderr(Stdio::null())
        .spawn()?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > TURN_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("claude -p did not end within {} s", TURN_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let took = start.elapsed();
    let said = std::fs::read_to_string(&out)?;
    anyhow::ensure!(status.success(), "claude -p failed: {said}");
    // All 20 calls ran: the script's last step edits the fourth file.
    let last = std::fs::read_to_string(project.join("notes3.txt")).unwrap_or_default();
    anyhow::ensure!(last.contains("final"), "the turn did not finish: {said}");
    Ok(took)
}
