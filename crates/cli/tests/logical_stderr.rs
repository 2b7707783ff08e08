//! What `logical recv` says on stderr when stderr is not a terminal (a service's log) and
//! `--json` is not given: one line when it starts (slot, publications, from which LSN, where
//! it writes, the spill directory), one line at each status interval (what was written, the
//! confirmed LSN, the lag, memory and spill), one line when it stops.

mod logical_support;

use logical_support::{cluster, recv_command};

#[test]
fn without_a_terminal_it_says_on_stderr_what_it_does() {
    let cluster = cluster(None);
    cluster
        .psql(
            "CREATE TABLE t (id int PRIMARY KEY, v text);
             CREATE TABLE u (id int PRIMARY KEY);
             CREATE PUBLICATION p FOR TABLE t;
             CREATE PUBLICATION q FOR TABLE u;
             SELECT pg_create_logical_replication_slot('s', 'pgoutput');",
        )
        .expect("schema");
    let from = cluster
        .query_one("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'")
        .expect("slot");
    cluster
        .psql(
            "INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 20) g;
             UPDATE t SET v = 'x' WHERE id <= 5;
             INSERT INTO u VALUES (1), (2);",
        )
        .expect("workload");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    // Idle for three status intervals once everything has arrived, then exit.
    let mut cmd = recv_command(&cluster, "s");
    cmd.args(["--publication", "q", "-o"]).arg(&out).args([
        "--idle-exit",
        "3",
        "--status-interval",
        "1",
    ]);
    let o = cmd.output().expect("run pgcompress");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    eprintln!("{err}");
    let lines: Vec<&str> = err.lines().collect();
    let written = std::fs::read_to_string(&out)
        .expect("output")
        .lines()
        .count();
    assert_eq!(written, 20 + 5 + 2);

    let started = lines.first().copied().unwrap_or_default();
    assert!(
        started.starts_with("pgcompress logical recv: started on slot \"s\""),
        "{err}"
    );
    for want in [
        "publications p, q".to_owned(),
        format!("from {from}"),
        format!("writing to {}", out.display()),
        format!("spill directory {}.spill", out.display()),
    ] {
        assert!(started.contains(&want), "want {want:?} in: {started}");
    }
    // Progress lines: at least one, all in the same form, the last one with everything.
    let progress: Vec<&str> = lines[1..lines.len() - 1].to_vec();
    assert!(!progress.is_empty(), "no progress line: {err}");
    for line in &progress {
        for part in [
            "pgcompress logical recv: ",
            " transactions, ",
            " changes written; confirmed ",
            ", lag ",
            "; memory ",
            ", spilled ",
        ] {
            assert!(line.contains(part), "want {part:?} in: {line}");
        }
    }
    let last = progress[progress.len() - 1];
    assert!(
        last.contains(&format!("3 transactions, {written} changes written")),
        "{last}"
    );
    let stopped = lines[lines.len() - 1];
    assert!(
        stopped.starts_with("pgcompress logical recv: stopped (idle for --idle-exit): "),
        "{stopped}"
    );
    assert!(
        stopped.contains(&format!("3 transactions, {written} changes written")),
        "{stopped}"
    );

    // To standard output, the spill directory under HOME's cache.
    let stop = cluster.current_wal_lsn().expect("lsn");
    let o = recv_command(&cluster, "s")
        .env("HOME", dir.path())
        .env_remove("XDG_CACHE_HOME")
        .args(["-o", "-", "--stop-at-lsn", &stop, "--idle-exit", "60"])
        .output()
        .expect("run pgcompress");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    let started = err.lines().next().unwrap_or_default();
    assert!(started.contains("writing to standard output"), "{err}");
    assert!(
        started.contains(&format!(
            "spill directory {}",
            dir.path().join(".cache/pgcompress/spill").display()
        )),
        "{err}"
    );
    assert!(
        err.lines()
            .last()
            .unwrap_or_default()
            .starts_with("pgcompress logical recv: stopped (reached --stop-at-lsn)"),
        "{err}"
    );
}
