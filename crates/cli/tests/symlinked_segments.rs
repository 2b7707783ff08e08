//! Regression: a directory holding symbolic links to segments was "no WAL segment
//! files found". Every command that takes segments reads through links to regular
//! files, as pg_waldump does; WAL written by a real server, read through the binary.

mod common;

use common::{pgcompress, phase};
use pgtest::Cluster;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn sha256(path: &Path) -> [u8; 32] {
    Sha256::digest(std::fs::read(path).expect("read")).into()
}

fn run_ok(args: &[&str]) -> String {
    let out = pgcompress(args);
    assert!(
        out.status.success(),
        "pgcompress {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn commands_read_a_directory_of_symlinked_segments() {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .archive_dir(true)
        .start()
        .expect("start cluster");
    let files = phase(&cluster, "pgbench", || {
        cluster.checkpoint().expect("checkpoint");
        cluster.pgbench_init(1).expect("pgbench -i");
    });
    assert!(files.len() > 1, "{files:?}");
    // The segments alone in one directory, and links to them in another.
    let tmp = tempfile::tempdir().expect("tmp");
    let real = common::isolate(tmp.path(), "real", &files);
    let links_dir = tmp.path().join("links");
    std::fs::create_dir(&links_dir).expect("mkdir");
    let links: Vec<PathBuf> = real
        .iter()
        .map(|f| {
            let link = links_dir.join(f.file_name().expect("name"));
            std::os::unix::fs::symlink(f, &link).expect("symlink");
            link
        })
        .collect();
    let real_dir = real[0].parent().expect("dir");

    let stats = |dir: &Path| -> serde_json::Value {
        let out = run_ok(&["wal", "stats", "--json", path_str(dir)]);
        serde_json::from_str(&out).expect("json")
    };
    let (by_link, by_file) = (stats(&links_dir), stats(real_dir));
    assert!(
        by_file["records"].as_u64().is_some_and(|n| n > 0),
        "{by_file}"
    );
    assert_eq!(by_link, by_file);
    let text = |dir: &Path| run_ok(&["wal", "stats", path_str(dir)]);
    assert_eq!(text(&links_dir), text(real_dir));
    let verify = |dir: &Path| run_ok(&["wal", "verify", path_str(dir)]);
    assert_eq!(
        verify(&links_dir).replace(path_str(&links_dir), ""),
        verify(real_dir).replace(path_str(real_dir), "")
    );

    // archive_command's %p may be a link too: push each, get it back, same bytes.
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir repo");
    let restored = tmp.path().join("restored");
    std::fs::create_dir(&restored).expect("mkdir restored");
    run_ok(&[
        "archive",
        "init",
        "--repo",
        path_str(&repo),
        "--from-segment",
        path_str(&real[0]),
    ]);
    for (link, target) in links.iter().zip(&real) {
        run_ok(&["archive", "push", "--repo", path_str(&repo), path_str(link)]);
        let name = link.file_name().and_then(|n| n.to_str()).expect("name");
        let dest = restored.join(name);
        run_ok(&[
            "archive",
            "get",
            "--repo",
            path_str(&repo),
            name,
            path_str(&dest),
        ]);
        assert_eq!(sha256(&dest), sha256(target), "{name}");
    }
}
