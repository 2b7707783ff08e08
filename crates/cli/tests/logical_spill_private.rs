//! Spill files hold row data of transactions not yet committed: they are the consumer's alone.
//! Each case runs `pgcompress logical recv` against a real PostgreSQL while a second account
//! (`pgcompress-other`, created here if missing) tries what another user of the host could:
//! read the spill files, plant the spill directory before the consumer starts, plant a link
//! under a spill file's name, swap a spill file; and two consumers on two clusters whose slots
//! share a name run side by side.

mod logical_support;

use logical_support::{cluster, recv_command, run_psql};
use pgtest::Cluster;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The second account.
const OTHER: &str = "pgcompress-other";

/// Creates the second account once (as root, which the harness runs as).
fn other_account() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let exists = Command::new("id")
            .args(["-u", OTHER])
            .output()
            .expect("id")
            .status
            .success();
        if !exists {
            let o = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    OTHER,
                ])
                .output()
                .expect("useradd");
            assert!(
                o.status.success(),
                "useradd {OTHER}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    });
}

/// Runs `args` as the second account.
fn as_other(args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", OTHER, "--"])
        .args(args)
        .output()
        .expect("runuser")
}

/// A temporary directory with `mode` (0755: anyone may look in; 1777: a shared one like /tmp).
fn dir_with_mode(mode: u32) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).expect("chmod");
    d
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).expect("stat").mode() & 0o7777
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Every spill file under `roots`, however deep.
fn spill_files(roots: &[&Path]) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(&p, out),
                Ok(t) if t.is_file() && name.ends_with(".spill") => out.push(p),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for r in roots {
        walk(r, &mut out);
    }
    out.sort();
    out
}

/// A cluster with table `t`, publication `p` and slot `slot`.
fn setup(slot: &str) -> Cluster {
    let c = cluster(Some("64kB"));
    c.psql(&format!(
        "CREATE TABLE t (id int PRIMARY KEY, v text); CREATE PUBLICATION p FOR TABLE t;
         SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput');"
    ))
    .expect("schema");
    c
}

/// A transaction of `rows` rows of 200 bytes that stays open `secs` seconds before it commits:
/// the server streams it (logical_decoding_work_mem 64kB) and our --work-mem 64kB spills it.
fn hold_large(c: &Cluster, first: u32, rows: u32, secs: u32) -> std::thread::JoinHandle<()> {
    let (psql, conninfo) = (c.install().bin("psql"), c.conninfo());
    let last = first + rows - 1;
    std::thread::spawn(move || {
        run_psql(
            &psql,
            &conninfo,
            &format!(
                "BEGIN;
                 INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series({first}, {last}) g;
                 SELECT pg_sleep({secs});
                 COMMIT;"
            ),
        )
    })
}

/// Waits until `done` holds, failing when `child` exits first or after 40 s.
fn wait_until<T>(child: &mut Child, what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(v) = done() {
            return v;
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("logical recv exited ({status}) while waiting for {what}: {err}");
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |t| t.lines().count())
}

/// SIGTERM, then the exit status must be 0.
fn stop(child: Child) {
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(term.success());
    let o = child.wait_with_output().expect("wait");
    assert!(
        o.status.success(),
        "logical recv: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// True when the second account was refused for lack of permission.
fn denied(o: &Output) -> bool {
    !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("Permission denied")
}

/// While a large transaction is spilled beside `-o FILE`: the directory is 0700 and its files
/// 0600, and the second account can neither list the directory, read a file, plant a link
/// under a spill file's name nor swap a file for its own.
#[test]
fn spill_files_are_closed_to_other_accounts() {
    other_account();
    let c = setup("s");
    // Anyone may look into the output's directory: only the spill directory's own modes
    // protect the spill files.
    let shared = dir_with_mode(0o755);
    let home = dir_with_mode(0o755);
    let out = shared.path().join("out.jsonl");
    let mut child = recv_command(&c, "s")
        .arg("-o")
        .arg(&out)
        .args(["--work-mem", "64kB"])
        .env("HOME", home.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let large = hold_large(&c, 1, 12_000, 6);
    let files = wait_until(&mut child, "a spill file", || {
        let f = spill_files(&[shared.path(), home.path()]);
        (!f.is_empty()).then_some(f)
    });
    let file = &files[0];
    let dir = file.parent().expect("spill directory").to_path_buf();
    let mut wrong = Vec::new();
    if mode(&dir) != 0o700 {
        wrong.push(format!(
            "{} is mode {:04o}, not 0700",
            dir.display(),
            mode(&dir)
        ));
    }
    for f in &files {
        if mode(f) != 0o600 {
            wrong.push(format!("{} is mode {:04o}, not 0600", f.display(), mode(f)));
        }
    }
    let ls = as_other(&["ls", s(&dir)]);
    if !denied(&ls) {
        wrong.push(format!(
            "{OTHER} listed {}: {}",
            dir.display(),
            String::from_utf8_lossy(&ls.stdout).trim()
        ));
    }
    let cat = as_other(&["head", "-c", "64", s(file)]);
    if !denied(&cat) {
        wrong.push(format!(
            "{OTHER} read {} bytes of {}",
            cat.stdout.len(),
            file.display()
        ));
    }
    let link = dir.join("pgcompress-spill-4000000000-1.spill");
    let ln = as_other(&["ln", "-s", "/etc/passwd", s(&link)]);
    if !denied(&ln) {
        wrong.push(format!("{OTHER} planted a link at {}", link.display()));
    }
    let swap = as_other(&[
        "sh",
        "-c",
        "f=$(mktemp) && printf forged > \"$f\" && mv -f \"$f\" \"$1\"",
        "sh",
        s(file),
    ]);
    if !denied(&swap) {
        wrong.push(format!(
            "{OTHER} swapped {}: {}",
            file.display(),
            String::from_utf8_lossy(&swap.stderr).trim()
        ));
    }
    large.join().expect("large transaction");
    wait_until(&mut child, "12,000 rows written", || {
        (lines(&out) >= 12_000).then_some(())
    });
    stop(child);
    assert_eq!(lines(&out), 12_000);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A spill directory planted by the second account before the consumer starts is refused with
/// exit status 2 and a line naming it; so are a link in its place and a directory of ours that
/// group and others may enter; a private directory of ours is used. With `-o -`, a directory
/// planted where the consumer used to put its spill files (`$TMPDIR/pgcompress-spill-<slot>`)
/// is not touched.
#[test]
fn planted_spill_directories_are_refused() {
    other_account();
    let c = setup("s");
    // A shared directory like /tmp: anyone may create entries, only their owner remove them.
    let shared = dir_with_mode(0o1777);
    let home = dir_with_mode(0o755);
    let out = shared.path().join("out.jsonl");
    let spill = shared.path().join("out.jsonl.spill");
    let run = |output: &Path| {
        let end = c.current_wal_lsn().expect("lsn");
        recv_command(&c, "s")
            .arg("-o")
            .arg(output)
            .args([
                "--work-mem",
                "64kB",
                "--stop-at-lsn",
                &end,
                "--idle-exit",
                "20",
            ])
            .env("HOME", home.path())
            .env("TMPDIR", shared.path())
            .stdout(Stdio::null())
            .output()
            .expect("run")
    };
    let refused = |o: &Output, what: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(err.contains(s(&spill)), "{what}: the line names it: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
        err.into_owned()
    };

    let mut failures = Vec::new();
    let mut check = |what: &str, o: Output| {
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.code() != Some(2) || !err.contains(s(&spill)) {
            failures.push(format!(
                "{what}: exit {:?}, stderr: {}",
                o.status.code(),
                err.trim()
            ));
        } else {
            eprintln!("{what}: {}", err.trim());
        }
    };

    // Planted by the other account, open to all.
    let o = as_other(&["mkdir", "-m", "0777", s(&spill)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check("planted 0777 by another account", run(&out));
    assert!(as_other(&["rmdir", s(&spill)]).status.success());
    // Planted by the other account, closed to all but it.
    let o = as_other(&["mkdir", "-m", "0700", s(&spill)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check("planted 0700 by another account", run(&out));
    assert!(as_other(&["rmdir", s(&spill)]).status.success());
    // A link to a directory of ours, planted by the other account.
    let ours = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(ours.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let o = as_other(&["ln", "-s", s(ours.path()), s(&spill)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check("a link planted by another account", run(&out));
    assert!(as_other(&["rm", s(&spill)]).status.success());
    // Ours, but open to group and others.
    std::fs::create_dir(&spill).expect("mkdir");
    std::fs::set_permissions(&spill, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    check("ours at 0755", run(&out));
    if failures.is_empty() {
        // Each refusal is one line.
        std::fs::set_permissions(&spill, std::fs::Permissions::from_mode(0o750)).expect("chmod");
        refused(&run(&out), "ours at 0750");
    }
    // Ours and private: used.
    std::fs::set_permissions(&spill, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let o = run(&out);
    if !o.status.success() {
        failures.push(format!(
            "a private directory of ours was not used: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }

    // `-o -`: the old name in the temporary directory, planted with a file of the other
    // account's in it, is neither used nor swept.
    let old = shared.path().join("pgcompress-spill-s");
    let o = as_other(&["mkdir", "-m", "0777", s(&old)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let planted = old.join("pgcompress-spill-1-1.spill");
    let o = as_other(&["sh", "-c", "printf forged > \"$1\"", "sh", s(&planted)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(Path::new("-"));
    if !o.status.success() {
        failures.push(format!(
            "-o - with a planted {}: {}",
            old.display(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    if !planted.exists() {
        failures.push(format!(
            "-o - used the planted {} (swept {})",
            old.display(),
            planted.display()
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two clusters, a slot named `s` on each, a consumer with `-o -` on each, run by the same
/// account with the same environment: each holds a large transaction spilled at once, in
/// directories of their own, and neither start deletes the other's files.
#[test]
fn two_clusters_with_the_same_slot_name_keep_their_spill_apart() {
    let a = setup("s");
    let b = setup("s");
    let shared = dir_with_mode(0o1777);
    let home = dir_with_mode(0o700);
    let roots = [shared.path(), home.path()];
    let outs = tempfile::tempdir().expect("tempdir");
    let spawn = |c: &Cluster, name: &str| {
        let out = outs.path().join(name);
        let child = recv_command(c, "s")
            .args(["-o", "-", "--work-mem", "64kB"])
            .env("HOME", home.path())
            .env("TMPDIR", shared.path())
            .stdout(std::fs::File::create(&out).expect("output"))
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        (child, out)
    };
    let (mut ca, out_a) = spawn(&a, "a.jsonl");
    let large_a = hold_large(&a, 1, 12_000, 8);
    let files_a = wait_until(&mut ca, "A's spill file", || {
        let f = spill_files(&roots);
        (!f.is_empty()).then_some(f)
    });
    let dir_a = files_a[0].parent().expect("dir").to_path_buf();
    // B starts while A's transaction is spilled, then spills one of its own.
    let (mut cb, out_b) = spawn(&b, "b.jsonl");
    let large_b = hold_large(&b, 1, 12_000, 3);
    let files_b = wait_until(&mut cb, "B's spill file", || {
        let f: Vec<_> = spill_files(&roots)
            .into_iter()
            .filter(|f| !files_a.contains(f))
            .collect();
        (!f.is_empty() || files_a.iter().any(|f| !f.exists())).then_some(f)
    });
    let mut wrong = Vec::new();
    // Per user and per stream: the cache directory, system identifier and slot.
    let system_a = a
        .query_one("SELECT system_identifier FROM pg_control_system()")
        .expect("system identifier");
    let want_a = home
        .path()
        .join(".cache/pgcompress/spill")
        .join(format!("{system_a}-s"));
    let file_mode = std::fs::symlink_metadata(&files_a[0]).map_or(0, |m| m.mode() & 0o7777);
    if dir_a != want_a || mode(&dir_a) != 0o700 || file_mode != 0o600 {
        wrong.push(format!(
            "A spills in {} (mode {:04o}, file {file_mode:04o}), not {} (0700, 0600)",
            dir_a.display(),
            mode(&dir_a),
            want_a.display()
        ));
    }
    if let Some(gone) = files_a.iter().find(|f| !f.exists()) {
        wrong.push(format!(
            "A's spill file {} was deleted while its transaction was open",
            gone.display()
        ));
    }
    if files_b.iter().any(|f| f.parent() == Some(&dir_a)) {
        wrong.push(format!("both consumers spill in {}", dir_a.display()));
    }
    large_b.join().expect("B's transaction");
    large_a.join().expect("A's transaction");
    for (child, out, name) in [(&mut ca, &out_a, "A"), (&mut cb, &out_b, "B")] {
        let deadline = Instant::now() + Duration::from_secs(40);
        while lines(out) < 12_000 && Instant::now() < deadline {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                wrong.push(format!("{name} exited ({status}): {}", err.trim()));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for mut child in [ca, cb] {
        if child.try_wait().expect("try_wait").is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let _ = child.wait_with_output();
    }
    for (out, name) in [(&out_a, "A"), (&out_b, "B")] {
        if lines(out) != 12_000 {
            wrong.push(format!("{name} wrote {} of 12000 rows", lines(out)));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
