//! What the sustained archive run reads off the disk: a server's `.ready` backlog, the bytes and
//! WAL segments a repository holds; and directories handed to the server user.

use crate::error::{IoContext, Result};
use std::path::Path;

/// Creates `dir` (and its parents) for the server user.
pub(super) fn mkdir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).io(|| format!("creating {}", dir.display()))?;
    pgtest::run::chown_to_server_user(dir)?;
    Ok(())
}

/// `.ready` files waiting in a server's `pg_wal/archive_status`.
pub(super) fn ready_count(wal: &Path) -> usize {
    std::fs::read_dir(wal.join("archive_status")).map_or(0, |rd| {
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".ready"))
            .count()
    })
}

/// Bytes of every file under `dir`.
pub(super) fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// WAL segments among the files under `dir`: names that start with a segment name followed by `.`
/// (pgcompress: `.pgcz`) or `-` (pgBackRest: `-<sha1>.zst`), not `.partial`, `.backup` or `.history` files.
pub(super) fn segment_files(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            match e.metadata() {
                Ok(m) if m.is_dir() => segment_files(&e.path()),
                Ok(_) => u64::from(
                    name.len() > 24
                        && name.as_bytes()[..24].iter().all(u8::is_ascii_hexdigit)
                        && matches!(name.as_bytes()[24], b'.' | b'-')
                        && !name.contains(".partial")
                        && !name.contains(".backup"),
                ),
                Err(_) => 0,
            }
        })
        .sum()
}

/// Hands a copied data directory to the server user.
pub(super) fn chown_tree(dir: &Path) -> Result<()> {
    pgtest::run::chown_to_server_user(dir)?;
    for e in std::fs::read_dir(dir)
        .io(|| format!("listing {}", dir.display()))?
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            chown_tree(&p)?;
        } else {
            pgtest::run::chown_to_server_user(&p)?;
        }
    }
    Ok(())
}
