//! `pgcompress archive expire` against archives a real PostgreSQL wrote: three base backups
//! (their `.backup` history files archived by the server), a timeline switch (a standby
//! promoted while archiving into the same repository), expire running while the new primary
//! pushes, and a recovery from the kept backup through the whole expired archive to the end
//! of its timelines. Once on a directory, once on an S3 bucket (moto_server).

mod archive_support;

use archive::retention::{classify, FileKind, Position};
use archive_support::restore::{switch_and_wait_archived, wait, Restored};
use archive_support::s3::{Moto, S3Repo};
use archive_support::{
    archive, expire_json, names, position, server_scratch, server_writable_dir, Repo,
};
use pgtest::run::run;
use pgtest::Cluster;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Checksum of the pgbench tables.
const CHECKSUM_SQL: &str = "SELECT md5(string_agg(aid::text || ':' || abalance, ',' ORDER BY aid)) \
    || md5((SELECT string_agg(bid::text || ':' || bbalance, ',' ORDER BY bid) FROM pgbench_branches)) \
    FROM pgbench_accounts";

#[test]
fn expire_on_a_directory_keeps_what_the_kept_backups_need() {
    let scratch = server_scratch("pgc-expire-");
    let top = scratch.path();
    let repo = server_writable_dir(top, "repo");
    expire_scenario(&repo, top);
}

#[test]
fn expire_on_s3_keeps_what_the_kept_backups_need() {
    let Some(moto) = Moto::start_or_skip("expire_on_s3_keeps_what_the_kept_backups_need") else {
        return;
    };
    moto.create_bucket("pgc-expire");
    let scratch = server_scratch("pgc-expire-");
    let top = scratch.path();
    let mut repo = S3Repo::new(&moto, "pgc-expire", "cluster/wal");
    repo.write_config(&top.join("pgcompress.toml"));
    expire_scenario(&repo, top);
}

/// `archive expire --json --min-age 0 ARGS`; panics unless it exits 0. These tests are
/// about retention by backups: files pushed seconds ago are not held back
/// (archive_expire_running.rs tests the minimum age).
fn expire<R: Repo + ?Sized>(repo: &R, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--min-age", "0"];
    all.extend_from_slice(args);
    expire_json(repo, &all)
}

fn backup_files(names: &BTreeSet<String>) -> Vec<String> {
    names
        .iter()
        .filter(|n| n.ends_with(".backup"))
        .cloned()
        .collect()
}

fn base_backup(cluster: &Cluster, dir: &Path) {
    let mut bb = cluster.command("pg_basebackup");
    bb.arg("-D").arg(dir).args(["-X", "none", "-c", "fast"]);
    run(&mut bb).expect("pg_basebackup");
}

fn expire_scenario<R: Repo + Sync>(repo: &R, top: &Path) {
    let push = repo.command_line("push", "%p");
    let archiving =
        |b: pgtest::ClusterBuilder| b.guc("archive_mode", "on").guc("wal_compression", "off");
    let primary = archiving(Cluster::builder().wal_segsize_mb(1))
        .start()
        .expect("start primary");
    // The repository is the primary's before archive_command points at it; the standby
    // below is a copy of the same cluster (and of its archive_command).
    archive_support::init(repo, &primary.data_dir());
    primary
        .set_guc_and_reload("archive_command", &push)
        .expect("archive_command");
    primary.pgbench_init(1).expect("pgbench -i");

    // Backup 0 on timeline 1; its data directory is not needed.
    base_backup(&primary, &top.join("backup0"));
    primary
        .pgbench(&["-n", "-t", "300", "-c", "2", "--random-seed=1"])
        .expect("pgbench");
    switch_and_wait_archived(&primary);

    // Backup 1 on timeline 1: the standby's own pg_basebackup.
    let standby = archiving(Cluster::builder().from_base_backup(primary.conninfo(), true))
        .start()
        .expect("start standby");
    primary
        .pgbench(&["-n", "-t", "300", "-c", "2", "--random-seed=2"])
        .expect("pgbench");
    switch_and_wait_archived(&primary);
    let end = primary.current_wal_lsn().expect("lsn");
    wait("the standby to replay", Duration::from_secs(120), || {
        standby
            .query_one(&format!(
                "SELECT pg_last_wal_replay_lsn() >= '{end}'::pg_lsn"
            ))
            .is_ok_and(|v| v == "t")
    });
    drop(primary);

    // The timeline switch: the standby becomes a primary on timeline 2, archives
    // 00000002.history and the old timeline's last segment as .partial.
    standby
        .query_one("SELECT pg_promote(true, 120)")
        .expect("promote");
    let new = &standby;
    new.pgbench(&["-n", "-t", "300", "-c", "2", "--random-seed=3"])
        .expect("pgbench");
    // Backup 2 on timeline 2: the one recovery uses at the end.
    let backup2 = top.join("backup2");
    base_backup(new, &backup2);
    new.pgbench(&["-n", "-t", "300", "-c", "2", "--random-seed=4"])
        .expect("pgbench");
    switch_and_wait_archived(new);

    let before = names(repo);
    let backups = backup_files(&before);
    assert_eq!(backups.len(), 3, "{backups:?}");
    assert!(backups[2].starts_with("00000002"), "{backups:?}");
    assert!(before.contains("00000002.history"), "{before:?}");
    assert!(before.iter().any(|n| n.ends_with(".partial")), "{before:?}");
    let start = |b: &str| position(b).expect("backup position");

    // --dry-run says what --keep 2 removes and removes nothing.
    let plan = expire(repo, &["--keep", "2", "--dry-run"]);
    assert_eq!(plan["dry_run"], true);
    assert_eq!(names(repo), before, "a dry run removed files");
    let planned: BTreeSet<String> = plan["removed"]
        .as_array()
        .expect("removed")
        .iter()
        .map(|r| r["name"].as_str().expect("name").to_owned())
        .collect();
    let cutoff = start(&backups[1]);
    let expected: BTreeSet<String> = before
        .iter()
        .filter(|n| position(n).is_some_and(|p| p < cutoff))
        .cloned()
        .collect();
    assert_eq!(planned, expected, "{plan}");
    assert!(planned.contains(&backups[0]), "{plan}");
    assert!(
        planned
            .iter()
            .filter(|n| classify(n) != FileKind::Other)
            .count()
            >= 2,
        "{plan}"
    );

    let done = expire(repo, &["--keep", "2"]);
    assert_eq!(done["removed"], plan["removed"], "{done}");
    assert_eq!(done["kept_backups"].as_array().map(Vec::len), Some(2));
    let after: BTreeSet<String> = before.difference(&expected).cloned().collect();
    assert_eq!(names(repo), after);
    // Nothing more to do at the same retention.
    let again = expire(repo, &["--keep", "2"]);
    assert_eq!(again["removed_files"], 0, "{again}");

    // --before past every backup is refused and removes nothing.
    let out = archive(repo, &["expire", "--before", "0000000200000000000000FF"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no base backup starts"), "{err}");
    assert_eq!(names(repo), after);

    // --keep 1 while the new primary writes and archives: nothing at or after the kept
    // backup's start goes, every segment pushed meanwhile stays.
    let stop = AtomicBool::new(false);
    let switches = AtomicUsize::new(0);
    let mut runs = 0;
    let mut expired_during_push = serde_json::Value::Null;
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                new.psql("INSERT INTO pgbench_history SELECT 1, 1, 1, 1, now(), 'x' FROM generate_series(1, 2000)")
                    .expect("insert");
                new.query_one("SELECT pg_switch_wal()").expect("switch");
                switches.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Expire over and over until the server has switched (and its archiver pushed)
        // several segments meanwhile.
        while runs < 3 || switches.load(Ordering::SeqCst) < 8 {
            expired_during_push = expire(repo, &["--keep", "1"]);
            runs += 1;
        }
        stop.store(true, Ordering::SeqCst);
        writer.join().expect("writer");
    });
    let pushed = switches.load(Ordering::SeqCst);
    assert!(pushed > 0);
    let last = switch_and_wait_archived(new);
    let kept = expired_during_push["kept_backups"]
        .as_array()
        .expect("kept");
    assert_eq!(kept.len(), 1, "{expired_during_push}");
    assert_eq!(kept[0]["name"], backups[2].as_str());
    let cutoff = start(&backups[2]);
    let now = names(repo);
    for n in &now {
        if let Some(p) = position(n) {
            assert!(p >= cutoff, "{n} is before the kept backup and was kept");
        }
    }
    for n in before
        .iter()
        .filter(|n| position(n).is_some_and(|p| p >= cutoff))
    {
        assert!(now.contains(n), "{n} was needed and is gone");
    }
    assert!(now.contains("00000002.history"));
    assert!(!now.contains(&backups[1]));
    // Every timeline 2 segment from the kept backup's start to the last one archived is
    // there, the ones pushed while expire ran included.
    let (_, last_pos) = archive::retention::parse_segment_name(&last).expect("segment");
    for p in cutoff.0..=last_pos.0 {
        let name = format!("00000002{}", Position(p));
        assert!(now.contains(&name), "{name} is missing");
    }
    let checksum = new.query_one(CHECKSUM_SQL).expect("checksum");
    let rows = new
        .query_one("SELECT count(*) FROM pgbench_history")
        .expect("count");

    // PostgreSQL is the judge: the kept backup recovers through what is left, across the
    // end of timeline 2, to the same data.
    let get = repo.command_line("get", "%f %p");
    let restored = Restored::start(new, &backup2, top, &get, "");
    restored.wait_promoted();
    let log = restored.log_text();
    assert_eq!(restored.query(CHECKSUM_SQL), checksum, "{log}");
    assert_eq!(
        restored.query("SELECT count(*) FROM pgbench_history"),
        rows,
        "{log}"
    );
    assert!(log.contains("restored log file \"00000002"), "{log}");
    eprintln!(
        "expire: {} files at first, --keep 2 removed {}, --keep 1 ({runs} runs with {pushed} switches pushed meanwhile) left {}; recovery through timeline 2 matched",
        before.len(),
        expected.len(),
        now.len()
    );
}

/// A backup history file as PostgreSQL writes it, for a backup starting in `segment`.
fn backup_label(segment: &str) -> String {
    let (_, pos) = archive::retention::parse_segment_name(segment).expect("segment");
    let lsn = format!(
        "{:X}/{:X}",
        pos.0 >> 32,
        ((pos.0 & 0xffff_ffff) << 20) | 0x28
    );
    format!(
        "START WAL LOCATION: {lsn} (file {segment})\nSTOP WAL LOCATION: {lsn} (file {segment})\n\
         CHECKPOINT LOCATION: {lsn}\nBACKUP METHOD: streamed\nBACKUP FROM: primary\n\
         START TIME: 2026-11-25 00:00:00 UTC\nLABEL: test\nSTART TIMELINE: 1\n\
         STOP TIME: 2026-11-25 00:00:01 UTC\nSTOP TIMELINE: 1\n"
    )
}

/// The long header of the first page of segment `segno` (`XLogLongPageHeaderData` of
/// PostgreSQL 15: magic 0xD110, XLP_LONG_HEADER, timeline 1), which push checks against the
/// repository's system; the rest of these made-up segments is not WAL.
fn first_page_header(segno: u64, seg_size: u32) -> [u8; 40] {
    let mut h = [0u8; 40];
    h[0..2].copy_from_slice(&0xD110u16.to_le_bytes());
    h[2..4].copy_from_slice(&2u16.to_le_bytes());
    h[4..8].copy_from_slice(&1u32.to_le_bytes());
    h[8..16].copy_from_slice(&(segno * u64::from(seg_size)).to_le_bytes());
    h[24..32].copy_from_slice(&7_000_000_000_000_000_003u64.to_le_bytes());
    h[32..36].copy_from_slice(&seg_size.to_le_bytes());
    h[36..40].copy_from_slice(&8192u32.to_le_bytes());
    h
}

#[test]
fn sigkill_during_expire_leaves_no_backup_without_its_wal_and_a_rerun_finishes() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let top = scratch.path();
    let src = top.join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    let template = top.join("template");
    // 60 segments (1 MB, 1 MB segments) and backups starting at 10, 30 and 50.
    let mut files = Vec::new();
    for i in 1..=60u64 {
        let name = format!("00000001000000000000{i:04X}");
        let mut bytes: Vec<u8> = (0..1u64 << 20)
            .map(|j| (j.wrapping_mul(i + 7) >> 5) as u8)
            .collect();
        bytes[..40].copy_from_slice(&first_page_header(i, 1 << 20));
        std::fs::write(src.join(&name), bytes).expect("write");
        files.push(name);
    }
    let mut backups = Vec::new();
    for start in [10u64, 30, 50] {
        let seg = format!("00000001000000000000{start:04X}");
        let name = format!("{seg}.00000028.backup");
        std::fs::write(src.join(&name), backup_label(&seg)).expect("write");
        backups.push(name.clone());
        files.push(name);
    }
    archive_support::init_from_segment(&template, &src.join(&files[0]));
    for f in &files {
        archive_support::push(&template, &src.join(f));
    }
    let cutoff = position(&backups[2]).expect("position");
    let expected: BTreeSet<String> = files
        .iter()
        .filter(|n| position(n).is_none_or(|p| p >= cutoff))
        .cloned()
        .collect();
    let copy = |to: &Path| {
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(&template)
            .arg(to)
            .status()
            .expect("cp");
        assert!(status.success());
    };
    // How long an undisturbed expire takes sets the range of kill delays.
    let timing = top.join("timing");
    copy(&timing);
    let started = std::time::Instant::now();
    expire(&timing, &["--keep", "1"]);
    let full = started.elapsed().as_micros() as u64 + 1;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut interrupted = 0;
    for trial in 0..20 {
        let repo = top.join(format!("repo-{trial}"));
        copy(&repo);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = archive_support::command(&repo, "expire")
            .args(["--keep", "1", "--min-age", "0"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_micros(seed % full));
        let _ = child.kill();
        let killed = !child.wait().expect("wait").success();
        let now = names(&repo);
        if killed && now != expected {
            interrupted += 1;
        }
        // Nothing the kept backup needs is gone, and every backup still listed has all
        // of its WAL.
        for n in &expected {
            assert!(now.contains(n), "trial {trial}: {n} is gone");
        }
        for b in backup_files(&now) {
            let start = position(&b).expect("position");
            for f in files
                .iter()
                .filter(|f| position(f).is_some_and(|p| p >= start))
            {
                assert!(
                    now.contains(f),
                    "trial {trial}: {b} is listed but {f} is gone"
                );
            }
        }
        let done = expire(&repo, &["--keep", "1"]);
        assert_eq!(names(&repo), expected, "trial {trial}: {done}");
        std::fs::remove_dir_all(&repo).expect("rm");
    }
    eprintln!(
        "20 kills of expire over 0..{} ms, {interrupted} midway: every rerun finished the job",
        full / 1000
    );
}
