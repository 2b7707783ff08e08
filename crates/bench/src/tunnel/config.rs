//! What `bench tunnel` is asked to measure: its options, the link rates and the configurations between
//! the clients and PostgreSQL, parsed from their command-line spelling.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// Link rates unless `--rate` says otherwise: 50 Mbit/s, 1 Gbit/s, unshaped.
pub const DEFAULT_RATES: &str = "50,1000,none";
/// Configurations unless `--configs` says otherwise: all of them.
pub const DEFAULT_CONFIGS: &str = "direct,direct-tls,socat,none,lz4,zstd:1,zstd:3,auto,ssh";
/// Workloads unless `--workloads` says otherwise: all of them.
pub const DEFAULT_WORKLOADS: &str = "all";

/// What to measure.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `pgcompress` executable whose tunnel is measured.
    pub pgcompress: PathBuf,
    /// Link rates in Mbit/s separated by commas; `none` for an unshaped link.
    pub rates: String,
    /// TPC-H scale factor.
    pub scale: f64,
    /// Workloads separated by commas (see [`super::workload::ALL`]), or `all`.
    pub workloads: String,
    /// Configurations separated by commas: `direct`, `direct-tls`, `socat`, `ssh` (`ssh -C`), or a tunnel method
    /// (`none`, `lz4`, `zstd:1`, `auto`, ...; `tunnel zstd:1` also works).
    pub configs: String,
    /// pgbench's `-T` in seconds.
    pub pgbench_seconds: u32,
    /// pgbench's scale factor (`pgbench -i -s`).
    pub pgbench_scale: u32,
    /// How many times every configuration runs every workload at each rate, the configurations
    /// taking turns (1: once).
    pub rounds: u32,
    /// Where generated TPC-H data is cached; default [`super::tpch::default_cache`].
    pub cache: Option<PathBuf>,
    /// The command line, recorded in the report.
    pub command: String,
}

/// How the clients reach PostgreSQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Config {
    /// Straight to PostgreSQL's veth address.
    Direct,
    /// Straight to PostgreSQL's veth address with PostgreSQL's own TLS (`sslmode=require`): what a DBA
    /// who needs the link encrypted runs without the tunnel.
    DirectTls,
    /// A socat relay in each namespace: the floor of any two-hop proxy.
    Socat,
    /// The tunnel pair with this `--method`.
    Tunnel(String),
    /// An OpenSSH port forward with compression (`ssh -C`).
    Ssh,
}

impl Config {
    /// Its name in reports: `direct`, `socat`, `tunnel <method>`, `ssh -C`.
    pub fn name(&self) -> String {
        match self {
            Config::Direct => "direct".into(),
            Config::DirectTls => super::report::DIRECT_TLS.into(),
            Config::Socat => "socat".into(),
            Config::Tunnel(m) => format!("tunnel {m}"),
            Config::Ssh => super::report::SSH_C.into(),
        }
    }

    /// One item of `--configs`.
    pub fn parse(item: &str) -> Result<Config> {
        let s = item.trim();
        let bad = |why: &str| Error::Tunnel {
            what: "--configs".into(),
            reason: format!("{s:?}: {why}"),
        };
        Ok(match s {
            "direct" => Config::Direct,
            "direct-tls" | "direct TLS" => Config::DirectTls,
            "socat" => Config::Socat,
            "ssh" | "ssh -C" | "ssh-C" => Config::Ssh,
            _ => {
                let m = s.strip_prefix("tunnel").map_or(s, str::trim);
                let (name, level) = m.split_once(':').unwrap_or((m, ""));
                let known = matches!(name, "none" | "lz4" | "zstd" | "auto");
                let level_ok = level.is_empty() || level.parse::<u8>().is_ok();
                if !known || !level_ok || (matches!(name, "none" | "auto") && !level.is_empty()) {
                    return Err(bad(
                        "give direct, direct-tls, socat, ssh or a tunnel method: none, lz4[:N], zstd[:N], auto",
                    ));
                }
                Config::Tunnel(m.to_string())
            }
        })
    }
}

/// Parses `--configs`, keeping the order given and dropping repeats.
pub fn parse_configs(list: &str) -> Result<Vec<Config>> {
    let mut v: Vec<Config> = Vec::new();
    for item in list.split(',').filter(|s| !s.trim().is_empty()) {
        let c = Config::parse(item)?;
        if !v.contains(&c) {
            v.push(c);
        }
    }
    if v.is_empty() {
        return Err(Error::Tunnel {
            what: "--configs".into(),
            reason: "no configuration given".into(),
        });
    }
    Ok(v)
}

/// Parses `--rate`: Mbit/s separated by commas, `none` (or `unshaped`) for no shaping.
pub fn parse_rates(list: &str) -> Result<Vec<Option<u64>>> {
    let mut v = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let r = match item {
            "none" | "unshaped" => None,
            n => Some(
                n.parse::<u64>()
                    .ok()
                    .filter(|&n| (1..=100_000).contains(&n))
                    .ok_or_else(|| Error::Tunnel {
                        what: "--rate".into(),
                        reason: format!("{item:?}: give Mbit/s from 1 to 100000, or none"),
                    })?,
            ),
        };
        if !v.contains(&r) {
            v.push(r);
        }
    }
    if v.is_empty() {
        return Err(Error::Tunnel {
            what: "--rate".into(),
            reason: "no rate given".into(),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_configs_parse() {
        assert_eq!(
            parse_rates(DEFAULT_RATES).expect("parses"),
            vec![Some(50), Some(1000), None]
        );
        assert!(parse_rates("0").is_err());
        assert!(parse_rates("fast").is_err());
        let c = parse_configs(DEFAULT_CONFIGS).expect("parses");
        let names: Vec<String> = c.iter().map(Config::name).collect();
        assert_eq!(
            names,
            [
                "direct",
                "direct TLS",
                "socat",
                "tunnel none",
                "tunnel lz4",
                "tunnel zstd:1",
                "tunnel zstd:3",
                "tunnel auto",
                "ssh -C"
            ]
        );
        assert_eq!(
            parse_configs("tunnel zstd:1, zstd:1,ssh -C").expect("parses"),
            vec![Config::Tunnel("zstd:1".into()), Config::Ssh]
        );
        assert!(parse_configs("gzip").is_err());
        assert!(parse_configs("auto:3").is_err());
    }
}
