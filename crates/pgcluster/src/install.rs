//! Finding the PostgreSQL binaries to test against.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::run::run_as_current_user;

/// Environment variable naming the PostgreSQL bin directory to use, overriding every other way of finding it.
pub const BINDIR_ENV: &str = "PGCOMPRESS_PG_BINDIR";

/// Environment variable choosing the PostgreSQL major of a whole test run (for example `17`), found under
/// [`MAJORS_ROOT_ENV`] or Debian's `/usr/lib/postgresql/<major>/bin`. Unset: the installation [`PgInstall::find`]
/// finds today (PostgreSQL 15 on the project's machines).
pub const MAJOR_ENV: &str = "PGCOMPRESS_PG_MAJOR";

/// Environment variable naming the directory `scripts/pg-majors.sh` installs majors into (`<root>/<major>/bin`).
pub const MAJORS_ROOT_ENV: &str = "PGCOMPRESS_PG_ROOT";

/// Where `scripts/pg-majors.sh` installs PostgreSQL 16, 17 and 18 unless [`MAJORS_ROOT_ENV`] says otherwise.
pub const DEFAULT_MAJORS_ROOT: &str = "/opt/pgcompress-pg";

/// A PostgreSQL installation: where its programs live and which major version it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgInstall {
    bindir: PathBuf,
    major: u32,
    /// Where client programs this installation lacks come from, in order (a server-only package such as 16's
    /// from npm has no psql, pg_dump or pg_basebackup): the next newer majors installed by
    /// `scripts/pg-majors.sh` first, since pg_dump and pg_basebackup refuse servers newer than themselves,
    /// then the newest Debian bindir.
    clients: Vec<PathBuf>,
}

impl PgInstall {
    /// Finds PostgreSQL: `$PGCOMPRESS_PG_BINDIR`, then `pg_config --bindir` from `PATH`, then the directory of
    /// `initdb` on `PATH`, then the newest `/usr/lib/postgresql/*/bin` (Debian's layout).
    ///
    /// With `$PGCOMPRESS_PG_MAJOR` set (and no `$PGCOMPRESS_PG_BINDIR`), finds that major with
    /// [`PgInstall::of_major`] instead.
    pub fn find() -> Result<PgInstall> {
        if let Some(dir) = std::env::var_os(BINDIR_ENV) {
            // An explicit choice that does not work is an error, not a reason to silently test something else.
            return PgInstall::from_bindir(dir);
        }
        if let Some(major) = env_major()? {
            return PgInstall::of_major(major);
        }
        let mut tried = vec![format!("${BINDIR_ENV} unset")];
        match pg_config_bindir() {
            Some(dir) => match PgInstall::from_bindir(&dir) {
                Ok(found) => return Ok(found),
                Err(e) => tried.push(format!("pg_config: {e}")),
            },
            None => tried.push("no pg_config on PATH".into()),
        }
        match which("initdb").and_then(|p| p.canonicalize().ok()) {
            Some(initdb) => match initdb.parent().map(PgInstall::from_bindir) {
                Some(Ok(found)) => return Ok(found),
                Some(Err(e)) => tried.push(format!("initdb on PATH: {e}")),
                None => tried.push("initdb on PATH has no parent directory".into()),
            },
            None => tried.push("no initdb on PATH".into()),
        }
        match newest_debian_bindir() {
            Some(dir) => PgInstall::from_bindir(dir),
            None => {
                tried.push("no /usr/lib/postgresql/*/bin".into());
                Err(Error::InstallNotFound {
                    tried: tried.join("; "),
                })
            }
        }
    }

    /// Finds PostgreSQL `major`: `$PGCOMPRESS_PG_ROOT/<major>/bin` (default `/opt/pgcompress-pg`, filled by
    /// `scripts/pg-majors.sh`), then Debian's `/usr/lib/postgresql/<major>/bin`. The server there must report
    /// that major.
    pub fn of_major(major: u32) -> Result<PgInstall> {
        let root = majors_root();
        let candidates = [
            root.join(major.to_string()).join("bin"),
            PathBuf::from(format!("/usr/lib/postgresql/{major}/bin")),
        ];
        let mut tried = Vec::new();
        for dir in candidates {
            if !dir.join("postgres").is_file() {
                tried.push(format!("no {}", dir.join("postgres").display()));
                continue;
            }
            match PgInstall::from_bindir(&dir) {
                Ok(found) if found.major == major => return Ok(found),
                Ok(found) => tried.push(format!("{} is PostgreSQL {}", dir.display(), found.major)),
                Err(e) => tried.push(e.to_string()),
            }
        }
        Err(Error::MajorNotInstalled {
            major,
            tried: tried.join("; "),
        })
    }

    /// Uses the installation in `bindir`, checking that it has `initdb`, `postgres` and `pg_ctl`.
    pub fn from_bindir(bindir: impl AsRef<Path>) -> Result<PgInstall> {
        let bindir = bindir.as_ref().to_path_buf();
        for program in ["initdb", "postgres", "pg_ctl"] {
            if !bindir.join(program).is_file() {
                return Err(Error::NotABindir {
                    bindir,
                    program: program.into(),
                });
            }
        }
        // `postgres --version` is allowed as root, so no user switch is needed here.
        let mut cmd = Command::new(bindir.join("postgres"));
        cmd.arg("--version");
        let out = run_as_current_user(&mut cmd, None, Duration::from_secs(30))?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let major = parse_major(&text).ok_or(Error::BadVersion { output: text })?;
        let root = majors_root();
        let clients = (major + 1..=major + 3)
            .map(|m| root.join(m.to_string()).join("bin"))
            .chain(newest_debian_bindir())
            .filter(|d| *d != bindir && d.is_dir())
            .collect();
        Ok(PgInstall {
            bindir,
            major,
            clients,
        })
    }

    /// Path of the program `name` (for example `"psql"`): this installation's own, or, when it has none (a
    /// server-only package), the newest Debian installation's. Use [`own_bin`](Self::own_bin) for programs that
    /// must match the server's major, such as `pg_waldump`.
    pub fn bin(&self, name: &str) -> PathBuf {
        let own = self.bindir.join(name);
        if own.is_file() {
            return own;
        }
        self.clients
            .iter()
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
            .unwrap_or(own)
    }

    /// This installation's own program `name`, if it has one.
    pub fn own_bin(&self, name: &str) -> Option<PathBuf> {
        Some(self.bindir.join(name)).filter(|p| p.is_file())
    }

    /// The bin directory.
    pub fn bindir(&self) -> &Path {
        &self.bindir
    }

    /// Major version, for example 15 (for versions before 10 this is the first component only, e.g. 9).
    pub fn major(&self) -> u32 {
        self.major
    }
}

fn majors_root() -> PathBuf {
    std::env::var_os(MAJORS_ROOT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_MAJORS_ROOT))
}

/// The major `$PGCOMPRESS_PG_MAJOR` asks for, if set.
fn env_major() -> Result<Option<u32>> {
    match std::env::var(MAJOR_ENV) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::BadMajorEnv { value: v }),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::BadMajorEnv {
            value: v.to_string_lossy().into_owned(),
        }),
    }
}

/// Parses "postgres (PostgreSQL) 15.18 (Debian ...)" or "postgres (PostgreSQL) 17devel" into the major version.
fn parse_major(version: &str) -> Option<u32> {
    let rest = version.split(')').nth(1)?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn pg_config_bindir() -> Option<PathBuf> {
    let pg_config = which("pg_config")?;
    let mut cmd = Command::new(pg_config);
    cmd.arg("--bindir");
    let out = run_as_current_user(&mut cmd, None, Duration::from_secs(30)).ok()?;
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// The first executable file named `program` on `PATH`, as the shell would find it.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn newest_debian_bindir() -> Option<PathBuf> {
    let entries = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version)
        .map(|(_, bin)| bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!(
            parse_major("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"),
            Some(15)
        );
        assert_eq!(parse_major("postgres (PostgreSQL) 17devel"), Some(17));
        assert_eq!(parse_major("postgres (PostgreSQL) 9.6.24"), Some(9));
        assert_eq!(parse_major("garbage"), None);
    }

    #[test]
    fn finds_an_installation() {
        let install = PgInstall::find().expect("PostgreSQL must be installed to run pgtest");
        assert!(install.major() >= 10, "{install:?}");
        assert!(install.bin("psql").is_file());
    }

    #[test]
    fn a_missing_major_names_itself() {
        let err = PgInstall::of_major(9).expect_err("PostgreSQL 9 is not installed here");
        assert!(
            matches!(err, Error::MajorNotInstalled { major: 9, .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("PostgreSQL 9 is not installed"),
            "{err}"
        );
    }

    #[test]
    fn rejects_a_directory_without_postgres() {
        let err = PgInstall::from_bindir("/").expect_err("/ is no bindir");
        assert!(matches!(err, Error::NotABindir { .. }), "{err}");
    }
}
