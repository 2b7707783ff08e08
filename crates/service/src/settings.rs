//! Where a command's settings come from: a flag, then the environment, then a TOML config
//! file, then the default; the first layer that has a value wins, and the value remembers
//! which layer it came from, so that an error about it says where to fix it
//! (`PGCOMPRESS_METHOD: unknown method`, `` `repo` in /etc/pgcompress.toml: ... ``).
//!
//! The mechanics live here; which keys a command has, and what they mean, stay with the
//! command. An empty environment variable counts as unset, as in libpq and the AWS SDKs. A
//! config file's keys are the fields of a `#[serde(deny_unknown_fields)]` struct, so a typo is
//! refused with its line instead of being ignored.

use serde::de::DeserializeOwned;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The layer a value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag (`--repo`).
    Flag(&'static str),
    /// An environment variable.
    Env(&'static str),
    /// A key of the config file.
    File {
        /// The key.
        key: &'static str,
        /// The file, as it was given.
        path: PathBuf,
    },
    /// The built-in default.
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(name) | Source::Env(name) => f.write_str(name),
            Source::File { key, path } => write!(f, "`{key}` in {}", path.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// A setting's value and the layer it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

impl<T> Sourced<T> {
    /// `value` from `source`.
    pub fn new(value: T, source: Source) -> Self {
        Sourced { value, source }
    }

    /// A flag's value, if the flag was given.
    pub fn flag(name: &'static str, value: Option<T>) -> Option<Self> {
        value.map(|value| Sourced::new(value, Source::Flag(name)))
    }

    /// Interprets the value; an error names the layer it came from.
    pub fn parse<U, E: fmt::Display>(
        self,
        f: impl FnOnce(T) -> Result<U, E>,
    ) -> Result<Sourced<U>, SettingsError> {
        match f(self.value) {
            Ok(value) => Ok(Sourced::new(value, self.source)),
            Err(e) => Err(SettingsError::Value {
                origin: self.source,
                message: e.to_string(),
            }),
        }
    }
}

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// An environment variable holds bytes that are not UTF-8 where text is needed.
    #[error("{0} is not valid UTF-8")]
    NotUtf8(Source),
    /// The config file could not be read.
    #[error("reading config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The config file is not TOML, or has a key that is not a setting, or a value of the
    /// wrong type.
    #[error("config file {}{}: {message}", path.display(), line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line of the mistake, when known.
        line: Option<usize>,
        /// The first line of the parser's message.
        message: String,
    },
    /// A value does not mean anything to its setting.
    #[error("{origin}: {message}")]
    Value {
        /// Where the value came from.
        origin: Source,
        /// What is wrong with it.
        message: String,
    },
}

/// The environment, as a command reads its settings from it (injected, so tests need not
/// change the process's).
pub struct Environment<F> {
    var: F,
}

impl<F: Fn(&str) -> Option<OsString>> Environment<F> {
    /// Reads variables through `var` (`std::env::var_os` for the process).
    pub fn new(var: F) -> Self {
        Environment { var }
    }

    /// The first of `names` that is set and not empty, as bytes (paths need not be UTF-8).
    pub fn os(&self, names: &[&'static str]) -> Option<Sourced<OsString>> {
        names.iter().find_map(|&name| {
            (self.var)(name)
                .filter(|v| !v.is_empty())
                .map(|v| Sourced::new(v, Source::Env(name)))
        })
    }

    /// The first of `names` that is set and not empty, as text; a value that is not UTF-8 is
    /// an error, not skipped.
    pub fn text(&self, names: &[&'static str]) -> Result<Option<Sourced<String>>, SettingsError> {
        let Some(Sourced { value, source }) = self.os(names) else {
            return Ok(None);
        };
        match value.into_string() {
            Ok(text) => Ok(Some(Sourced::new(text, source))),
            Err(_) => Err(SettingsError::NotUtf8(source)),
        }
    }
}

/// A loaded config file: its keys as the fields of `T`.
#[derive(Debug)]
pub struct ConfigFile<T> {
    path: PathBuf,
    keys: T,
}

impl<T: DeserializeOwned> ConfigFile<T> {
    /// Reads and parses `path`; `T` refuses unknown keys with `deny_unknown_fields`.
    pub fn load(path: &Path) -> Result<Self, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let keys = toml::from_str(&text).map_err(|e| SettingsError::Syntax {
            path: path.to_path_buf(),
            line: e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1),
            // toml's messages span several lines (a snippet of the file); keep the first.
            message: e.message().lines().next().unwrap_or_default().to_owned(),
        })?;
        Ok(ConfigFile {
            path: path.to_path_buf(),
            keys,
        })
    }
}

impl<T> ConfigFile<T> {
    /// The parsed keys.
    pub fn keys(&self) -> &T {
        &self.keys
    }

    /// The file, as it was given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value of `key` (read from the keys by `get`), marked as coming from this file.
    pub fn get<V: Clone>(
        &self,
        key: &'static str,
        get: impl FnOnce(&T) -> Option<&V>,
    ) -> Option<Sourced<V>> {
        get(&self.keys).map(|v| {
            Sourced::new(
                v.clone(),
                Source::File {
                    key,
                    path: self.path.clone(),
                },
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(serde::Deserialize, Debug, Default)]
    #[serde(deny_unknown_fields)]
    struct Keys {
        colour: Option<String>,
        size: Option<i64>,
    }

    fn env_of(pairs: &[(&str, &[u8])]) -> Environment<impl Fn(&str) -> Option<OsString>> {
        use std::os::unix::ffi::OsStringExt;
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from_vec(v.to_vec())))
            .collect();
        Environment::new(move |k: &str| map.get(k).cloned())
    }

    fn file(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("settings.toml");
        std::fs::write(&p, text).expect("write");
        p
    }

    /// The value of `colour` by the layers: flag, then `COLOUR`/`COLOR`, then the file.
    fn colour(
        flag: Option<&str>,
        env: &Environment<impl Fn(&str) -> Option<OsString>>,
        file: &ConfigFile<Keys>,
    ) -> Option<Sourced<String>> {
        Sourced::flag("--colour", flag.map(str::to_owned))
            .or(env.text(&["COLOUR", "COLOR"]).expect("utf-8"))
            .or_else(|| file.get("colour", |k| k.colour.as_ref()))
    }

    #[test]
    fn the_first_layer_with_a_value_wins_and_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file(dir.path(), "colour = \"green\"\nsize = 3\n");
        let f = ConfigFile::<Keys>::load(&path).expect("load");
        assert_eq!(f.keys().size, Some(3));
        let from_file = Source::File {
            key: "colour",
            path: path.clone(),
        };
        let none = env_of(&[]);
        assert_eq!(
            colour(None, &none, &f),
            Some(Sourced::new("green".into(), from_file.clone()))
        );
        // An empty variable is unset; the second name stands in for the first.
        let env = env_of(&[("COLOUR", b""), ("COLOR", b"blue")]);
        assert_eq!(
            colour(None, &env, &f),
            Some(Sourced::new("blue".into(), Source::Env("COLOR")))
        );
        let env = env_of(&[("COLOUR", b"red"), ("COLOR", b"blue")]);
        assert_eq!(
            colour(None, &env, &f),
            Some(Sourced::new("red".into(), Source::Env("COLOUR")))
        );
        assert_eq!(
            colour(Some("white"), &env, &f),
            Some(Sourced::new("white".into(), Source::Flag("--colour")))
        );
        assert_eq!(
            from_file.to_string(),
            format!("`colour` in {}", path.display())
        );
    }

    #[test]
    fn errors_say_where_the_bad_value_came_from() {
        let env = env_of(&[("COLOUR", b"\xff")]);
        let e = env.text(&["COLOUR"]).expect_err("not UTF-8");
        assert_eq!(e.to_string(), "COLOUR is not valid UTF-8");
        // Bytes are fine where bytes are wanted (paths).
        assert!(env.os(&["COLOUR"]).is_some());

        let e = Sourced::new("x", Source::Env("SIZE"))
            .parse(|v| v.parse::<u32>())
            .expect_err("not a number");
        assert_eq!(e.to_string(), "SIZE: invalid digit found in string");

        let dir = tempfile::tempdir().expect("tempdir");
        let typo = file(dir.path(), "colour = \"red\"\ncolor = \"blue\"\n");
        let e = ConfigFile::<Keys>::load(&typo).expect_err("unknown key");
        let msg = e.to_string();
        assert!(
            msg.contains("color") && msg.contains("(line 2)") && msg.contains("settings.toml"),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
        let wrong_type = file(dir.path(), "size = \"big\"\n");
        let msg = ConfigFile::<Keys>::load(&wrong_type)
            .expect_err("wrong type")
            .to_string();
        assert!(msg.contains("(line 1)"), "{msg}");
        let missing = dir.path().join("none.toml");
        let msg = ConfigFile::<Keys>::load(&missing)
            .expect_err("missing")
            .to_string();
        assert!(
            msg.starts_with("reading config file") && msg.contains("none.toml"),
            "{msg}"
        );
    }
}
