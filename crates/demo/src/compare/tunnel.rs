//! The demo's tunnel section: the pgbench accounts table copied out with `COPY ... TO STDOUT`
//! directly and through a tunnel pair, the two outputs compared by hash and the bytes on the link
//! set against the PostgreSQL protocol bytes a direct connection carries.

use crate::error::{Error, Result};
use crate::pair::{Pair, PairOptions};
use crate::sys::hash_stdout;
use advise::fmt::bytes;
use pgcluster::Cluster;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// The statement the section runs both ways.
const COPY: &str = "COPY pgbench_accounts TO STDOUT";

/// What the tunnel section measured.
#[derive(Debug, Clone, Serialize)]
pub struct TunnelSection {
    /// The link method.
    pub method: String,
    /// The statement run both ways.
    pub statement: &'static str,
    /// Bytes of COPY output the client received (the same both ways).
    pub output_bytes: u64,
    /// SHA-256 of that output, equal both ways.
    pub output_sha256: String,
    /// PostgreSQL protocol bytes from the server during the tunnelled COPY: what a direct
    /// connection carries.
    pub direct_bytes: u64,
    /// Bytes on the link from the server half to the client half, TLS included.
    pub link_bytes: u64,
    /// `direct_bytes / link_bytes`.
    pub ratio: f64,
    /// Wall time of the direct COPY, seconds.
    pub direct_s: f64,
    /// Wall time of the tunnelled COPY, seconds.
    pub tunnel_s: f64,
}

impl TunnelSection {
    /// A few lines for the demo's table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "Reading the pgbench accounts through the tunnel ({}, TLS 1.3 between the halves): `{}`\n",
            self.method, self.statement
        );
        let _ = writeln!(
            out,
            "  {:<34} {:>12}  ({:.2} s)",
            "direct connection, protocol bytes",
            bytes(self.direct_bytes),
            self.direct_s
        );
        let _ = writeln!(
            out,
            "  {:<34} {:>12}  ({:.2} s), {:.1}x fewer bytes",
            "through the tunnel, link bytes",
            bytes(self.link_bytes),
            self.tunnel_s,
            self.ratio
        );
        let _ = writeln!(
            out,
            "  the client got the same {} both ways (SHA-256 {}…); pgbench rows are mostly blank filler, \
             so expect less on real tables",
            bytes(self.output_bytes),
            &self.output_sha256[..16.min(self.output_sha256.len())]
        );
        out
    }
}

/// Runs [`COPY`] on `db` with psql at `-h host -p port` and returns the output's length, hash
/// and the wall time.
fn copy_out(cluster: &Cluster, db: &str, host: &str, port: u16) -> Result<(u64, String, f64)> {
    let what = format!("psql -h {host} -p {port} -c {COPY:?}");
    let started = Instant::now();
    let mut cmd = cluster.command("psql");
    cmd.args([
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-U",
        pgcluster::SUPERUSER,
    ])
    .args(["-h", host, "-p", &port.to_string(), "-d", db, "-c", COPY]);
    let (len, hex) = hash_stdout(&mut cmd, &what)?;
    Ok((len, hex, started.elapsed().as_secs_f64()))
}

/// The section: a direct COPY, then the same through a fresh tunnel pair with `method`.
pub fn run(cluster: &Cluster, db: &str, pgcompress: &Path, method: &str) -> Result<TunnelSection> {
    let socket = cluster.socket_dir();
    let (direct_len, direct_hash, direct_s) =
        copy_out(cluster, db, &socket.to_string_lossy(), cluster.port())?;
    let pair = Pair::start(&PairOptions {
        pgcompress: pgcompress.to_path_buf(),
        socket_dir: socket,
        port: cluster.port(),
        method: method.to_owned(),
    })?;
    let (len, hash, tunnel_s) = copy_out(cluster, db, "127.0.0.1", pair.client_port())?;
    let (client, _server) = pair.stop()?;
    if (len, &hash) != (direct_len, &direct_hash) {
        return Err(Error::Tunnel {
            what: format!("`{COPY}` through the tunnel"),
            reason: format!(
                "output differs from the direct connection's: {len} bytes, SHA-256 {hash} against {direct_len} bytes, {direct_hash}"
            ),
        });
    }
    let b2f = client.backend_to_frontend;
    Ok(TunnelSection {
        method: method.to_owned(),
        statement: COPY,
        output_bytes: len,
        output_sha256: hash,
        direct_bytes: b2f.raw_bytes,
        link_bytes: b2f.link_bytes,
        ratio: b2f.raw_bytes as f64 / b2f.link_bytes.max(1) as f64,
        direct_s,
        tunnel_s,
    })
}
