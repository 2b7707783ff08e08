//! The tools compared: how each is invoked to push and get one segment, where it keeps its files, and
//! pgBackRest's configuration and stanza.

use crate::error::{Error, IoContext, Result};
use crate::timing::timed;
use codec::Spec;
use pgcluster::Cluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;

/// The stanza name in every pgBackRest configuration.
const STANZA: &str = "bench";

/// One archiver being compared.
#[derive(Clone, Debug)]
pub enum Tool {
    /// `pgcompress archive push [--method SPEC]` and `archive get`.
    Pgcompress(Option<Spec>),
    /// `pgbackrest archive-push|archive-get` with a compress type and level.
    Pgbackrest(&'static str, u32),
    /// A compressor program: name, level flag, file suffix. Push compresses into a file, get decompresses it.
    Program(&'static str, &'static str, &'static str),
}

/// The programs compared, in the order they are printed.
pub const GZIP: Tool = Tool::Program("gzip", "-6", "gz");
/// See [`GZIP`].
pub const ZSTD: Tool = Tool::Program("zstd", "-3", "zst");
/// See [`GZIP`].
pub const XZ: Tool = Tool::Program("xz", "-6", "xz");

impl Tool {
    /// The name in tables and JSON.
    pub fn label(&self) -> String {
        match self {
            Tool::Pgcompress(None) => format!(
                "pgcompress (default {})",
                Spec::from_str(::archive::DEFAULT_METHOD)
                    .map_or_else(|_| ::archive::DEFAULT_METHOD.to_string(), |s| s.to_string())
            ),
            Tool::Pgcompress(Some(s)) => format!("pgcompress --method {s}"),
            Tool::Pgbackrest(t, l) => format!("pgbackrest {t}:{l}"),
            Tool::Program(p, l, _) => format!("{p} {l}"),
        }
    }

    /// The program that must be on PATH (pgcompress is this executable).
    pub fn program(&self) -> Option<&'static str> {
        match self {
            Tool::Pgcompress(_) => None,
            Tool::Pgbackrest(..) => Some("pgbackrest"),
            Tool::Program(p, ..) => Some(*p),
        }
    }
}

/// Where one tool keeps its files during the run.
pub struct Place {
    /// The tool that keeps them.
    pub tool: Tool,
    /// The repository (pgcompress, pgBackRest) or the directory of compressed files (programs).
    repo: PathBuf,
    /// pgBackRest's configuration file.
    conf: Option<PathBuf>,
}

impl Place {
    /// `archive init` of a pgcompress repository for the cluster whose WAL it will hold
    /// (`--pgdata DIR` or `--from-segment FILE`), as an operator sets one up; other tools
    /// need nothing here.
    fn init(&self, me: &Path, identity: [&std::ffi::OsStr; 2]) -> Result<()> {
        if !matches!(self.tool, Tool::Pgcompress(_)) {
            return Ok(());
        }
        let mut c = Command::new(me);
        c.args(["archive", "init", "--repo"])
            .arg(&self.repo)
            .args(identity);
        timed(c, None, &format!("{} init", self.tool.label()))?;
        Ok(())
    }

    /// The archive command for `segment`, and the file its standard output goes to.
    pub fn push(&self, me: &Path, segment: &Path) -> (Command, Option<PathBuf>) {
        let name = file_name(segment);
        match &self.tool {
            Tool::Pgcompress(method) => {
                let mut c = Command::new(me);
                c.args(["archive", "push", "--repo"]).arg(&self.repo);
                if let Some(m) = method {
                    c.arg("--method").arg(m.to_string());
                }
                c.arg(segment);
                (c, None)
            }
            Tool::Pgbackrest(..) => (
                self.pgbackrest("archive-push", &[segment.as_os_str()]),
                None,
            ),
            Tool::Program(p, level, suffix) => {
                let mut c = Command::new(p);
                c.args([*level, "-c"]).arg(segment);
                (c, Some(self.repo.join(format!("{name}.{suffix}"))))
            }
        }
    }

    /// The restore command for segment `name` into `dest`, and the file its standard output goes to.
    pub fn get(&self, me: &Path, name: &str, dest: &Path) -> (Command, Option<PathBuf>) {
        match &self.tool {
            Tool::Pgcompress(_) => {
                let mut c = Command::new(me);
                c.args(["archive", "get", "--repo"])
                    .arg(&self.repo)
                    .arg(name)
                    .arg(dest);
                (c, None)
            }
            Tool::Pgbackrest(..) => (
                self.pgbackrest(
                    "archive-get",
                    &[std::ffi::OsStr::new(name), dest.as_os_str()],
                ),
                None,
            ),
            Tool::Program(p, _, suffix) => {
                let mut c = Command::new(p);
                c.args(["-d", "-c"])
                    .arg(self.repo.join(format!("{name}.{suffix}")));
                (c, Some(dest.to_path_buf()))
            }
        }
    }

    fn pgbackrest(&self, command: &str, args: &[&std::ffi::OsStr]) -> Command {
        let mut c = Command::new("pgbackrest");
        if let Some(conf) = &self.conf {
            c.arg(format!("--config={}", conf.display()));
        }
        c.arg(format!("--stanza={STANZA}")).arg(command).args(args);
        c
    }

    /// Bytes the tool stored for segment `name`.
    pub fn stored(&self, name: &str) -> Result<u64> {
        let path = self.stored_path(name)?;
        Ok(std::fs::metadata(&path)
            .io(|| format!("{} stored nothing at {}", self.tool.label(), path.display()))?
            .len())
    }

    /// Deletes what the tool stored for segment `name`, so that the next push of it does the whole work again.
    pub fn forget(&self, name: &str) -> Result<()> {
        let path = self.stored_path(name)?;
        std::fs::remove_file(&path).io(|| format!("deleting {}", path.display()))
    }

    /// The file the tool stored segment `name` in.
    fn stored_path(&self, name: &str) -> Result<PathBuf> {
        Ok(match &self.tool {
            Tool::Pgcompress(_) => self.repo.join(format!("{name}.pgcz")),
            // pgBackRest names the file `<segment>-<sha1>.<ext>` under archive/<stanza>/<id>/<first 16 digits>/.
            Tool::Pgbackrest(..) => find_prefixed(&self.repo.join("archive"), &format!("{name}-"))?
                .ok_or_else(|| Error::NotStored {
                    tool: "pgbackrest".into(),
                    segment: name.to_string(),
                    repo: self.repo.clone(),
                })?,
            Tool::Program(_, _, suffix) => self.repo.join(format!("{name}.{suffix}")),
        })
    }
}

/// The first file under `dir` (recursively) whose name starts with `prefix`.
fn find_prefixed(dir: &Path, prefix: &str) -> Result<Option<PathBuf>> {
    let listing = || format!("listing {}", dir.display());
    for e in std::fs::read_dir(dir).io(listing)? {
        let e = e.io(listing)?;
        let path = e.path();
        if e.file_type()
            .io(|| format!("reading the type of {}", path.display()))?
            .is_dir()
        {
            if let Some(found) = find_prefixed(&path, prefix)? {
                return Ok(Some(found));
            }
        } else if e.file_name().to_string_lossy().starts_with(prefix) {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// The last component of `p`, for messages and names.
pub fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A directory the server user can write into.
pub fn mkdir_for_server(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).io(|| format!("creating {}", dir.display()))?;
    pgcluster::run::chown_to_server_user(dir)?;
    Ok(())
}

/// Repositories for every tool, and a stanza for every pgBackRest compress type (while the server runs).
pub fn prepare(me: &Path, tools: &[Tool], cluster: &Cluster, root: &Path) -> Result<Vec<Place>> {
    let mut places = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let dir = root.join(format!("tool{i}"));
        mkdir_for_server(&dir)?;
        let repo = dir.join("repo");
        mkdir_for_server(&repo)?;
        let conf = match tool {
            Tool::Pgbackrest(kind, level) => {
                eprintln!("bench archive: pgbackrest stanza-create with compress-type={kind} compress-level={level}");
                for sub in ["lock", "log"] {
                    mkdir_for_server(&dir.join(sub))?;
                }
                let conf = dir.join("pgbackrest.conf");
                let text = format!(
                    "[global]\nrepo1-path={repo}\ncompress-type={kind}\ncompress-level={level}\narchive-async=n\n\
                     log-level-console=warn\nlog-level-file=off\nlog-path={log}\nlock-path={lock}\n\n\
                     [{STANZA}]\npg1-path={data}\npg1-socket-path={sock}\npg1-port={port}\npg1-user={user}\n",
                    repo = repo.display(),
                    log = dir.join("log").display(),
                    lock = dir.join("lock").display(),
                    data = cluster.data_dir().display(),
                    sock = cluster.socket_dir().display(),
                    port = cluster.port(),
                    user = pgcluster::SUPERUSER,
                );
                std::fs::write(&conf, text).io(|| format!("writing {}", conf.display()))?;
                pgcluster::run::chown_to_server_user(&conf)?;
                let place = Place {
                    tool: tool.clone(),
                    repo: repo.clone(),
                    conf: Some(conf.clone()),
                };
                let cmd = place.pgbackrest("stanza-create", &[]);
                timed(cmd, None, &format!("{} stanza-create", tool.label()))?;
                Some(conf)
            }
            _ => None,
        };
        let place = Place {
            tool: tool.clone(),
            repo,
            conf,
        };
        place.init(me, ["--pgdata".as_ref(), cluster.data_dir().as_os_str()])?;
        places.push(place);
    }
    Ok(places)
}

/// The first line of `--version` (pgBackRest: `version`).
pub fn tool_version(tool: &Tool) -> String {
    let output = match tool {
        Tool::Pgcompress(_) => return format!("pgcompress {}", env!("CARGO_PKG_VERSION")),
        Tool::Pgbackrest(..) => Command::new("pgbackrest").arg("version").output(),
        Tool::Program(p, ..) => Command::new(p).arg("--version").output(),
    };
    output
        .ok()
        .and_then(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// Stored bytes of `segments` with each of `tools` (pushed one file at a time, as archive_command would),
/// for the demo; the repositories live in `dir`. Tools whose program is not installed are left out.
pub fn stored_bytes(
    me: &Path,
    tools: &[Tool],
    segments: &[PathBuf],
    dir: &Path,
) -> Result<Vec<(Tool, u64)>> {
    mkdir_for_server(dir)?;
    let mut out = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        if matches!(tool, Tool::Pgbackrest(..)) {
            return Err(Error::NoPgbackrest);
        }
        if tool
            .program()
            .is_some_and(|p| pgcluster::which(p).is_none())
        {
            continue;
        }
        let repo = dir.join(format!("tool{i}"));
        mkdir_for_server(&repo)?;
        let place = Place {
            tool: tool.clone(),
            repo,
            conf: None,
        };
        if let Some(first) = segments.first() {
            place.init(me, ["--from-segment".as_ref(), first.as_os_str()])?;
        }
        let mut total = 0;
        for seg in segments {
            let (cmd, to) = place.push(me, seg);
            timed(
                cmd,
                to.as_deref(),
                &format!("{} of {}", tool.label(), seg.display()),
            )?;
            total += place.stored(&file_name(seg))?;
        }
        out.push((tool.clone(), total));
    }
    Ok(out)
}
