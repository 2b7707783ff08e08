//! The server half: accepts link connections from client halves (TLS 1.3, client
//! certificates), and only after both handshakes opens the PostgreSQL connection.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;

use super::endpoint::{Endpoint, Stream};
use super::error::NetError;
use super::meter::{MeterTargets, Metered};
use super::pump::{self, DirectionCtx};
use super::sender::{Sender, Settled};
use super::stats::{track_connection, DirectionCounters, Half, Stats, StatsSnapshot};
use super::tap::FrameTap;
use super::{bind_metrics, serve, Report, Reporter, Serving, Shutdown, HANDSHAKE_TIMEOUT};
use crate::framer::Framer;
use crate::link::frame::{HEADER_LEN, MAX_HANDSHAKE_PAYLOAD};
use crate::link::handshake::AUTO;
use crate::link::{
    check_spec, Hello, LinkDecoder, LinkEncoder, Reply, SenderConfig, TagSet, COLUMNS_VERSION,
};
use crate::Direction;

/// How the server half runs.
#[derive(Clone)]
pub struct ServerConfig {
    /// Where client halves connect (`ADDR:PORT`).
    pub listen: Endpoint,
    /// PostgreSQL.
    pub upstream: Endpoint,
    /// CA that client certificates must chain to.
    pub ca: PathBuf,
    /// This half's certificate chain.
    pub cert: PathBuf,
    /// This half's private key.
    pub key: PathBuf,
    /// Stats file, rewritten every second and at exit.
    pub stats_file: Option<PathBuf>,
    /// Time open connections get after a shutdown.
    pub drain_timeout: Duration,
    /// A test hook seeing every link frame after the handshake.
    pub tap: Option<FrameTap>,
    /// Most link connections served at once; past it one is answered with a Refuse frame.
    pub max_connections: usize,
    /// Prometheus endpoint (`GET /metrics`), `ADDR:PORT`.
    pub metrics: Option<String>,
    /// Message types compressed backend->frontend (the method is the one the client half's
    /// Hello asks for; what to batch and from how many bytes is each sender's own setting).
    pub compress_types: TagSet,
    /// Fewest bytes ready together that are compressed backend->frontend.
    pub threshold: usize,
}

struct Shared {
    acceptor: TlsAcceptor,
    upstream: Endpoint,
    stats: Arc<Stats>,
    report: Reporter,
    tap: Option<FrameTap>,
    /// Where `--method auto` last settled backend->frontend, over the connections of every
    /// client half: the next bulk connection's start.
    settled: Arc<Settled>,
    /// The half's shutdown: at its "now", open connections end their links properly.
    stop: Shutdown,
    compress_types: TagSet,
    threshold: usize,
}

/// Runs the server half until `shutdown`, then drains; returns the final totals.
pub async fn run_server(
    config: ServerConfig,
    shutdown: Shutdown,
    report: Reporter,
) -> Result<StatsSnapshot, NetError> {
    let tls = super::tls::link_server_config(&config.ca, &config.cert, &config.key)?;
    let listener = config.listen.bind_link().await?;
    let stats = Arc::new(Stats::new(Half::Server, "any".to_owned()));
    let shared = Arc::new(Shared {
        acceptor: TlsAcceptor::from(tls),
        upstream: config.upstream.clone(),
        stats: stats.clone(),
        report: report.clone(),
        tap: config.tap.clone(),
        settled: Arc::new(Settled::new()),
        stop: shutdown.clone(),
        compress_types: config.compress_types.clone(),
        threshold: config.threshold,
    });
    // Told before Listening, so whoever waits for Listening knows both addresses.
    let metrics = bind_metrics(config.metrics.as_deref(), Half::Server, &report).await?;
    report(Report::Listening {
        half: Half::Server,
        address: listener.address(),
    });
    let refusing = shared.clone();
    let limit = config.max_connections;
    serve(
        Serving {
            stats,
            stats_file: config.stats_file.as_deref(),
            drain_timeout: config.drain_timeout,
            max_connections: limit,
            shutdown,
            report,
            listener,
            metrics,
        },
        move |stream, peer| serve_link(stream, peer, shared.clone()),
        move |stream, _peer| refuse_link(stream, refusing.clone(), limit),
    )
    .await
}

/// Answers a link connection past `--max-connections` with a Refuse frame after the TLS
/// handshake and its Hello, so the client half can tell its application why.
async fn refuse_link(stream: Stream, shared: Arc<Shared>, limit: usize) {
    let stats = &shared.stats;
    let targets = MeterTargets {
        read: [Arc::default(), stats.f2b.clone()],
        written: [Arc::default(), stats.b2f.clone()],
    };
    let reason = format!("pgcompress tunnel server: too many connections ({limit})");
    let _ = handshake(stream, targets, &shared.acceptor, Some(reason)).await;
}

async fn serve_link(stream: Stream, peer: String, shared: Arc<Shared>) {
    let started = Instant::now();
    let conn_f2b = Arc::new(DirectionCounters::default());
    let conn_b2f = Arc::new(DirectionCounters::default());
    let stats = &shared.stats;
    // The server half reads frontend->backend link bytes and writes backend->frontend ones.
    let targets = MeterTargets {
        read: [conn_f2b.clone(), stats.f2b.clone()],
        written: [conn_b2f.clone(), stats.b2f.clone()],
    };
    let (link, hello, rest) = match handshake(stream, targets, &shared.acceptor, None).await {
        Ok(v) => v,
        Err(e) => {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            (shared.report)(Report::Refused {
                peer,
                reason: e.to_string(),
            });
            return;
        }
    };
    if let Ok(mut m) = stats.method.lock() {
        *m = if hello.backend_auto {
            AUTO.to_owned()
        } else {
            hello.backend_spec.to_string()
        };
    }
    let conn = [conn_f2b, conn_b2f];
    let report = track_connection(
        stats,
        peer,
        started,
        &conn,
        pump_link(link, hello, rest, &shared, conn.clone()),
    )
    .await;
    (shared.report)(Report::Connection(report));
}

type Link = tokio_rustls::server::TlsStream<Metered<Stream>>;

/// TLS accept and the link Hello; nothing reaches PostgreSQL before both succeed. With
/// `refuse`, the Hello is answered with a Refuse frame carrying that reason. A peer that
/// does not start TLS is told what the port is ([`super::plain::tls_only`]).
async fn handshake(
    stream: Stream,
    targets: MeterTargets,
    acceptor: &TlsAcceptor,
    refuse: Option<String>,
) -> Result<(Link, Hello, Vec<u8>), NetError> {
    let work = async {
        let link = Metered::new(super::plain::tls_only(stream).await?, targets);
        let mut tls = acceptor
            .accept(link)
            .await
            .map_err(|e| NetError::Tls(e.to_string()))?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        let (hello, used) = loop {
            if let Some(h) = Hello::decode(&buf)? {
                break h;
            }
            if buf.len() > HEADER_LEN + MAX_HANDSHAKE_PAYLOAD as usize {
                return Err(NetError::Refused("oversized Hello".to_owned()));
            }
            let n = tls
                .read(&mut chunk)
                .await
                .map_err(|e| NetError::io("reading the link Hello", e))?;
            if n == 0 {
                return Err(NetError::Refused(
                    "the peer closed before its Hello".to_owned(),
                ));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let reply = match refuse {
            Some(reason) => Reply::Refuse(reason),
            None => hello.answer(|s| check_spec(s).is_ok()),
        };
        let mut out = Vec::new();
        reply.encode(&mut out)?;
        tls.write_all(&out)
            .await
            .map_err(|e| NetError::io("writing the link Accept", e))?;
        tls.flush()
            .await
            .map_err(|e| NetError::io("writing the link Accept", e))?;
        if let Reply::Refuse(reason) = reply {
            let _ = tls.shutdown().await;
            return Err(NetError::Refused(reason));
        }
        buf.drain(..used);
        Ok((tls, hello, buf))
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, work)
        .await
        .map_err(|_| NetError::Timeout("TLS and link handshake".to_owned()))?
}

async fn pump_link(
    link: Link,
    hello: Hello,
    rest: Vec<u8>,
    shared: &Shared,
    conn: [Arc<DirectionCounters>; 2],
) -> Result<(), NetError> {
    let [conn_f2b, conn_b2f] = conn;
    let pg = match tokio::time::timeout(HANDSHAKE_TIMEOUT, shared.upstream.connect()).await {
        Ok(Ok(pg)) => pg,
        Ok(Err(e)) => return Err(tell_application(link, &hello, e).await),
        Err(_) => {
            let e = NetError::Timeout(format!("connecting to {}", shared.upstream));
            return Err(tell_application(link, &hello, e).await);
        }
    };
    // The version the Accept named: the handshake refused a Hello with none in common.
    let columns = hello.common_version().is_some_and(|v| v >= COLUMNS_VERSION);
    let decoder =
        LinkDecoder::new(Direction::FrontendToBackend, hello.frontend_spec)?.with_columns(columns);
    let encoder = LinkEncoder::new(
        Direction::BackendToFrontend,
        SenderConfig {
            columns,
            compress: shared.compress_types.clone(),
            threshold: shared.threshold,
            ..SenderConfig::new(hello.backend_spec)
        },
    )?;
    let mut sender = Sender::new(Framer::new(Direction::BackendToFrontend), encoder);
    if hello.backend_auto {
        sender = sender.adapt(shared.settled.clone());
    }
    let ready = Arc::new(AtomicBool::new(false));
    let session_over = Arc::new(AtomicBool::new(false));
    let f2b = DirectionCtx {
        direction: Direction::FrontendToBackend,
        ready: ready.clone(),
        session_over: session_over.clone(),
        counters: [conn_f2b, shared.stats.f2b.clone()],
        tap: shared.tap.clone(),
    };
    let b2f = DirectionCtx {
        direction: Direction::BackendToFrontend,
        ready,
        session_over,
        counters: [conn_b2f, shared.stats.b2f.clone()],
        tap: shared.tap.clone(),
    };
    let (link_r, mut link_w) = tokio::io::split(link);
    let (pg_r, pg_w) = tokio::io::split(pg);
    let result = {
        let both = async {
            tokio::try_join!(
                pump::decode(link_r, pg_w, decoder, rest, &f2b),
                pump::encode(pg_r, &mut link_w, sender, &b2f),
            )
            .map(|_| ())
        };
        tokio::select! {
            r = both => r,
            // The drain is over: the connection ends here, its link properly.
            _ = shared.stop.now() => Ok(()),
        }
    };
    // However the connection ended, the client half gets close_notify, not a bare close.
    pump::close_link(&mut link_w).await;
    result
}

/// PostgreSQL cannot be reached: the application gets a FATAL ErrorResponse saying why
/// (verbatim on the link) instead of a bare close. Returns `e` for the connection's report.
async fn tell_application(mut link: Link, hello: &Hello, e: NetError) -> NetError {
    let message = super::error_response(&format!("pgcompress tunnel server: {e}"));
    if let Ok(mut encoder) = LinkEncoder::new(
        Direction::BackendToFrontend,
        SenderConfig::new(hello.backend_spec),
    ) {
        if encoder.push_bytes(Some(b'E'), &message).is_ok() && encoder.flush().is_ok() {
            let _ = link.write_all(encoder.output()).await;
            let _ = link.shutdown().await;
        }
    }
    e
}
