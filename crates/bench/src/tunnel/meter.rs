//! One configuration running between the clients and PostgreSQL ([`Relay`]), and what a run is measured
//! by ([`LinkMeter`]): the veth's kernel byte counters each way and the CPU of every process in between.

use super::config::Config;
use super::relay::{PgTarget, SocatPair, SshForward};
use super::workload::{Endpoint, Meter};
use super::{Pair, PairOptions, Placement};
use crate::error::Result;
use crate::sys::{server_cpu_s, tree_cpu_seconds};
use pgtest::netns::{NetLink, Side, VethBytes};
use pgtest::Cluster;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::net::IpAddr;
use std::time::Instant;

/// What stands between the clients and PostgreSQL in one configuration, running.
pub(super) enum Relay {
    /// Straight to PostgreSQL, with its own TLS when `true`.
    Direct(bool),
    Socat(SocatPair),
    Ssh(SshForward),
    Tunnel(Pair),
}

impl Relay {
    pub(super) fn start(
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
            Config::Direct => Relay::Direct(false),
            Config::DirectTls => Relay::Direct(true),
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

    pub(super) fn endpoint(&self, link: &NetLink, pg_port: u16) -> Endpoint {
        let local = |port| Endpoint {
            host: "127.0.0.1".into(),
            port,
            tls: false,
        };
        match self {
            Relay::Direct(tls) => Endpoint {
                host: link.addr(Side::Server).to_string(),
                port: pg_port,
                tls: *tls,
            },
            Relay::Socat(s) => local(s.local_port()),
            Relay::Ssh(s) => local(s.local_port()),
            Relay::Tunnel(p) => local(p.client_port()),
        }
    }

    pub(super) fn pids(&self) -> Vec<(String, u32)> {
        match self {
            Relay::Direct(_) => Vec::new(),
            Relay::Socat(s) => s.pids(),
            Relay::Ssh(s) => s.pids(),
            Relay::Tunnel(p) => p.pids(),
        }
    }

    /// Stops it; the tunnel's halves must exit cleanly after SIGTERM.
    pub(super) fn stop(self) -> Result<()> {
        match self {
            Relay::Tunnel(p) => p.stop().map(drop),
            _ => Ok(()),
        }
    }
}

/// A sample of the counters a run is measured by.
pub(super) struct Sample {
    at: Instant,
    bytes: VethBytes,
    cpu: Vec<Option<f64>>,
}

/// Samples the veth counters and the CPU of the relay's processes and PostgreSQL before and after
/// the timed part of a run.
pub(super) struct LinkMeter<'a> {
    pub(super) link: &'a NetLink,
    pub(super) labels: Vec<(String, u32)>,
    pub(super) before: Option<Sample>,
    pub(super) after: Option<Sample>,
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
    pub(super) fn result(&self) -> Option<(f64, u64, u64, BTreeMap<String, f64>)> {
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
