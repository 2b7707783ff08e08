//! Exactly once across kill -9, and a corrupt spill record, for `pgcompress logical recv`
//! against a real PostgreSQL 15 streaming at logical_decoding_work_mem = 64kB.

mod logical_support;

use logical_support::{
    assert_same, cluster, ours, recv, recv_command, run_psql, test_decoding, Rng,
};
use pgtest::Cluster;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TRIALS: usize = 50;

const SCHEMA: &str = "
CREATE TABLE small (id serial PRIMARY KEY, v text);
CREATE TABLE big (id int, v text);
CREATE PUBLICATION p FOR ALL TABLES;
SELECT pg_create_logical_replication_slot('ours', 'pgoutput');
SELECT pg_create_logical_replication_slot('td', 'test_decoding');
";

/// One round of the workload: many small transactions, a large one that streams, and every
/// third round a large one that aborts.
fn round(k: u32) -> String {
    let mut sql = String::new();
    for i in 0..15 {
        sql.push_str(&format!("INSERT INTO small (v) VALUES ('r{k} s{i}');\n"));
    }
    sql.push_str(&format!(
        "UPDATE small SET v = v || ' u' WHERE id % 7 = {};\nDELETE FROM small WHERE id % 11 = {};\n",
        k % 7,
        k % 11
    ));
    sql.push_str(&format!(
        "BEGIN; INSERT INTO big SELECT g, 'r{k} big ' || g FROM generate_series(1, 2500) g; \
         SAVEPOINT a; INSERT INTO big SELECT g, 'r{k} undone' FROM generate_series(1, 300) g; \
         ROLLBACK TO a; COMMIT;\n"
    ));
    if k % 3 == 0 {
        sql.push_str(&format!(
            "BEGIN; INSERT INTO big SELECT g, 'r{k} aborted' FROM generate_series(1, 2500) g; ROLLBACK;\n"
        ));
    }
    sql
}

fn wait_slot_idle(cluster: &Cluster) {
    cluster
        .wait_until("slot ours to be released", Duration::from_secs(60), || {
            Ok(cluster
                .query_one("SELECT active FROM pg_replication_slots WHERE slot_name = 'ours'")?
                == "f")
        })
        .expect("slot released");
}

/// Odd trials fsync in batches (--fsync-interval), even ones after every transaction.
fn start(cluster: &Cluster, out: &Path, trial: usize) -> std::process::Child {
    let interval = if trial % 2 == 1 { "0.2" } else { "0" };
    piped_recv(cluster, out)
        .args(["--fsync-interval", interval])
        .spawn()
        .expect("spawn pgcompress")
}

/// `logical recv` on slot `ours` into `out` with a 64kB work_mem, stdout dropped and stderr
/// piped; the caller adds its own options and spawns it.
fn piped_recv(cluster: &Cluster, out: &Path) -> Command {
    let mut cmd = recv_command(cluster, "ours");
    cmd.args(["--work-mem", "64kB", "--idle-exit", "60", "-o"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn kill_9_at_random_moments_loses_and_duplicates_nothing() {
    let cluster = cluster(Some("64kB"));
    cluster.psql(SCHEMA).expect("schema");
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    eprintln!("kill -9 trials: seed {seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("cdc.jsonl");

    let done = Arc::new(AtomicBool::new(false));
    let workload = {
        let done = Arc::clone(&done);
        let conninfo = cluster.conninfo();
        let psql = cluster.install().bin("psql");
        thread::spawn(move || {
            let mut k = 0;
            while !done.load(Ordering::SeqCst) || k < 4 {
                run_psql(&psql, &conninfo, &round(k));
                k += 1;
            }
            k
        })
    };

    let started = Instant::now();
    for trial in 0..TRIALS {
        wait_slot_idle(&cluster);
        let mut child = start(&cluster, &out, trial);
        thread::sleep(Duration::from_millis(30 + rng.below(400)));
        if let Some(status) = child.try_wait().expect("try_wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("trial {trial}: pgcompress exited by itself ({status}): {err}");
        }
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        if trial == TRIALS / 2 {
            let len = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
            assert!(
                len > 0,
                "no output after {trial} trials: the consumer never got going"
            );
        }
    }
    done.store(true, Ordering::SeqCst);
    let rounds = workload.join().expect("workload thread");
    eprintln!(
        "{TRIALS} trials over {rounds} workload rounds in {:?}",
        started.elapsed()
    );
    let stop = cluster.current_wal_lsn().expect("lsn");
    wait_slot_idle(&cluster);
    recv(&cluster, "ours", &out, &stop, &["--work-mem", "64kB"]);

    let mine: Vec<_> = ours(&out).into_iter().map(|(c, _)| c).collect();
    let theirs = test_decoding(&cluster, "td");
    assert!(mine.iter().all(|c| !c.columns.iter().any(|(_, v)| v
        .as_deref()
        .is_some_and(|v| v.contains("aborted") || v.contains("undone")))));
    assert_same(&mine, &theirs);
}

#[test]
fn corrupt_spill_record_stops_with_file_and_offset_and_writes_nothing_of_it() {
    let cluster = cluster(Some("64kB"));
    cluster.psql(SCHEMA).expect("schema");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("cdc.jsonl");
    let spill = dir.path().join("spill");
    let child = piped_recv(&cluster, &out)
        .arg("--spill-dir")
        .arg(&spill)
        .spawn()
        .expect("spawn pgcompress");
    cluster
        .psql("INSERT INTO small (v) VALUES ('before');")
        .expect("small txn");
    let conninfo = cluster.conninfo();
    let psql = cluster.install().bin("psql");
    let big = thread::spawn(move || {
        let mut cmd = std::process::Command::new(psql);
        cmd.args(["-X", "-q", "-d", &conninfo, "-c"]).arg(
            "BEGIN; INSERT INTO big SELECT g, 'doomed ' || g FROM generate_series(1, 20000) g; \
             SELECT pg_sleep(3); COMMIT;",
        );
        pgtest::run(&mut cmd).expect("big txn")
    });
    // Wait for the big transaction's spill file, then damage a byte in its middle.
    let deadline = Instant::now() + Duration::from_secs(30);
    let victim = loop {
        let found = std::fs::read_dir(&spill).ok().and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| {
                std::fs::metadata(p)
                    .map(|m| m.len() > 20_000)
                    .unwrap_or(false)
            })
        });
        if let Some(p) = found {
            break p;
        }
        assert!(Instant::now() < deadline, "no spill file appeared");
        thread::sleep(Duration::from_millis(20));
    };
    // In place, one byte, without truncating what the consumer may be appending.
    let len = std::fs::metadata(&victim).expect("stat spill").len();
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&victim)
        .expect("open spill");
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(len / 2)).expect("seek");
    f.read_exact(&mut b).expect("read byte");
    b[0] ^= 0x5a;
    f.seek(SeekFrom::Start(len / 2)).expect("seek");
    f.write_all(&b).expect("write byte");
    drop(f);
    assert!(big.join().expect("big txn thread").status.success());

    let o = child.wait_with_output().expect("pgcompress exits");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {stderr}");
    let name = victim.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        stderr.contains(name) && stderr.contains("offset"),
        "error must name the file and offset: {stderr}"
    );
    let text = std::fs::read_to_string(&out).expect("output");
    assert!(
        text.contains("before"),
        "the earlier transaction is kept: {text}"
    );
    assert!(
        !text.contains("doomed"),
        "nothing of the corrupt transaction is written"
    );
    // The slot was not confirmed past the bad transaction: the server still has it to send.
    let pending = cluster
        .query_one(
            "SELECT count(*) FROM pg_logical_slot_peek_changes('td', NULL, NULL) \
             WHERE data LIKE '%doomed%'",
        )
        .expect("peek");
    assert_eq!(pending, "20000");
    let confirmed = cluster
        .query_one(
            "SELECT confirmed_flush_lsn < (SELECT max(lsn) FROM \
             pg_logical_slot_peek_changes('td', NULL, NULL)) FROM pg_replication_slots \
             WHERE slot_name = 'ours'",
        )
        .expect("confirmed");
    assert_eq!(confirmed, "t");
}
