//! What a DBA reads when a command fails: one style for every error (usage or runtime),
//! `pgcompress: error: ...` and at most one hint line, each cause said once and in our words,
//! the exit status scripts read right. No server is needed: these are refused before one is.

mod error_support;
mod tunnel_support;

use error_support::one_error;
use std::process::{Command, Output};
use tunnel_support::Keys;

fn pgcompress(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgcompress"))
        .args(args)
        .env_remove("PGCOMPRESS_REPO")
        .env_remove("PGCOMPRESS_CONFIG")
        .env_remove("PGCOMPRESS_METHOD")
        .output()
        .expect("run pgcompress")
}

/// The parts of a message between ": " and "; ": none may come twice.
fn assert_no_part_twice(line: &str, what: &str) {
    let parts: Vec<&str> = line
        .split(": ")
        .flat_map(|p| p.split("; "))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    for (i, p) in parts.iter().enumerate() {
        assert!(
            !parts[i + 1..].contains(p),
            "{what}: {p:?} said twice: {line}"
        );
    }
}

#[test]
fn usage_and_runtime_errors_share_one_style_and_keep_their_statuses() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let repo = scratch.path().join("repo");
    let repo = repo.to_str().expect("utf-8");
    let k = Keys::new();
    let pem = |n: &str| k.file(n).to_str().expect("utf-8").to_owned();
    let (ca, cert, key) = (pem("ca.pem"), pem("client.pem"), pem("client-key.pem"));
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["wal", "stats", "--no-such-flag", "x"], 2),
        (
            vec!["archive", "push", "--repo", repo, "--method", "lz5", "f"],
            2,
        ),
        (vec!["archive", "push", "--repo", repo], 2),
        // restore_command's caller reads any status up to 125 as "not archived".
        (vec!["archive", "get", "--repo", repo, "a"], 200),
        (
            vec!["archive", "get", "--repo", repo, "--no-such-flag", "a", "b"],
            200,
        ),
        (vec!["archive", "expire", "--repo", repo, "--keep", "0"], 2),
        (vec!["wal", "stats", "/nonexistent-pgcompress-dir"], 2),
        (vec!["wal", "advise", "--methods", "lz5", "x"], 2),
        (vec!["logical", "recv", "--spill-compression", "lz5"], 2),
        (
            vec![
                "tunnel",
                "client",
                "--listen",
                "127.0.0.1:0",
                "--server",
                "127.0.0.1:9",
                "--method",
                "lz5",
                "--ca",
                &ca,
                "--cert",
                &cert,
                "--key",
                &key,
            ],
            2,
        ),
        (
            vec![
                "tunnel",
                "client",
                "--listen",
                "127.0.0.1:0",
                "--server",
                "127.0.0.1:9",
                "--ca",
                &ca,
                "--cert",
                &cert,
                "--key",
                &ca,
            ],
            2,
        ),
    ];
    for (args, status) in cases {
        let out = pgcompress(&args);
        let line = one_error(&out, status, &args.join(" "));
        assert_no_part_twice(&line, &args.join(" "));
    }
}

#[test]
fn no_error_says_its_cause_twice() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let junk = scratch.path().join("000000010000000000000001");
    std::fs::write(&junk, [0x6b_u8; 8192]).expect("write junk");
    let junk = junk.to_str().expect("utf-8");
    for (args, once) in [
        (
            vec!["wal", "stats", "/nonexistent-pgcompress-dir"],
            "os error 2",
        ),
        (vec!["wal", "stats", junk], "magic"),
        (vec!["wal", "verify", junk], "magic"),
        (
            vec!["archive", "push", "--repo", "/r", "--method", "lz5", "f"],
            "lz5",
        ),
        (vec!["wal", "advise", "--methods", "lz5", "x"], "lz5"),
        (vec!["logical", "recv", "--spill-compression", "lz5"], "lz5"),
    ] {
        let out = pgcompress(&args);
        let line = one_error(&out, 2, &args.join(" "));
        assert_eq!(line.matches(once).count(), 1, "{once:?} not once: {line}");
        assert_no_part_twice(&line, &args.join(" "));
        assert!(!line.contains("unknown magic"), "{line}");
    }
}

#[test]
fn each_method_flag_lists_only_what_it_accepts() {
    let k = Keys::new();
    let pem = |n: &str| k.file(n).to_str().expect("utf-8").to_owned();
    let (ca, cert, key) = (pem("ca.pem"), pem("client.pem"), pem("client-key.pem"));
    let tunnel = |m: &'static str| {
        vec![
            "tunnel".to_owned(),
            "client".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--server".into(),
            "127.0.0.1:9".into(),
            "--method".into(),
            m.into(),
            "--ca".into(),
            ca.clone(),
            "--cert".into(),
            cert.clone(),
            "--key".into(),
            key.clone(),
        ]
    };
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<String>>();
    let all = ["none", "pglz", "lz4", "zstd", "snappy", "gzip", "xz"];
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            owned(&["archive", "push", "--repo", "/r", "--method", "lz5", "f"]),
            all.to_vec(),
        ),
        (
            owned(&["wal", "advise", "--methods", "pglz,lz5", "x"]),
            all.to_vec(),
        ),
        (
            owned(&["logical", "recv", "--spill-compression", "lz5"]),
            vec!["none", "pglz", "lz4", "zstd"],
        ),
        (
            owned(&["logical", "recv", "--spill-compression", "snappy"]),
            vec!["none", "pglz", "lz4", "zstd"],
        ),
        (tunnel("lz5"), vec!["none", "lz4", "zstd", "auto"]),
        (tunnel("gzip"), vec!["none", "lz4", "zstd", "auto"]),
    ];
    for (args, accepted) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_pgcompress"))
            .args(&args)
            .output()
            .expect("run pgcompress");
        let what = args.join(" ");
        let line = one_error(&out, 2, &what);
        let list = line
            .rsplit_once("valid methods: ")
            .unwrap_or_else(|| panic!("{what}: no list: {line}"))
            .1;
        let listed: Vec<&str> = list
            .split([',', ' '])
            .filter(|w| !w.is_empty() && *w != "or")
            .collect();
        assert_eq!(listed, accepted, "{what}: {line}");
    }
}

#[test]
fn keep_zero_says_what_is_valid() {
    let out = pgcompress(&["archive", "expire", "--repo", "/r", "--keep", "0"]);
    let line = one_error(&out, 2, "--keep 0");
    assert!(line.contains("--keep"), "{line}");
    assert!(line.contains("1 or more"), "{line}");
    assert!(!line.contains("non-zero type"), "{line}");
}

#[test]
fn a_tunnel_key_that_is_not_its_certificates_says_so() {
    let k = Keys::new();
    let pem = |n: &str| k.file(n).to_str().expect("utf-8").to_owned();
    for (half, cert, key, at) in [
        (
            "server",
            "server.pem",
            "client-key.pem",
            ["--upstream", "/tmp"],
        ),
        (
            "client",
            "client.pem",
            "server-key.pem",
            ["--server", "127.0.0.1:9"],
        ),
    ] {
        let out = pgcompress(&[
            "tunnel",
            half,
            "--listen",
            "127.0.0.1:0",
            at[0],
            at[1],
            "--ca",
            &pem("ca.pem"),
            "--cert",
            &pem(cert),
            "--key",
            &pem(key),
        ]);
        let line = one_error(&out, 2, half);
        assert!(
            line.contains(&format!("{} does not match {}", pem(key), pem(cert))),
            "{half}: {line}"
        );
        assert!(!line.contains("KeyMismatch"), "{half}: {line}");
    }
}
