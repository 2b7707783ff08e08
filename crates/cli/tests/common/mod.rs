//! Shared helpers of the integration tests: WAL corpora written by a real server,
//! and the real pg_waldump as the oracle.
#![allow(dead_code)]

use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The settings of `wal_compression` a stock PostgreSQL 15 can write.
pub const SETTINGS: [&str; 4] = ["off", "pglz", "lz4", "zstd"];

/// The settings of `wal_compression` this server's build offers, in the order of [`SETTINGS`]
/// (16's and 18's packages are built without lz4 and zstd). The boolean spellings are left out.
pub fn offered_settings(cluster: &Cluster) -> Vec<&'static str> {
    let vals = cluster
        .query_one(
            "SELECT array_to_string(enumvals, ',') FROM pg_settings WHERE name = 'wal_compression'",
        )
        .expect("wal_compression's values");
    let vals: Vec<&str> = vals.split(',').collect();
    SETTINGS.into_iter().filter(|s| vals.contains(s)).collect()
}

/// WAL written by a real server, one contiguous segment range per phase.
pub struct Corpus {
    /// Holds the copies; removed on drop.
    pub dir: tempfile::TempDir,
    /// (phase name, its segment files in order).
    pub phases: Vec<(String, Vec<PathBuf>)>,
    /// Every archived segment, in order.
    pub all: Vec<PathBuf>,
    /// A copy of pg_wal as the server left it (partial last segment, recycled ones).
    pub live: Vec<PathBuf>,
    /// The cluster, kept for its binaries.
    pub cluster: Cluster,
}

/// Runs the corpus workload on a fresh cluster with `seg_mb` segments: a phase per
/// wal_compression setting (set system-wide), then a phase mixing them per session
/// with a 2.5 MB record that crosses segment boundaries.
pub fn corpus(seg_mb: u32, transactions: u32) -> Corpus {
    let cluster = Cluster::builder()
        .wal_segsize_mb(seg_mb)
        .archive_dir(true)
        .guc("max_wal_size", "1GB")
        // pg_walinspect, the oracle where a major has no pg_waldump, reads WAL from pg_wal.
        .guc("wal_keep_size", "2GB")
        .start()
        .expect("start cluster");
    cluster.pgbench_init(2).expect("pgbench -i");
    let settings = offered_settings(&cluster);
    let mut phases = Vec::new();
    for setting in settings.iter().copied() {
        cluster
            .set_guc_and_reload("wal_compression", setting)
            .expect("set wal_compression");
        let files = phase(&cluster, setting, || {
            cluster.checkpoint().expect("checkpoint");
            let t = transactions.to_string();
            cluster
                .pgbench(&["-n", "-t", &t, "-c", "2", "--random-seed=7"])
                .expect("pgbench");
        });
        phases.push((setting.to_string(), files));
    }
    cluster
        .set_guc_and_reload("wal_compression", "off")
        .expect("reset");
    let files = phase(&cluster, "mixed", || {
        cluster.checkpoint().expect("checkpoint");
        for s in &settings {
            cluster
                .psql(&format!(
                    "CHECKPOINT;
                     SET wal_compression = {s};
                     UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 13 = 0;
                     UPDATE pgbench_branches SET bbalance = bbalance + 1;"
                ))
                .expect("per-session update");
        }
        // One record of 2.5 MB: it crosses pages, and segments when they are small.
        cluster
            .psql("SELECT pg_logical_emit_message(false, 'pgcompress', repeat('x', 2500000));")
            .expect("big record");
        cluster
            .psql("CREATE TABLE t AS SELECT g, md5(g::text) m FROM generate_series(1, 20000) g;")
            .expect("ctas");
    });
    phases.push(("mixed".to_string(), files));
    let dir = tempfile::tempdir().expect("tempdir");
    let arch = dir.path().join("archive");
    std::fs::create_dir(&arch).expect("mkdir");
    let mut all = Vec::new();
    for f in cluster.archived_segments().expect("archived") {
        let dest = arch.join(f.file_name().expect("name"));
        std::fs::copy(&f, &dest).expect("copy");
        all.push(dest);
    }
    all.sort();
    // Re-point the phases at the copies.
    let phases = phases
        .into_iter()
        .map(|(n, fs)| {
            (
                n,
                fs.iter()
                    .map(|f| arch.join(f.file_name().expect("name")))
                    .collect(),
            )
        })
        .collect();
    cluster
        .psql("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 5000) g;")
        .expect("tail");
    let live_dir = dir.path().join("live");
    std::fs::create_dir(&live_dir).expect("mkdir");
    let mut live = cluster.copy_wal_to(&live_dir).expect("copy pg_wal");
    live.sort();
    Corpus {
        dir,
        phases,
        all,
        live,
        cluster,
    }
}

/// Runs `work` in its own segments: switch before and after (so WAL written before,
/// initdb's included, is left out), wait for archiving, and return the archived files
/// that hold it.
pub fn phase(cluster: &Cluster, name: &str, work: impl FnOnce()) -> Vec<PathBuf> {
    cluster.switch_wal().expect("switch");
    let first = cluster
        .query_one("SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
        .expect("first");
    work();
    let last = cluster
        .query_one("SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
        .expect("last");
    cluster.switch_wal().expect("switch");
    cluster
        .wait_for_archived(&last, Duration::from_secs(60))
        .expect("archived");
    let files: Vec<PathBuf> = cluster
        .archived_segments()
        .expect("archived")
        .into_iter()
        .filter(|f| {
            let n = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n >= first.as_str() && n <= last.as_str()
        })
        .collect();
    assert!(!files.is_empty(), "phase {name} archived no segment");
    files
}

/// Output and exit status of `pg_waldump --stats -p DIR FIRST LAST`.
pub fn pg_waldump_stats(cluster: &Cluster, files: &[PathBuf]) -> (String, bool) {
    let (code, out, _err) = pg_waldump_stats_exit(cluster, files);
    (out, code == 0)
}

/// Exit status, stdout and stderr of `pg_waldump --stats -p DIR FIRST LAST`.
pub fn pg_waldump_stats_exit(cluster: &Cluster, files: &[PathBuf]) -> (i32, String, String) {
    let dir = files[0].parent().expect("dir");
    // The server's own major's pg_waldump: another major's refuses the page magic.
    let waldump = cluster
        .install()
        .own_bin("pg_waldump")
        .expect("this major's pg_waldump");
    let out = Command::new(waldump)
        .arg("--stats")
        .arg("-p")
        .arg(dir)
        .arg(name(&files[0]))
        .arg(name(files.last().expect("last")))
        .output()
        .expect("run pg_waldump");
    exit_and_text(out)
}

/// Exit status, stdout and stderr of a finished command.
pub fn exit_and_text(out: std::process::Output) -> (i32, String, String) {
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the pgcompress binary.
pub fn pgcompress(args: &[&str]) -> std::process::Output {
    pgcompress_on(args, &[])
}

/// Runs `pgcompress ARGS FILES...`.
pub fn pgcompress_on(args: &[&str], files: &[PathBuf]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pgcompress"))
        .args(args)
        .args(files)
        .output()
        .expect("run pgcompress")
}

/// Exit status, stdout and stderr of `pgcompress wal CMD FILES...`.
pub fn wal_command(cmd: &str, files: &[PathBuf]) -> (i32, String, String) {
    exit_and_text(pgcompress_on(&["wal", cmd], files))
}

/// Rewrites `path` with `f` applied to its bytes: damage done to a copy of WAL.
pub fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(path).expect("read");
    f(&mut b);
    std::fs::write(path, b).expect("write");
}

/// Runs `pgcompress wal stats --json` on files and parses the object.
pub fn stats_json(files: &[PathBuf]) -> serde_json::Value {
    let out = pgcompress_on(&["wal", "stats", "--json"], files);
    assert!(
        out.status.success(),
        "pgcompress failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// Copies `files` into a fresh directory of `tmp` (so pg_waldump sees only them).
pub fn isolate(tmp: &Path, label: &str, files: &[PathBuf]) -> Vec<PathBuf> {
    let d = tmp.join(label);
    std::fs::create_dir_all(&d).expect("mkdir");
    files
        .iter()
        .map(|f| {
            let dest = d.join(f.file_name().expect("name"));
            std::fs::copy(f, &dest).expect("copy");
            dest
        })
        .collect()
}

/// The file name of a path.
pub fn name(p: &Path) -> String {
    p.file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_string()
}

/// One row of pg_waldump's table: name and the four integers.
#[derive(Debug, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub records: u64,
    pub record_bytes: u64,
    pub fpi_bytes: u64,
    pub combined: u64,
}

/// Parses pg_waldump's `--stats` text: the LSN range and the rows (Total last).
pub fn parse_pg_waldump(text: &str) -> (String, String, Vec<Row>) {
    let first = text.lines().next().expect("header line");
    let range = first
        .strip_prefix("WAL statistics between ")
        .and_then(|r| r.strip_suffix(':'))
        .expect("header");
    let (start, end) = range.split_once(" and ").expect("range");
    let mut rows = Vec::new();
    for line in text.lines().skip(3) {
        let mut toks = line.split_whitespace();
        let Some(name) = toks.next() else { continue };
        if name.starts_with("---") {
            continue;
        }
        let nums: Vec<u64> = toks.filter_map(|t| t.parse().ok()).collect();
        assert_eq!(nums.len(), 4, "row {line:?}");
        rows.push(Row {
            name: name.to_string(),
            records: nums[0],
            record_bytes: nums[1],
            fpi_bytes: nums[2],
            combined: nums[3],
        });
    }
    (start.to_string(), end.to_string(), rows)
}
