//! A local repository: one container per archived file, `<name>.pgcz`, in one directory.
//!
//! Durability follows PostgreSQL's `contrib/basic_archive`: the container is written to a
//! unique temporary file in `<repo>/.tmp/`, fsynced, then published with `link(2)`, which
//! fails if the final name exists, so a file is never overwritten and a crash at any moment
//! leaves either nothing or a complete, fsynced container under the final name. The
//! directory is fsynced after the link. The same name with the same content (SHA-256 of the
//! original) is a success, as a server that crashed after archiving but before marking the
//! segment done will push it again; different content is an error.
//!
//! `get` decodes and checks the SHA-256 in memory, writes a temporary file next to the
//! destination, fsyncs it and renames it into place, so the destination appears only
//! complete and checked.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use codec::Spec;
use sha2::{Digest, Sha256};

use crate::container::{self, check_name, Header, MAX_HEADER_LEN};
use crate::error::{ArchiveError, ContainerError};
use crate::pack::{pack_hashed, Packed};

/// File name suffix of containers in a local repository.
pub const SUFFIX: &str = ".pgcz";
/// Directory inside the repository holding files being written.
pub const TMP_DIR: &str = ".tmp";
/// Temporary files older than this are left over from killed pushes and are removed.
const STALE_TMP_AGE: Duration = Duration::from_secs(3600);

/// What [`LocalRepo::push`] did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PushOutcome {
    /// The file was packed and published.
    Stored(Header),
    /// The repository already held this name with identical content; nothing was written.
    AlreadyArchived(Header),
}

/// One file of the repository, as its header describes it.
#[derive(Debug)]
pub struct Entry {
    /// The archived file name (without the `.pgcz` suffix).
    pub name: String,
    /// Bytes the container occupies.
    pub stored_size: u64,
    /// The header, or why it cannot be read.
    pub header: Result<Header, ContainerError>,
}

/// A repository in a local directory.
#[derive(Debug, Clone)]
pub struct LocalRepo {
    dir: PathBuf,
}

impl LocalRepo {
    /// A repository rooted at `dir` (created by the first push).
    pub fn new(dir: impl Into<PathBuf>) -> LocalRepo {
        LocalRepo { dir: dir.into() }
    }

    /// The repository directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the container of `name` lives.
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}{SUFFIX}"))
    }

    /// Archives the file at `src` under `name` with `spec`.
    pub fn push(&self, src: &Path, name: &str, spec: &Spec) -> Result<PushOutcome, ArchiveError> {
        check_name(name).map_err(|reason| ArchiveError::InvalidName {
            name: name.into(),
            reason,
        })?;
        let data = fs::read(src).map_err(ArchiveError::io("reading", src))?;
        let sha256: [u8; 32] = Sha256::digest(&data).into();
        let dest = self.path_of(name);
        if let Some(outcome) = self.compare_existing(name, &dest, &sha256)? {
            return Ok(outcome);
        }
        let packed = pack_hashed(name, &data, sha256, spec)?;
        drop(data);
        let tmp_dir = self.dir.join(TMP_DIR);
        fs::create_dir_all(&tmp_dir).map_err(ArchiveError::io("creating", &tmp_dir))?;
        let tmp = write_temp(&tmp_dir, name, &packed)?;
        let linked = fs::hard_link(&tmp, &dest);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                // A concurrent push of the same name won the race.
                return match self.compare_existing(name, &dest, &sha256)? {
                    Some(outcome) => Ok(outcome),
                    None => Err(ArchiveError::Io {
                        what: "publishing".into(),
                        path: dest,
                        source: e,
                    }),
                };
            }
            Err(e) => {
                return Err(ArchiveError::Io {
                    what: format!("linking {} to", tmp.display()),
                    path: dest,
                    source: e,
                })
            }
        }
        sync_dir(&self.dir)?;
        remove_stale_temps(&tmp_dir);
        Ok(PushOutcome::Stored(packed.header))
    }

    /// `Some` outcome when `dest` exists: identical content is success, anything else an error.
    fn compare_existing(
        &self,
        name: &str,
        dest: &Path,
        sha256: &[u8; 32],
    ) -> Result<Option<PushOutcome>, ArchiveError> {
        let bytes = match fs::read(dest) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ArchiveError::io("reading", dest)(e)),
        };
        let header = match decode_named(name, &bytes) {
            Ok((h, _)) => h,
            Err(source) => {
                return Err(ArchiveError::ExistingCorrupt {
                    name: name.into(),
                    source,
                })
            }
        };
        if header.sha256 != *sha256 {
            return Err(ArchiveError::Conflict {
                name: name.into(),
                existing: header.sha256_hex(),
                new: container::hex(sha256),
            });
        }
        // As basic_archive does: the earlier push may have crashed before its fsyncs.
        File::open(dest)
            .and_then(|f| f.sync_all())
            .map_err(ArchiveError::io("syncing", dest))?;
        sync_dir(&self.dir)?;
        Ok(Some(PushOutcome::AlreadyArchived(header)))
    }

    /// Restores `name` to `dest` after checking its SHA-256; [`ArchiveError::NotFound`] if the
    /// repository does not hold it. `dest` is created only when everything checked out.
    pub fn get(&self, name: &str, dest: &Path) -> Result<Header, ArchiveError> {
        check_name(name).map_err(|reason| ArchiveError::InvalidName {
            name: name.into(),
            reason,
        })?;
        let src = self.path_of(name);
        let bytes = match fs::read(&src) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(ArchiveError::NotFound { name: name.into() })
            }
            Err(e) => return Err(ArchiveError::io("reading", &src)(e)),
        };
        let (header, data) =
            decode_named(name, &bytes).map_err(|source| ArchiveError::Corrupt {
                name: name.into(),
                source,
            })?;
        drop(bytes);
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = dest
            .file_name()
            .map_or_else(|| "restore".into(), |n| n.to_string_lossy().into_owned());
        let tmp = parent.join(format!(
            ".{base}.pgcompress.{}.{}.tmp",
            std::process::id(),
            nanos()
        ));
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(ArchiveError::io("creating", &tmp))?;
            f.write_all(&data)
                .map_err(ArchiveError::io("writing", &tmp))?;
            f.sync_all().map_err(ArchiveError::io("syncing", &tmp))?;
            drop(f);
            fs::rename(&tmp, dest).map_err(ArchiveError::io(
                format!("renaming {} to", tmp.display()),
                dest,
            ))
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        sync_dir(&parent)?;
        Ok(header)
    }

    /// Every container in the repository, sorted by name, described by its header alone.
    pub fn list(&self) -> Result<Vec<Entry>, ArchiveError> {
        let mut entries = Vec::new();
        for (name, path) in self.files()? {
            let (stored_size, header) = match read_header(&path) {
                Ok(x) => x,
                Err(e) => return Err(ArchiveError::io("reading", &path)(e)),
            };
            let header = header.and_then(|h| check_same_name(&name, h));
            entries.push(Entry {
                name,
                stored_size,
                header,
            });
        }
        Ok(entries)
    }

    /// Decodes the container of `name` completely and checks every checksum and the SHA-256.
    pub fn verify_one(&self, name: &str) -> Result<Header, ArchiveError> {
        let path = self.path_of(name);
        let bytes = fs::read(&path).map_err(ArchiveError::io("reading", &path))?;
        decode_named(name, &bytes)
            .map(|(h, _)| h)
            .map_err(|source| ArchiveError::Corrupt {
                name: name.into(),
                source,
            })
    }

    /// Names and paths of the containers, sorted.
    pub fn files(&self) -> Result<Vec<(String, PathBuf)>, ArchiveError> {
        let rd = fs::read_dir(&self.dir).map_err(ArchiveError::io("listing", &self.dir))?;
        let mut files = Vec::new();
        for entry in rd {
            let entry = entry.map_err(ArchiveError::io("listing", &self.dir))?;
            let file_name = entry.file_name();
            let Some(file_name) = file_name.to_str() else {
                continue;
            };
            let Some(name) = file_name.strip_suffix(SUFFIX) else {
                continue;
            };
            if check_name(name).is_err() {
                continue;
            }
            files.push((name.to_owned(), entry.path()));
        }
        files.sort();
        Ok(files)
    }
}

/// Decodes a container and checks that it holds `name`.
fn decode_named(name: &str, bytes: &[u8]) -> Result<(Header, Vec<u8>), ContainerError> {
    let (h, data) = container::decode(bytes)?;
    Ok((check_same_name(name, h)?, data))
}

fn check_same_name(name: &str, h: Header) -> Result<Header, ContainerError> {
    if h.name != name {
        return Err(ContainerError::Field {
            field: "name",
            detail: format!("the container holds {:?}, not {name:?} (renamed?)", h.name),
        });
    }
    Ok(h)
}

/// Reads just enough of a container to parse its header.
fn read_header(path: &Path) -> std::io::Result<(u64, Result<Header, ContainerError>)> {
    let f = File::open(path)?;
    let size = f.metadata()?.len();
    let mut buf = Vec::with_capacity(4096);
    f.take(MAX_HEADER_LEN as u64).read_to_end(&mut buf)?;
    let header = match container::Header::parse(&buf) {
        Ok(Some((h, hlen))) => {
            let expected = hlen as u64 + h.payload_len();
            if expected == size {
                Ok(h)
            } else {
                Err(ContainerError::Length {
                    expected,
                    actual: size,
                })
            }
        }
        Ok(None) => Err(ContainerError::Truncated {
            need: 16,
            have: size,
        }),
        Err(e) => Err(e),
    };
    Ok((size, header))
}

fn write_temp(tmp_dir: &Path, name: &str, packed: &Packed) -> Result<PathBuf, ArchiveError> {
    let tmp = tmp_dir.join(format!("{name}.{}.{}", std::process::id(), nanos()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(ArchiveError::io("creating", &tmp))?;
    let written = f
        .write_all(&packed.bytes)
        .and_then(|()| f.sync_all())
        .map_err(ArchiveError::io("writing", &tmp));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Removes temporary files that killed pushes left behind, best effort.
fn remove_stale_temps(tmp_dir: &Path) {
    let Ok(rd) = fs::read_dir(tmp_dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in rd.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > STALE_TMP_AGE);
        if old {
            let _ = fs::remove_file(entry.path());
        }
    }
}

fn sync_dir(dir: &Path) -> Result<(), ArchiveError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(ArchiveError::io("syncing directory", dir))
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
