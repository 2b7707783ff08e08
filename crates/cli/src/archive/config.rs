//! Where `pgcompress archive` finds its settings: flags, then the environment, then a TOML
//! config file, then the defaults.

use crate::args::archive::parse_spec;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use ::archive::{Location, S3Options};
use anyhow::{anyhow, bail, Context};
use codec::Spec;
use serde::Deserialize;

/// Environment variable that stands in for `--repo`.
pub const REPO_ENV: &str = "PGCOMPRESS_REPO";
/// Environment variable that stands in for `--config`.
pub const CONFIG_ENV: &str = "PGCOMPRESS_CONFIG";
/// Environment variable that stands in for `--method`.
pub const METHOD_ENV: &str = "PGCOMPRESS_METHOD";
/// Environment variables for `--endpoint`, first found wins (the AWS SDKs' names).
const ENDPOINT_ENVS: [&str; 2] = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"];
/// Environment variables for `--region`, first found wins.
const REGION_ENVS: [&str; 2] = ["AWS_REGION", "AWS_DEFAULT_REGION"];

/// The config file's keys; anything else is refused, so that a typo is not silently ignored.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    repo: Option<String>,
    method: Option<String>,
    endpoint: Option<String>,
    region: Option<String>,
}

/// What the flags said.
#[derive(Debug, Default)]
pub struct Flags<'a> {
    pub config: Option<&'a Path>,
    pub repo: Option<&'a OsStr>,
    pub method: Option<&'a Spec>,
    pub endpoint: Option<&'a str>,
    pub region: Option<&'a str>,
}

/// Settings after flags, environment, config file and defaults were weighed.
#[derive(Debug)]
pub struct Settings {
    pub location: Location,
    pub s3: S3Options,
    pub method: Spec,
}

/// Resolves the settings, reading the environment through `env`.
pub fn resolve(flags: &Flags, env: impl Fn(&str) -> Option<OsString>) -> anyhow::Result<Settings> {
    let var = |name: &str| env(name).filter(|v| !v.is_empty());
    let text_var = |name: &str| -> anyhow::Result<Option<String>> {
        var(name)
            .map(|v| {
                v.into_string()
                    .map_err(|_| anyhow!("{name} is not valid UTF-8"))
            })
            .transpose()
    };
    let first_text_var = |names: &[&str]| -> anyhow::Result<Option<String>> {
        for n in names {
            if let Some(v) = text_var(n)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    };

    let config_path = match flags.config {
        Some(p) => Some(p.to_path_buf()),
        None => var(CONFIG_ENV).map(PathBuf::from),
    };
    let file = match &config_path {
        Some(p) => load(p)?,
        None => FileConfig::default(),
    };
    let in_file = |key: &str| {
        format!(
            "`{key}` in {}",
            config_path.as_deref().unwrap_or(Path::new("")).display()
        )
    };

    let location = if let Some(r) = flags.repo {
        location_of(r).context("--repo")?
    } else if let Some(r) = var(REPO_ENV) {
        location_of(&r).context(REPO_ENV)?
    } else if let Some(r) = &file.repo {
        match location_of(OsStr::new(r)).with_context(|| in_file("repo"))? {
            // A relative directory in a config file is relative to the file, not to
            // wherever PostgreSQL happens to run the command.
            Location::Dir(d) if d.is_relative() => {
                let base = config_path
                    .as_deref()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new(""));
                Location::Dir(base.join(d))
            }
            l => l,
        }
    } else {
        bail!(
            "no repository: give --repo DIR|s3://BUCKET/PREFIX, set {REPO_ENV}, or set `repo` in \
the config file (--config or {CONFIG_ENV})"
        );
    };

    let method = if let Some(m) = flags.method {
        *m
    } else if let Some(m) = text_var(METHOD_ENV)? {
        parse_spec(&m).map_err(|e| anyhow!("{METHOD_ENV}: {e}"))?
    } else if let Some(m) = &file.method {
        parse_spec(m).map_err(|e| anyhow!("{}: {e}", in_file("method")))?
    } else {
        parse_spec(::archive::DEFAULT_METHOD).map_err(|e| anyhow!("default method: {e}"))?
    };

    let endpoint = match flags.endpoint {
        Some(e) => Some(e.to_owned()),
        None => first_text_var(&ENDPOINT_ENVS)?.or_else(|| file.endpoint.clone()),
    };
    let region = match flags.region {
        Some(r) => Some(r.to_owned()),
        None => first_text_var(&REGION_ENVS)?.or_else(|| file.region.clone()),
    };
    Ok(Settings {
        location,
        s3: S3Options { endpoint, region },
        method,
    })
}

/// Reads and parses the config file.
fn load(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).map_err(|e| {
        // toml's messages span several lines (a snippet of the file); keep the first.
        let msg = e.message().to_owned();
        let at = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                format!(" (line {line})")
            })
            .unwrap_or_default();
        anyhow!("config file {}{at}: {msg}", path.display())
    })
}

/// `--repo`'s value as a location: `s3://...` or a directory (which need not be UTF-8).
fn location_of(s: &OsStr) -> anyhow::Result<Location> {
    match s.to_str() {
        Some(s) => Ok(Location::parse(s)?),
        None => Ok(Location::Dir(PathBuf::from(s))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

    /// How a method prints once parsed (`zstd:level=1` prints as `zstd:1`).
    fn spec_text(s: &str) -> String {
        parse_spec(s).expect("spec").to_string()
    }

    fn config_file(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("pgcompress.toml");
        std::fs::write(&p, text).expect("write config");
        p
    }

    #[test]
    fn flags_beat_environment_beat_file_beat_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = config_file(
            dir.path(),
            "repo = \"s3://from-file/wal\"\nmethod = \"lz4\"\nendpoint = \"http://file:1\"\nregion = \"file-region\"\n",
        );
        let all_env = env_of(&[
            (CONFIG_ENV, cfg.to_str().expect("utf-8")),
            (REPO_ENV, "/env/repo"),
            (METHOD_ENV, "zstd:level=1"),
            ("AWS_ENDPOINT_URL", "http://env:2"),
            ("AWS_DEFAULT_REGION", "env-default-region"),
            ("AWS_REGION", "env-region"),
        ]);
        // The file alone.
        let s = resolve(
            &Flags::default(),
            env_of(&[(CONFIG_ENV, cfg.to_str().expect("utf-8"))]),
        )
        .expect("resolve");
        assert_eq!(
            s.location,
            Location::S3 {
                bucket: "from-file".into(),
                prefix: "wal".into()
            }
        );
        assert_eq!(s.method.to_string(), spec_text("lz4"));
        assert_eq!(s.s3.endpoint.as_deref(), Some("http://file:1"));
        assert_eq!(s.s3.region.as_deref(), Some("file-region"));
        // The environment over the file.
        let s = resolve(&Flags::default(), &all_env).expect("resolve");
        assert_eq!(s.location, Location::Dir("/env/repo".into()));
        assert_eq!(s.method.to_string(), spec_text("zstd:level=1"));
        assert_eq!(s.s3.endpoint.as_deref(), Some("http://env:2"));
        assert_eq!(s.s3.region.as_deref(), Some("env-region"));
        // Flags over both.
        let spec = parse_spec("pglz").expect("spec");
        let flags = Flags {
            config: None,
            repo: Some(OsStr::new("s3://flag")),
            method: Some(&spec),
            endpoint: Some("https://flag:3"),
            region: Some("flag-region"),
        };
        let s = resolve(&flags, &all_env).expect("resolve");
        assert_eq!(
            s.location,
            Location::S3 {
                bucket: "flag".into(),
                prefix: String::new()
            }
        );
        assert_eq!(s.method.to_string(), spec_text("pglz"));
        assert_eq!(s.s3.endpoint.as_deref(), Some("https://flag:3"));
        assert_eq!(s.s3.region.as_deref(), Some("flag-region"));
        // Defaults.
        let s = resolve(
            &Flags {
                repo: Some(OsStr::new("/r")),
                ..Flags::default()
            },
            env_of(&[]),
        )
        .expect("resolve");
        assert_eq!(s.method.to_string(), spec_text(::archive::DEFAULT_METHOD));
        assert_eq!(s.s3, S3Options::default());
    }

    #[test]
    fn a_relative_directory_in_the_file_is_relative_to_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = config_file(dir.path(), "repo = \"wal-archive\"\n");
        let flags = Flags {
            config: Some(&cfg),
            ..Flags::default()
        };
        let s = resolve(&flags, env_of(&[])).expect("resolve");
        assert_eq!(s.location, Location::Dir(dir.path().join("wal-archive")));
    }

    #[test]
    fn bad_settings_are_one_line_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let typo = config_file(dir.path(), "repo = \"/r\"\nendpont = \"http://x\"\n");
        let flags = Flags {
            config: Some(&typo),
            ..Flags::default()
        };
        let e = format!("{:#}", resolve(&flags, env_of(&[])).expect_err("typo"));
        assert!(e.contains("endpont") && e.contains("line 2"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");

        let bad_method = config_file(dir.path(), "repo = \"/r\"\nmethod = \"zstd:level=99\"\n");
        let flags = Flags {
            config: Some(&bad_method),
            ..Flags::default()
        };
        let e = format!("{:#}", resolve(&flags, env_of(&[])).expect_err("method"));
        assert!(e.contains("`method`"), "{e}");

        let e = format!(
            "{:#}",
            resolve(&Flags::default(), env_of(&[])).expect_err("no repo")
        );
        assert!(e.starts_with("no repository"), "{e}");
        let e = format!(
            "{:#}",
            resolve(&Flags::default(), env_of(&[(REPO_ENV, "s3://")])).expect_err("no bucket")
        );
        assert!(e.contains(REPO_ENV) && e.contains("bucket"), "{e}");
        let missing = dir.path().join("nope.toml");
        let flags = Flags {
            config: Some(&missing),
            ..Flags::default()
        };
        let e = format!("{:#}", resolve(&flags, env_of(&[])).expect_err("missing"));
        assert!(e.contains("nope.toml"), "{e}");
    }
}
