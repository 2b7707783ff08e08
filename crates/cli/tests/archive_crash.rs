//! Crash safety of `pgcompress archive push`: SIGKILL at random moments never leaves a partial
//! or corrupt file under the final name, and the next push succeeds.

mod archive_support;

use archive_support::{bin, get};
use pgtest::Cluster;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TRIALS: usize = 100;

#[test]
fn sigkill_during_push_never_publishes_a_partial_file() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let scratch = scratch.path();
    // A real 4 MB segment full of pgbench WAL: long enough for kills to land in every phase
    // (reading, decoding, compressing, self-check, writing, fsync, link), short enough for
    // 100 trials.
    let cluster = Cluster::builder()
        .wal_segsize_mb(4)
        .start()
        .expect("start cluster");
    cluster.pgbench_init(1).expect("pgbench -i");
    cluster.switch_wal().expect("switch");
    let wal = cluster.copy_wal_to(&scratch.join("wal")).expect("copy");
    drop(cluster);
    let segment = wal.first().expect("a segment").clone();
    let original = std::fs::read(&segment).expect("read");
    let name = segment
        .file_name()
        .and_then(|n| n.to_str())
        .expect("name")
        .to_owned();

    let push = |repo: &std::path::Path| {
        Command::new(bin())
            .args(["archive", "push", "--repo"])
            .arg(repo)
            .arg(&segment)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn push")
    };
    // How long an undisturbed push takes (warm, second run) sets the range of kill delays.
    let mut full = 0;
    for i in 0..2 {
        let repo = scratch.join(format!("repo-timing{i}"));
        archive_support::init_from_segment(&repo, &segment);
        let start = Instant::now();
        let out = push(&repo).wait_with_output().expect("wait");
        assert!(out.status.success());
        full = start.elapsed().as_micros() as u64;
    }

    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let (mut absent, mut complete) = (0, 0);
    for trial in 0..TRIALS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % (full + 1));
        let repo = scratch.join(format!("repo-{trial}"));
        archive_support::init_from_segment(&repo, &segment);
        let mut child = push(&repo);
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();

        let final_path = repo.join(format!("{name}.pgcz"));
        let dest = scratch.join("restored");
        if final_path.exists() {
            complete += 1;
            let out = get(&repo, &name, &dest);
            assert!(
                out.status.success(),
                "trial {trial} (kill after {delay:?}): a file is visible but not get-able: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                std::fs::read(&dest).expect("read") == original,
                "trial {trial}: bytes differ"
            );
            std::fs::remove_file(&dest).expect("rm");
        } else {
            absent += 1;
        }
        // Only complete containers and the temporary directory may exist.
        if let Ok(rd) = std::fs::read_dir(&repo) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                assert!(
                    n == ".tmp" || n == format!("{name}.pgcz") || n == "pgcompress-repository",
                    "trial {trial}: stray {n}"
                );
            }
        }
        let out = push(&repo).wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "trial {trial}: the next push failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            final_path.exists(),
            "trial {trial}: not archived after the next push"
        );
        if trial % 10 == 0 {
            let out = get(&repo, &name, &dest);
            assert!(
                out.status.success(),
                "trial {trial}: get after re-push failed"
            );
            assert!(std::fs::read(&dest).expect("read") == original);
            std::fs::remove_file(&dest).expect("rm");
        }
        std::fs::remove_dir_all(&repo).expect("clean");
    }
    eprintln!(
        "{TRIALS} kills over 0..{}ms: {absent} left nothing, {complete} a complete file",
        full / 1000
    );
}
