//! TCP listening, pg_hba.conf lines, and clusters made from a base backup: a standby that replays its
//! primary, and a copy that starts on its own.

use std::process::Command;
use std::time::Duration;

use pgtest::{run, Cluster};

#[test]
fn tcp_hba_and_base_backups() {
    let primary = Cluster::builder()
        .listen_tcp(true)
        .hba_line("host all nobody 127.0.0.1/32 reject")
        .start()
        .expect("primary starts");
    let port = primary.tcp_port().expect("listens on TCP");
    assert_eq!(primary.port(), port);
    assert_eq!(
        primary.query_one("SHOW listen_addresses").expect("show"),
        "127.0.0.1"
    );
    primary
        .psql(
            "CREATE ROLE nobody LOGIN; CREATE TABLE t AS SELECT g FROM generate_series(1, 1000) g;",
        )
        .expect("setup");

    // The first matching hba line wins: ours rejects `nobody` over TCP, initdb's trust lines let postgres in.
    let tcp = |user: &str| {
        let mut cmd: Command = primary.command("psql");
        cmd.args([
            "-X",
            "-At",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            user,
        ])
        .args(["-c", "SELECT 42"]);
        run(&mut cmd)
    };
    let out = tcp("postgres").expect("postgres connects over TCP");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
    let err = tcp("nobody").expect_err("nobody is rejected");
    assert!(err.to_string().contains("pg_hba.conf rejects"), "{err}");

    let conninfo = format!("host=127.0.0.1 port={port} user=postgres");
    let standby = Cluster::builder()
        .from_base_backup(&conninfo, true)
        .start()
        .expect("standby starts");
    assert_eq!(
        standby.query_one("SELECT pg_is_in_recovery()").expect("q"),
        "t"
    );
    assert_eq!(
        standby.query_one("SELECT count(*) FROM t").expect("q"),
        "1000"
    );
    primary
        .psql("INSERT INTO t SELECT g FROM generate_series(1001, 2000) g;")
        .expect("insert");
    let lsn = primary.current_wal_lsn().expect("lsn");
    standby
        .wait_until(
            "the standby replays the insert",
            Duration::from_secs(30),
            || {
                let q = format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn");
                Ok(standby.query_one(&q)? == "t")
            },
        )
        .expect("replayed");
    assert_eq!(
        standby.query_one("SELECT count(*) FROM t").expect("q"),
        "2000"
    );

    let copy = Cluster::builder()
        .from_base_backup(&conninfo, false)
        .start()
        .expect("copy starts");
    assert_eq!(
        copy.query_one("SELECT pg_is_in_recovery()").expect("q"),
        "f"
    );
    copy.psql("INSERT INTO t VALUES (0);")
        .expect("the copy is writable");
    assert_eq!(copy.query_one("SELECT count(*) FROM t").expect("q"), "2001");
}
