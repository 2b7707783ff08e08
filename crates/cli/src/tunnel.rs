//! `pgcompress tunnel keys|server|client|stats`: parses, calls `wire::net`, prints.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use codec::{Method, Spec, SpecError};
use wire::link::handshake::AUTO;
use wire::link::TagSet;
use wire::net::{
    ClientConfig, Endpoint, Half, KeysConfig, LogFormat, LogRecord, NetError, Report, Reporter,
    ServerConfig, StatsSnapshot,
};

use crate::args::tunnel::{
    Batching, ClientArgs, Common, KeysArgs, LogFormatArg, ServerArgs, StatsArgs, TunnelCommand,
};
use crate::output::{bytes, pct};

/// Runs one `tunnel` subcommand; the exit code follows the contract (0, 1 runtime, 2 config).
pub fn run(cmd: TunnelCommand) -> anyhow::Result<ExitCode> {
    let (half, format) = match &cmd {
        TunnelCommand::Server(s) => (Some(Half::Server), log_format(&s.common)),
        TunnelCommand::Client(c) => (Some(Half::Client), log_format(&c.common)),
        _ => (None, LogFormat::Text),
    };
    let result = match cmd {
        TunnelCommand::Keys(k) => keys(k),
        TunnelCommand::Server(s) => server(s),
        TunnelCommand::Client(c) => client(c),
        TunnelCommand::Stats(s) => stats(s),
    };
    Ok(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Text: the one style of every command's errors; JSON: a line like the half's others.
            if format == LogFormat::Json {
                eprintln!("{}", LogRecord::fatal(half, &e.to_string()).render(format));
            } else {
                crate::errors::print(&e);
            }
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
        outln!("{}", p.display());
    }
    Ok(())
}

fn log_format(c: &Common) -> LogFormat {
    match c.log_format {
        LogFormatArg::Text => LogFormat::Text,
        LogFormatArg::Json => LogFormat::Json,
    }
}

/// Prints each report as a log line: all JSON with `--log-format json`; with `--json` alone the
/// per-connection, refusal and drain lines are JSON and the listening lines stay text.
fn reporter(half: Half, json: bool, format: LogFormat) -> Reporter {
    Arc::new(move |r: Report| {
        let record = LogRecord::from_report(half, &r);
        let as_json = json
            && matches!(
                record.event,
                "connection" | "refused" | "too_many_connections" | "draining"
            );
        let format = if as_json { LogFormat::Json } else { format };
        eprintln!("{}", record.render(format));
    })
}

fn summary(s: &StatsSnapshot, json: bool) {
    if json {
        outln!("{}", serde_json::to_string(s).unwrap_or_default());
        return;
    }
    outln!("tunnel {} (method {})", s.half, s.method);
    outln!(
        "  connections: {} total, {} open, {} refused peers, {} refused connections, {} decompression errors, {} links cut",
        s.connections_total,
        s.connections_open,
        s.refused_peers,
        s.refused_connections,
        s.decompression_errors,
        s.links_cut
    );
    for (name, d) in [
        ("frontend->backend", &s.frontend_to_backend),
        ("backend->frontend", &s.backend_to_frontend),
    ] {
        outln!(
            "  {name}: {} raw, {} on the link ({:.1}%), {} chunks, {} frames, {} method switches",
            bytes(d.raw_bytes),
            bytes(d.link_bytes),
            pct(d.link_bytes, d.raw_bytes),
            d.chunks,
            d.frames,
            d.method_switches
        );
    }
}

fn drain(c: &Common) -> Duration {
    Duration::from_secs(c.drain_timeout)
}

/// `--compress-types`: "all", or message type letters.
fn compress_types(b: &Batching) -> Result<TagSet, NetError> {
    match b.compress_types.as_str() {
        "all" => Ok(TagSet::all()),
        t if t.is_ascii() && !t.is_empty() => Ok(TagSet::from_tags(t.as_bytes())),
        _ => Err(NetError::Config(
            "--compress-types takes \"all\" or message type letters such as dDQ".to_owned(),
        )),
    }
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
        compress_types: compress_types(&a.batching)?,
        threshold: a.batching.threshold,
    };
    let report = reporter(Half::Server, a.common.json, log_format(&a.common));
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
    let auto = a.method == AUTO;
    let method = if auto {
        Spec::new(Method::None)
    } else {
        link_method(&a.method).map_err(|e| NetError::Config(format!("--method: {e}")))?
    };
    let compress_types = compress_types(&a.batching)?;
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
        compress_types,
        threshold: a.batching.threshold,
        stats_file: a.common.stats.clone(),
        drain_timeout: drain(&a.common),
        max_connections: a.common.max_connections,
        metrics: a.common.metrics.clone(),
    };
    let report = reporter(Half::Client, a.common.json, log_format(&a.common));
    let snapshot =
        wire::net::run_blocking(|shutdown| wire::net::run_client(config, shutdown, report))?;
    summary(&snapshot, a.common.json);
    Ok(())
}

/// `--method`, when not `auto`: a specification the link takes; one it does not take is refused
/// with the list of those it does. Checked here rather than by clap, so that with
/// `--log-format json` the refusal is a JSON line like every other error of a half.
fn link_method(text: &str) -> Result<Spec, String> {
    match Spec::parse_among(text, &wire::link::METHODS) {
        Ok(spec) => wire::link::check_spec(&spec)
            .map(|()| spec)
            .map_err(|e| e.to_string()),
        Err(e @ (SpecError::UnknownMethod { .. } | SpecError::NotAccepted { .. })) => {
            Err(format!("{e}, {AUTO}"))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn stats(a: StatsArgs) -> Result<(), NetError> {
    let s = StatsSnapshot::read(&a.file)?;
    summary(&s, a.json);
    Ok(())
}
