//! A repository belongs to one cluster: [`Repository::init`] records which
//! ([`crate::identity`]), on purpose and once, and every push and get checks against it, so
//! that a typo in `--repo`, a backup volume that is not mounted or another cluster's
//! `archive_command` cannot quietly start or mix an archive.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::Repository;
use crate::error::ArchiveError;
use crate::identity::{
    control_file_system_identifier, Identity, FIRST_PAGE_HEADER_LEN, IDENTITY_KEY, MAX_IDENTITY_LEN,
};
use crate::retention::{classify, FileKind};

/// What [`Repository::init`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Initialized {
    /// The identity file was written; `adopted` containers were there already (a repository
    /// of an earlier version, checked against the identity by its newest WAL segment).
    Created {
        /// Containers already in the repository.
        adopted: usize,
    },
    /// The repository already recorded this identity; nothing was written.
    Already,
}

impl Repository {
    /// The identity the repository records: [`ArchiveError::NotInitialized`] when the
    /// location does not exist or holds no identity file. It is read anew on every call, never
    /// cached: a long-lived `archive serve` whose backup volume is unmounted under it must find
    /// the bare mount point uninitialized, not go on writing into it.
    pub fn identity(&self) -> Result<Identity, ArchiveError> {
        match self.read_identity()? {
            Some(id) => Ok(id),
            None => Err(ArchiveError::NotInitialized {
                location: self.location(),
                detail: self.why_absent()?,
            }),
        }
    }

    /// The identity file, if there is one.
    fn read_identity(&self) -> Result<Option<Identity>, ArchiveError> {
        let Some((_, head)) = self.store.read_head(IDENTITY_KEY, MAX_IDENTITY_LEN + 1)? else {
            return Ok(None);
        };
        Identity::parse(&head)
            .map(Some)
            .map_err(|source| ArchiveError::Identity {
                what: format!("{IDENTITY_KEY} in {}", self.location()),
                source,
            })
    }

    /// Why a repository without an identity file is not one: the location is missing, or
    /// it is there but was never initialized.
    fn why_absent(&self) -> Result<String, ArchiveError> {
        match self.store.check_present() {
            Ok(()) => Ok(format!("is not initialized (no {IDENTITY_KEY} file)")),
            Err(ArchiveError::NoRepository { reason, .. }) => Ok(reason),
            Err(e) => Err(e),
        }
    }

    /// Makes the location a repository of `wanted`: creates it (a directory; an S3 bucket
    /// must exist) and writes the identity file. A repository that records the same identity
    /// is left as it is; one that records another, or holds WAL of another system, is
    /// refused and left unchanged. Containers already there (a repository of an earlier
    /// version) are adopted once the oldest and the newest WAL segment among them are found
    /// to be `wanted`'s.
    pub fn init(&self, wanted: &Identity) -> Result<Initialized, ArchiveError> {
        self.store.create_location()?;
        let other = |existing: String| ArchiveError::OtherCluster {
            location: self.location(),
            existing,
            wanted: *wanted,
        };
        if let Some(id) = self.read_identity()? {
            return if id == *wanted {
                Ok(Initialized::Already)
            } else {
                Err(other(id.to_string()))
            };
        }
        let files = self.files()?;
        let segments: Vec<(crate::retention::Position, u32, &String)> = files
            .iter()
            .filter_map(|(name, _)| match classify(name) {
                FileKind::Segment { tli, pos } => Some((pos, tli, name)),
                _ => None,
            })
            .collect();
        // The oldest and the newest segment already there must be the cluster's: reading every
        // one would decode the whole archive.
        let ends = [segments.iter().min(), segments.iter().max()];
        for (_, _, name) in ends.into_iter().flatten() {
            let found = self.archived_segment_identity(name)?;
            if wanted.admits(&found).is_err() {
                return Err(other(format!("WAL of {found} ({name})")));
            }
        }
        let created = self
            .store
            .create(IDENTITY_KEY, wanted.render().into_bytes())?;
        if !created {
            // Another init won the race: it stands if it recorded the same identity.
            return match self.read_identity()? {
                Some(id) if id == *wanted => Ok(Initialized::Already),
                Some(id) => Err(other(id.to_string())),
                None => Err(ArchiveError::Store {
                    what: format!("writing {IDENTITY_KEY} in"),
                    location: self.location(),
                    detail: "the name was taken, then vanished".into(),
                }),
            };
        }
        Ok(Initialized::Created {
            adopted: files.len(),
        })
    }

    /// The identity in the first page of an archived segment, decoded and checked.
    fn archived_segment_identity(&self, name: &str) -> Result<Identity, ArchiveError> {
        let bytes = self
            .store
            .read(&super::key_of(name))?
            .ok_or_else(|| ArchiveError::NotFound { name: name.into() })?;
        let (_, data) =
            super::decode_named(name, &bytes).map_err(|source| ArchiveError::Corrupt {
                name: name.into(),
                source,
            })?;
        Identity::of_segment(&data).map_err(|source| ArchiveError::Identity {
            what: format!("{name} in {}", self.location()),
            source,
        })
    }

    /// Refuses a WAL segment (or `.partial` segment) `name` read from `file` that is not of
    /// the repository's cluster, before anything is written.
    pub(super) fn admit(&self, name: &str, file: &File, len: u64) -> Result<(), ArchiveError> {
        let id = self.identity()?;
        if !matches!(
            classify(name),
            FileKind::Segment { .. } | FileKind::Partial { .. }
        ) {
            return Ok(());
        }
        let mut first = [0u8; FIRST_PAGE_HEADER_LEN];
        let read = if len >= FIRST_PAGE_HEADER_LEN as u64 {
            file.read_exact_at(&mut first, 0).map(|()| first.len())
        } else {
            Ok(0)
        };
        let n = read.map_err(ArchiveError::io("reading the first page of", name))?;
        let found = Identity::of_segment(&first[..n]).map_err(|source| ArchiveError::Identity {
            what: format!("{name} is refused by repository {}", self.location()),
            source,
        })?;
        id.admits(&found)
            .map_err(|mismatch| ArchiveError::ForeignFile {
                name: name.into(),
                location: self.location(),
                mismatch,
            })
    }
}

/// The identity of the cluster in data directory `dir`: the system identifier of its
/// `global/pg_control`, and the segment size and major version of the newest segment in its
/// `pg_wal`, whose system identifier must agree.
pub fn data_directory_identity(dir: &Path) -> Result<Identity, ArchiveError> {
    let sysid = match control_file_identity(dir)? {
        Some(id) => id,
        None => {
            return Err(ArchiveError::Config(format!(
                "{} is not a PostgreSQL data directory (no global/pg_control)",
                dir.display()
            )))
        }
    };
    let wal = dir.join("pg_wal");
    let rd = fs::read_dir(&wal).map_err(ArchiveError::io("listing", &wal))?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| matches!(classify(n), FileKind::Segment { .. }))
        .collect();
    names.sort_unstable_by(|a, b| b.cmp(a));
    // The newest segment that has been written: a segment the server created ahead of need
    // is zeros (or sparse) until it is used, and has no header yet.
    let mut unread = None;
    for name in &names {
        let path = wal.join(name);
        let mut first = [0u8; FIRST_PAGE_HEADER_LEN];
        File::open(&path)
            .and_then(|f| f.read_exact_at(&mut first, 0))
            .map_err(ArchiveError::io("reading", &path))?;
        let id = match Identity::of_segment(&first) {
            Ok(id) => id,
            Err(source) => {
                unread.get_or_insert(ArchiveError::Identity {
                    what: path.display().to_string(),
                    source,
                });
                continue;
            }
        };
        if id.system_identifier != sysid {
            return Err(ArchiveError::Config(format!(
                "{}: global/pg_control names system {sysid}, pg_wal/{name} system {}",
                dir.display(),
                id.system_identifier
            )));
        }
        return Ok(id);
    }
    Err(unread
        .unwrap_or_else(|| ArchiveError::Config(format!("{} holds no WAL segment", wal.display()))))
}

/// The system identifier in `dir/global/pg_control`; `None` when `dir` has no such file.
/// PostgreSQL runs restore_command in the data directory, so `get` reads it from `.`.
pub fn control_file_identity(dir: &Path) -> Result<Option<u64>, ArchiveError> {
    let path = dir.join("global").join("pg_control");
    let mut first = [0u8; 8];
    let read = File::open(&path).and_then(|f| {
        let n = f.read_at(&mut first, 0)?;
        Ok(n)
    });
    match read {
        Ok(n) => control_file_system_identifier(&first[..n])
            .map(Some)
            .map_err(|source| ArchiveError::Identity {
                what: path.display().to_string(),
                source,
            }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ArchiveError::io("reading", &path)(e)),
    }
}

impl Repository {
    /// Refuses to restore into the data directory `dir` when its `global/pg_control` names
    /// another system than the repository's (a `restore_command` pointed at another cluster's
    /// archive); a `dir` without `global/pg_control` is not checked.
    pub fn admit_data_directory(&self, dir: &Path) -> Result<(), ArchiveError> {
        let id = self.identity()?;
        match control_file_identity(dir)? {
            Some(found) if found != id.system_identifier => Err(ArchiveError::ForeignFile {
                name: format!("the data directory {}", dir.display()),
                location: self.location(),
                mismatch: crate::identity::Mismatch::System {
                    expected: id.system_identifier,
                    found,
                },
            }),
            _ => Ok(()),
        }
    }
}
