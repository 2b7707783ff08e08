//! Help that wraps its prose to the terminal and never breaks an example: a config snippet or
//! a command line pasted from `--help` must work, at any width and when not a terminal.

use std::process::Command;

/// `pgcompress ARGS --help` with standard output a pipe and COLUMNS as given (clap falls back
/// to COLUMNS when standard output is not a terminal).
fn help(args: &[&str], columns: Option<&str>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pgcompress"));
    cmd.args(args).arg("--help");
    match columns {
        Some(c) => cmd.env("COLUMNS", c),
        None => cmd.env_remove("COLUMNS"),
    };
    let out = cmd.output().expect("run pgcompress");
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// Lines that must each come out whole, as a DBA would paste them.
const ARCHIVE_EXAMPLES: [&str; 7] = [
    "  repo = \"s3://pg-wal/main\"",
    "  endpoint = \"http://127.0.0.1:9000\"   # an S3-compatible server; omit for AWS",
    "  method = \"xz:1\"   # the high-ratio setting: smaller than xz -6, several times the push CPU of the default",
    "  pgcompress archive init --config /etc/pgcompress.toml --pgdata \"$PGDATA\"",
    "  archive_command = 'pgcompress archive push --config /etc/pgcompress.toml %p'",
    "  restore_command = 'pgcompress archive get --config /etc/pgcompress.toml %f %p'",
    "  region     --region     $AWS_REGION, $AWS_DEFAULT_REGION         default us-east-1",
];

#[test]
fn examples_are_never_wrapped_and_prose_fits_the_terminal() {
    for columns in [Some("40"), Some("60"), Some("80"), None, Some("200")] {
        let text = help(&["archive"], columns);
        for example in ARCHIVE_EXAMPLES {
            assert!(
                text.lines().any(|l| l == example),
                "COLUMNS={columns:?}: {example:?} is not one line in:\n{text}"
            );
        }
        // Prose (lines that are not indented examples) fits the width asked for.
        if let Some(width) = columns.and_then(|c| c.parse::<usize>().ok()) {
            for line in text.lines().filter(|l| !l.starts_with(' ')) {
                assert!(
                    line.chars().count() <= width.max(60),
                    "COLUMNS={width}: prose line too wide: {line:?}"
                );
            }
        }
    }
}

#[test]
fn prose_uses_a_wide_terminal() {
    let text = help(&["archive"], Some("200"));
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(widest > 100, "widest line {widest} at COLUMNS=200:\n{text}");
}

#[test]
fn every_command_help_keeps_its_command_lines_whole() {
    // Each line of an example command (one that starts with `pgcompress`, a postgresql.conf
    // `*_command` setting, a line continued by a backslash) is complete: a narrow terminal
    // does not cut it.
    for cmd in [
        &["tunnel"][..],
        &["tunnel", "server"],
        &["tunnel", "client"],
        &["archive", "push"],
        &["archive", "get"],
        &["archive", "init"],
        &["wal", "advise"],
    ] {
        let wide = help(cmd, Some("400"));
        let narrow = help(cmd, Some("50"));
        let examples: Vec<&str> = wide
            .lines()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with("pgcompress ") || l.contains("_command = '") || l.ends_with('\\')
            })
            .collect();
        assert!(!examples.is_empty(), "{cmd:?}: no example in:\n{wide}");
        for e in examples {
            assert!(
                narrow.lines().any(|l| l == e),
                "{cmd:?}: {e:?} broken at COLUMNS=50:\n{narrow}"
            );
        }
    }
}

#[test]
fn tunnel_halves_have_the_layout_of_other_commands_and_their_exit_statuses() {
    for half in ["server", "client"] {
        let text = help(&["tunnel", half], Some("100"));
        assert!(text.contains("\nExit status: 0 "), "tunnel {half}:\n{text}");
        // Options with their help on the same line, as in `archive push --help`.
        assert!(
            text.lines().any(
                |l| l.trim_start().starts_with("--ca <FILE>") && l.contains("  CA certificate")
            ),
            "tunnel {half}:\n{text}"
        );
    }
}

#[test]
fn version_is_one_line_and_help_subcommand_has_the_examples_too() {
    let out = Command::new(env!("CARGO_BIN_EXE_pgcompress"))
        .arg("--version")
        .output()
        .expect("run pgcompress");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text.lines().count(), 1, "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_pgcompress"))
        .args(["help", "archive"])
        .env("COLUMNS", "50")
        .output()
        .expect("run pgcompress");
    let text = String::from_utf8_lossy(&out.stdout);
    for example in ARCHIVE_EXAMPLES {
        assert!(text.lines().any(|l| l == example), "{example:?}:\n{text}");
    }
}
