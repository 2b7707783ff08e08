//! The server's side of `bench spill`: decoding a slot with `streaming` off and reading what PostgreSQL
//! spilled (`pg_stat_replication_slots`, and the bytes under `pg_replslot/<slot>/` sampled while it ran),
//! and capturing the streamed pgoutput of a second slot into a file for our assembler.

use crate::error::{Context, Error, IoContext, Result};
use crate::sys::checked_output;
use pgcluster::Cluster;
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// pgoutput protocol version asked for: 2 is the oldest with streaming and what PostgreSQL 14+ speaks.
pub const PROTO_VERSION: u32 = 2;

/// How often the spill directory is measured while the server decodes.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

/// What PostgreSQL did with one workload, decoding it with `streaming` off.
#[derive(Clone, Debug, Serialize)]
pub struct ServerSpill {
    /// `pg_stat_replication_slots.spill_bytes`: bytes the reorder buffer wrote to spill files.
    pub spill_bytes: u64,
    /// `spill_count`: times it spilled.
    pub spill_count: u64,
    /// `spill_txns`: transactions spilled.
    pub spill_txns: u64,
    /// The most bytes seen at once in the slot's `pg_replslot/` directory (sampled every 20 ms).
    pub peak_replslot_bytes: u64,
    /// pgoutput messages decoded.
    pub messages: u64,
    /// Their bytes: what a consumer receives, before any framing.
    pub pgoutput_bytes: u64,
    /// Wall seconds of the decoding call.
    pub decode_s: f64,
}

/// The pgoutput options of a SQL decoding call, quoted for SQL.
fn options(publication: &str, streaming: bool, binary: bool) -> String {
    let mut o = format!(
        "'proto_version', '{PROTO_VERSION}', 'publication_names', '{publication}', 'streaming', '{}'",
        if streaming { "on" } else { "off" }
    );
    if binary {
        o.push_str(", 'binary', 'true'");
    }
    o
}

/// Decodes `slot` with `streaming` off (consuming it), sampling its spill directory, and reads its counters.
pub fn server_spill(
    cluster: &Cluster,
    slot: &str,
    publication: &str,
    binary: bool,
) -> Result<ServerSpill> {
    let dir = cluster.data_dir().join("pg_replslot").join(slot);
    let stop = AtomicBool::new(false);
    let peak = AtomicU64::new(0);
    let sql = format!(
        "SELECT count(*), coalesce(sum(length(data)), 0) FROM pg_logical_slot_get_binary_changes('{slot}', \
         NULL, NULL, {})",
        options(publication, false, binary)
    );
    let began = Instant::now();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(dir_bytes(&dir), Ordering::Relaxed);
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        let out = cluster.psql(&sql);
        stop.store(true, Ordering::Relaxed);
        out
    })
    .context("decoding the workload with streaming off")?;
    let decode_s = began.elapsed().as_secs_f64();
    let [messages, pgoutput_bytes] = numbers(&sql, &out)?;
    let stats_sql = format!(
        "SELECT spill_bytes, spill_count, spill_txns FROM pg_stat_replication_slots WHERE slot_name = '{slot}'"
    );
    let stats = cluster.psql(&stats_sql)?;
    let [spill_bytes, spill_count, spill_txns] = numbers(&stats_sql, &stats)?;
    Ok(ServerSpill {
        spill_bytes,
        spill_count,
        spill_txns,
        peak_replslot_bytes: peak.into_inner(),
        messages,
        pgoutput_bytes,
        decode_s,
    })
}

/// A psql row of `N` integers separated by `|`.
fn numbers<const N: usize>(sql: &str, text: &str) -> Result<[u64; N]> {
    let parsed: Option<Vec<u64>> = text.trim().split('|').map(|v| v.parse().ok()).collect();
    parsed
        .and_then(|v| v.try_into().ok())
        .ok_or_else(|| Error::Parse {
            what: sql.to_string(),
            text: text.to_string(),
            expected: "one row of integers",
        })
}

/// Bytes of the files in `dir` now; 0 when it does not exist (yet).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(|e| e.ok()?.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    })
}

/// Decodes `slot` with `streaming` on (consuming it) and writes the rows `(lsn, data)` as a binary COPY
/// stream to `to`, for [`super::copy::CopyReader`]. Returns the file's size.
pub fn capture_streamed(
    cluster: &Cluster,
    slot: &str,
    publication: &str,
    binary: bool,
    to: &Path,
) -> Result<u64> {
    let file = std::fs::File::create(to).io(|| format!("creating {}", to.display()))?;
    let copy = format!(
        "COPY (SELECT lsn, data FROM pg_logical_slot_get_binary_changes('{slot}', NULL, NULL, {})) \
         TO STDOUT (FORMAT binary)",
        options(publication, true, binary)
    );
    let mut cmd: Command = cluster.command("psql");
    cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", &copy])
        .args(cluster.conn_args())
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(Stdio::piped());
    pgcluster::run::as_server_user(&mut cmd)?;
    checked_output(&mut cmd, "psql", &format!("psql -c {copy:?}"))?;
    Ok(std::fs::metadata(to)
        .io(|| format!("reading {}", to.display()))?
        .len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psql_rows_of_numbers() {
        assert_eq!(numbers::<2>("q", "12|345\n").expect("two"), [12, 345]);
        assert!(numbers::<2>("q", "12").is_err());
        assert!(numbers::<3>("q", "1||3").is_err());
        assert!(options("p", true, true).ends_with("'streaming', 'on', 'binary', 'true'"));
    }
}
