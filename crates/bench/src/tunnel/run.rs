//! `pgcompress-bench tunnel`: two network namespaces joined by a veth pair ([`pgtest::netns`]),
//! PostgreSQL in the server namespace, every client program in the client namespace; at each link
//! rate (`tc` token bucket on both veth ends), each configuration (direct, socat, the tunnel with each
//! method, `ssh -C`) runs each workload while the kernel counts the veth's bytes.
//!
//! Per run: wall time of the client program, veth bytes each way, CPU seconds of the processes in
//! between (each relay process with its children, and PostgreSQL), pgbench's TPS and latency, and a
//! check of the result against what the same work gave over the Unix socket before the runs.

pub use super::config::{
    parse_configs, parse_rates, Config, Options, DEFAULT_CONFIGS, DEFAULT_RATES, DEFAULT_WORKLOADS,
};
use super::meter::{LinkMeter, Relay};
use super::report::{rate_label, Measurement, TunnelReport};
use super::workload::{self, Env, Outcome, Workload};
use super::{tools, tpch};
use crate::error::{chain, Context, Error, IoContext, Result};
use crate::sys::{load_average, machine, postmaster_pid};
use crate::{check_cancelled, Progress};
use pgtest::netns::{NetLink, Side};
use pgtest::{Cluster, PgInstall};
use std::collections::BTreeMap;
use std::ffi::OsStr;

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
    if configs.contains(&Config::DirectTls) {
        p.step("turning on PostgreSQL's own TLS for direct-tls".into());
        enable_server_tls(&cluster).context("turning on PostgreSQL's TLS (ssl = on)")?;
    }
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
        // Rounds take the configurations in turn, so that each round's are minutes apart at most.
        for round in 0..o.rounds.max(1) {
            let at = round_label(rate, round, o.rounds);
            for c in &configs {
                let cname = c.name();
                p.step(format!("{at}: starting {cname}"));
                let relay = match Relay::start(c, &link, &cluster, &o.pgcompress) {
                    Ok(r) => r,
                    Err(e) => {
                        let note =
                            format!("FAILED: {cname} did not start at {}: {}", at, chain(&e));
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
                    p.step(format!("{}: {cname}: {}", at, w.name()));
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
                            let mut m =
                                measurement(rate, &cname, w, wall_s, c2s, s2c, cpu, outcome);
                            m.round = round;
                            p.note(format!(
                                "{}: {cname}: {}: {:.1} s, {} -> / {} <-, {}",
                                at,
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
                            let note =
                                format!("FAILED: {cname} {} at {}: {}", w.name(), at, chain(&e));
                            p.note(note.clone());
                            notes.push(note);
                        }
                    }
                }
                if let Err(e) = relay.stop() {
                    let note = format!("FAILED: stopping {cname} at {}: {}", at, chain(&e));
                    p.note(note.clone());
                    notes.push(note);
                }
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
    if o.rounds > 1 {
        head.push(format!(
            "rounds: {} at each rate, the configurations taking turns; each row is a configuration's \
             median round (by TPS for pgbench, by wall time otherwise); TPS vs socat is the median of \
             the ratios within a round, with their range",
            o.rounds
        ));
    }
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
        zstd1_bytes: o.zstd1_bytes,
        round: 0,
    }
}

/// What progress lines and notes call one round at one rate: `unshaped`, or `unshaped, round 2/3`.
fn round_label(rate: Option<u64>, round: u32, rounds: u32) -> String {
    if rounds > 1 {
        format!("{}, round {}/{rounds}", rate_label(rate), round + 1)
    } else {
        rate_label(rate)
    }
}

/// Gives the cluster a fresh self-signed certificate and turns `ssl` on, for `direct-tls`: clients
/// connect with `sslmode=require`, so the certificate is not verified (the handshake and the records
/// are what is measured).
fn enable_server_tls(cluster: &Cluster) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let data = cluster.data_dir();
    let (crt, key) = (data.join("bench-server.crt"), data.join("bench-server.key"));
    let mut cmd = std::process::Command::new("openssl");
    cmd.args([
        "req", "-new", "-x509", "-nodes", "-days", "2", "-newkey", "rsa:2048",
    ])
    .args(["-subj", "/CN=pgcompress-bench", "-keyout"])
    .arg(&key)
    .arg("-out")
    .arg(&crt);
    pgtest::run::run_as_current_user(&mut cmd, None, std::time::Duration::from_secs(60))?;
    let owner = std::fs::metadata(&data).io(|| format!("reading {}", data.display()))?;
    for f in [&crt, &key] {
        std::os::unix::fs::chown(f, Some(owner.uid()), Some(owner.gid()))
            .io(|| format!("giving {} to the server's user", f.display()))?;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600))
            .io(|| format!("making {} 0600", f.display()))?;
    }
    cluster.set_guc_and_reload("ssl_cert_file", &crt.to_string_lossy())?;
    cluster.set_guc_and_reload("ssl_key_file", &key.to_string_lossy())?;
    cluster.set_guc_and_reload("ssl", "on")?;
    let on = cluster.query_one("SHOW ssl")?;
    if on != "on" {
        return Err(Error::Tunnel {
            what: "ssl = on".into(),
            reason: format!("the server still says ssl = {on}: {}", cluster.log_tail(5)),
        });
    }
    Ok(())
}
