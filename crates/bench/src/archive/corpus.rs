//! The corpora: full segments that one workload alone wrote, with `wal_compression = off`.

use super::tools::mkdir_for_server;
use crate::error::{Error, IoContext, Result};
use crate::runs::{lsn, segment_names, Server};
use pgtest::Cluster;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wal::SegmentName;

/// pgbench scale of the pgbench corpus (1,000,000 accounts, 160 MB of table).
const PGBENCH_SCALE: u32 = 10;
/// Rows of prose each round of the text corpus inserts.
const PROSE_ROWS: u32 = 10_000;
/// How long the archiver may take to copy a corpus's segments.
const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(300);

/// One corpus: a name, what wrote it, and its segments.
pub(crate) struct Corpus {
    pub(crate) name: &'static str,
    pub(crate) workload: String,
    pub(crate) segments: Vec<PathBuf>,
}

/// Runs `chunk(round)` until the WAL written since a fresh segment fills `n` segments, then copies exactly
/// those `n` segments from the archive into `root/<name>/`.
fn isolate(
    cluster: &Cluster,
    server: &Server,
    n: u32,
    root: &Path,
    name: &str,
    mut chunk: impl FnMut(u32) -> Result<()>,
) -> Result<Vec<PathBuf>> {
    cluster.switch_wal()?;
    let start = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;
    let first = SegmentName::containing(server.tli, start, server.seg_size);
    let end = (first.segno + u64::from(n)) * server.seg_size;
    let began = Instant::now();
    let mut round = 0;
    loop {
        let now = lsn(&cluster.query_one("SELECT pg_current_wal_insert_lsn()")?)?;
        if now.0 >= end {
            break;
        }
        eprintln!(
            "bench archive: {name} corpus: {:.0} of {} MB written ({:.0} s)",
            now.0.saturating_sub(start.0) as f64 / f64::from(1 << 20),
            u64::from(n) * (server.seg_size >> 20),
            began.elapsed().as_secs_f64()
        );
        chunk(round)?;
        round += 1;
    }
    let names = segment_names(server, first.segno..first.segno + u64::from(n));
    let last = names
        .last()
        .ok_or(Error::Internal("a corpus of no segment"))?;
    cluster.wait_for_archived(last, ARCHIVE_TIMEOUT)?;
    let dir = root.join(name);
    mkdir_for_server(&dir)?;
    let mut out = Vec::new();
    for n in &names {
        let to = dir.join(n);
        std::fs::copy(server.archive.join(n), &to)
            .io(|| format!("copying segment {n} of the {name} corpus"))?;
        pgtest::run::chown_to_server_user(&to)?;
        out.push(to);
    }
    Ok(out)
}

/// The pgbench corpus: tpcb-like transactions after a checkpoint.
pub(crate) fn pgbench_corpus(
    cluster: &Cluster,
    server: &Server,
    n: u32,
    root: &Path,
) -> Result<Corpus> {
    eprintln!("bench archive: pgbench corpus: pgbench -i -s {PGBENCH_SCALE}, then a checkpoint");
    cluster.pgbench_init(PGBENCH_SCALE)?;
    cluster.checkpoint()?;
    let segments = isolate(cluster, server, n, root, "pgbench", |round| {
        let seed = format!(
            "--random-seed={}",
            pgtest::workload::PGBENCH_SEED + u64::from(round)
        );
        cluster.pgbench(&["-n", "-c", "2", "-j", "2", "-t", "2000", &seed])?;
        Ok(())
    })?;
    Ok(Corpus {
        name: "pgbench",
        workload: format!(
            "pgbench tpcb-like, scale {PGBENCH_SCALE}, 2 clients, from a checkpoint (full-page images, then small records)"
        ),
        segments,
    })
}

/// The text corpus: prose rows inserted, then edited after a checkpoint.
pub(crate) fn text_corpus(
    cluster: &Cluster,
    server: &Server,
    n: u32,
    root: &Path,
) -> Result<Corpus> {
    let segments = isolate(cluster, server, n, root, "text", |round| {
        pgtest::workload::prose_round(cluster, round, PROSE_ROWS)?;
        Ok(())
    })?;
    Ok(Corpus {
        name: "text",
        workload: format!(
            "English-like prose rows ({PROSE_ROWS} inserted per round, one in eight older rows edited after a checkpoint)"
        ),
        segments,
    })
}
