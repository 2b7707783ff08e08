//! A real client library's own test suite through `pgcompress tunnel`: pg8000's
//! tests from its PyPI source distribution (scripts/setup.sh installs them) run against a direct TCP
//! connection and through the tunnel with zstd:1 and lz4, and give the same pass/fail set.

mod tunnel_support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use pgtest::Cluster;
use tunnel_support::{Keys, Tunnel, Upstream, METHODS};

/// The version scripts/setup.sh installs.
const PG8000_VERSION: &str = "1.31.5";

/// The venv of scripts/setup.sh (`PGCOMPRESS_VENV` overrides it, as there).
fn venv() -> PathBuf {
    std::env::var_os("PGCOMPRESS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/pgcompress-venv"))
}

/// Tests whose outcome does not depend on the path but on a race inside the client's machine, so the
/// comparison leaves them out (their outcomes are still printed). `test_broken_pipe_read` terminates a
/// backend and then writes to its socket: direct, PostgreSQL has closed the socket, and whether pg8000's
/// read sees the reset (ConnectionResetError, "failed") or the end of the stream ("network error",
/// "passed") depends on when the RST arrives: each of the three went both ways in direct runs here
/// (pg8000's own `test_broken_pipe_flush` says "sometimes raises and sometimes doesn't" of the same
/// sequence). The client half now closes the application's socket whole when PostgreSQL ends the
/// session, as a direct connection does, so through the tunnel the same race decides them.
const RACY: [&str; 3] = [
    "test/dbapi/test_connection.py::test_broken_pipe_read",
    "test/legacy/test_connection.py::test_broken_pipe_read",
    "test/native/test_connection.py::test_broken_pipe_read",
];

/// pg8000's unpacked source distribution, or why it is not there.
fn pg8000_source() -> Result<PathBuf, String> {
    let dir = venv().join("src").join(format!("pg8000-{PG8000_VERSION}"));
    if dir.join("test/native/conftest.py").is_file() && venv().join("bin/python").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "pg8000 {PG8000_VERSION}'s tests are not at {}; run scripts/setup.sh",
            dir.display()
        ))
    }
}

/// A cluster set up as pg8000's README asks for its tests: TCP on 127.0.0.1, the `postgres` user with
/// password `pw`, scram-sha-256 passwords, hstore, and pg_hba.conf lines for its authentication tests.
fn pg8000_cluster() -> Cluster {
    let mut b = Cluster::builder()
        .listen_tcp(true)
        .guc("password_encryption", "scram-sha-256");
    for (db, method) in [
        ("pg8000_md5", "md5"),
        ("pg8000_gss", "gss"),
        ("pg8000_password", "password"),
        ("pg8000_scram_sha_256", "scram-sha-256"),
    ] {
        b = b.hba_line(format!("host {db} all 127.0.0.1/32 {method}"));
    }
    let cluster = b.start().expect("cluster for pg8000");
    cluster
        .psql("ALTER USER postgres WITH PASSWORD 'pw'; CREATE EXTENSION hstore;")
        .expect("pg8000 test setup");
    cluster
}

/// Outcomes of one pytest run: test id → PASSED/FAILED/ERROR/XFAIL/XPASS, and the skip lines.
#[derive(Debug, PartialEq, Eq)]
struct Outcomes {
    tests: BTreeMap<String, String>,
    skipped: Vec<String>,
}

impl Outcomes {
    fn count(&self, outcome: &str) -> usize {
        self.tests.values().filter(|o| *o == outcome).count()
    }

    fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} errors, {} skipped",
            self.count("PASSED"),
            self.count("FAILED"),
            self.count("ERROR"),
            self.skipped.len()
        )
    }
}

/// Runs pg8000's whole test suite against 127.0.0.1:`port` and reads pytest's `-rA` summary.
fn run_suite(src: &std::path::Path, port: u16, label: &str) -> Outcomes {
    let started = Instant::now();
    let mut cmd = Command::new(venv().join("bin/python"));
    cmd.current_dir(src)
        .args([
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "--benchmark-disable",
        ])
        .arg("test")
        .env("PGHOST", "127.0.0.1")
        .env("PGPORT", port.to_string())
        .env("PGPASSWORD", "pw")
        .env_remove("PGUSER")
        .env_remove("PGDATABASE");
    // pytest exits 1 when a test fails; whether the same ones fail both ways is the point.
    let out = match pgtest::run::run_as_current_user(&mut cmd, None, Duration::from_secs(600)) {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(pgtest::Error::Command { stdout, .. }) => stdout,
        Err(e) => panic!("pg8000's tests {label}: {e}"),
    };
    let mut tests = BTreeMap::new();
    let mut skipped = Vec::new();
    for line in out.lines() {
        let mut words = line.splitn(2, ' ');
        let (Some(outcome), Some(rest)) = (words.next(), words.next()) else {
            continue;
        };
        match outcome {
            "PASSED" | "FAILED" | "ERROR" | "XFAIL" | "XPASS" => {
                // `FAILED id - message`: the id is the first word.
                let id = rest.split(' ').next().unwrap_or(rest);
                tests.insert(id.to_owned(), outcome.to_owned());
            }
            "SKIPPED" => skipped.push(rest.to_owned()),
            _ => {}
        }
    }
    let outcomes = Outcomes { tests, skipped };
    eprintln!(
        "pg8000 {PG8000_VERSION} test suite {label}: {} in {:.1} s",
        outcomes.summary(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        outcomes.count("PASSED") > 100,
        "pg8000's suite {label} hardly ran:\n{}",
        out.lines().rev().take(40).collect::<Vec<_>>().join("\n")
    );
    outcomes
}

#[test]
fn pg8000_suite_passes_the_same_through_the_tunnel() {
    let src = match pg8000_source() {
        Ok(src) => src,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("{e}"),
        Err(e) => {
            eprintln!("SKIPPED pg8000_suite_passes_the_same_through_the_tunnel: {e}");
            return;
        }
    };
    // A fresh cluster per run: the suite leaves tables, databases and settings behind. The three runs go
    // side by side (each suite is one Python process mostly waiting on round trips) to keep CI time down.
    let keys = Keys::new();
    let (direct, through) = std::thread::scope(|s| {
        let direct = s.spawn(|| {
            let cluster = pg8000_cluster();
            run_suite(&src, cluster.tcp_port().expect("tcp"), "direct")
        });
        let tunnels: Vec<_> = METHODS
            .iter()
            .map(|method| {
                let (keys, src) = (&keys, &src);
                s.spawn(move || {
                    let cluster = pg8000_cluster();
                    // Upstream over TCP, so that the same pg_hba.conf `host` lines apply as direct.
                    let tunnel = Tunnel::start(keys, &cluster, Upstream::Tcp, method);
                    let label = format!("through the tunnel ({method})");
                    let outcomes = run_suite(src, tunnel.port, &label);
                    (*method, outcomes, tunnel.finish())
                })
            })
            .collect();
        let direct = direct.join().expect("direct run");
        let through: Vec<_> = tunnels
            .into_iter()
            .map(|t| t.join().expect("tunnel run"))
            .collect();
        (direct, through)
    });
    for (method, through, fin) in through {
        let compared = |id: &String| !RACY.contains(&id.as_str());
        let differ: Vec<String> = direct
            .tests
            .iter()
            .filter(|(id, o)| compared(id) && through.tests.get(*id) != Some(o))
            .map(|(id, o)| format!("{id}: direct {o}, tunnel {:?}", through.tests.get(id)))
            .chain(
                through
                    .tests
                    .iter()
                    .filter(|(id, _)| compared(id) && !direct.tests.contains_key(*id))
                    .map(|(id, o)| format!("{id}: tunnel {o}, not run direct")),
            )
            .collect();
        for id in RACY {
            eprintln!(
                "pg8000 {id} (not compared): direct {:?}, through {method} {:?}",
                direct.tests.get(id),
                through.tests.get(id)
            );
        }
        assert!(
            differ.is_empty(),
            "pg8000's tests through {method} differ from direct:\n{}",
            differ.join("\n")
        );
        assert_eq!(through.skipped, direct.skipped, "skips through {method}");
        eprintln!(
            "pg8000 through {method}: {} connections, {} bytes to the server ({} on the link), {} from it ({} on \
             the link)",
            fin.client.connections_total,
            fin.client.frontend_to_backend.raw_bytes,
            fin.client.frontend_to_backend.link_bytes,
            fin.client.backend_to_frontend.raw_bytes,
            fin.client.backend_to_frontend.link_bytes
        );
        assert_eq!(fin.client.decompression_errors, 0, "{fin:?}");
    }
}
