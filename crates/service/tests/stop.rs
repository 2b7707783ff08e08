//! `service::stop` in a real process: a child installs the handler, says it is ready, is sent
//! real signals, and reports through its token what it saw. The parent checks the report.
//!
//! Run as `stop` (the parent) or `stop child MODE` (the child). A child waits at most
//! [`CHILD_DEADLINE`] for a signal, so a handler that never fires ends the test with a failure,
//! not a hang.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a child waits for a signal before it reports that none came.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

/// One case of the parent: starts a child, signals it, checks its report.
type Case = fn() -> Result<(), String>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("child") {
        child(args.get(2).map(String::as_str).unwrap_or(""));
        return;
    }
    let mut failed = 0;
    let mut cases: Vec<(&str, Case)> = vec![
        ("sigterm_stops_a_blocking_wait", || {
            expect("blocking", &[Signal::SIGTERM], "stopped after 1 signal(s)")
        }),
        ("sigint_stops_a_blocking_wait", || {
            expect("blocking", &[Signal::SIGINT], "stopped after 1 signal(s)")
        }),
        ("a_second_signal_is_counted", || {
            expect(
                "twice",
                &[Signal::SIGTERM, Signal::SIGTERM],
                "second signal seen",
            )
        }),
        ("install_twice_gives_the_same_token", || {
            expect("reinstall", &[Signal::SIGTERM], "both tokens stopped")
        }),
        ("a_wait_without_a_signal_ends_at_its_deadline", || {
            expect("deadline", &[], "deadline passed, not stopped")
        }),
    ];
    #[cfg(feature = "tokio")]
    cases.push(("sigterm_wakes_an_async_wait", || {
        expect(
            "async",
            &[Signal::SIGTERM, Signal::SIGINT],
            "async: 2 signal(s)",
        )
    }));
    for (name, case) in cases.drain(..) {
        match case() {
            Ok(()) => println!("test {name} ... ok"),
            Err(e) => {
                println!("test {name} ... FAILED: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        println!("{failed} failed");
        std::process::exit(1);
    }
}

/// Starts a child in `mode`, waits for its "ready" line, sends it `signals` one after another
/// (each after the child says it saw the one before), and compares its last line to `want`.
fn expect(mode: &str, signals: &[Signal], want: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
    let mut child = Command::new(exe)
        .args(["child", mode])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the child: {e}"))?;
    let pid = Pid::from_raw(child.id() as i32);
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut next = || -> Result<String, String> {
        lines
            .next()
            .ok_or_else(|| "the child ended without a report".to_owned())?
            .map_err(|e| format!("reading the child: {e}"))
    };
    let mut last = next()?;
    if last != "ready" {
        return Err(format!("first line {last:?}, expected \"ready\""));
    }
    for (i, sig) in signals.iter().enumerate() {
        kill(pid, *sig).map_err(|e| format!("sending {sig}: {e}"))?;
        if i + 1 < signals.len() {
            // The handler may merge signals that arrive together: send the next one once
            // the child saw this one.
            last = next()?;
            if last != format!("saw {}", i + 1) {
                return Err(format!("after {sig}: {last:?}"));
            }
        }
    }
    last = next()?;
    let status = child.wait().map_err(|e| format!("waiting: {e}"))?;
    if !status.success() {
        return Err(format!("child {status}, last line {last:?}"));
    }
    if last != want {
        return Err(format!("child said {last:?}, expected {want:?}"));
    }
    Ok(())
}

/// The child's part: install, say "ready", wait as `mode` says, report what the token says.
fn child(mode: &str) {
    let stop = service::stop::install().expect("installing the handler");
    println!("ready");
    match mode {
        "blocking" => {
            let stopped = stop.wait(CHILD_DEADLINE);
            assert!(
                stopped && stop.is_stopped(),
                "no signal within the deadline"
            );
            assert!(stop.flag().load(std::sync::atomic::Ordering::SeqCst));
            println!("stopped after {} signal(s)", stop.signals());
        }
        "twice" => {
            assert!(stop.wait(CHILD_DEADLINE), "no first signal");
            println!("saw {}", stop.signals());
            wait_for_count(&stop, 2);
            println!("second signal seen");
        }
        "reinstall" => {
            let again = service::stop::install().expect("a second install");
            assert!(again.wait(CHILD_DEADLINE), "no signal");
            assert!(stop.is_stopped() && again.is_stopped());
            println!("both tokens stopped");
        }
        "deadline" => {
            let stopped = stop.wait(Duration::from_millis(50));
            println!(
                "deadline passed, {}",
                if stopped { "stopped" } else { "not stopped" }
            );
        }
        #[cfg(feature = "tokio")]
        "async" => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                stop.signalled(1).await;
                println!("saw {}", stop.signals());
                stop.signalled(2).await;
            });
            println!("async: {} signal(s)", stop.signals());
        }
        other => panic!("unknown child mode {other:?}"),
    }
}

/// Waits (each step bounded by the deadline) until `n` signals were counted.
fn wait_for_count(stop: &service::stop::Stop, n: u32) {
    let start = std::time::Instant::now();
    while stop.signals() < n {
        assert!(start.elapsed() < CHILD_DEADLINE, "signal {n} never came");
        std::thread::sleep(Duration::from_millis(10));
    }
}
