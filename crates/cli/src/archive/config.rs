//! Where `pgcompress archive` finds its settings: flags, then the environment, then a TOML
//! config file, then the defaults. The layers are [`service::settings`]'s; the keys and what
//! they mean are the archive's.

use crate::args::archive::parse_spec;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use ::archive::{Location, S3Options};
use anyhow::anyhow;
use codec::Spec;
use serde::Deserialize;
use service::settings::{ConfigFile, Environment, Source, Sourced};

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
    let env = Environment::new(env);
    let config_path = match flags.config {
        Some(p) => Some(p.to_path_buf()),
        None => env.os(&[CONFIG_ENV]).map(|p| PathBuf::from(p.value)),
    };
    let file = config_path
        .as_deref()
        .map(ConfigFile::<FileConfig>::load)
        .transpose()?;
    let in_file =
        |key, get: fn(&FileConfig) -> Option<&String>| file.as_ref().and_then(|f| f.get(key, get));

    let repo = Sourced::flag("--repo", flags.repo.map(OsStr::to_os_string))
        .or_else(|| env.os(&[REPO_ENV]))
        .or_else(|| in_file("repo", |f| f.repo.as_ref()).map(|r| Sourced::new(r.value.into(), r.source)))
        .ok_or_else(|| {
            anyhow!(
                "no repository: give --repo DIR|s3://BUCKET/PREFIX, set {REPO_ENV}, or set `repo` in \
the config file (--config or {CONFIG_ENV})"
            )
        })?
        .parse(|r| location_of(&r))?;
    let location = match (repo.value, &file) {
        // A relative directory in a config file is relative to the file, not to wherever
        // PostgreSQL happens to run the command.
        (Location::Dir(d), Some(f))
            if d.is_relative() && matches!(repo.source, Source::File { .. }) =>
        {
            Location::Dir(f.path().parent().unwrap_or(Path::new("")).join(d))
        }
        (l, _) => l,
    };

    let method = match flags.method {
        Some(m) => *m,
        None => {
            env.text(&[METHOD_ENV])?
                .or_else(|| in_file("method", |f| f.method.as_ref()))
                .unwrap_or_else(|| {
                    Sourced::new(::archive::DEFAULT_METHOD.to_owned(), Source::Default)
                })
                .parse(|m| parse_spec(&m))?
                .value
        }
    };

    // A text setting without a default: flag, environment (first of several names), file.
    let text = |flag: &'static str,
                value: Option<&str>,
                envs: &[&'static str],
                key: &'static str,
                get: fn(&FileConfig) -> Option<&String>|
     -> anyhow::Result<Option<String>> {
        Ok(Sourced::flag(flag, value.map(str::to_owned))
            .or(env.text(envs)?)
            .or_else(|| in_file(key, get))
            .map(|v| v.value))
    };
    Ok(Settings {
        location,
        s3: S3Options {
            endpoint: text(
                "--endpoint",
                flags.endpoint,
                &ENDPOINT_ENVS,
                "endpoint",
                |f| f.endpoint.as_ref(),
            )?,
            region: text("--region", flags.region, &REGION_ENVS, "region", |f| {
                f.region.as_ref()
            })?,
        },
        method,
    })
}

/// `--repo`'s value as a location: `s3://...` or a directory (which need not be UTF-8).
fn location_of(s: &OsStr) -> Result<Location, ::archive::ArchiveError> {
    match s.to_str() {
        Some(s) => Location::parse(s),
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
