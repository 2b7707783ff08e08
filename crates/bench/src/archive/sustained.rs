//! `bench archive --sustained SECS`: a busy primary archiving as fast as it writes. pgbench runs flat out
//! for SECS seconds on a fresh cluster while its archive_command stores every segment in a local repository:
//! once with no archiving cost (`archive_command = 'true'`, the WAL rate the machine allows), once with
//! `pgcompress archive push --async` (its `archive serve` started by the first push), once with pgBackRest
//! `archive-async` at `process-max=2` (zst:3). For each: the WAL rate held, the `.ready` backlog (sampled
//! every 250 ms, and how long it took to drain after pgbench stopped), the bytes stored, the CPU the whole
//! machine spent, and a recovery of a base backup taken before the run through the whole archive with the
//! tool's prefetching get (`archive get --prefetch 8`, pgBackRest's async `archive-get`), timed to
//! promotion and checked against the primary's data. Both tools then run again with their repository on an
//! S3-compatible server (moto_server, one per run, on loopback; see [`super::s3`]). With several rounds the
//! tools take turns at going first, and the ratios are of their means.

use super::files::{chown_tree, dir_bytes, mkdir, ready_count, segment_files};
use super::s3::{S3Server, KEY_ID, SECRET};
use super::sustained_report::{schedule, Archiver, Store, SustainedReport, SustainedRun, SCALE};
use crate::error::{Context, Error, IoContext, Result};
use crate::runs::parse_tps;
use crate::sys::{alive, busy_ticks, signal, ticks_per_second};
use crate::{check_cancelled, Progress};
use nix::sys::signal::Signal;
use pgtest::run::{run, run_with};
use pgtest::Cluster;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest wait for the backlog to drain or a recovery to end.
const DRAIN_LIMIT: Duration = Duration::from_secs(900);
/// Checksum of the pgbench tables.
const CHECKSUM_SQL: &str = "SELECT md5(string_agg(aid::text || ':' || abalance, ',' ORDER BY aid)) \
    || md5((SELECT string_agg(bid::text || ':' || bbalance, ',' ORDER BY bid) FROM pgbench_branches)) \
    FROM pgbench_accounts";

/// Runs every archiver for `seconds` of pgbench with `clients` clients, both tools on each of `stores`,
/// `rounds` times (see [`schedule`] for the order); `pgcompress` is the binary. A request to stop
/// (`progress`) is honoured between runs and while waiting for a backlog or a recovery; pgbench itself ends with the terminal's Ctrl-C, else after its `seconds`. The
/// throwaway clusters and S3 servers are stopped on the way out.
pub fn run_sustained(
    pgcompress: &Path,
    seconds: u32,
    clients: u32,
    stores: &[Store],
    rounds: u32,
    progress: &dyn Progress,
) -> Result<SustainedReport> {
    let mut runs = Vec::new();
    for (round, archiver) in schedule(stores, rounds) {
        check_cancelled(progress)?;
        let of = if rounds > 1 {
            format!(" (round {round} of {rounds})")
        } else {
            String::new()
        };
        progress.step(format!("{}{of}: {seconds} s of pgbench", archiver.label()));
        let r = one_run(pgcompress, round, archiver, seconds, clients, progress)
            .with_context(|| format!("sustained run with {}{of}", archiver.label()))?;
        progress.note(format!(
            "{}{of}: {:.1} MB/s of WAL, backlog max {} at end {}, drained in {:.1} s{}",
            archiver.label(),
            r.wal_mb_per_s,
            r.ready_max,
            r.ready_at_end,
            r.drain_s,
            r.recovery_s
                .map_or(String::new(), |s| format!(", recovered in {s:.1} s"))
        ));
        runs.push(r);
    }
    Ok(SustainedReport::new(clients, seconds, rounds, runs))
}

/// Bucket names on the S3-compatible server.
const PGCOMPRESS_BUCKET: &str = "pgcompress";
const PGBACKREST_BUCKET: &str = "pgbackrest";

/// pgBackRest's configuration for a stanza on `data`, asynchronous, two processes; its repository in
/// `dir/repo`, or on `s3` (HTTPS, certificate not verified: moto's is self-signed).
fn pgbackrest_conf(
    dir: &Path,
    data: &Path,
    cluster: &Cluster,
    s3: Option<&S3Server>,
) -> Result<PathBuf> {
    for sub in ["lock", "log", "spool", "repo"] {
        mkdir(&dir.join(sub))?;
    }
    let conf = dir.join("pgbackrest.conf");
    let repo = match s3 {
        None => format!("repo1-path={}\n", dir.join("repo").display()),
        Some(s3) => format!(
            "repo1-type=s3\nrepo1-path=/repo\nrepo1-s3-bucket={PGBACKREST_BUCKET}\nrepo1-s3-endpoint=127.0.0.1\n\
             repo1-storage-port={}\nrepo1-s3-region=us-east-1\nrepo1-s3-key={KEY_ID}\n\
             repo1-s3-key-secret={SECRET}\nrepo1-s3-uri-style=path\nrepo1-storage-verify-tls=n\n",
            s3.port()
        ),
    };
    let text = format!(
        "[global]\n{repo}compress-type=zst\ncompress-level=3\narchive-async=y\nprocess-max=2\n\
         spool-path={spool}\nlog-level-console=warn\nlog-level-file=off\nlog-path={log}\nlock-path={lock}\n\n\
         [bench]\npg1-path={data}\npg1-socket-path={sock}\npg1-port={port}\npg1-user={user}\n",
        spool = dir.join("spool").display(),
        log = dir.join("log").display(),
        lock = dir.join("lock").display(),
        data = data.display(),
        sock = cluster.socket_dir().display(),
        port = cluster.port(),
        user = pgtest::SUPERUSER,
    );
    std::fs::write(&conf, text).io(|| format!("writing {}", conf.display()))?;
    pgtest::run::chown_to_server_user(&conf)?;
    Ok(conf)
}

fn lsn(text: &str) -> Result<u64> {
    crate::runs::lsn(text).map(|l| l.0)
}

fn one_run(
    me: &Path,
    round: u32,
    archiver: Archiver,
    seconds: u32,
    clients: u32,
    progress: &dyn Progress,
) -> Result<SustainedRun> {
    let tmp = tempfile::Builder::new()
        .prefix("pgcompress-bench-sustained-")
        .tempdir()
        .io(|| "creating a temporary directory".into())?;
    let root = tmp.path();
    pgtest::run::chown_to_server_user(root)?;
    // Dropped before `tmp`: the spool servers are stopped before their directories are removed.
    let _servers = SpoolServers(vec![
        root.join("spool/serve.pid"),
        root.join("fetch-spool/fetch.pid"),
    ]);
    // archive_command stays empty until the archive is ready: the server keeps every segment meanwhile.
    let cluster = Cluster::builder()
        .guc("archive_mode", "on")
        .guc("archive_command", "")
        .guc("wal_compression", "off")
        .guc("max_wal_size", "8GB")
        .guc("checkpoint_timeout", "1min")
        .guc("synchronous_commit", "off")
        .guc("autovacuum", "off")
        .start()
        .context("starting the throwaway cluster")?;
    let repo = root.join("repo");
    mkdir(&repo)?;
    // Each S3 run gets a server of its own, so that no run pays for another's objects.
    let s3 = if archiver.s3() {
        let server = S3Server::start(archiver.pgbackrest())?;
        let bucket = if archiver.pgbackrest() {
            PGBACKREST_BUCKET
        } else {
            PGCOMPRESS_BUCKET
        };
        server.create_bucket(bucket)?;
        Some((server, bucket))
    } else {
        None
    };
    let (archive_command, restore_command) = match archiver {
        Archiver::None => ("true".to_owned(), None),
        Archiver::Pgcompress | Archiver::PgcompressS3 => {
            let spool = root.join("spool");
            let fetch = root.join("fetch-spool");
            mkdir(&spool)?;
            mkdir(&fetch)?;
            // The credentials go in the command's environment, as an operator would set them.
            let (prefix, repo_args) = match &s3 {
                Some((server, bucket)) => (
                    format!("env AWS_ACCESS_KEY_ID={KEY_ID} AWS_SECRET_ACCESS_KEY={SECRET} "),
                    format!("--repo s3://{bucket}/wal --endpoint {}", server.endpoint()),
                ),
                None => (String::new(), format!("--repo {}", repo.display())),
            };
            // The repository is made the cluster's before archive_command points at it.
            let mut init = Command::new(me);
            init.args(["archive", "init", "--pgdata"])
                .arg(cluster.data_dir())
                .args(repo_args.split(' '));
            if s3.is_some() {
                init.env("AWS_ACCESS_KEY_ID", KEY_ID)
                    .env("AWS_SECRET_ACCESS_KEY", SECRET);
            }
            run(&mut init).context("pgcompress archive init")?;
            (
                format!(
                    "{prefix}{} archive push --async --spool {} {repo_args} %p",
                    me.display(),
                    spool.display(),
                ),
                Some(format!(
                    "{prefix}{} archive get --prefetch 8 --spool {} {repo_args} %f %p",
                    me.display(),
                    fetch.display(),
                )),
            )
        }
        Archiver::Pgbackrest | Archiver::PgbackrestS3 => {
            let dir = root.join("pgbackrest");
            mkdir(&dir)?;
            let server = s3.as_ref().map(|(server, _)| server);
            let conf = pgbackrest_conf(&dir, &cluster.data_dir(), &cluster, server)?;
            let mut cmd = Command::new("pgbackrest");
            cmd.arg(format!("--config={}", conf.display()))
                .args(["--stanza=bench", "stanza-create"]);
            pgtest::run::as_server_user(&mut cmd)?;
            run(&mut cmd).context("pgbackrest stanza-create")?;
            (
                format!(
                    "pgbackrest --config={} --stanza=bench archive-push %p",
                    conf.display()
                ),
                // The restored server gets a configuration of its own (pg1-path is its data directory).
                Some(String::new()),
            )
        }
    };
    cluster.psql(&format!(
        "ALTER SYSTEM SET archive_command = '{}'",
        archive_command.replace('\'', "''")
    ))?;
    cluster.psql("SELECT pg_reload_conf()")?;
    cluster
        .pgbench(&["-i", "-s", &SCALE.to_string(), "-q"])
        .context("pgbench -i")?;
    let backup = root.join("backup");
    let mut bb = cluster.command("pg_basebackup");
    bb.arg("-D").arg(&backup).args(["-X", "none", "-c", "fast"]);
    run(&mut bb).context("pg_basebackup")?;

    let wal = cluster.data_dir().join("pg_wal");
    let start_lsn = lsn(&cluster.query_one("SELECT pg_current_wal_lsn()")?)?;
    let busy_start = busy_ticks();
    let started = Instant::now();
    let done = AtomicBool::new(false);
    let (out, ready_max) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut max = 0;
            while !done.load(Ordering::SeqCst) {
                max = max.max(ready_count(&wal));
                std::thread::sleep(Duration::from_millis(250));
            }
            max
        });
        let out = cluster.pgbench(&[
            "-n",
            "-c",
            &clients.to_string(),
            "-j",
            &clients.to_string(),
            "-T",
            &seconds.to_string(),
        ]);
        done.store(true, Ordering::SeqCst);
        (out, sampler.join().unwrap_or(0))
    });
    let out = out.context("pgbench")?;
    let ran = started.elapsed().as_secs_f64();
    let end_lsn = lsn(&cluster.query_one("SELECT pg_current_wal_lsn()")?)?;
    let ready_at_end = ready_count(&wal);
    let checksum = cluster.query_one(CHECKSUM_SQL)?;
    cluster.query_one("SELECT pg_switch_wal()")?;
    progress.step(format!("{}: draining the backlog", archiver.label()));
    let drain_start = Instant::now();
    while ready_count(&wal) > 0 {
        check_cancelled(progress)?;
        if drain_start.elapsed() > DRAIN_LIMIT {
            return Err(Error::Internal(
                "the archive backlog did not drain in 15 minutes",
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let drain_s = drain_start.elapsed().as_secs_f64();
    let machine_cpu_s = match (busy_start, busy_ticks(), ticks_per_second()) {
        (Some(a), Some(b), Some(t)) => b.saturating_sub(a) as f64 / t,
        _ => 0.0,
    };
    let (stored_bytes, stored_segments) = match &s3 {
        Some((server, bucket)) => server.usage(bucket)?,
        None => (
            dir_bytes(&repo) + dir_bytes(&root.join("pgbackrest/repo")),
            segment_files(&repo) + segment_files(&root.join("pgbackrest/repo")),
        ),
    };
    let wal_bytes = end_lsn.saturating_sub(start_lsn);
    let (recovery_s, recovered_identical) = match restore_command {
        None => (None, None),
        Some(cmd) => {
            let port = cluster.port() + 1000;
            progress.step(format!(
                "{}: recovering {:.2} GB of WAL from the archive",
                archiver.label(),
                wal_bytes as f64 / 1e9
            ));
            let (secs, got) = recover(&cluster, archiver, &backup, root, &cmd, port, progress)?;
            (Some(secs), Some(got == checksum))
        }
    };
    Ok(SustainedRun {
        round,
        archiver,
        label: archiver.label(),
        wal_bytes,
        seconds: ran,
        wal_mb_per_s: wal_bytes as f64 / 1e6 / ran,
        tps: parse_tps(&out),
        ready_max,
        ready_at_end,
        drain_s,
        stored_bytes,
        stored_segments,
        machine_cpu_s,
        recovery_s,
        recovered_identical,
    })
}

/// The long-lived processes pgcompress starts for a run (the `archive serve` of `push --async`, the
/// prefetching `archive get`), by their pid files: stopped (SIGTERM, then SIGKILL after 10 s) when the run
/// ends, however it ends. Left alone they would stop only once idle, after the run's directory is gone,
/// and write their last status into a copy of it.
struct SpoolServers(Vec<PathBuf>);

impl Drop for SpoolServers {
    fn drop(&mut self) {
        for file in &self.0 {
            let Some(pid) = std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            else {
                continue;
            };
            // Only a process that names this spool: a pid file can outlive its process.
            let spool = file.parent().map(|d| d.display().to_string());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if !spool.is_some_and(|d| String::from_utf8_lossy(&cmdline).contains(d.as_str())) {
                continue;
            }
            signal(pid, Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(10);
            while alive(pid) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            if alive(pid) {
                signal(pid, Signal::SIGKILL);
            }
        }
    }
}

/// Starts the base backup in `backup` with `restore_command` (pgBackRest: its async archive-get with a
/// configuration of its own), waits for the promotion at the end of the archive, and returns the seconds
/// it took and the restored data's checksum. The primary is stopped first.
fn recover(
    cluster: &Cluster,
    archiver: Archiver,
    backup: &Path,
    root: &Path,
    restore_command: &str,
    port: u16,
    progress: &dyn Progress,
) -> Result<(f64, String)> {
    cluster.stop()?;
    let sock = root.join("restored-sock");
    mkdir(&sock)?;
    let restore_command = if archiver.pgbackrest() {
        let dir = root.join("pgbackrest");
        let conf = dir.join("pgbackrest-restore.conf");
        let text = std::fs::read_to_string(dir.join("pgbackrest.conf"))
            .io(|| "reading pgbackrest.conf".into())?
            .replace(
                &format!("pg1-path={}", cluster.data_dir().display()),
                &format!("pg1-path={}", backup.display()),
            )
            .replace(
                &format!("spool-path={}", dir.join("spool").display()),
                &format!("spool-path={}", dir.join("spool-restore").display()),
            );
        mkdir(&dir.join("spool-restore"))?;
        std::fs::write(&conf, text).io(|| format!("writing {}", conf.display()))?;
        pgtest::run::chown_to_server_user(&conf)?;
        format!(
            "pgbackrest --config={} --stanza=bench archive-get %f \"%p\"",
            conf.display()
        )
    } else {
        restore_command.to_owned()
    };
    let mut conf = std::fs::read_to_string(backup.join("postgresql.conf"))
        .io(|| "reading the backup's postgresql.conf".into())?;
    let _ = write!(
        conf,
        "\nport = {port}\nunix_socket_directories = '{}'\narchive_mode = off\nrestore_command = '{}'\n",
        sock.display(),
        restore_command.replace('\'', "''")
    );
    std::fs::write(backup.join("postgresql.conf"), conf).io(|| "writing postgresql.conf".into())?;
    std::fs::write(backup.join("recovery.signal"), "").io(|| "writing recovery.signal".into())?;
    let _ = std::fs::remove_file(backup.join("postgresql.auto.conf"));
    chown_tree(backup)?;
    let log = root.join("restored.log");
    std::fs::write(&log, "").io(|| "creating the log".into())?;
    pgtest::run::chown_to_server_user(&log)?;
    let pg_ctl = |args: &[&str]| {
        let mut cmd = Command::new(cluster.install().bin("pg_ctl"));
        cmd.arg("-D").arg(backup).args(args);
        run_with(&mut cmd, None, DRAIN_LIMIT)
    };
    let psql = |sql: &str| -> Result<String> {
        let mut cmd = Command::new(cluster.install().bin("psql"));
        cmd.args(["-X", "-At", "-h"]).arg(&sock).args([
            "-p",
            &port.to_string(),
            "-U",
            pgtest::SUPERUSER,
            "-d",
            "postgres",
            "-c",
            sql,
        ]);
        let out = run(&mut cmd)?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let started = Instant::now();
    let log_arg = log.display().to_string();
    pg_ctl(&["-l", &log_arg, "-w", "-t", "900", "start"])
        .context("starting the restored server")?;
    let result = (|| {
        while psql("SELECT pg_is_in_recovery()").ok().as_deref() != Some("f") {
            check_cancelled(progress)?;
            if started.elapsed() > DRAIN_LIMIT {
                return Err(Error::Internal("recovery did not end in 15 minutes"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let secs = started.elapsed().as_secs_f64();
        Ok((secs, psql(CHECKSUM_SQL)?))
    })();
    let _ = pg_ctl(&["-m", "immediate", "-w", "stop"]);
    result
}
