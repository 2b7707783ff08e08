//! Compression specifications in PostgreSQL's syntax (`src/common/compression.c`,
//! `parse_compress_specification`): `method`, `method:LEVEL` or
//! `method:key[=value],key[=value]...` with keys `level`, `long` and `workers`.
//!
//! Extensions over PostgreSQL: `off` is an alias of `none`; `long=N` sets the zstd
//! long-distance window log (`long` alone = 27, `long=on|off|true|false` also accepted);
//! a bare integer may open a keyword list (`zstd:19,long`).

use std::fmt;
use std::str::FromStr;

use crate::method::Method;

/// Window log `long` alone selects (zstd's `ZSTD_WINDOWLOG_LIMIT_DEFAULT`, 128 MiB).
pub const DEFAULT_LONG_WINDOW_LOG: u32 = 27;
/// Accepted zstd window logs for `long=N` (`ZSTD_WINDOWLOG_MIN`..=`ZSTD_WINDOWLOG_MAX_64`).
pub const LONG_WINDOW_LOG_RANGE: std::ops::RangeInclusive<u32> = 10..=31;
/// Accepted zstd worker counts (`ZSTDMT_NBWORKERS_MAX` on 64-bit is 200).
pub const WORKERS_RANGE: std::ops::RangeInclusive<u32> = 0..=200;
/// The option keys a specification may carry.
pub const OPTION_KEYS: [&str; 3] = ["level", "long", "workers"];

/// A parsed compression specification: a method plus optional tuning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Spec {
    /// The compression method.
    pub method: Method,
    /// Compression level; `None` = the method's default level.
    pub level: Option<i32>,
    /// zstd long-distance matching window log; `None` = off.
    pub long: Option<u32>,
    /// zstd worker threads; `None` = single-threaded.
    pub workers: Option<u32>,
}

/// Why a compression specification was rejected; the message names the bad part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// Empty specification or an empty item in a list.
    #[error(
        "empty compression specification{}; valid methods: {}",
        within("", input),
        method_list(&Method::ALL)
    )]
    Empty {
        /// The whole input.
        input: String,
    },
    /// Unknown method name.
    #[error(
        "unknown compression method \"{method}\"{}; valid methods: {}",
        within(method, input),
        method_list(accepted)
    )]
    UnknownMethod {
        /// The name given.
        method: String,
        /// The whole specification.
        input: String,
        /// The methods the caller accepts.
        accepted: Vec<Method>,
    },
    /// A method this use of a specification does not take ([`Spec::parse_among`]).
    #[error(
        "compression method {method} cannot be used here{}; valid methods: {}",
        within(method.name(), input),
        method_list(accepted)
    )]
    NotAccepted {
        /// The method given.
        method: Method,
        /// The whole specification.
        input: String,
        /// The methods the caller accepts.
        accepted: Vec<Method>,
    },
    /// The method takes no level (pglz, snappy, none).
    #[error("compression method {method} does not accept a level in \"{input}\"")]
    LevelNotAccepted {
        /// The method.
        method: Method,
        /// The whole specification.
        input: String,
    },
    /// Level outside the method's range.
    #[error("compression level {level} is out of range for {method} ({}..{}) in \"{input}\"", range.0, range.1)]
    LevelOutOfRange {
        /// The level given.
        level: i64,
        /// The method.
        method: Method,
        /// Valid range, inclusive.
        range: (i32, i32),
        /// The whole specification.
        input: String,
    },
    /// Unknown option key.
    #[error(
        "unknown compression option \"{key}\" in \"{input}\"; valid options: level, long, workers"
    )]
    UnknownOption {
        /// The key given.
        key: String,
        /// The whole specification.
        input: String,
    },
    /// An option's value is missing or malformed.
    #[error("compression option \"{key}\" {expected}, got \"{value}\" in \"{input}\"")]
    BadValue {
        /// The option key.
        key: &'static str,
        /// What the option expects.
        expected: &'static str,
        /// The value given (empty when missing).
        value: String,
        /// The whole specification.
        input: String,
    },
    /// An option given twice.
    #[error("compression option \"{key}\" given more than once in \"{input}\"")]
    Duplicate {
        /// The option key.
        key: &'static str,
        /// The whole specification.
        input: String,
    },
    /// An option the method does not support (`long`, `workers` are zstd-only).
    #[error("compression method {method} does not support option \"{key}\" (only zstd does) in \"{input}\"")]
    OptionNotSupported {
        /// The method.
        method: Method,
        /// The option key.
        key: &'static str,
        /// The whole specification.
        input: String,
    },
    /// A numeric option value outside its range.
    #[error("compression option \"{key}\" value {value} is out of range ({}..{}) in \"{input}\"", range.0, range.1)]
    OptionOutOfRange {
        /// The option key.
        key: &'static str,
        /// The value given.
        value: i64,
        /// Valid range, inclusive.
        range: (u32, u32),
        /// The whole specification.
        input: String,
    },
    /// A list item that is an option (`long`, `level=N`...) has no specification before it.
    #[error("compression option \"{item}\" does not follow a method in list \"{input}\"")]
    DanglingOption {
        /// The item.
        item: String,
        /// The whole list.
        input: String,
    },
}

fn method_list(accepted: &[Method]) -> String {
    accepted
        .iter()
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// ` in "INPUT"` when the part a message names is not the whole input, so that a
/// specification of one word is not quoted twice.
fn within(part: &str, input: &str) -> String {
    if part == input {
        String::new()
    } else {
        format!(" in \"{input}\"")
    }
}

impl Spec {
    /// A specification of `method` with all defaults.
    pub const fn new(method: Method) -> Spec {
        Spec {
            method,
            level: None,
            long: None,
            workers: None,
        }
    }

    /// The level to use: the given one or the method's default.
    pub fn effective_level(&self) -> Option<i32> {
        self.level.or(self.method.default_level())
    }

    fn set_level(&mut self, v: &str, input: &str) -> Result<(), SpecError> {
        let bad = || SpecError::BadValue {
            key: "level",
            expected: "requires an integer value",
            value: v.to_owned(),
            input: input.to_owned(),
        };
        let level: i64 = v.parse().map_err(|_| bad())?;
        let Some(range) = self.method.level_range() else {
            return Err(SpecError::LevelNotAccepted {
                method: self.method,
                input: input.to_owned(),
            });
        };
        if self.level.is_some() {
            return Err(SpecError::Duplicate {
                key: "level",
                input: input.to_owned(),
            });
        }
        match i32::try_from(level) {
            Ok(l) if range.contains(&l) => {
                self.level = Some(l);
                Ok(())
            }
            _ => Err(SpecError::LevelOutOfRange {
                level,
                method: self.method,
                range: (*range.start(), *range.end()),
                input: input.to_owned(),
            }),
        }
    }

    fn set_option(&mut self, key: &str, value: Option<&str>, input: &str) -> Result<(), SpecError> {
        let key: &'static str = match OPTION_KEYS.iter().find(|k| **k == key) {
            Some(k) => k,
            None => {
                return Err(SpecError::UnknownOption {
                    key: key.to_owned(),
                    input: input.to_owned(),
                })
            }
        };
        if key == "level" {
            return self.set_level(value.unwrap_or(""), input);
        }
        if self.method != Method::Zstd {
            return Err(SpecError::OptionNotSupported {
                method: self.method,
                key,
                input: input.to_owned(),
            });
        }
        let (slot, range) = if key == "long" {
            (&mut self.long, LONG_WINDOW_LOG_RANGE)
        } else {
            (&mut self.workers, WORKERS_RANGE)
        };
        if slot.is_some() {
            return Err(SpecError::Duplicate {
                key,
                input: input.to_owned(),
            });
        }
        let bad = |expected| SpecError::BadValue {
            key,
            expected,
            value: value.unwrap_or("").to_owned(),
            input: input.to_owned(),
        };
        let n: i64 = match (key, value) {
            ("long", None | Some("on" | "true")) => i64::from(DEFAULT_LONG_WINDOW_LOG),
            ("long", Some("off" | "false")) => return Ok(()),
            ("long", Some(v)) => v
                .parse()
                .map_err(|_| bad("requires a window log (10..31), on or off"))?,
            (_, Some(v)) => v.parse().map_err(|_| bad("requires an integer value"))?,
            (_, None) => return Err(bad("requires an integer value")),
        };
        match u32::try_from(n) {
            Ok(v) if range.contains(&v) => {
                *slot = Some(v);
                Ok(())
            }
            _ => Err(SpecError::OptionOutOfRange {
                key,
                value: n,
                range: (*range.start(), *range.end()),
                input: input.to_owned(),
            }),
        }
    }
}

impl FromStr for Spec {
    type Err = SpecError;

    fn from_str(input: &str) -> Result<Spec, SpecError> {
        Spec::parse_among(input, &Method::ALL)
    }
}

impl Spec {
    /// Parses `input` for a use that takes only the `accepted` methods (a spill file, the
    /// tunnel's link): any other method, known or not, is refused with that list.
    pub fn parse_among(input: &str, accepted: &[Method]) -> Result<Spec, SpecError> {
        let (name, detail) = match input.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (input, None),
        };
        if name.is_empty() {
            return Err(SpecError::Empty {
                input: input.to_owned(),
            });
        }
        let method = Method::from_name(name).ok_or_else(|| SpecError::UnknownMethod {
            method: name.to_owned(),
            input: input.to_owned(),
            accepted: accepted.to_vec(),
        })?;
        if !accepted.contains(&method) {
            return Err(SpecError::NotAccepted {
                method,
                input: input.to_owned(),
                accepted: accepted.to_vec(),
            });
        }
        let mut spec = Spec::new(method);
        let Some(detail) = detail else {
            return Ok(spec);
        };
        for (i, item) in detail.split(',').enumerate() {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            if key.is_empty() {
                return Err(SpecError::UnknownOption {
                    key: item.to_owned(),
                    input: input.to_owned(),
                });
            }
            // PostgreSQL: a detail that is just an integer is the level.
            let looks_numeric =
                key.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+');
            if i == 0 && value.is_none() && looks_numeric {
                spec.set_level(key, input)?;
            } else {
                spec.set_option(key, value, input)?;
            }
        }
        Ok(spec)
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.method.name())?;
        match (self.level, self.long, self.workers) {
            (None, None, None) => Ok(()),
            (Some(l), None, None) => write!(f, ":{l}"),
            _ => {
                let mut sep = ':';
                if let Some(l) = self.level {
                    write!(f, "{sep}level={l}")?;
                    sep = ',';
                }
                match self.long {
                    Some(DEFAULT_LONG_WINDOW_LOG) => write!(f, "{sep}long")?,
                    Some(w) => write!(f, "{sep}long={w}")?,
                    None => {}
                }
                if self.long.is_some() {
                    sep = ',';
                }
                if let Some(w) = self.workers {
                    write!(f, "{sep}workers={w}")?;
                }
                Ok(())
            }
        }
    }
}

/// Parses a comma-separated list of specifications.
///
/// A comma also separates options inside one specification, so an item that is an option
/// (`level=N`, `long`, `long=N`, `workers=N`) belongs to the specification before it:
/// `pglz,lz4,zstd:level=19,long,zstd:5` is `[pglz, lz4, zstd:level=19,long, zstd:5]`.
pub fn parse_spec_list(input: &str) -> Result<Vec<Spec>, SpecError> {
    let mut groups: Vec<String> = Vec::new();
    for item in input.split(',') {
        let key = item.split_once('=').map_or(item, |(k, _)| k);
        if OPTION_KEYS.contains(&key) {
            match groups.last_mut() {
                Some(g) => {
                    if !g.contains(':') {
                        g.push(':');
                    } else {
                        g.push(',');
                    }
                    g.push_str(item);
                }
                None => {
                    return Err(SpecError::DanglingOption {
                        item: item.to_owned(),
                        input: input.to_owned(),
                    })
                }
            }
        } else if item.is_empty() {
            return Err(SpecError::Empty {
                input: input.to_owned(),
            });
        } else {
            groups.push(item.to_owned());
        }
    }
    groups.iter().map(|g| g.parse()).collect()
}

#[cfg(test)]
mod tests;
