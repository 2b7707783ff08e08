//! Counters of one tunnel half, the stats file and the per-connection report.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::error::NetError;
use crate::link::Counters;

/// Which half of the tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Half {
    /// Beside the application.
    Client,
    /// Beside PostgreSQL.
    Server,
}

impl std::fmt::Display for Half {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Half::Client => "client",
            Half::Server => "server",
        })
    }
}

/// Totals of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectionStats {
    /// PostgreSQL bytes.
    pub raw_bytes: u64,
    /// Bytes on the link socket, TLS records included.
    pub link_bytes: u64,
    /// Compressed chunks.
    pub chunks: u64,
    /// Of those, the chunks that travelled column-coded (link version 2, zstd).
    #[serde(default)]
    pub column_chunks: u64,
    /// Link frames.
    pub frames: u64,
    /// Method switches `--method auto` made.
    #[serde(default)]
    pub method_switches: u64,
}

/// The stats file's content (`pgcompress tunnel stats FILE`) and the exit summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Which half wrote it.
    pub half: Half,
    /// The method this half asks for (client), or the one the latest client half asked for
    /// (server; `any` before the first).
    pub method: String,
    /// Connections being served now.
    pub connections_open: u64,
    /// Connections accepted since start (refused peers excluded).
    pub connections_total: u64,
    /// Link peers refused: TLS or link handshake failures.
    pub refused_peers: u64,
    /// Connections closed because of a bad link frame or chunk.
    pub decompression_errors: u64,
    /// Connections refused because the half already served `--max-connections`.
    #[serde(default)]
    pub refused_connections: u64,
    /// Connections whose link peer went away mid-session, without TLS close_notify.
    #[serde(default)]
    pub links_cut: u64,
    /// Application to PostgreSQL.
    pub frontend_to_backend: DirectionStats,
    /// PostgreSQL to the application.
    pub backend_to_frontend: DirectionStats,
}

impl StatsSnapshot {
    /// Reads a stats file.
    pub fn read(path: &Path) -> Result<StatsSnapshot, NetError> {
        let text = std::fs::read_to_string(path).map_err(|source| NetError::File {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| {
            NetError::Config(format!("{}: not a tunnel stats file: {e}", path.display()))
        })
    }

    /// Writes the snapshot to `path` atomically (a temporary file, then a rename).
    pub fn write_atomic(&self, path: &Path) -> Result<(), NetError> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let err = |source| NetError::File {
            path: path.to_path_buf(),
            source,
        };
        let json = serde_json::to_vec_pretty(self).map_err(|e| err(std::io::Error::other(e)))?;
        std::fs::write(&tmp, json).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }
}

#[derive(Debug, Default)]
pub(crate) struct DirectionCounters {
    raw_bytes: AtomicU64,
    link_bytes: AtomicU64,
    chunks: AtomicU64,
    column_chunks: AtomicU64,
    frames: AtomicU64,
    switches: AtomicU64,
}

impl DirectionCounters {
    /// Adds the growth from `before` to `now` of the codec counters (link bytes are counted
    /// on the socket instead).
    pub(crate) fn add_delta(&self, before: &Counters, now: &Counters) {
        self.raw_bytes
            .fetch_add(now.raw_bytes - before.raw_bytes, Ordering::Relaxed);
        self.chunks
            .fetch_add(now.chunks - before.chunks, Ordering::Relaxed);
        self.column_chunks
            .fetch_add(now.column_chunks - before.column_chunks, Ordering::Relaxed);
        self.frames
            .fetch_add(now.frames - before.frames, Ordering::Relaxed);
    }

    pub(crate) fn add_switch(&self) {
        self.switches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_link(&self, n: u64) {
        self.link_bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> DirectionStats {
        DirectionStats {
            raw_bytes: self.raw_bytes.load(Ordering::Relaxed),
            link_bytes: self.link_bytes.load(Ordering::Relaxed),
            chunks: self.chunks.load(Ordering::Relaxed),
            column_chunks: self.column_chunks.load(Ordering::Relaxed),
            frames: self.frames.load(Ordering::Relaxed),
            method_switches: self.switches.load(Ordering::Relaxed),
        }
    }
}

/// Live counters of one half, shared by its connections.
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) half: Half,
    pub(crate) method: std::sync::Mutex<String>,
    pub(crate) open: AtomicU64,
    pub(crate) total: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) decompression_errors: AtomicU64,
    pub(crate) refused_connections: AtomicU64,
    pub(crate) links_cut: AtomicU64,
    pub(crate) f2b: Arc<DirectionCounters>,
    pub(crate) b2f: Arc<DirectionCounters>,
}

impl Stats {
    pub(crate) fn new(half: Half, method: String) -> Self {
        Stats {
            half,
            method: std::sync::Mutex::new(method),
            open: AtomicU64::new(0),
            total: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            decompression_errors: AtomicU64::new(0),
            refused_connections: AtomicU64::new(0),
            links_cut: AtomicU64::new(0),
            f2b: Arc::default(),
            b2f: Arc::default(),
        }
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            half: self.half,
            method: self.method.lock().map(|m| m.clone()).unwrap_or_default(),
            connections_open: self.open.load(Ordering::Relaxed),
            connections_total: self.total.load(Ordering::Relaxed),
            refused_peers: self.refused.load(Ordering::Relaxed),
            decompression_errors: self.decompression_errors.load(Ordering::Relaxed),
            refused_connections: self.refused_connections.load(Ordering::Relaxed),
            links_cut: self.links_cut.load(Ordering::Relaxed),
            frontend_to_backend: self.f2b.snapshot(),
            backend_to_frontend: self.b2f.snapshot(),
        }
    }
}

/// Decrements the open count however the connection ends (also when aborted).
struct OpenGuard(Arc<Stats>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts one connection of either half for its whole life: numbers it and holds it open in
/// `stats` while `carry` runs, counts a failure on link data as a decompression error, and
/// returns its report. `conn` holds the connection's own frontend->backend and
/// backend->frontend counters, which `carry` fills.
pub(crate) async fn track_connection(
    stats: &Arc<Stats>,
    peer: String,
    started: Instant,
    conn: &[Arc<DirectionCounters>; 2],
    carry: impl Future<Output = Result<(), NetError>>,
) -> ConnectionReport {
    let id = stats.total.fetch_add(1, Ordering::Relaxed) + 1;
    stats.open.fetch_add(1, Ordering::Relaxed);
    let _guard = OpenGuard(stats.clone());
    let error = carry.await.err().map(|e| {
        if e.is_link_data() {
            stats.decompression_errors.fetch_add(1, Ordering::Relaxed);
        }
        if e.is_cut() {
            stats.links_cut.fetch_add(1, Ordering::Relaxed);
        }
        e.to_string()
    });
    ConnectionReport {
        id,
        peer,
        duration_secs: started.elapsed().as_secs_f64(),
        frontend_to_backend: conn[0].snapshot(),
        backend_to_frontend: conn[1].snapshot(),
        error,
    }
}

/// One connection's totals, reported when it ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionReport {
    /// Connection number within this half, from 1.
    pub id: u64,
    /// The peer: the application's address on the client half, the client half's on the
    /// server half.
    pub peer: String,
    /// Seconds from accept to close.
    pub duration_secs: f64,
    /// Application to PostgreSQL.
    pub frontend_to_backend: DirectionStats,
    /// PostgreSQL to the application.
    pub backend_to_frontend: DirectionStats,
    /// Why it ended badly, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
