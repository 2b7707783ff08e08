//! The one style of a failing command's stderr, shared by the tests that check it:
//! `pgcompress: error: ...`, then at most one `pgcompress: hint: ...` line.
#![allow(dead_code)]

use std::process::Output;

/// Asserts the exit `status` and the one style: a first line `pgcompress: error: ...`, at most
/// one more line, which is a hint; returns the error line.
pub fn one_error(out: &Output, status: i32, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(status), "{what}: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("pgcompress: error: ")),
        "{what}: {err}"
    );
    assert!(
        lines.len() <= 2,
        "{what}: more than an error and a hint: {err}"
    );
    if let Some(hint) = lines.get(1) {
        assert!(hint.starts_with("pgcompress: hint: "), "{what}: {err}");
    }
    lines[0].to_owned()
}

/// What a refused command prints, after checking it: exit status 2 (a usage error or a
/// refusal before anything was touched) and the one style.
pub fn refused(out: &Output) -> String {
    one_error(out, 2, "a refusal");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
