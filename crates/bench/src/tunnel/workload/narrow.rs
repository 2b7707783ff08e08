//! The narrow-row workloads: a 400,000-row table of an int, a short text, an int and a
//! timestamptz (about 40 bytes a row on the wire), read with `COPY ... TO STDOUT` and with
//! `SELECT *` through psql. Their reference also holds what `zstd -1` makes of the whole text
//! output, the yardstick for what a link that compresses row by row should approach.

use super::*;
use sha2::{Digest, Sha256};

/// The database of the narrow table.
pub const NARROW_DB: &str = "narrow";
/// Rows of the narrow table.
pub const NARROW_ROWS: u32 = 400_000;
/// `COPY narrow TO STDOUT`.
pub(super) const NARROW_COPY: &str = "COPY narrow TO STDOUT";
/// `SELECT * FROM narrow`, in the table's order.
pub(super) const NARROW_SELECT: &str = "SELECT * FROM narrow";

/// What a narrow read must equal and how small `zstd -1` makes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NarrowReference {
    /// Bytes and SHA-256 of the output.
    pub hash: (u64, String),
    /// Bytes of the whole output compressed by zstd at level 1 (the `zstd -1` CLI's level,
    /// one stream).
    pub zstd1_bytes: u64,
}

/// Creates and fills the narrow table over the Unix socket.
pub(super) fn create(env: &Env<'_>) -> Result<()> {
    env.fresh_db(NARROW_DB)?;
    env.sql(
        NARROW_DB,
        &format!(
            "CREATE TABLE narrow (id int, tag text, qty int, at timestamptz);\n\
             INSERT INTO narrow SELECT g, 'n' || (g % 97), (g * 31) % 1000, \
             timestamptz '2026-01-01 00:00:00+00' + g * interval '17 seconds' \
             FROM generate_series(1, {NARROW_ROWS}) g;\nVACUUM ANALYZE narrow;"
        ),
    )
    .map(drop)
}

/// psql arguments of a narrow read: `sql` as text rows (`-At`; FETCH_COUNT for the SELECT).
pub(super) fn args(cmd: &mut Command, sql: &str) {
    cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-v"])
        .arg(format!("FETCH_COUNT={FETCH_COUNT}"))
        .args(["-c", sql]);
}

/// Reads `sql` over the Unix socket: the reference of a narrow workload.
pub(super) fn reference(env: &Env<'_>, sql: &str) -> Result<NarrowReference> {
    let mut cmd = env.local_cmd("psql", NARROW_DB);
    args(&mut cmd, sql);
    let out = run(&mut cmd)?;
    let zstd1 = zstd::stream::encode_all(&out.stdout[..], 1)
        .io(|| "compressing the narrow output with zstd -1".into())?;
    Ok(NarrowReference {
        hash: (
            out.stdout.len() as u64,
            hex::encode(Sha256::digest(&out.stdout)),
        ),
        zstd1_bytes: zstd1.len() as u64,
    })
}
