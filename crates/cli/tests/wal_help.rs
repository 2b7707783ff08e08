//! What `pgcompress --help`, `pgcompress wal --help` and `wal advise --help` say of
//! the `wal` commands: every one named in the summaries, and predicted WAL bytes
//! described as the output and the README describe them.

mod common;

use common::pgcompress;

/// What every description of predicted WAL bytes must say they leave out.
const LEFT_OUT: &str = "not the unused space after a segment switch";

fn help(args: &[&str]) -> String {
    let out = pgcompress(args);
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).expect("utf8")
}

#[test]
fn wal_summaries_name_stats_verify_and_advise() {
    let top = help(&["--help"]);
    let line = top
        .lines()
        .find(|l| l.trim_start().starts_with("wal "))
        .unwrap_or_else(|| panic!("a wal line:\n{top}"));
    for what in ["statistics", "verification", "advice"] {
        assert!(
            line.contains(what),
            "top-level wal line names {what}: {line}"
        );
    }
    let wal = help(&["wal", "--help"]);
    let summary = wal.lines().next().expect("summary");
    for what in ["statistics", "verification", "advice"] {
        assert!(
            summary.contains(what),
            "wal --help summary names {what}: {summary}"
        );
    }
    for cmd in ["stats", "verify", "advise"] {
        assert!(
            wal.lines()
                .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
            "wal --help lists {cmd}:\n{wal}"
        );
    }
}

#[test]
fn advise_help_output_and_readme_agree_on_predicted_bytes() {
    let h = help(&["wal", "advise", "--help"]);
    let flat = h.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(LEFT_OUT),
        "wal advise --help says predicted bytes are {LEFT_OUT:?}:\n{h}"
    );
    assert!(
        !flat.contains("+ unused space after switches"),
        "wal advise --help must not count the unused space:\n{h}"
    );
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `pgcompress wal advise"))
        .expect("README's wal advise row");
    assert!(row.contains(LEFT_OUT), "README's row: {row}");
    // The output states it in the same words, from the one constant it prints.
    assert!(
        advise::WAL_BYTES_MEANING.contains(LEFT_OUT),
        "{}",
        advise::WAL_BYTES_MEANING
    );
}
