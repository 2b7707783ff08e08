//! `logical recv` checks what it is given before it touches anything: a spill compression that
//! spill files cannot use is refused before connecting; publications that do not exist in the
//! database and a slot of another output plugin are refused before START_REPLICATION (and
//! before --create-slot creates anything); each with exit status 2 and one line, and no output
//! file, state file or spill directory created, an existing output and state left
//! byte-identical.

mod error_support;
mod logical_support;

use std::collections::BTreeMap;
use std::path::Path;

use error_support::refused;
use logical_support::{cluster, recv, recv_command};

/// Every file under `dir` with its bytes (directories as empty entries).
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let p = entry.expect("entry").path();
            let name = p.strip_prefix(dir).expect("below").display().to_string();
            if p.is_dir() {
                todo.push(p);
                all.insert(name + "/", Vec::new());
            } else {
                all.insert(name, std::fs::read(&p).expect("read"));
            }
        }
    }
    all
}

#[test]
fn publications_missing_from_the_database_are_refused_before_anything_is_written() {
    let cluster = cluster(None);
    cluster
        .psql(
            "CREATE TABLE t (id int PRIMARY KEY, v text);
             CREATE PUBLICATION p FOR TABLE t;
             SELECT pg_create_logical_replication_slot('s', 'pgoutput');
             INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 10) g;",
        )
        .expect("schema");
    let stop = cluster.current_wal_lsn().expect("lsn");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let slot_lsn = "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'";
    let before = cluster.query_one(slot_lsn).expect("slot");

    // A misspelled publication next to a good one: named, and nothing created.
    let misspelled = |stop: &str| {
        let mut cmd = recv_command(&cluster, "s");
        cmd.args(["--publication", "pq,Other", "-o"])
            .arg(&out)
            .args(["--stop-at-lsn", stop, "--idle-exit", "60"]);
        refused(&cmd.output().expect("run pgcompress"))
    };
    let err = misspelled(&stop);
    assert!(
        err.contains("no publications \"pq\", \"Other\" in database \"postgres\""),
        "{err}"
    );
    assert!(!err.contains("\"p\""), "p exists: {err}");
    assert!(snapshot(dir.path()).is_empty(), "created files: {err}");
    assert_eq!(cluster.query_one(slot_lsn).expect("slot"), before);
    eprintln!("{}", err.trim_end());

    // --create-slot creates no slot for a run that cannot start.
    let mut cmd = recv_command(&cluster, "new_slot");
    cmd.args(["--publication", "nope", "--create-slot", "-o"])
        .arg(&out);
    let err = refused(&cmd.output().expect("run pgcompress"));
    assert!(err.contains("no publication \"nope\""), "{err}");
    assert_eq!(
        cluster
            .query_one("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'new_slot'")
            .expect("slots"),
        "0"
    );
    assert!(snapshot(dir.path()).is_empty(), "created files: {err}");

    // An output file and state that exist stay byte-identical.
    recv(&cluster, "s", &out, &stop, &[]);
    cluster
        .psql("INSERT INTO t VALUES (100, 'later')")
        .expect("insert");
    let stop = cluster.current_wal_lsn().expect("lsn");
    let held = snapshot(dir.path());
    assert!(held.contains_key("out.jsonl") && held.contains_key("out.jsonl.state"));
    let err = misspelled(&stop);
    assert!(err.contains("\"pq\""), "{err}");
    assert_eq!(
        snapshot(dir.path()),
        held,
        "the output or its state changed"
    );
}

#[test]
fn a_slot_of_another_plugin_is_refused_with_how_to_make_a_pgoutput_one() {
    let cluster = cluster(None);
    cluster
        .psql(
            "CREATE TABLE t (id int PRIMARY KEY);
             CREATE PUBLICATION p FOR TABLE t;
             SELECT pg_create_logical_replication_slot('td', 'test_decoding');
             SELECT pg_create_physical_replication_slot('phys');
             INSERT INTO t VALUES (1);",
        )
        .expect("schema");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let slots = "SELECT string_agg(slot_name || ' ' || coalesce(confirmed_flush_lsn::text, '-'), \
                 ', ' ORDER BY slot_name) FROM pg_replication_slots";
    let before = cluster.query_one(slots).expect("slots");
    for (slot, want) in [
        ("td", "slot \"td\" decodes with test_decoding"),
        ("phys", "slot \"phys\" is a physical slot"),
    ] {
        let mut cmd = recv_command(&cluster, slot);
        cmd.arg("-o").arg(&out).args(["--idle-exit", "60"]);
        let err = refused(&cmd.output().expect("run pgcompress"));
        assert!(err.contains(want), "{err}");
        assert!(
            err.contains("pg_create_logical_replication_slot('NAME', 'pgoutput')"),
            "{err}"
        );
        assert!(snapshot(dir.path()).is_empty(), "created files: {err}");
        eprintln!("{}", err.trim_end());
    }
    assert_eq!(cluster.query_one(slots).expect("slots"), before);
}

#[test]
fn a_spill_compression_spill_files_cannot_use_is_refused_before_connecting() {
    let cluster = cluster(None);
    cluster
        .psql(
            "CREATE TABLE t (id int PRIMARY KEY);
             CREATE PUBLICATION p FOR TABLE t;
             SELECT pg_create_logical_replication_slot('s', 'pgoutput');",
        )
        .expect("schema");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.jsonl");
    let mut cmd = recv_command(&cluster, "s");
    cmd.args(["--spill-compression", "xz", "-o"])
        .arg(&out)
        .args(["--idle-exit", "60"]);
    let err = refused(&cmd.output().expect("run pgcompress"));
    assert!(err.contains("xz"), "{err}");
    assert!(snapshot(dir.path()).is_empty(), "created files: {err}");
    eprintln!("{}", err.trim_end());

    // Not even a connection: a listener that would take one sees none.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let o = logical_support::pgcompress()
        .args(["logical", "recv", "--slot", "s", "--publication", "p"])
        .args(["--spill-compression", "xz", "--dbname"])
        .arg(format!(
            "host=127.0.0.1 port={port} user=postgres connect_timeout=5"
        ))
        .arg("-o")
        .arg(&out)
        .output()
        .expect("run pgcompress");
    let err = refused(&o);
    assert!(err.contains("xz"), "{err}");
    listener.set_nonblocking(true).expect("nonblocking");
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("logical recv connected before checking its spill spec: {other:?}"),
    }
    assert!(snapshot(dir.path()).is_empty(), "created files: {err}");
}
