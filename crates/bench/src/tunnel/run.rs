//! `pgcompress bench tunnel`: two network namespaces joined by a veth pair ([`pgtest::netns`]),
//! PostgreSQL in the server namespace, every client program in the client namespace; at each link
//! rate (`tc` token bucket on both veth ends), each configuration (direct, socat, the tunnel with each
//! method, `ssh -C`) runs each workload while the kernel counts the veth's bytes.
//!
//! Per run: wall time of the client program, veth bytes each way, CPU seconds of the processes in
//! between (each relay process with its children, and PostgreSQL), pgbench's TPS and latency, and a
//! check of the result against what the same work gave over the Unix socket before the runs.

use super::relay::{tree_cpu_seconds, PgTarget, SocatPair, SshForward};
use super::report::{rate_label, Measurement, TunnelReport};
use super::workload::{self, Endpoint, Env, Meter, Outcome, Workload};
use super::{tools, tpch, Pair, PairOptions, Placement};
use crate::error::{chain, Context, Error, IoContext, Result};
use crate::sys::{cpu_model, load_average, postmaster_pid, server_cpu_s};
use crate::{check_cancelled, Progress};
use pgtest::netns::{NetLink, Side, VethBytes};
use pgtest::{Cluster, PgInstall};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Instant;

/// Link rates unless `--rate` says otherwise: 50 Mbit/s, 1 Gbit/s, unshaped.
pub const DEFAULT_RATES: &str = "50,1000,none";
/// Configurations unless `--configs` says otherwise: all of them.
pub const DEFAULT_CONFIGS: &str = "direct,socat,none,lz4,zstd:1,zstd:3,auto,ssh";
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
    /// Workloads separated by commas (see [`workload::ALL`]), or `all`.
    pub workloads: String,
    /// Configurations separated by commas: `direct`, `socat`, `ssh` (`ssh -C`), or a tunnel method
    /// (`none`, `lz4`, `zstd:1`, `auto`, ...; `tunnel zstd:1` also works).
    pub configs: String,
    /// pgbench's `-T` in seconds.
    pub pgbench_seconds: u32,
    /// pgbench's scale factor (`pgbench -i -s`).
    pub pgbench_scale: u32,
    /// Where generated TPC-H data is cached; default [`tpch::default_cache`].
    pub cache: Option<PathBuf>,
    /// The command line, recorded in the report.
    pub command: String,
}

/// How the clients reach PostgreSQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Config {
    /// Straight to PostgreSQL's veth address.
    Direct,
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
            "socat" => Config::Socat,
            "ssh" | "ssh -C" | "ssh-C" => Config::Ssh,
            _ => {
                let m = s.strip_prefix("tunnel").map_or(s, str::trim);
                let (name, level) = m.split_once(':').unwrap_or((m, ""));
                let known = matches!(name, "none" | "lz4" | "zstd" | "auto");
                let level_ok = level.is_empty() || level.parse::<u8>().is_ok();
                if !known || !level_ok || (matches!(name, "none" | "auto") && !level.is_empty()) {
                    return Err(bad(
                        "give direct, socat, ssh or a tunnel method: none, lz4[:N], zstd[:N], auto",
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

/// What stands between the clients and PostgreSQL in one configuration, running.
enum Relay {
    Direct,
    Socat(SocatPair),
    Ssh(SshForward),
    Tunnel(Pair),
}

impl Relay {
    fn start(
        c: &Config,
        link: &NetLink,
        cluster: &Cluster,
        pgcompress: &std::path::Path,
    ) -> Result<Relay> {
        let server = |p: &OsStr| link.command(Side::Server, p);
        let client = |p: &OsStr| link.command(Side::Client, p);
        let server_addr = link.addr(Side::Server);
        let pg = PgTarget::Unix {
            dir: cluster.socket_dir(),
            port: cluster.port(),
        };
        Ok(match c {
            Config::Direct => Relay::Direct,
            Config::Socat => Relay::Socat(SocatPair::start(&server, &client, server_addr, pg)?),
            Config::Ssh => Relay::Ssh(SshForward::start(&server, &client, server_addr, pg)?),
            Config::Tunnel(method) => Relay::Tunnel(Pair::start_in(
                &PairOptions {
                    pgcompress: pgcompress.to_path_buf(),
                    socket_dir: cluster.socket_dir(),
                    port: cluster.port(),
                    method: method.clone(),
                },
                &Placement {
                    server: &server,
                    client: &client,
                    server_addr: IpAddr::V4(server_addr),
                },
            )?),
        })
    }

    fn endpoint(&self, link: &NetLink, pg_port: u16) -> Endpoint {
        let local = |port| Endpoint {
            host: "127.0.0.1".into(),
            port,
        };
        match self {
            Relay::Direct => Endpoint {
                host: link.addr(Side::Server).to_string(),
                port: pg_port,
            },
            Relay::Socat(s) => local(s.local_port()),
            Relay::Ssh(s) => local(s.local_port()),
            Relay::Tunnel(p) => local(p.client_port()),
        }
    }

    fn pids(&self) -> Vec<(String, u32)> {
        match self {
            Relay::Direct => Vec::new(),
            Relay::Socat(s) => s.pids(),
            Relay::Ssh(s) => s.pids(),
            Relay::Tunnel(p) => p.pids(),
        }
    }

    /// Stops it; the tunnel's halves must exit cleanly after SIGTERM.
    fn stop(self) -> Result<()> {
        match self {
            Relay::Tunnel(p) => p.stop().map(drop),
            _ => Ok(()),
        }
    }
}

/// A sample of the counters a run is measured by.
struct Sample {
    at: Instant,
    bytes: VethBytes,
    cpu: Vec<Option<f64>>,
}

/// Samples the veth counters and the CPU of the relay's processes and PostgreSQL before and after
/// the timed part of a run.
struct LinkMeter<'a> {
    link: &'a NetLink,
    labels: Vec<(String, u32)>,
    before: Option<Sample>,
    after: Option<Sample>,
}

impl LinkMeter<'_> {
    fn sample(&self) -> Result<Sample> {
        let bytes = self.link.bytes()?;
        let cpu = self
            .labels
            .iter()
            .map(|(label, pid)| {
                if label == "postgres" {
                    server_cpu_s(*pid)
                } else {
                    tree_cpu_seconds(*pid).ok()
                }
            })
            .collect();
        Ok(Sample {
            at: Instant::now(),
            bytes,
            cpu,
        })
    }

    /// Wall seconds, bytes each way, CPU seconds per label.
    fn result(&self) -> Option<(f64, u64, u64, BTreeMap<String, f64>)> {
        let (b, a) = (self.before.as_ref()?, self.after.as_ref()?);
        let mut cpu = BTreeMap::new();
        for (i, (label, _)) in self.labels.iter().enumerate() {
            if let (Some(Some(x)), Some(Some(y))) = (b.cpu.get(i), a.cpu.get(i)) {
                cpu.insert(label.clone(), ((y - x).max(0.0) * 100.0).round() / 100.0);
            }
        }
        Some((
            (a.at - b.at).as_secs_f64(),
            a.bytes
                .client_to_server
                .saturating_sub(b.bytes.client_to_server),
            a.bytes
                .server_to_client
                .saturating_sub(b.bytes.server_to_client),
            cpu,
        ))
    }
}

impl Meter for LinkMeter<'_> {
    fn start(&mut self) -> Result<()> {
        self.before = Some(self.sample()?);
        Ok(())
    }

    fn stop(&mut self) -> Result<()> {
        self.after = Some(self.sample()?);
        Ok(())
    }
}

/// Cores, RAM, kernel and CPU model on one line.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ram_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .map_or("? GiB".into(), |kb| {
            format!("{:.0} GiB", kb as f64 / 1048576.0)
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or("?".into(), |s| s.trim().to_string());
    format!(
        "{cores} cores, {ram_gib} RAM, Linux {kernel}, {}",
        cpu_model().unwrap_or_else(|| "CPU model unknown".into())
    )
}

/// The runs whose check failed, and the runs that could not be made (from the notes).
pub fn failures(r: &TunnelReport) -> Vec<String> {
    let mut v: Vec<String> = r
        .runs
        .iter()
        .filter(|m| m.check.starts_with("FAILED"))
        .map(|m| {
            format!(
                "{} {} at {}: {}",
                m.config,
                m.workload,
                rate_label(m.rate_mbit),
                m.check
            )
        })
        .collect();
    v.extend(r.notes.iter().filter(|n| n.starts_with("FAILED")).cloned());
    v
}

/// Runs the benchmark; see the module documentation. Runs that fail are named in the notes (starting
/// with `FAILED`) and the others go on; see [`failures`].
pub fn run(o: &Options, p: &dyn Progress) -> Result<TunnelReport> {
    let rates = parse_rates(&o.rates)?;
    let configs = parse_configs(&o.configs)?;
    let workloads = workload::select(&o.workloads)?;
    if !(o.scale > 0.0 && o.scale <= 100.0) {
        return Err(Error::Tunnel {
            what: "--scale".into(),
            reason: format!(
                "{}: give a TPC-H scale factor above 0, at most 100",
                o.scale
            ),
        });
    }
    if let Some(why) = NetLink::unavailable_reason() {
        return Err(Error::Tunnel {
            what: "bench tunnel needs network namespaces".into(),
            reason: why,
        });
    }
    let load_start = load_average();
    let tpchgen = tools::ensure(p)?;
    let install = PgInstall::find().context("bench tunnel runs a throwaway PostgreSQL")?;
    let data = if workloads.iter().any(|w| w.uses_tpch()) {
        let cache = o.cache.clone().unwrap_or_else(tpch::default_cache);
        Some(tpch::generate(&tpchgen, o.scale, &cache, p)?)
    } else {
        None
    };
    p.step("creating the network namespaces and the veth pair".into());
    let link = NetLink::create("bt")?;
    let server_addr = link.addr(Side::Server);
    let client_addr = link.addr(Side::Client);
    p.step(format!(
        "initdb and start PostgreSQL {} in {} on {server_addr}",
        install.major(),
        link.ns(Side::Server)
    ));
    let cluster = Cluster::builder()
        .install(install.clone())
        .netns(link.ns(Side::Server))
        .listen_tcp(true)
        .guc("listen_addresses", format!("127.0.0.1,{server_addr}"))
        .hba_line(format!("host all all {client_addr}/32 trust"))
        .hba_line(format!("host replication all {client_addr}/32 trust"))
        .guc("shared_buffers", "256MB")
        .guc("max_wal_size", "4GB")
        .guc("checkpoint_timeout", "1h")
        .guc("autovacuum", "off")
        // Reads in heap order every time: a scan does not start where the last one stopped, and
        // no parallel workers interleave their rows.
        .guc("synchronize_seqscans", "off")
        .guc("max_parallel_workers_per_gather", "0")
        .start()
        .context("starting PostgreSQL in the server namespace")?;
    let postmaster = postmaster_pid(&cluster.data_dir());
    let work = tempfile::Builder::new()
        .prefix("pgcompress-bench-tunnel-")
        .tempdir()
        .io(|| "creating a directory for dumps and base backups".into())?;
    let client = |prog: &OsStr| link.command(Side::Client, prog);
    let reference_none = workload::Reference::default();
    let mut env = Env {
        install: &install,
        socket_dir: cluster.socket_dir(),
        port: cluster.port(),
        client: &client,
        data: data.as_ref(),
        work: work.path().to_path_buf(),
        reference: &reference_none,
        pgbench_seconds: o.pgbench_seconds,
    };
    p.step("loading the reference data over the Unix socket".into());
    let reference = workload::prepare(&env, &workloads, o.pgbench_scale)
        .context("preparing the data over the Unix socket")?;
    env.reference = &reference;

    let mut runs: Vec<Measurement> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut ssh_note: Option<String> = None;
    for &rate in &rates {
        check_cancelled(p)?;
        link.shape(rate)?;
        for c in &configs {
            let cname = c.name();
            p.step(format!("{}: starting {cname}", rate_label(rate)));
            let relay = match Relay::start(c, &link, &cluster, &o.pgcompress) {
                Ok(r) => r,
                Err(e) => {
                    let note = format!(
                        "FAILED: {cname} did not start at {}: {}",
                        rate_label(rate),
                        chain(&e)
                    );
                    p.note(note.clone());
                    notes.push(note);
                    continue;
                }
            };
            if let (Relay::Ssh(s), None) = (&relay, &ssh_note) {
                ssh_note = Some(format!("ssh -C: {}", s.negotiated()));
            }
            let ep = relay.endpoint(&link, cluster.port());
            let mut labels = relay.pids();
            labels.extend(postmaster.map(|pid| ("postgres".to_string(), pid)));
            for &w in &workloads {
                check_cancelled(p)?;
                p.step(format!("{}: {cname}: {}", rate_label(rate), w.name()));
                let mut meter = LinkMeter {
                    link: &link,
                    labels: labels.clone(),
                    before: None,
                    after: None,
                };
                let tag = cname.replace([' ', ':'], "-");
                let result = env.run(w, &ep, &tag, &mut meter);
                match (result, meter.result()) {
                    (Ok(outcome), Some((wall_s, c2s, s2c, cpu))) => {
                        let m = measurement(rate, &cname, w, wall_s, c2s, s2c, cpu, outcome);
                        p.note(format!(
                            "{}: {cname}: {}: {:.1} s, {} -> / {} <-, {}",
                            rate_label(rate),
                            w.name(),
                            m.wall_s,
                            advise::fmt::bytes(m.bytes_c2s),
                            advise::fmt::bytes(m.bytes_s2c),
                            m.check
                        ));
                        runs.push(m);
                    }
                    (Ok(_), None) => {
                        return Err(Error::Internal("a workload ran without its measurement"))
                    }
                    (Err(e), _) => {
                        if e.is_cancelled() {
                            return Err(e);
                        }
                        let note = format!(
                            "FAILED: {cname} {} at {}: {}",
                            w.name(),
                            rate_label(rate),
                            chain(&e)
                        );
                        p.note(note.clone());
                        notes.push(note);
                    }
                }
            }
            if let Err(e) = relay.stop() {
                let note = format!(
                    "FAILED: stopping {cname} at {}: {}",
                    rate_label(rate),
                    chain(&e)
                );
                p.note(note.clone());
                notes.push(note);
            }
        }
    }
    link.shape(None)?;
    p.step("stopping PostgreSQL and removing the namespaces".into());
    cluster.stop().context("stopping the throwaway cluster")?;
    drop(cluster);
    drop(link);

    let mut head = vec![format!(
        "host load (1-minute average) {} at the start, {} at the end: the machine was shared, so \
         wall times and CPU seconds vary between runs; byte counts do not",
        load_start.map_or("?".into(), |l| format!("{l:.2}")),
        load_average().map_or("?".into(), |l| format!("{l:.2}"))
    )];
    if let Some(d) = &data {
        head.push(format!(
            "TPC-H scale factor {} generated by tpchgen-cli {} as CSV ({} in 8 files, {} rows); \
             tables without keys or indexes",
            o.scale,
            tools::TPCHGEN_VERSION,
            advise::fmt::bytes(d.bytes),
            d.rows.values().sum::<u64>()
        ));
    }
    head.push(format!(
        "bytes: the veth's kernel counters (Ethernet frames, TCP/IP headers included); link shaped \
         with tc tbf on both veth ends; CPU: user + system seconds of each relay process with its \
         children, and of PostgreSQL's postmaster with its backends; select: psql FETCH_COUNT={}; \
         pgbench: scale {}, 8 clients, 2 threads, -T {} -n",
        workload::FETCH_COUNT,
        o.pgbench_scale,
        o.pgbench_seconds
    ));
    head.extend(ssh_note);
    head.extend(notes);
    Ok(TunnelReport {
        machine: machine(),
        scale: o.scale,
        command: o.command.clone(),
        notes: head,
        runs,
    })
}

/// One measurement.
#[allow(clippy::too_many_arguments)]
fn measurement(
    rate: Option<u64>,
    config: &str,
    w: Workload,
    wall_s: f64,
    c2s: u64,
    s2c: u64,
    cpu: BTreeMap<String, f64>,
    o: Outcome,
) -> Measurement {
    Measurement {
        rate_mbit: rate,
        config: config.to_string(),
        workload: w.name().to_string(),
        wall_s: (wall_s * 1000.0).round() / 1000.0,
        bytes_c2s: c2s,
        bytes_s2c: s2c,
        tps: o.tps,
        latency_ms: o.latency_ms,
        cpu_s: cpu,
        check: o.check,
    }
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
