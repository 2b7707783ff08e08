//! A CDC file continues only its own stream: `logical recv -o FILE` refuses a file
//! written from another cluster, or from a slot that was dropped and re-created (or advanced by
//! someone else) since, leaving the file and its state as they were; `--start-over` is the
//! explicit way to begin again; an ordinary restart, after the consumer confirmed keepalive
//! positions while idle, continues exactly. Each case runs the command as an operator would,
//! against real PostgreSQL clusters.

mod logical_support;

use logical_support::{cluster, ours, recv_command};
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::Output;

const SCHEMA: &str = "CREATE TABLE t (id int PRIMARY KEY, v text); \
                      CREATE TABLE other (id int); \
                      CREATE PUBLICATION p FOR TABLE t;";

/// The operator's command: slot `s`, publication `p`, created if missing, into `out`, until
/// the server has sent what is committed now.
fn run(cluster: &Cluster, out: &Path, extra: &[&str]) -> Output {
    let stop = cluster.current_wal_lsn().expect("lsn");
    let mut args = vec!["--stop-at-lsn", &stop, "--idle-exit", "30"];
    args.extend_from_slice(extra);
    run_with(cluster, out, &args)
}

/// The operator's command with its stop condition in `args`.
fn run_with(cluster: &Cluster, out: &Path, args: &[&str]) -> Output {
    let mut cmd = recv_command(cluster, "s");
    cmd.args(["--create-slot", "--if-not-exists", "-o"])
        .arg(out)
        .args(args);
    cmd.output().expect("run pgcompress")
}

fn ok(cluster: &Cluster, o: &Output) {
    assert!(
        o.status.success(),
        "logical recv failed ({}): {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr),
        cluster.log_tail(20)
    );
}

fn state_of(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".state");
    PathBuf::from(s)
}

/// The output file and its state, byte for byte.
fn snapshot(out: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(out).expect("read output"),
        std::fs::read(state_of(out)).expect("read state"),
    )
}

/// Asserts the run was refused as the issue asks: exit status 2, one line of error, the file and
/// its state untouched; returns the line.
fn refused(o: &Output, out: &Path, before: &(Vec<u8>, Vec<u8>)) -> String {
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(2),
        "expected a refusal with exit status 2; stderr: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("pgcompress: error: "), "{stderr}");
    assert!(&snapshot(out) == before, "the file or its state changed");
    eprint!("refused as expected: {stderr}");
    stderr
}

fn ids(out: &Path) -> Vec<i64> {
    ours(out)
        .iter()
        .map(|(_, v)| {
            v["columns"][0]["value"]
                .as_i64()
                .unwrap_or_else(|| panic!("id in {v}"))
        })
        .collect()
}

fn system_id(cluster: &Cluster) -> String {
    cluster
        .query_one("SELECT system_identifier FROM pg_control_system()")
        .expect("system id")
}

fn confirmed(cluster: &Cluster) -> String {
    cluster
        .query_one(
            "SELECT coalesce(confirmed_flush_lsn::text, 'none') FROM pg_replication_slots \
             WHERE slot_name = 's' UNION ALL SELECT 'none' LIMIT 1",
        )
        .expect("confirmed_flush_lsn")
}

/// The first report of this mistake: 40,000 rows from cluster A, then the same command and file against
/// a new cluster B with 3,000 rows committed, all at LSNs below A's last one.
#[test]
fn a_file_written_from_another_cluster_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let a = cluster(None);
    a.psql(SCHEMA).expect("schema A");
    a.psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput');")
        .expect("slot A");
    a.psql("INSERT INTO t SELECT g, 'a' || g FROM generate_series(1, 40000) g;")
        .expect("rows A");
    ok(&a, &run(&a, &out, &[]));
    assert_eq!(ids(&out).len(), 40_000);
    drop(a);

    let b = cluster(None);
    b.psql(SCHEMA).expect("schema B");
    b.psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput');")
        .expect("slot B");
    for k in 0..30 {
        b.psql(&format!(
            "INSERT INTO t SELECT g, 'b' || g FROM generate_series({}, {}) g;",
            k * 100 + 1,
            k * 100 + 100
        ))
        .expect("rows B");
    }
    let slot_b = confirmed(&b);
    let before = snapshot(&out);
    let line = refused(&run(&b, &out, &[]), &out, &before);
    let (sys_a, sys_b) = (
        String::from_utf8_lossy(&before.1)
            .lines()
            .find_map(|l| l.strip_prefix("system ").map(str::to_owned))
            .expect("system in the state"),
        system_id(&b),
    );
    assert_ne!(sys_a, sys_b);
    assert!(
        line.contains(&sys_a) && line.contains(&sys_b) && line.contains("--start-over"),
        "the line names both sides and what to do: {line}"
    );
    // Nothing was confirmed on B: its rows are all still in its slot.
    assert_eq!(confirmed(&b), slot_b);
}

/// The slot is dropped, rows are committed, the slot is re-created: those rows are in no slot.
/// Run with --create-slot --if-not-exists as a service would, the command is refused while the
/// slot is missing (and does not create it), and again once someone else has re-created it.
#[test]
fn a_slot_dropped_and_recreated_is_refused_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let c = cluster(None);
    c.psql(SCHEMA).expect("schema");
    c.psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput');")
        .expect("slot");
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 100) g;")
        .expect("rows 1-100");
    ok(&c, &run(&c, &out, &[]));
    assert_eq!(ids(&out), (1..=100).collect::<Vec<_>>());

    c.psql("SELECT pg_drop_replication_slot('s');")
        .expect("drop slot");
    c.psql("INSERT INTO t SELECT g, 'lost' || g FROM generate_series(101, 200) g;")
        .expect("rows 101-200");
    let before = snapshot(&out);
    let line = refused(&run(&c, &out, &[]), &out, &before);
    assert!(
        line.contains("slot s") && line.contains("--start-over"),
        "{line}"
    );
    assert_eq!(confirmed(&c), "none", "the slot was not created again");

    c.psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput');")
        .expect("slot again");
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(201, 300) g;")
        .expect("rows 201-300");
    let slot = confirmed(&c);
    let line = refused(&run(&c, &out, &[]), &out, &before);
    assert!(
        line.contains(&slot) && line.contains("confirmed_flush_lsn"),
        "names the slot's position: {line}"
    );
    assert_eq!(confirmed(&c), slot, "nothing confirmed");
}

/// `--start-over` empties the file and its state and follows the slot from where it stands; a
/// plain run afterwards continues the new stream.
#[test]
fn start_over_is_the_explicit_way_to_begin_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let c = cluster(None);
    c.psql(SCHEMA).expect("schema");
    c.psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput');")
        .expect("slot");
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 50) g;")
        .expect("rows");
    ok(&c, &run(&c, &out, &[]));
    c.psql(
        "SELECT pg_drop_replication_slot('s'); \
         INSERT INTO t SELECT g, 'lost' FROM generate_series(51, 60) g; \
         SELECT pg_create_logical_replication_slot('s', 'pgoutput'); \
         INSERT INTO t SELECT g, 'v' || g FROM generate_series(61, 70) g;",
    )
    .expect("slot re-created");
    let before = snapshot(&out);
    refused(&run(&c, &out, &[]), &out, &before);

    ok(&c, &run(&c, &out, &["--start-over"]));
    assert_eq!(ids(&out), (61..=70).collect::<Vec<_>>());
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(71, 80) g;")
        .expect("more rows");
    ok(&c, &run(&c, &out, &[]));
    assert_eq!(ids(&out), (61..=80).collect::<Vec<_>>());

    // Against another cluster the same flag starts over too.
    let other = cluster(None);
    other.psql(SCHEMA).expect("schema");
    other
        .psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput'); INSERT INTO t VALUES (1000, 'x');")
        .expect("other");
    let before = snapshot(&out);
    refused(&run(&other, &out, &[]), &out, &before);
    ok(&other, &run(&other, &out, &["--start-over"]));
    assert_eq!(ids(&out), vec![1000]);
}

/// While idle the consumer confirms the server's keepalive position (past the last row it
/// wrote); that position is in the state before the server hears of it, so an ordinary
/// restart is not mistaken for a slot moved by someone else, and continues exactly.
#[test]
fn a_restart_after_idle_confirmations_continues_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let c = cluster(None);
    c.psql(SCHEMA).expect("schema");
    c.psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput');")
        .expect("slot");
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g;")
        .expect("rows");
    ok(&c, &run(&c, &out, &[]));
    // WAL moves on without a row for us.
    c.psql("INSERT INTO other SELECT generate_series(1, 20000);")
        .expect("other rows");
    ok(
        &c,
        &run_with(&c, &out, &["--status-interval", "0.1", "--idle-exit", "3"]),
    );
    let slot = logical::Lsn::parse(&confirmed(&c)).expect("slot confirmed");
    let state = std::fs::read_to_string(state_of(&out)).expect("state");
    let key = |k: &str| {
        state
            .lines()
            .find_map(|l| l.strip_prefix(k).and_then(logical::Lsn::parse))
            .unwrap_or_else(|| panic!("{k} in {state}"))
    };
    assert!(
        slot > key("end_lsn "),
        "the slot was confirmed past the last row ({slot}): {state}"
    );
    assert!(
        slot <= key("confirmed "),
        "what the slot confirmed is in the state ({slot}): {state}"
    );
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(11, 20) g;")
        .expect("rows");
    ok(&c, &run(&c, &out, &[]));
    assert_eq!(ids(&out), (1..=20).collect::<Vec<_>>());
}

/// A state of version 1 (offset and LSNs only, as pgcompress wrote before) does not say which
/// stream its file continues: refused, untouched; moved aside, the slot goes on into a new
/// file and nothing is lost. A --start past what the file holds is refused as well.
#[test]
fn a_state_without_its_stream_and_a_start_past_the_file_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let c = cluster(None);
    c.psql(SCHEMA).expect("schema");
    c.psql("SELECT pg_create_logical_replication_slot('s', 'pgoutput');")
        .expect("slot");
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 10) g;")
        .expect("rows");
    ok(&c, &run(&c, &out, &[]));

    let before = snapshot(&out);
    let line = refused(&run(&c, &out, &["--start", "FF/0"]), &out, &before);
    assert!(line.contains("--start FF/0"), "{line}");

    let state = String::from_utf8_lossy(&before.1).into_owned();
    let v1: String = std::iter::once("pgcompress-logical-state 1\n".to_owned())
        .chain(
            state
                .lines()
                .filter(|l| {
                    ["offset ", "lsn ", "end_lsn "]
                        .iter()
                        .any(|k| l.starts_with(k))
                })
                .map(|l| format!("{l}\n")),
        )
        .collect();
    std::fs::write(state_of(&out), &v1).expect("write a version 1 state");
    let before = snapshot(&out);
    let line = refused(&run(&c, &out, &[]), &out, &before);
    assert!(line.contains("older pgcompress"), "{line}");

    let aside = dir.path().join("old.jsonl");
    std::fs::rename(&out, &aside).expect("move aside");
    std::fs::rename(state_of(&out), state_of(&aside)).expect("move state aside");
    c.psql("INSERT INTO t SELECT g, 'v' || g FROM generate_series(11, 20) g;")
        .expect("rows");
    ok(&c, &run(&c, &out, &[]));
    assert_eq!(ids(&aside), (1..=10).collect::<Vec<_>>());
    assert_eq!(ids(&out), (11..=20).collect::<Vec<_>>());
}
