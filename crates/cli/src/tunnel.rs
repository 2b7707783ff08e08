//! `pgcompress tunnel keys|server|client|stats`: parses, calls `wire::net`, prints.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use wire::link::TagSet;
use wire::net::{
    ClientConfig, ConnectionReport, DirectionStats, Endpoint, Half, KeysConfig, NetError, Report,
    Reporter, ServerConfig, StatsSnapshot,
};

use crate::args::tunnel::{ClientArgs, Common, KeysArgs, ServerArgs, StatsArgs, TunnelCommand};
use crate::output::{bytes, pct};

/// Runs one `tunnel` subcommand; the exit code follows the contract (0, 1 runtime, 2 config).
pub fn run(cmd: TunnelCommand) -> anyhow::Result<ExitCode> {
    let result = match cmd {
        TunnelCommand::Keys(k) => keys(k),
        TunnelCommand::Server(s) => server(s),
        TunnelCommand::Client(c) => client(c),
        TunnelCommand::Stats(s) => stats(s),
    };
    Ok(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pgcompress tunnel: error: {e}");
            ExitCode::from(if e.is_config() { 2 } else { 1 })
        }
    })
}

fn keys(k: KeysArgs) -> Result<(), NetError> {
    let written = wire::net::write_keys(&KeysConfig {
        dir: k.dir,
        days: k.days,
        server_names: k.server_names,
        force: k.force,
    })?;
    for p in written {
        println!("{}", p.display());
    }
    Ok(())
}

fn reporter(half: Half, json: bool) -> Reporter {
    Arc::new(move |r: Report| match r {
        Report::Listening { half, address } => {
            eprintln!("pgcompress tunnel {half}: listening on {address}");
        }
        Report::MetricsListening { half, address } => {
            eprintln!("pgcompress tunnel {half}: metrics on http://{address}/metrics");
        }
        Report::Refused { peer, reason } if json => eprintln!(
            "{}",
            serde_json::json!({"event": "refused", "half": half, "peer": peer, "reason": reason})
        ),
        Report::Refused { peer, reason } => {
            eprintln!("pgcompress tunnel {half}: refused peer {peer}: {reason}");
        }
        Report::TooManyConnections { peer, limit } if json => eprintln!(
            "{}",
            serde_json::json!({"event": "too_many_connections", "half": half, "peer": peer, "limit": limit})
        ),
        Report::TooManyConnections { peer, limit } => {
            eprintln!("pgcompress tunnel {half}: refused {peer}: too many connections ({limit})");
        }
        Report::Connection(c) if json => {
            let mut v = serde_json::to_value(&c).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("event".into(), "connection".into());
                o.insert("half".into(), half.to_string().into());
            }
            eprintln!("{v}");
        }
        Report::Connection(c) => eprintln!("{}", connection_line(half, &c)),
        Report::Draining { open } if json => eprintln!(
            "{}",
            serde_json::json!({"event": "draining", "half": half, "open": open})
        ),
        Report::Draining { open } => {
            eprintln!("pgcompress tunnel {half}: shutting down, draining {open} connection(s)");
        }
        _ => {}
    })
}

fn direction(name: &str, d: &DirectionStats) -> String {
    format!(
        "{name} {} raw, {} link ({:.1}%)",
        d.raw_bytes,
        d.link_bytes,
        pct(d.link_bytes, d.raw_bytes)
    )
}

fn connection_line(half: Half, c: &ConnectionReport) -> String {
    let mut line = format!(
        "pgcompress tunnel {half}: connection {} from {} ended after {:.3} s: {}; {}",
        c.id,
        c.peer,
        c.duration_secs,
        direction("frontend->backend", &c.frontend_to_backend),
        direction("backend->frontend", &c.backend_to_frontend),
    );
    if let Some(e) = &c.error {
        line.push_str(&format!("; error: {e}"));
    }
    line
}

fn summary(s: &StatsSnapshot, json: bool) {
    if json {
        println!("{}", serde_json::to_string(s).unwrap_or_default());
        return;
    }
    println!("tunnel {} (method {})", s.half, s.method);
    println!(
        "  connections: {} total, {} open, {} refused peers, {} refused connections, {} decompression errors",
        s.connections_total,
        s.connections_open,
        s.refused_peers,
        s.refused_connections,
        s.decompression_errors
    );
    for (name, d) in [
        ("frontend->backend", &s.frontend_to_backend),
        ("backend->frontend", &s.backend_to_frontend),
    ] {
        println!(
            "  {name}: {} raw, {} on the link ({:.1}%), {} chunks, {} frames",
            bytes(d.raw_bytes),
            bytes(d.link_bytes),
            pct(d.link_bytes, d.raw_bytes),
            d.chunks,
            d.frames
        );
    }
}

fn drain(c: &Common) -> Duration {
    Duration::from_secs(c.drain_timeout)
}

fn server(a: ServerArgs) -> Result<(), NetError> {
    let listen = Endpoint::parse(&a.listen, 0)?;
    if !matches!(listen, Endpoint::Tcp(_)) {
        return Err(NetError::Config("--listen must be ADDR:PORT".to_owned()));
    }
    let config = ServerConfig {
        listen,
        upstream: Endpoint::parse(&a.upstream, a.upstream_port)?,
        ca: a.common.ca.clone(),
        cert: a.common.cert.clone(),
        key: a.common.key.clone(),
        stats_file: a.common.stats.clone(),
        drain_timeout: drain(&a.common),
        tap: None,
        max_connections: a.common.max_connections,
        metrics: a.common.metrics.clone(),
    };
    let report = reporter(Half::Server, a.common.json);
    let snapshot =
        wire::net::run_blocking(|shutdown| wire::net::run_server(config, shutdown, report))?;
    summary(&snapshot, a.common.json);
    Ok(())
}

/// The host part of `HOST:PORT` (brackets of an IPv6 address removed).
fn host_of(server: &str) -> &str {
    let host = server.rsplit_once(':').map_or(server, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn client(a: ClientArgs) -> Result<(), NetError> {
    let auto = a.method == wire::link::handshake::AUTO;
    let method = if auto {
        wire::link::parse_spec("none")
    } else {
        wire::link::parse_spec(&a.method)
    }
    .map_err(|e| NetError::Config(e.to_string()))?;
    if !a.compress_types.is_ascii() {
        return Err(NetError::Config(
            "--compress-types takes message type letters such as dDQ".to_owned(),
        ));
    }
    let server = Endpoint::parse(&a.server, 0)?;
    if !matches!(server, Endpoint::Tcp(_)) {
        return Err(NetError::Config("--server must be HOST:PORT".to_owned()));
    }
    let config = ClientConfig {
        listen: Endpoint::parse(&a.listen, a.port)?,
        server_name: a
            .server_name
            .clone()
            .unwrap_or_else(|| host_of(&a.server).to_owned()),
        server: a.server.clone(),
        method,
        auto,
        ca: a.common.ca.clone(),
        cert: a.common.cert.clone(),
        key: a.common.key.clone(),
        local_tls: a.local_cert.clone().zip(a.local_key.clone()),
        compress_types: TagSet::from_tags(a.compress_types.as_bytes()),
        threshold: a.threshold,
        stats_file: a.common.stats.clone(),
        drain_timeout: drain(&a.common),
        max_connections: a.common.max_connections,
        metrics: a.common.metrics.clone(),
    };
    let report = reporter(Half::Client, a.common.json);
    let snapshot =
        wire::net::run_blocking(|shutdown| wire::net::run_client(config, shutdown, report))?;
    summary(&snapshot, a.common.json);
    Ok(())
}

fn stats(a: StatsArgs) -> Result<(), NetError> {
    let s = StatsSnapshot::read(&a.file)?;
    summary(&s, a.json);
    Ok(())
}
