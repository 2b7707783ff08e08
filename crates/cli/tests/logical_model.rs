//! A model-based proof of `logical recv`'s ordering: several sessions at once run random mixes
//! of INSERT, UPDATE (index, bitmap and sequential scans), DELETE, TRUNCATE, savepoints rolled
//! back to, subtransactions, TOASTed values, aborted and two-phase transactions, some large
//! enough for the server to stream (logical_decoding_work_mem 64kB) and to pass our
//! `--work-mem`. What `logical recv` writes must equal test_decoding from a slot made at the
//! same position, change for change, in commit order, with each spill compression.
//!
//! Four sessions run at any moment: each of four lanes opens one session (a psql connection
//! running its own random script) after another. The run prints its seed;
//! `PGCOMPRESS_MODEL_SEED=N` replays one, `PGCOMPRESS_MODEL_SESSIONS=N` sets how many sessions
//! run in all (CI: 200) and `PGCOMPRESS_MODEL_TRANSACTIONS=N` how many transactions each runs
//! (CI: 2); `scripts/logical-model.sh` runs larger ones in a loop.

mod logical_support;

use logical_support::{assert_same, cluster, ours, recv, recv_command, test_decoding, Rng};
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Sessions running at once (the lanes of the concurrent test, the sessions of a round of the
/// kill -9 test).
const SESSIONS: u64 = 4;
/// Spill compressions each run is received with.
const SPILLS: [&str; 3] = ["lz4", "zstd:1", "none"];

/// One session's script: `transactions` random transactions on its own key range (per session
/// and round) of the shared table `m` and on its own table `s{session}` (which it may truncate).
fn session_script(rng: &mut Rng, session: u64, round: u64, transactions: u64) -> String {
    let base = (round * SESSIONS + session + 1) * 10_000_000;
    let mine = format!("s{session}");
    // Keys inserted so far in this session's range of `m` (a high-water mark).
    let mut next = base;
    let mut sql = String::new();
    for t in 0..transactions {
        let two_phase = rng.chance(8);
        let abort = !two_phase && rng.chance(10);
        sql.push_str("BEGIN;\n");
        let statements = 1 + rng.below(5);
        let mut savepoint = 0;
        for _ in 0..statements {
            match rng.below(10) {
                0..=2 => {
                    // Inserts: now and then large enough to stream, now and then TOASTed.
                    let n = if rng.chance(15) {
                        2000 + rng.below(3000)
                    } else {
                        1 + rng.below(50)
                    };
                    let value = if rng.chance(10) {
                        "(SELECT string_agg(md5(g::text || x::text), '') FROM generate_series(1, 400) x)"
                    } else {
                        "md5(g::text)"
                    };
                    sql.push_str(&format!(
                        "INSERT INTO m SELECT g, {value}, {t} FROM generate_series({}, {}) g;\n",
                        next,
                        next + n - 1
                    ));
                    next += n;
                }
                3 if next > base => {
                    let k = base + rng.below(next - base);
                    sql.push_str(&format!("UPDATE m SET n = n + 1 WHERE k = {k};\n"));
                }
                4 if next > base => {
                    // A bitmap heap scan visits rows in physical order.
                    let a = base + rng.below(next - base);
                    sql.push_str(&format!(
                        "SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off;\n\
                         UPDATE m SET v = 'b' || v WHERE k BETWEEN {a} AND {};\n\
                         RESET enable_seqscan; RESET enable_indexscan;\n",
                        a + rng.below(200)
                    ));
                }
                5 if next > base => {
                    let a = base + rng.below(next - base);
                    sql.push_str(&format!(
                        "SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;\n\
                         UPDATE m SET n = -n WHERE k BETWEEN {a} AND {} AND n % 3 = 0;\n\
                         RESET enable_indexscan; RESET enable_bitmapscan;\n",
                        a + rng.below(500)
                    ));
                }
                6 if next > base => {
                    let a = base + rng.below(next - base);
                    sql.push_str(&format!(
                        "DELETE FROM m WHERE k BETWEEN {a} AND {};\n",
                        a + rng.below(30)
                    ));
                }
                7 => {
                    savepoint += 1;
                    sql.push_str(&format!(
                        "SAVEPOINT sp{savepoint};\n\
                         INSERT INTO {mine} SELECT g, 'sub {t}' FROM generate_series(1, {}) g;\n",
                        1 + rng.below(300)
                    ));
                    if rng.chance(50) {
                        sql.push_str(&format!("ROLLBACK TO SAVEPOINT sp{savepoint};\n"));
                    } else {
                        sql.push_str(&format!("RELEASE SAVEPOINT sp{savepoint};\n"));
                    }
                }
                8 if rng.chance(30) => sql.push_str(&format!("TRUNCATE {mine};\n")),
                _ => sql.push_str(&format!(
                    "INSERT INTO {mine} VALUES ({t}, repeat('x', {}));\n",
                    rng.below(3000)
                )),
            }
        }
        if two_phase {
            let gid = format!("g{session}_{t}");
            sql.push_str(&format!("PREPARE TRANSACTION '{gid}';\n"));
            if rng.chance(25) {
                sql.push_str(&format!("ROLLBACK PREPARED '{gid}';\n"));
            } else {
                sql.push_str(&format!("COMMIT PREPARED '{gid}';\n"));
            }
        } else if abort {
            sql.push_str("ROLLBACK;\n");
        } else {
            sql.push_str("COMMIT;\n");
        }
    }
    sql
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn concurrent_random_sessions_equal_test_decoding() {
    let seed = env_u64("PGCOMPRESS_MODEL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1
    });
    let total = env_u64("PGCOMPRESS_MODEL_SESSIONS")
        .unwrap_or(200)
        .max(SESSIONS);
    let transactions = env_u64("PGCOMPRESS_MODEL_TRANSACTIONS").unwrap_or(2);
    let per_lane = total.div_ceil(SESSIONS);
    eprintln!(
        "model seed {seed} ({} sessions of {transactions} transactions, {SESSIONS} at once; \
         replay with PGCOMPRESS_MODEL_SEED={seed})",
        per_lane * SESSIONS
    );
    let slots: Vec<String> = SPILLS.iter().map(|spill| slot(spill)).collect();
    let cluster = model_cluster(&slots);

    let dir = tempfile::tempdir().expect("tempdir");
    let (psql, conninfo) = (cluster.install().bin("psql"), cluster.conninfo());
    // Every script is written before the lanes start, so a seed gives the same sessions
    // whatever the timing.
    let mut rng = Rng(seed);
    let lanes: Vec<Vec<PathBuf>> = (0..SESSIONS)
        .map(|lane| {
            (0..per_lane)
                .map(|n| {
                    let sql = session_script(&mut rng, lane, n, transactions);
                    write_script(dir.path(), &format!("lane{lane}-{n}"), &sql)
                })
                .collect()
        })
        .collect();
    let lanes: Vec<_> = lanes
        .into_iter()
        .enumerate()
        .map(|(lane, scripts)| {
            let (psql, conninfo) = (psql.clone(), conninfo.clone());
            thread::spawn(move || {
                for (n, script) in scripts.into_iter().enumerate() {
                    spawn_psql(
                        &psql,
                        &conninfo,
                        script,
                        format!("lane {lane} session {n} (seed {seed})"),
                    )
                    .join()
                    .expect("session thread");
                }
            })
        })
        .collect();
    for lane in lanes {
        lane.join().expect("lane");
    }
    let stop = cluster.current_wal_lsn().expect("lsn");
    let theirs = test_decoding(&cluster, "td");
    for spill in SPILLS {
        let out = dir.path().join(format!("{}.jsonl", slot(spill)));
        recv(
            &cluster,
            &slot(spill),
            &out,
            &stop,
            &["--work-mem", "64kB", "--spill-compression", spill],
        );
        let mine: Vec<_> = ours(&out).into_iter().map(|(c, _)| c).collect();
        eprintln!(
            "seed {seed}, spill {spill}: {} changes, {} transactions, equal to test_decoding",
            mine.len(),
            distinct_xids(&mine)
        );
        assert_same(&mine, &theirs);
    }
    let streamed = cluster
        .query_one(&format!(
            "SELECT stream_txns FROM pg_stat_replication_slots WHERE slot_name = '{}'",
            slot("lz4")
        ))
        .expect("slot stats");
    assert_ne!(streamed, "0", "the server streamed nothing (seed {seed})");
}

fn slot(spill: &str) -> String {
    format!("ours_{}", spill.replace(':', "_"))
}

fn distinct_xids(changes: &[logical_support::Change]) -> usize {
    let mut xids: Vec<u32> = changes.iter().map(|c| c.xid).collect();
    xids.dedup();
    xids.len()
}

/// A cluster streaming at 64kB with the model's tables, a publication, a pgoutput slot per name
/// in `slots` and a test_decoding slot `td`, all made at the same position.
fn model_cluster(slots: &[String]) -> Cluster {
    let cluster = cluster(Some("64kB"));
    let mut setup = String::from(
        "CREATE TABLE m (k bigint PRIMARY KEY, v text, n int);
         ALTER TABLE m ALTER COLUMN v SET STORAGE EXTERNAL;
         CREATE PUBLICATION p FOR ALL TABLES;",
    );
    for s in 0..SESSIONS {
        setup.push_str(&format!("CREATE TABLE s{s} (a int, b text);\n"));
        setup.push_str(&format!("ALTER TABLE s{s} REPLICA IDENTITY FULL;\n"));
    }
    for slot in slots {
        setup.push_str(&format!(
            "SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput');\n"
        ));
    }
    setup.push_str("SELECT pg_create_logical_replication_slot('td', 'test_decoding');");
    cluster.psql(&setup).expect("schema and slots");
    cluster
}

/// Writes a session's script where the server user can read it.
fn write_script(dir: &Path, name: &str, sql: &str) -> PathBuf {
    let script = dir.join(format!("{name}.sql"));
    std::fs::write(&script, sql).expect("script");
    pgtest::run::chown_to_server_user(&script).ok();
    script
}

/// Runs `script` with `psql` on `conninfo` in a thread, stopping at the first error.
fn spawn_psql(
    psql: &Path,
    conninfo: &str,
    script: PathBuf,
    what: String,
) -> thread::JoinHandle<()> {
    let mut cmd = Command::new(psql);
    cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", conninfo, "-f"])
        .arg(&script);
    thread::spawn(move || {
        let o = pgtest::run(&mut cmd).expect("run psql");
        assert!(
            o.status.success(),
            "{what} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    })
}

/// kill -9 of `logical recv` at random moments while four random sessions run at once; after a
/// final run the output, read in full, equals test_decoding: every committed transaction
/// exactly once, in commit order, each transaction's changes in WAL order.
/// `PGCOMPRESS_MODEL_KILLS` sets the number of trials (50).
#[test]
fn kill_9_during_concurrent_random_sessions_loses_and_duplicates_nothing() {
    let seed = env_u64("PGCOMPRESS_MODEL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1
    });
    let trials = env_u64("PGCOMPRESS_MODEL_KILLS").unwrap_or(50);
    eprintln!(
        "kill -9 model: seed {seed}, {trials} trials (replay with PGCOMPRESS_MODEL_SEED={seed})"
    );
    let cluster = model_cluster(&["ours".to_owned()]);
    // The sessions' scripts go where the server user can read them; the output and its spill
    // directory in a directory of the account running the consumer, which refuses a spill
    // directory inside one another account owns.
    let dir = tempfile::tempdir().expect("tempdir");
    pgtest::run::chown_to_server_user(dir.path()).ok();
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = out_dir.path().join("cdc.jsonl");
    let done = Arc::new(AtomicBool::new(false));
    // The sessions run round after round of 20 random transactions each until the trials end.
    let workload = {
        let done = Arc::clone(&done);
        let conninfo = cluster.conninfo();
        let psql = cluster.install().bin("psql");
        let scripts = dir.path().to_path_buf();
        thread::spawn(move || {
            let mut round = 0;
            while !done.load(Ordering::SeqCst) || round < 2 {
                let sessions: Vec<_> = (0..SESSIONS)
                    .map(|s| {
                        let mut rng =
                            Rng(seed ^ (round << 8 | s).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                        let sql = session_script(&mut rng, s, round, 20);
                        let script = write_script(&scripts, &format!("r{round}s{s}"), &sql);
                        spawn_psql(
                            &psql,
                            &conninfo,
                            script,
                            format!("session {s} round {round}"),
                        )
                    })
                    .collect();
                for s in sessions {
                    s.join().expect("session");
                }
                round += 1;
            }
            round
        })
    };
    let mut rng = Rng(seed);
    for trial in 0..trials {
        wait_slot_idle(&cluster);
        let mut child = recv_command(&cluster, "ours")
            .args(["--work-mem", "64kB", "--idle-exit", "60"])
            .args(["--fsync-interval", if trial % 2 == 1 { "0.2" } else { "0" }])
            .arg("-o")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn pgcompress");
        thread::sleep(Duration::from_millis(30 + rng.below(400)));
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "trial {trial}: pgcompress exited by itself (seed {seed})"
        );
        child.kill().expect("kill -9");
        child.wait().expect("reap");
    }
    done.store(true, Ordering::SeqCst);
    let rounds = workload.join().expect("workload");
    let stop = cluster.current_wal_lsn().expect("lsn");
    wait_slot_idle(&cluster);
    recv(&cluster, "ours", &out, &stop, &["--work-mem", "64kB"]);
    let mine: Vec<_> = ours(&out).into_iter().map(|(c, _)| c).collect();
    let theirs = test_decoding(&cluster, "td");
    eprintln!(
        "kill -9 model: seed {seed}, {trials} trials over {rounds} rounds of {SESSIONS} sessions: \
         {} changes in {} transactions, equal to test_decoding",
        mine.len(),
        distinct_xids(&mine)
    );
    assert_same(&mine, &theirs);
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
