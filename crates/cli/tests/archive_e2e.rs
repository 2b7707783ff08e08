//! End to end with PostgreSQL as the oracle: a PostgreSQL cluster archives through
//! `pgcompress archive push`; a second cluster restored from a pg_basebackup with
//! `pgcompress archive get` as restore_command reaches the same data at a recovery target.
//! Once with a local directory repository, once with an S3 bucket on a moto server.

mod archive_support;

use archive_support::restore::{switch_and_wait_archived, wait, Restored};
use archive_support::s3::{Moto, S3Repo};
use archive_support::{get, list_json, server_writable_dir, Repo};
use pgtest::run::run;
use pgtest::Cluster;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Checksum of the pgbench tables.
const CHECKSUM_SQL: &str = "SELECT md5(string_agg(aid::text || ':' || abalance, ',' ORDER BY aid)) \
    || md5((SELECT string_agg(bid::text || ':' || bbalance, ',' ORDER BY bid) FROM pgbench_branches)) \
    FROM pgbench_accounts";

#[test]
fn recovery_from_a_directory_archive_reaches_the_same_data() {
    let scratch = scratch();
    let top = scratch.path();
    let repo = server_writable_dir(top, "repo");
    recovery_reaches_the_same_data(&repo, top);
}

#[test]
fn recovery_from_an_s3_archive_reaches_the_same_data() {
    let Some(moto) = Moto::start_or_skip("recovery_from_an_s3_archive_reaches_the_same_data")
    else {
        return;
    };
    moto.create_bucket("pgc-e2e");
    let scratch = scratch();
    let top = scratch.path();
    // archive_command and restore_command name the repository through a config file.
    let mut repo = S3Repo::new(&moto, "pgc-e2e", "cluster/wal");
    repo.write_config(&top.join("pgcompress.toml"));
    recovery_reaches_the_same_data(&repo, top);
}

fn scratch() -> tempfile::TempDir {
    let scratch = tempfile::Builder::new()
        .prefix("pgc-e2e-")
        .tempdir()
        .expect("tempdir");
    pgtest::run::chown_to_server_user(scratch.path()).expect("chown");
    scratch
}

/// A cluster archives into `repo` through push; a base backup recovers through get to a
/// named restore point and has the data the source had there.
fn recovery_reaches_the_same_data<R: Repo>(repo: &R, top: &Path) {
    // archive_command also keeps a plain copy of what it archived, so every file the
    // repository gives back can be compared byte for byte with what PostgreSQL handed over.
    let copies = server_writable_dir(top, "copies");
    let push = format!(
        "{} && cp %p {}/%f",
        repo.command_line("push", "%p"),
        copies.display()
    );
    // As an operator sets it up: the repository is initialized for the cluster before
    // archive_command points at it (the server keeps its WAL meanwhile).
    let cluster = Cluster::builder()
        .guc("archive_mode", "on")
        .guc("wal_compression", "off")
        .start()
        .expect("start cluster");
    archive_support::init(repo, &cluster.data_dir());
    cluster
        .set_guc_and_reload("archive_command", &push)
        .expect("archive_command");
    cluster.pgbench_init(1).expect("pgbench -i");

    // Base backup without WAL: recovery must fetch every segment through `get`.
    let backup = top.join("restored");
    let mut bb = cluster.command("pg_basebackup");
    bb.arg("-D").arg(&backup).args(["-X", "none", "-c", "fast"]);
    run(&mut bb).expect("pg_basebackup");

    cluster
        .pgbench(&["-n", "-t", "500", "-c", "2", "--random-seed=3"])
        .expect("pgbench");
    let checksum = cluster.query_one(CHECKSUM_SQL).expect("checksum");
    cluster
        .query_one("SELECT pg_create_restore_point('pgcompress_target')")
        .expect("restore point");
    // Work after the target, which recovery must not replay.
    cluster
        .pgbench(&["-n", "-t", "200", "-c", "1", "--random-seed=4"])
        .expect("pgbench after target");
    switch_and_wait_archived(&cluster);
    let final_checksum = cluster.query_one(CHECKSUM_SQL).expect("checksum");
    assert_ne!(final_checksum, checksum);
    let archived = list_json(repo)["files"].as_array().map_or(0, Vec::len);
    assert!(archived >= 3, "only {archived} files archived");

    // Copies of the base backup for the standby and the mistakes below, before the recovery
    // settings go in.
    let copy_backup = |name: &str| {
        let to = top.join(name);
        let mut cp = Command::new("cp");
        cp.arg("-a").arg(&backup).arg(&to);
        run(&mut cp).expect("copy the base backup");
        to
    };
    let standby_data = copy_backup("standby");
    let typo_data = copy_backup("typo");
    let unmounted_data = copy_backup("unmounted");

    // The second cluster: the base backup, restore_command = get, a named target.
    let get = repo.command_line("get", "%f %p");
    let restored = Restored::start(
        &cluster,
        &backup,
        top,
        &get,
        "recovery_target_name = 'pgcompress_target'\nrecovery_target_action = 'promote'",
    );
    restored.wait_promoted();
    let log_text = restored.log_text();
    assert!(
        log_text.contains("recovery stopping at restore point \"pgcompress_target\""),
        "{log_text}"
    );
    assert!(log_text.contains("restored log file"), "{log_text}");
    assert_eq!(restored.query(CHECKSUM_SQL), checksum, "{log_text}");
    // The servers below take its port and log in turn.
    drop(restored);

    // A standby fed from the archive alone (standby.signal, restore_command, no primary_conninfo)
    // replays every archived segment, past the restore point, to the primary's last switch.
    let standby = Restored::standby(&cluster, &standby_data, top, &get);
    wait(
        "the standby to replay the archive",
        Duration::from_secs(120),
        || standby.query(CHECKSUM_SQL) == final_checksum,
    );
    assert_eq!(standby.query("SELECT pg_is_in_recovery()"), "t");
    drop(standby);
    every_archived_file_comes_back_identical(repo, &copies, top);
    mistakes_in_restore_command_stop_recovery(&cluster, repo, top, &typo_data, &unmounted_data);
}

/// A misspelt flag in restore_command, or a repository that is not there (a volume not
/// mounted), stops recovery with the error in the server log: the server does not come up,
/// promote or start a new timeline without the archived WAL.
fn mistakes_in_restore_command_stop_recovery<R: Repo>(
    cluster: &Cluster,
    repo: &R,
    top: &Path,
    typo_data: &Path,
    unmounted_data: &Path,
) {
    let typo = repo.command_line("get", "--fsnyc %f %p");
    let missing = repo.missing().command_line("get", "%f %p");
    for (data, command, said) in [
        (typo_data, typo.as_str(), "unexpected argument '--fsnyc'"),
        // The location is named: `no-such-repo` or `no-such-bucket`.
        (unmounted_data, missing.as_str(), "no-such-"),
    ] {
        let log = Restored::refused(cluster, data, top, command);
        assert!(log.contains(said), "{command}: {log}");
        assert!(
            log.contains("could not restore file") && log.contains("exit code 200"),
            "{command}: {log}"
        );
        assert!(
            !log.contains("selected new timeline ID"),
            "{command}: {log}"
        );
        let wal: Vec<String> = std::fs::read_dir(data.join("pg_wal"))
            .expect("pg_wal")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !wal.iter().any(|n| n.ends_with(".history")),
            "{command}: a new timeline was started: {wal:?}"
        );
        assert!(
            data.join("recovery.signal").exists(),
            "{command}: recovery ended"
        );
    }
}

/// `archive get` of every file archive_command saw returns the very bytes PostgreSQL handed
/// to it (segments, history and backup files), compared by SHA-256.
fn every_archived_file_comes_back_identical<R: Repo>(repo: &R, copies: &Path, top: &Path) {
    let fetched = top.join("fetched");
    std::fs::create_dir_all(&fetched).expect("mkdir");
    let mut names: Vec<String> = std::fs::read_dir(copies)
        .expect("read copies")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let segments = names.iter().filter(|n| n.len() == 24).count();
    assert!(
        segments >= 3,
        "only {segments} segments archived: {names:?}"
    );
    for name in &names {
        let dest = fetched.join(name);
        let out = get(repo, name, &dest);
        assert!(
            out.status.success(),
            "get {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = sha256(&std::fs::read(copies.join(name)).expect("read copy"));
        let got = sha256(&std::fs::read(&dest).expect("read fetched"));
        assert_eq!(
            got, want,
            "{name}: archive get differs from what was archived"
        );
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}
