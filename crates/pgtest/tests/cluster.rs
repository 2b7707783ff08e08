//! A real server: SQL, pgbench, GUCs, restart.

use pgtest::{Cluster, Error};

#[test]
fn runs_sql_and_pgbench() {
    let cluster = Cluster::start().expect("cluster starts");
    let out = cluster
        .psql("CREATE TABLE t (x int, y text); INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 3) i; SELECT x, y FROM t ORDER BY x;")
        .expect("script runs");
    assert_eq!(out, "1|v1\n2|v2\n3|v3");
    assert_eq!(
        cluster.query_one("SELECT count(*) FROM t").expect("count"),
        "3"
    );
    assert_eq!(
        cluster.query_one("SELECT current_user").expect("user"),
        "postgres"
    );

    cluster.pgbench_init(1).expect("pgbench -i");
    let out = cluster
        .pgbench(&["-n", "-t", "20", "--random-seed=7"])
        .expect("pgbench runs");
    assert!(
        out.contains("number of transactions actually processed: 20"),
        "{out}"
    );
    assert_eq!(
        cluster
            .query_one("SELECT count(*) FROM pgbench_history")
            .expect("history"),
        "20"
    );
}

#[test]
fn sql_errors_carry_stderr_and_stop_the_script() {
    let cluster = Cluster::start().expect("cluster starts");
    let err = cluster
        .psql("CREATE TABLE a (x int); SELECT * FROM no_such_table; CREATE TABLE b (x int);")
        .expect_err("script fails");
    let msg = err.to_string();
    assert!(matches!(err, Error::Command { .. }), "{msg}");
    assert!(msg.contains("no_such_table"), "{msg}");
    assert_eq!(
        cluster
            .query_one("SELECT count(*) FROM pg_class WHERE relname IN ('a', 'b')")
            .expect("count"),
        "1"
    );
    let err = cluster.query_one("SELECT 1, 2").expect_err("two columns");
    assert!(matches!(err, Error::UnexpectedOutput { .. }), "{err}");
}

#[test]
fn gucs_set_per_cluster_are_visible() {
    let cluster = Cluster::builder()
        .guc("work_mem", "7MB")
        .guc("application_name", "it's pgtest")
        .data_checksums(true)
        .start()
        .expect("cluster starts");
    assert_eq!(cluster.query_one("SHOW work_mem").expect("show"), "7MB");
    assert_eq!(cluster.query_one("SHOW fsync").expect("show"), "off");
    assert_eq!(
        cluster.query_one("SHOW data_checksums").expect("show"),
        "on"
    );
    assert_eq!(
        cluster.query_one("SHOW listen_addresses").expect("show"),
        ""
    );

    cluster
        .set_guc_and_reload("work_mem", "9MB")
        .expect("reload");
    assert_eq!(cluster.query_one("SHOW work_mem").expect("show"), "9MB");

    let other = Cluster::builder()
        .guc("fsync", "on")
        .start()
        .expect("second cluster");
    assert_eq!(other.query_one("SHOW fsync").expect("show"), "on");
    assert_eq!(other.query_one("SHOW work_mem").expect("show"), "4MB");
}

#[test]
fn bad_guc_names_are_rejected_before_initdb() {
    let err = Cluster::builder()
        .guc("work_mem = 1; x", "1")
        .start()
        .expect_err("rejected");
    assert!(matches!(err, Error::InvalidGucName { .. }), "{err}");
}

#[test]
fn restart_and_stop() {
    let cluster = Cluster::builder().start().expect("cluster starts");
    cluster
        .psql("ALTER SYSTEM SET max_connections = 33")
        .expect("alter system");
    cluster.restart().expect("restart");
    assert_eq!(
        cluster.query_one("SHOW max_connections").expect("show"),
        "33"
    );
    cluster.stop().expect("stop");
    cluster.stop().expect("stop again is a no-op");
    assert!(cluster.psql("SELECT 1").is_err());
    cluster.restart().expect("start after stop");
    assert_eq!(cluster.query_one("SELECT 1").expect("query"), "1");
}

#[test]
fn command_points_client_programs_at_the_cluster() {
    let cluster = Cluster::start().expect("cluster starts");
    let mut cmd = cluster.command("psql");
    cmd.args(["-X", "-At", "-c", "SELECT current_database()"]);
    let out = pgtest::run(&mut cmd).expect("psql via env");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "postgres");
    assert!(cluster
        .conninfo()
        .contains(&format!("port={}", cluster.port())));
    assert_eq!(cluster.conn_args()[3], cluster.port().to_string());
}

#[test]
fn query_one_keeps_awkward_values() {
    let cluster = Cluster::start().expect("cluster starts");
    assert_eq!(cluster.query_one("SELECT ''").expect("empty"), "");
    assert_eq!(
        cluster
            .query_one("SELECT 'a|b' || chr(10) || 'c'")
            .expect("pipes"),
        "a|b\nc"
    );
    for bad in ["SELECT 1 WHERE false", "SELECT 1 UNION ALL SELECT 2"] {
        let err = cluster.query_one(bad).expect_err(bad);
        assert!(matches!(err, Error::UnexpectedOutput { .. }), "{err}");
    }
}
