//! Repositories: one container per archived file, `<name>.pgcz`, in a local directory
//! ([`local`]) or under a prefix of an S3-compatible bucket ([`s3`]).
//!
//! Everything that decides what a push, get, list or verify means lives here, once, in
//! [`Repository`]; a [`Store`] only moves bytes and knows how to publish an object without
//! overwriting one that is already there. The semantics are those of PostgreSQL's
//! `contrib/basic_archive`:
//!
//! - push packs and self-checks the file, then publishes it under its name only if that name
//!   is free. The same name with the same content (SHA-256 of the original) is a success, as a
//!   server that crashed after archiving but before marking the segment done pushes it again;
//!   different content, or a damaged existing copy, is an error and nothing is overwritten.
//! - get rebuilds the file into a temporary file next to the destination while hashing it
//!   (XXH3-128), and renames it into place
//!   only if the hash matches (fsynced only when asked), so the destination appears only
//!   complete and checked. A name the repository does not hold is [`ArchiveError::NotFound`]
//!   only once the repository itself is known to be there: a missing directory or bucket is
//!   an error, so that it cannot pass for the end of the archive.

mod expire;
mod init;
pub mod local;
#[cfg(feature = "s3")]
pub mod s3;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use codec::Spec;

use crate::container::{self, check_name, Header, MAX_HEADER_LEN};
use crate::error::{ArchiveError, ContainerError};
use crate::input::Input;
use crate::pack::{pack_fallback, pack_records, self_check, Hash};

pub use expire::{Expired, Retain};
pub use init::{control_file_identity, data_directory_identity, Initialized};
pub use local::LocalStore;
#[cfg(feature = "s3")]
pub use s3::S3Store;

/// The region used when none is configured.
pub const DEFAULT_REGION: &str = "us-east-1";

/// How to reach an S3-compatible store, beyond the credentials, which come from the standard
/// AWS environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, or a web identity or container credentials setup).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// A custom endpoint such as `http://127.0.0.1:9000` (MinIO, Ceph, a test server);
    /// `http://` is allowed for it. `None`: AWS itself, or `AWS_ENDPOINT_URL*` from the
    /// environment.
    pub endpoint: Option<String>,
    /// The region; `None`: `AWS_REGION` / `AWS_DEFAULT_REGION`, else [`DEFAULT_REGION`].
    pub region: Option<String>,
}

/// File name suffix of containers in a repository.
pub const SUFFIX: &str = ".pgcz";

/// What [`Repository::push`] did.
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

/// Where a repository is, as `--repo` spells it: a directory, or `s3://bucket/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory.
    Dir(PathBuf),
    /// A bucket of an S3-compatible object store and a key prefix inside it (no leading or
    /// trailing slash; empty for the bucket's top level).
    S3 {
        /// The bucket name.
        bucket: String,
        /// The key prefix, segments separated by `/`.
        prefix: String,
    },
}

/// `s3://` + `rest`, checked: the bucket and prefix S3 and its compatible servers accept.
#[cfg(feature = "s3")]
fn s3_location(s: &str, rest: &str) -> Result<Location, ArchiveError> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    s3::check_bucket(bucket)
        .map_err(|why| ArchiveError::Config(format!("repository {s:?}: {why}")))?;
    let prefix = s3::normalize_prefix(prefix)
        .map_err(|why| ArchiveError::Config(format!("repository {s:?}: {why}")))?;
    Ok(Location::S3 {
        bucket: bucket.to_owned(),
        prefix,
    })
}

/// Without the `s3` feature an S3 location is refused up front, not at the first request.
#[cfg(not(feature = "s3"))]
fn s3_location(s: &str, _rest: &str) -> Result<Location, ArchiveError> {
    Err(no_s3(s))
}

#[cfg(not(feature = "s3"))]
fn no_s3(location: &str) -> ArchiveError {
    ArchiveError::Config(format!(
        "repository {location:?}: this build has no S3 support (the archive crate's `s3` feature is off)"
    ))
}

impl Location {
    /// Parses `--repo`: `s3://bucket[/prefix]` is an S3 location, anything else a directory.
    pub fn parse(s: &str) -> Result<Location, ArchiveError> {
        let Some(rest) = strip_prefix_ignore_case(s, "s3://") else {
            if s.is_empty() {
                return Err(ArchiveError::Config(
                    "the repository location is empty".into(),
                ));
            }
            if strip_prefix_ignore_case(s, "s3:").is_some() {
                return Err(ArchiveError::Config(format!(
                    "repository {s:?}: an S3 repository is written s3://bucket/prefix"
                )));
            }
            return Ok(Location::Dir(PathBuf::from(s)));
        };
        s3_location(s, rest)
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Dir(d) => write!(f, "{}", d.display()),
            Location::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// A check [`Store::create_checked`] runs on the bytes before they may be published.
pub type Check<'a> = &'a (dyn Fn(&[u8]) -> Result<(), ArchiveError> + Sync);

/// Where the objects of a repository are kept. Keys are container file names
/// (`<name>.pgcz`), never paths. `Send + Sync`, so that async code can share a repository
/// with its blocking pool (`spawn_blocking`).
pub trait Store: std::fmt::Debug + Send + Sync {
    /// The whole object, or `None` if there is none under `key`.
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>, ArchiveError>;

    /// The object's size and its first `len` bytes (fewer if it is shorter), or `None` if
    /// there is none under `key`.
    fn read_head(&self, key: &str, len: usize) -> Result<Option<(u64, Vec<u8>)>, ArchiveError>;

    /// Publishes `bytes` under `key` durably, only if no object is there: `Ok(true)` when
    /// stored, `Ok(false)` when `key` already exists (nothing was written).
    fn create(&self, key: &str, bytes: Vec<u8>) -> Result<bool, ArchiveError>;

    /// [`Store::create`] of `bytes` only if `check(bytes)` passes; a store may overlap the
    /// check with its own work (writing and syncing a temporary file) as long as nothing is
    /// published before the check has passed.
    fn create_checked(
        &self,
        key: &str,
        bytes: &[u8],
        check: Check<'_>,
    ) -> Result<bool, ArchiveError> {
        check(bytes)?;
        self.create(key, bytes.to_vec())
    }

    /// Makes sure an object that an earlier push published is durable (a push may have
    /// crashed before its fsyncs).
    fn settle(&self, key: &str) -> Result<(), ArchiveError>;

    /// Keys and sizes of the objects directly in the repository, in any order.
    fn list(&self) -> Result<Vec<(String, u64)>, ArchiveError> {
        Ok(self
            .list_modified()?
            .into_iter()
            .map(|(k, s, _)| (k, s))
            .collect())
    }

    /// [`Store::list`] with each object's last modification time by the store's clock (a
    /// file's mtime, an object's `LastModified`), which is when it was archived: objects are
    /// never rewritten. `None` where the store cannot tell.
    fn list_modified(&self) -> Result<Vec<(String, u64, Option<SystemTime>)>, ArchiveError>;

    /// Removes the objects `keys`, in order; a key already gone is not an error. When it
    /// returns, the removals are durable (a directory is fsynced once, at the end).
    fn delete(&self, keys: &[String]) -> Result<(), ArchiveError>;

    /// `Ok` when the repository itself exists and answers, so that an absent key really
    /// means an absent file.
    fn check_present(&self) -> Result<(), ArchiveError>;

    /// Makes the repository's location exist (`archive init`, the only step that creates
    /// one): a directory is created with its parents; an S3 bucket must exist already.
    fn create_location(&self) -> Result<(), ArchiveError>;

    /// The repository's location, for messages.
    fn location(&self) -> String;
}

/// A repository: the archive's semantics over one [`Store`].
#[derive(Debug)]
pub struct Repository {
    store: Box<dyn Store>,
}

impl Repository {
    /// A repository over `store`.
    pub fn new(store: Box<dyn Store>) -> Repository {
        Repository { store }
    }

    /// A repository in the local directory `dir` (created by [`Repository::init`]).
    pub fn local(dir: impl Into<PathBuf>) -> Repository {
        Repository::new(Box::new(LocalStore::new(dir)))
    }

    /// The repository at `location`; `s3` says how to reach an S3 location.
    pub fn open(location: &Location, s3: &S3Options) -> Result<Repository, ArchiveError> {
        Ok(match location {
            Location::Dir(d) => Repository::local(d),
            #[cfg(feature = "s3")]
            Location::S3 { bucket, prefix } => {
                Repository::new(Box::new(S3Store::new(bucket, prefix, s3)?))
            }
            #[cfg(not(feature = "s3"))]
            Location::S3 { .. } => {
                let _ = s3;
                return Err(no_s3(&location.to_string()));
            }
        })
    }

    /// The repository's location, for messages.
    pub fn location(&self) -> String {
        self.store.location()
    }

    /// Archives the file at `src` under `name` with `spec`.
    pub fn push(&self, src: &Path, name: &str, spec: &Spec) -> Result<PushOutcome, ArchiveError> {
        valid_name(name)?;
        let read_err = |e| ArchiveError::io("reading", src)(e);
        let file = File::open(src).map_err(read_err)?;
        let len = file.metadata().map_err(read_err)?.len();
        self.admit(name, &file, len)?;
        let len = usize::try_from(len).map_err(|_| ArchiveError::TooLarge {
            name: name.into(),
            size: len,
            max: container::MAX_ORIGINAL_SIZE,
        })?;
        // The file is read through small windows, never whole: fresh memory for 16 MB costs
        // more than reading it twice from the page cache.
        let input = Input::File(&file, len);
        let key = key_of(name);
        // The hash is needed here only when the name is taken; packing computes it anyway.
        let existing = self.compare_existing(name, &key, || {
            Ok(Hash::of_input(input).map_err(read_err)?.sha256)
        })?;
        if let Some(outcome) = existing {
            return Ok(outcome);
        }
        // A WAL segment's container is written (and fsynced) while it is checked by decoding
        // it; it is published only if the check passes. Anything else, or a container that
        // fails the check, goes the checked fallback way, from the file read whole.
        let mut published = None;
        if let Some((packed, hash)) = pack_records(name, src, input, spec)? {
            let check = |bytes: &[u8]| {
                self_check(bytes, &hash).map_err(|source| ArchiveError::SelfCheck {
                    name: name.into(),
                    source,
                })
            };
            match self.store.create_checked(&key, &packed.bytes, &check) {
                Ok(created) => published = Some((created, packed.header, hash)),
                Err(ArchiveError::SelfCheck { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let (created, header, hash) = match published {
            Some(p) => p,
            None => {
                let data = fs::read(src).map_err(read_err)?;
                let hash = Hash::of(&data);
                let packed = pack_fallback(name, &data, hash, spec)?;
                drop(data);
                (self.store.create(&key, packed.bytes)?, packed.header, hash)
            }
        };
        if created {
            return Ok(PushOutcome::Stored(header));
        }
        // A concurrent push of the same name won the race.
        match self.compare_existing(name, &key, || Ok(hash.sha256))? {
            Some(outcome) => Ok(outcome),
            None => Err(ArchiveError::Store {
                what: format!("publishing {key} in"),
                location: self.location(),
                detail: "the name was taken, then vanished; nothing was archived".into(),
            }),
        }
    }

    /// `Some` outcome when `key` exists: identical content (by the SHA-256 `sha256` gives) is
    /// success, anything else an error.
    fn compare_existing(
        &self,
        name: &str,
        key: &str,
        sha256: impl FnOnce() -> Result<[u8; 32], ArchiveError>,
    ) -> Result<Option<PushOutcome>, ArchiveError> {
        let Some(bytes) = self.store.read(key)? else {
            return Ok(None);
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
        let sha256 = sha256()?;
        if header.sha256 != sha256 {
            return Err(ArchiveError::Conflict {
                name: name.into(),
                existing: header.sha256_hex(),
                new: hex::encode(sha256),
            });
        }
        self.store.settle(key)?;
        Ok(Some(PushOutcome::AlreadyArchived(header)))
    }

    /// Restores `name` to `dest` after checking its hash (the XXH3-128 digest the container
    /// records);
    /// [`ArchiveError::NotFound`] if the repository does not hold it. `dest` is created only
    /// when everything checked out.
    ///
    /// `dest` is written to a temporary file that is renamed into place, but not fsynced:
    /// PostgreSQL fsyncs a restored segment itself when it keeps it (`durable_rename` in
    /// `KeepFileRestoredFromArchive`) and, after a crash, asks restore_command again for
    /// anything it had not kept; pgBackRest's archive-get skips the syncs for the same
    /// reason. [`Repository::get_with`] with `fsync` makes the file durable before returning.
    pub fn get(&self, name: &str, dest: &Path) -> Result<Header, ArchiveError> {
        self.get_with(name, dest, false)
    }

    /// [`Repository::get`], with `fsync`: the file and its directory are fsynced before it
    /// returns.
    pub fn get_with(&self, name: &str, dest: &Path, fsync: bool) -> Result<Header, ArchiveError> {
        valid_name(name)?;
        self.identity()?;
        let Some(bytes) = self.store.read(&key_of(name))? else {
            self.store.check_present()?;
            return Err(ArchiveError::NotFound { name: name.into() });
        };
        let corrupt = |source| ArchiveError::Corrupt {
            name: name.into(),
            source,
        };
        // The output is hashed with XXH3-128 and written to a temporary file piece by piece
        // as it is rebuilt; the file gets its name only if the digest matches.
        write_checked(dest, fsync, |file, tmp| {
            let mut hasher = twox_hash::XxHash3_128::default();
            let mut written: std::io::Result<()> = Ok(());
            let mut hash_and_write = |piece: &[u8]| {
                hasher.write(piece);
                if written.is_ok() {
                    written = file.write_all(piece);
                }
            };
            let (header, _) = crate::pipeline::decode_with(&bytes, &mut hash_and_write, false)
                .and_then(|(h, data)| Ok((check_same_name(name, h)?, data)))
                .map_err(corrupt)?;
            written.map_err(ArchiveError::io("writing", tmp))?;
            container::check_digest("XXH3-128", &header.xxh3, &hasher.finish_128().to_be_bytes())
                .map_err(corrupt)?;
            Ok(header)
        })
    }

    /// Every container in the repository, sorted by name, described by its header alone.
    pub fn list(&self) -> Result<Vec<Entry>, ArchiveError> {
        let mut entries = Vec::new();
        for (name, _) in self.files()? {
            let key = key_of(&name);
            // A container removed since the listing is simply not listed.
            let Some((stored_size, head)) = self.store.read_head(&key, MAX_HEADER_LEN)? else {
                continue;
            };
            let header = parse_header(&head, stored_size).and_then(|h| check_same_name(&name, h));
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
        valid_name(name)?;
        let Some(bytes) = self.store.read(&key_of(name))? else {
            return Err(ArchiveError::NotFound { name: name.into() });
        };
        decode_named(name, &bytes)
            .map(|(h, _)| h)
            .map_err(|source| ArchiveError::Corrupt {
                name: name.into(),
                source,
            })
    }

    /// Names (without the suffix) and stored sizes of the containers, sorted by name.
    /// Objects that are not containers (other suffixes, names a push would refuse) are
    /// skipped.
    pub fn files(&self) -> Result<Vec<(String, u64)>, ArchiveError> {
        let mut files: Vec<(String, u64)> = self
            .store
            .list()?
            .into_iter()
            .filter_map(|(key, size)| {
                let name = key.strip_suffix(SUFFIX)?;
                check_name(name).ok()?;
                Some((name.to_owned(), size))
            })
            .collect();
        files.sort();
        Ok(files)
    }
}

impl Repository {
    /// The original bytes of a small archived file (a backup or timeline history file),
    /// decoded and checked; `None` if the repository does not hold it.
    pub fn read_small(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>, ArchiveError> {
        valid_name(name)?;
        let key = key_of(name);
        let Some((size, head)) = self.store.read_head(&key, MAX_HEADER_LEN)? else {
            return Ok(None);
        };
        let header = parse_header(&head, size)
            .and_then(|h| check_same_name(name, h))
            .map_err(|source| ArchiveError::Corrupt {
                name: name.into(),
                source,
            })?;
        if header.original_size > max {
            return Err(ArchiveError::TooLarge {
                name: name.into(),
                size: header.original_size,
                max,
            });
        }
        let Some(bytes) = self.store.read(&key)? else {
            return Ok(None);
        };
        decode_named(name, &bytes)
            .map(|(_, data)| Some(data))
            .map_err(|source| ArchiveError::Corrupt {
                name: name.into(),
                source,
            })
    }

    /// The original size recorded in the header of `name`, if the repository holds it.
    pub fn original_size(&self, name: &str) -> Result<Option<u64>, ArchiveError> {
        valid_name(name)?;
        let Some((size, head)) = self.store.read_head(&key_of(name), MAX_HEADER_LEN)? else {
            return Ok(None);
        };
        parse_header(&head, size)
            .and_then(|h| check_same_name(name, h))
            .map(|h| Some(h.original_size))
            .map_err(|source| ArchiveError::Corrupt {
                name: name.into(),
                source,
            })
    }

    /// Removes the archived files `names`, in order (see [`Store::delete`]).
    pub fn remove(&self, names: &[String]) -> Result<(), ArchiveError> {
        for name in names {
            valid_name(name)?;
        }
        let keys: Vec<String> = names.iter().map(|n| key_of(n)).collect();
        self.store.delete(&keys)
    }
}

/// The key of the container of `name`.
pub fn key_of(name: &str) -> String {
    format!("{name}{SUFFIX}")
}

fn valid_name(name: &str) -> Result<(), ArchiveError> {
    check_name(name).map_err(|reason| ArchiveError::InvalidName {
        name: name.into(),
        reason,
    })
}

/// Decodes a container and checks that it holds `name`.
fn decode_named(name: &str, bytes: &[u8]) -> Result<(Header, Vec<u8>), ContainerError> {
    let (h, data) = crate::pipeline::decode(bytes)?;
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

/// Parses the header from the first bytes of a container of `size` bytes and checks that
/// the size is the one the header implies.
fn parse_header(head: &[u8], size: u64) -> Result<Header, ContainerError> {
    match Header::parse(head)? {
        Some((h, hlen)) => {
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
        None => Err(ContainerError::Truncated {
            need: 16,
            have: size,
        }),
    }
}

/// Creates a temporary file next to `dest`, lets `fill` write it, and renames it to `dest`
/// only if `fill` succeeds; with `fsync`, the file is fsynced before the rename and the
/// directory after it. On failure nothing is left behind.
fn write_checked<T>(
    dest: &Path,
    fsync: bool,
    fill: impl FnOnce(&mut File, &Path) -> Result<T, ArchiveError>,
) -> Result<T, ArchiveError> {
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
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(ArchiveError::io("creating", &tmp))?;
    let written = fill(&mut f, &tmp).and_then(|value| {
        if fsync {
            f.sync_all().map_err(ArchiveError::io("syncing", &tmp))?;
        }
        drop(f);
        fs::rename(&tmp, dest).map_err(ArchiveError::io(
            format!("renaming {} to", tmp.display()),
            dest,
        ))?;
        Ok(value)
    });
    let value = match written {
        Ok(v) => v,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    if fsync {
        sync_dir(&parent)?;
    }
    Ok(value)
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), ArchiveError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(ArchiveError::io("syncing directory", dir))
}

pub(crate) fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
