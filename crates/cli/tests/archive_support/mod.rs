//! Helpers shared by the `archive_*` integration tests: the pgcompress binary as
//! archive_command/restore_command would run it, and WAL written by a real server.
#![allow(dead_code)]

pub mod restore;
pub mod s3;

use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pgcompress"))
}

/// A repository as the tests reach it: how the command line selects it, and direct access
/// to its stored containers (to compare and to damage them).
pub trait Repo {
    /// Adds the options (and environment) that select this repository to `cmd`.
    fn apply(&self, cmd: &mut Command);
    /// The stored container of `name`, if any.
    fn stored(&self, name: &str) -> Option<Vec<u8>>;
    /// Replaces the stored container of `name` behind pgcompress's back.
    fn replace(&self, name: &str, bytes: &[u8]);
    /// A repository of the same kind that does not exist (a missing directory or bucket).
    fn missing(&self) -> Box<dyn Repo + '_>;
    /// A shell command line running `pgcompress archive SUB` on this repository with `tail`
    /// appended, as archive_command or restore_command.
    fn command_line(&self, sub: &str, tail: &str) -> String;
}

impl Repo for Path {
    fn apply(&self, cmd: &mut Command) {
        cmd.arg("--repo").arg(self);
        cmd.env_remove("PGCOMPRESS_REPO")
            .env_remove("PGCOMPRESS_CONFIG");
    }
    fn stored(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.join(format!("{name}.pgcz"))).ok()
    }
    fn replace(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.join(format!("{name}.pgcz")), bytes).expect("write container");
    }
    fn missing(&self) -> Box<dyn Repo + '_> {
        let parent = self.parent().unwrap_or(Path::new("/"));
        Box::new(parent.join("no-such-repo"))
    }
    fn command_line(&self, sub: &str, tail: &str) -> String {
        format!(
            "{} archive {sub} --repo {} {tail}",
            bin().display(),
            self.display()
        )
    }
}

impl Repo for PathBuf {
    fn apply(&self, cmd: &mut Command) {
        self.as_path().apply(cmd)
    }
    fn stored(&self, name: &str) -> Option<Vec<u8>> {
        self.as_path().stored(name)
    }
    fn replace(&self, name: &str, bytes: &[u8]) {
        self.as_path().replace(name, bytes)
    }
    fn missing(&self) -> Box<dyn Repo + '_> {
        self.as_path().missing()
    }
    fn command_line(&self, sub: &str, tail: &str) -> String {
        self.as_path().command_line(sub, tail)
    }
}

/// `pgcompress archive SUB` on `repo`, before its other arguments.
pub fn command<R: Repo + ?Sized>(repo: &R, sub: &str) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("archive").arg(sub);
    repo.apply(&mut cmd);
    cmd
}

/// Runs `pgcompress archive ARGS...` on `repo` and returns its output.
pub fn archive<R: Repo + ?Sized>(repo: &R, args: &[&str]) -> Output {
    let mut cmd = command(repo, args[0]);
    cmd.args(&args[1..]);
    cmd.output().expect("run pgcompress")
}

/// `archive push` of `path`; panics unless it exits 0.
pub fn push<R: Repo + ?Sized>(repo: &R, path: &Path) {
    let out = archive(repo, &["push", path.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "push {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `archive get NAME DEST`.
pub fn get<R: Repo + ?Sized>(repo: &R, name: &str, dest: &Path) -> Output {
    archive(repo, &["get", name, dest.to_str().expect("utf-8 path")])
}

/// Pushes `path`, gets it back and checks the bytes are identical.
pub fn round_trip<R: Repo + ?Sized>(repo: &R, path: &Path, scratch: &Path) {
    push(repo, path);
    let name = path.file_name().and_then(|n| n.to_str()).expect("name");
    let dest = scratch.join(format!("restored-{name}"));
    let out = get(repo, name, &dest);
    assert!(
        out.status.success(),
        "get {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = std::fs::read(path).expect("read original");
    let b = std::fs::read(&dest).expect("read restored");
    assert!(a == b, "{name}: restored bytes differ from the original");
    std::fs::remove_file(&dest).expect("rm");
}

/// `archive list --json` of the repository, as JSON.
pub fn list_json<R: Repo + ?Sized>(repo: &R) -> serde_json::Value {
    let out = archive(repo, &["info", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// A cluster with `seg_mb` segments and some pgbench WAL, with both wal_compression off and on,
/// plus switched segments. Returns the cluster (running) once every switched segment is in its
/// archive directory.
pub fn cluster_with_wal(seg_mb: u32, extra: &[(&str, &str)]) -> Cluster {
    let mut b = Cluster::builder()
        .wal_segsize_mb(seg_mb)
        .archive_dir(true)
        .guc("max_wal_size", "1GB");
    for (k, v) in extra {
        b = b.guc(*k, *v);
    }
    let cluster = b.start().expect("start cluster");
    cluster.pgbench_init(1).expect("pgbench -i");
    for setting in ["off", "lz4"] {
        cluster
            .set_guc_and_reload("wal_compression", setting)
            .expect("wal_compression");
        cluster.checkpoint().expect("checkpoint");
        cluster
            .pgbench(&["-n", "-t", "300", "-c", "2", "--random-seed=7"])
            .expect("pgbench");
        cluster.switch_wal().expect("switch");
    }
    // Text-heavy WAL (English-like prose rows), plain and with PostgreSQL's own compression.
    for (round, setting) in ["off", "pglz"].into_iter().enumerate() {
        cluster
            .set_guc_and_reload("wal_compression", setting)
            .expect("wal_compression");
        pgtest::workload::prose_round(&cluster, round as u32, 1500).expect("prose");
        cluster.switch_wal().expect("switch");
    }
    // A low-activity segment: a few records, then a switch (mostly zero tail).
    cluster
        .psql("CREATE TABLE small AS SELECT 1 AS x")
        .expect("ctas");
    cluster.switch_wal().expect("switch");
    cluster
}

/// A directory the server user (postgres, when the tests run as root) can write into.
pub fn server_writable_dir(parent: &Path, name: &str) -> PathBuf {
    let d = parent.join(name);
    std::fs::create_dir_all(&d).expect("mkdir");
    pgtest::run::chown_to_server_user(&d).expect("chown");
    d
}

/// Same name + same content succeeds; different content fails and changes nothing; concurrent
/// pushes of one file all succeed; of one name with different contents exactly one wins;
/// get of a missing file exits 1 quietly, from a missing repository 200.
pub fn conflict_semantics<R: Repo + ?Sized>(repo: &R, scratch: &Path, segment: &Path) {
    let name = segment.file_name().and_then(|n| n.to_str()).expect("name");
    // Concurrent pushes of the same file into an empty repository.
    let children: Vec<_> = (0..4)
        .map(|_| {
            command(repo, "push")
                .arg(segment)
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stored = repo.stored(name).expect("archived");

    // Again: already archived, identical → exit 0 with a warning.
    let out = archive(repo, &["push", segment.to_str().expect("path")]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already archived"));

    // The same name with different content.
    let other_dir = scratch.join("conflict-src");
    std::fs::create_dir_all(&other_dir).expect("mkdir");
    let mut changed = std::fs::read(segment).expect("read");
    let n = changed.len();
    changed[n - 1] ^= 0xff;
    let changed_path = other_dir.join(name);
    std::fs::write(&changed_path, &changed).expect("write");
    let out = archive(repo, &["push", changed_path.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("different content") && err.lines().count() == 1,
        "{err}"
    );
    assert!(
        repo.stored(name).expect("archived") == stored,
        "the archived copy must not change"
    );

    // Concurrent pushes of one name with four different contents: one is archived, the
    // others fail and overwrite nothing.
    let race_name = "00000003.history";
    let sources: Vec<PathBuf> = (0..4)
        .map(|i| {
            let d = scratch.join(format!("race-src{i}"));
            std::fs::create_dir_all(&d).expect("mkdir");
            let p = d.join(race_name);
            std::fs::write(
                &p,
                format!("{i}\t0/{i}000000\tcontender {i}\n").repeat(1000),
            )
            .expect("write");
            p
        })
        .collect();
    let children: Vec<_> = sources
        .iter()
        .map(|src| {
            command(repo, "push")
                .arg(src)
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut winners = Vec::new();
    for (src, c) in sources.iter().zip(children) {
        let out = c.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => winners.push(src.clone()),
            Some(1) => assert!(err.contains("different content"), "{err}"),
            other => panic!("push exited {other:?}: {err}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one contender wins: {winners:?}");
    let dest = scratch.join("RACE");
    let out = get(repo, race_name, &dest);
    assert!(out.status.success());
    assert!(
        std::fs::read(&dest).expect("read") == std::fs::read(&winners[0]).expect("read"),
        "the archived copy is the winner's"
    );
    std::fs::remove_file(&dest).expect("rm");

    // get from a repository that does not exist: a loud failure above 125, so
    // PostgreSQL aborts recovery instead of taking it for the end of the archive.
    let dest = scratch.join("RECOVERYHISTORY");
    let out = get(&*repo.missing(), "00000005.history", &dest);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(200), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!dest.exists());

    // get of a missing file: exit 1, nothing on stderr, no destination.
    let out = get(repo, "00000005.history", &dest);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dest.exists());
}

/// Flipping a byte anywhere in an archived file makes get and verify fail with one line and
/// leaves no destination file.
pub fn corruption_is_detected<R: Repo + ?Sized>(repo: &R, scratch: &Path, segment: &Path) {
    push(repo, segment);
    let name = segment.file_name().and_then(|n| n.to_str()).expect("name");
    let good = repo.stored(name).expect("archived");
    let len = good.len();
    // Every other byte of the first 200 (the whole header and the start of the payload),
    // then 40 offsets spread over the payload, and the last byte.
    let mut offsets: Vec<usize> = (0..200.min(len)).step_by(2).collect();
    offsets.extend((1..=40).map(|i| i * (len - 1) / 41));
    offsets.push(len - 1);
    let dest = scratch.join("RECOVERYXLOG");
    for at in offsets {
        let mut bad = good.clone();
        bad[at] ^= 0x04;
        repo.replace(name, &bad);
        let out = get(repo, name, &dest);
        let err = String::from_utf8_lossy(&out.stderr);
        // Above 125: PostgreSQL aborts recovery rather than take it for a missing file.
        assert_eq!(out.status.code(), Some(200), "flip at {at}: {err}");
        assert_eq!(
            err.lines().count(),
            1,
            "flip at {at}: one line expected: {err}"
        );
        assert!(err.contains(name), "flip at {at}: {err}");
        assert!(!dest.exists(), "flip at {at}: destination left behind");
        let out = archive(repo, &["verify"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "verify, flip at {at}: {err}");
        assert!(
            err.lines().next().is_some_and(|l| l.contains(name)),
            "{err}"
        );
    }
    repo.replace(name, &good);
    let out = archive(repo, &["verify"]);
    assert!(out.status.success());
    let leftovers: Vec<_> = std::fs::read_dir(scratch)
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".pgcompress."))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// `archive init` of `repo` for the cluster in data directory `pgdata`; panics unless it
/// exits 0. Every repository is initialized before its first push, as an operator would.
pub fn init<R: Repo + ?Sized>(repo: &R, pgdata: &Path) {
    init_with(repo, &["--pgdata", pgdata.to_str().expect("utf-8 path")]);
}

/// `archive init` of `repo` from the WAL segment `segment`; panics unless it exits 0.
pub fn init_from_segment<R: Repo + ?Sized>(repo: &R, segment: &Path) {
    init_with(
        repo,
        &["--from-segment", segment.to_str().expect("utf-8 path")],
    );
}

fn init_with<R: Repo + ?Sized>(repo: &R, args: &[&str]) {
    let mut all = vec!["init"];
    all.extend_from_slice(args);
    let out = archive(repo, &all);
    assert!(
        out.status.success(),
        "archive init {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scratch directory the server user may write into (its archive_command and its data
/// directories live there).
pub fn server_scratch(prefix: &str) -> tempfile::TempDir {
    let scratch = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("tempdir");
    pgtest::run::chown_to_server_user(scratch.path()).expect("chown");
    scratch
}

/// The names the repository holds.
pub fn names<R: Repo + ?Sized>(repo: &R) -> std::collections::BTreeSet<String> {
    list_json(repo)["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["name"].as_str().expect("name").to_owned())
        .collect()
}

/// `archive expire --json ARGS`; panics unless it exits 0.
pub fn expire_json<R: Repo + ?Sized>(repo: &R, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["expire", "--json"];
    all.extend_from_slice(args);
    let out = archive(repo, &all);
    assert!(
        out.status.success(),
        "expire {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// The segment position of a WAL, `.partial` or backup history file name.
pub fn position(name: &str) -> Option<archive::retention::Position> {
    use archive::retention::{classify, FileKind};
    match classify(name) {
        FileKind::Segment { pos, .. }
        | FileKind::Partial { pos, .. }
        | FileKind::BackupHistory { pos, .. } => Some(pos),
        _ => None,
    }
}
