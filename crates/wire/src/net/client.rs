//! The client half: accepts applications (TCP or a Unix socket), answers their encryption
//! requests, then carries each connection over its own TLS link to the server half.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use codec::Spec;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::endpoint::{Endpoint, Stream};
use super::error::NetError;
use super::meter::{MeterTargets, Metered};
use super::pump::{self, DirectionCtx};
use super::sender::{Sender, Settled};
use super::stats::{track_connection, DirectionCounters, Half, Stats, StatsSnapshot};
use super::{bind_metrics, serve, Report, Reporter, Serving, Shutdown, HANDSHAKE_TIMEOUT};
use crate::framer::{Framer, Kind};
use crate::link::handshake::AUTO;
use crate::link::{
    Accept, Hello, LinkDecoder, LinkEncoder, Reply, SenderConfig, TagSet, COLUMNS_VERSION,
};
use crate::Direction;

/// Time an application gets to send its startup packet (PostgreSQL's
/// `authentication_timeout` default).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// How the client half runs.
#[derive(Clone)]
pub struct ClientConfig {
    /// Where applications connect.
    pub listen: Endpoint,
    /// The server half, `HOST:PORT`.
    pub server: String,
    /// Name the server half's certificate must carry.
    pub server_name: String,
    /// Method asked for in both directions (ignored with `auto`).
    pub method: Spec,
    /// `--method auto`: this half adapts frontend->backend and asks the server half to adapt
    /// backend->frontend; both start at none.
    pub auto: bool,
    /// CA the server half's certificate must chain to.
    pub ca: PathBuf,
    /// This half's client certificate chain.
    pub cert: PathBuf,
    /// This half's private key.
    pub key: PathBuf,
    /// Certificate and key to serve TLS to applications that send SSLRequest; without them
    /// SSLRequest is answered 'N'.
    pub local_tls: Option<(PathBuf, PathBuf)>,
    /// Message types compressed frontend->backend.
    pub compress_types: TagSet,
    /// Fewest bytes ready together (a batch of messages read in one go) that are compressed
    /// frontend->backend.
    pub threshold: usize,
    /// Stats file, rewritten every second and at exit.
    pub stats_file: Option<PathBuf>,
    /// Time open connections get after a shutdown.
    pub drain_timeout: Duration,
    /// Most application connections served at once; past it one is told "too many
    /// connections" (SQLSTATE 53300) and closed.
    pub max_connections: usize,
    /// Prometheus endpoint (`GET /metrics`), `ADDR:PORT`.
    pub metrics: Option<String>,
}

struct Shared {
    config: ClientConfig,
    connector: TlsConnector,
    server_name: ServerName<'static>,
    local: Option<TlsAcceptor>,
    stats: Arc<Stats>,
    report: Reporter,
    /// Where `--method auto` last settled frontend->backend: the next bulk connection's start.
    settled: Arc<Settled>,
    /// The half's shutdown: at its "now", open connections end their links properly.
    stop: Shutdown,
}

/// Runs the client half until `shutdown`, then drains; returns the final totals.
pub async fn run_client(
    config: ClientConfig,
    shutdown: Shutdown,
    report: Reporter,
) -> Result<StatsSnapshot, NetError> {
    crate::link::check_spec(&config.method)?;
    let tls = super::tls::link_client_config(&config.ca, &config.cert, &config.key)?;
    let local = match &config.local_tls {
        Some((cert, key)) => Some(TlsAcceptor::from(super::tls::local_server_config(
            cert, key,
        )?)),
        None => None,
    };
    let server_name = ServerName::try_from(config.server_name.clone())
        .map_err(|e| NetError::Config(format!("server name \"{}\": {e}", config.server_name)))?;
    let listener = config.listen.bind().await?;
    let method = if config.auto {
        AUTO.to_owned()
    } else {
        config.method.to_string()
    };
    let stats = Arc::new(Stats::new(Half::Client, method));
    let stats_file = config.stats_file.clone();
    let drain = config.drain_timeout;
    let max_connections = config.max_connections;
    let metrics_addr = config.metrics.clone();
    let shared = Arc::new(Shared {
        config,
        connector: TlsConnector::from(tls),
        server_name,
        local,
        stats: stats.clone(),
        report: report.clone(),
        settled: Arc::new(Settled::new()),
        stop: shutdown.clone(),
    });
    // Told before Listening, so whoever waits for Listening knows both addresses.
    let metrics = bind_metrics(metrics_addr.as_deref(), Half::Client, &report).await?;
    report(Report::Listening {
        half: Half::Client,
        address: listener.address(),
    });
    serve(
        Serving {
            stats,
            stats_file: stats_file.as_deref(),
            drain_timeout: drain,
            max_connections,
            shutdown,
            report,
            listener,
            metrics,
        },
        move |stream, peer| serve_app(stream, peer, shared.clone()),
        move |stream, _peer| refuse_app(stream, max_connections),
    )
    .await
}

/// Tells an application past `--max-connections` so, as PostgreSQL would: its encryption
/// request is answered 'N', its startup packet read, then a FATAL ErrorResponse with SQLSTATE
/// 53300 (too_many_connections) is sent and the socket closed.
async fn refuse_app(app: Stream, limit: usize) {
    let Ok(Some(mut first)) = first_packet(app, None).await else {
        return;
    };
    if first.framer.started() {
        let msg = super::error_response_code(
            "53300",
            &format!("pgcompress tunnel client: too many connections ({limit})"),
        );
        let _ = first.app.write_all(&msg).await;
    }
    let _ = first.app.shutdown().await;
}

async fn serve_app(app: Stream, peer: String, shared: Arc<Shared>) {
    let started = Instant::now();
    let conn: [Arc<DirectionCounters>; 2] = Default::default();
    let report = track_connection(
        &shared.stats,
        peer,
        started,
        &conn,
        carry(app, &shared, conn.clone()),
    )
    .await;
    (shared.report)(Report::Connection(report));
}

/// The application's first packet, after any encryption request was answered.
pub(super) struct First {
    pub(super) app: Stream,
    pub(super) framer: Framer,
    packet: Vec<u8>,
    rest: Vec<u8>,
}

/// Reads until the StartupMessage or CancelRequest, answering SSLRequest ('S' and TLS with
/// a local certificate, else 'N') and GSSENCRequest ('N') on the way. Bytes sent after an
/// encryption request before its answer end the connection (CVE-2021-23214).
/// `Ok(None)` if the application closes between packets (a port probe, or a client that
/// wanted TLS and got 'N').
pub(super) async fn first_packet(
    mut app: Stream,
    local: Option<&TlsAcceptor>,
) -> Result<Option<First>, NetError> {
    let mut framer = Framer::new(Direction::FrontendToBackend);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(msg) = framer.poll(&buf)? {
            let len = msg.bytes.len();
            match msg.kind {
                Kind::SslRequest | Kind::GssEncRequest => {
                    let tls = matches!(msg.kind, Kind::SslRequest) && local.is_some();
                    buf.drain(..len);
                    // Anything already here was sent before the answer: refused.
                    framer.poll(&buf)?;
                    app.write_all(if tls { b"S" } else { b"N" })
                        .await
                        .map_err(|e| NetError::io("answering the encryption request", e))?;
                    app.flush()
                        .await
                        .map_err(|e| NetError::io("answering the encryption request", e))?;
                    if let (true, Some(acceptor)) = (tls, local) {
                        let s = acceptor
                            .accept(app)
                            .await
                            .map_err(|e| NetError::Tls(format!("application TLS: {e}")))?;
                        app = Box::new(s);
                    }
                    framer.resume_after_answer();
                    continue;
                }
                _ => {
                    let packet = buf[..len].to_vec();
                    buf.drain(..len);
                    return Ok(Some(First {
                        app,
                        framer,
                        packet,
                        rest: buf,
                    }));
                }
            }
        }
        let n = app
            .read(&mut chunk)
            .await
            .map_err(|e| NetError::io("reading the startup packet", e))?;
        if n == 0 {
            // Nothing was cut off when nothing is left; a partial packet is an error.
            framer.finish(&buf)?;
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

type Link = tokio_rustls::client::TlsStream<Metered<Stream>>;

/// Opens the link: TCP, TLS, Hello and the server half's answer.
async fn open_link(
    shared: &Shared,
    targets: MeterTargets,
) -> Result<(Link, Accept, Vec<u8>), NetError> {
    let config = &shared.config;
    let work = async {
        let tcp = Endpoint::Tcp(config.server.clone()).connect_link().await?;
        let mut tls = shared
            .connector
            .connect(shared.server_name.clone(), Metered::new(tcp, targets))
            .await
            .map_err(|e| NetError::Tls(format!("to the server half {}: {e}", config.server)))?;
        let mut out = Vec::new();
        let hello = if config.auto {
            Hello::auto()
        } else {
            Hello::new(config.method, config.method)
        };
        hello.encode(&mut out)?;
        let refused = |what: &str, e| super::tls::link_handshake_error(what, &config.server, e);
        tls.write_all(&out)
            .await
            .map_err(|e| refused("writing the link Hello", e))?;
        tls.flush()
            .await
            .map_err(|e| refused("writing the link Hello", e))?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 2048];
        let (reply, used) = loop {
            if let Some(r) = Reply::decode(&buf)? {
                break r;
            }
            let n = tls
                .read(&mut chunk)
                .await
                .map_err(|e| refused("reading the link Accept", e))?;
            if n == 0 {
                return Err(NetError::Refused(
                    "the server half closed the link during the handshake".to_owned(),
                ));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        match reply {
            Reply::Refuse(reason) => Err(NetError::Refused(reason)),
            Reply::Accept(accept) => {
                buf.drain(..used);
                Ok((tls, accept, buf))
            }
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, work)
        .await
        .map_err(|_| NetError::Timeout(format!("link handshake with {}", config.server)))?
}

async fn carry(
    app: Stream,
    shared: &Shared,
    conn: [Arc<DirectionCounters>; 2],
) -> Result<(), NetError> {
    let [conn_f2b, conn_b2f] = conn;
    let first = tokio::time::timeout(STARTUP_TIMEOUT, first_packet(app, shared.local.as_ref()))
        .await
        .map_err(|_| NetError::Timeout("waiting for the startup packet".to_owned()))??;
    let Some(first) = first else {
        return Ok(());
    };
    let stats = &shared.stats;
    // The client half writes frontend->backend link bytes and reads backend->frontend ones.
    let targets = MeterTargets {
        read: [conn_b2f.clone(), stats.b2f.clone()],
        written: [conn_f2b.clone(), stats.f2b.clone()],
    };
    let mut first = first;
    let (link, accept, rest) = match open_link(shared, targets).await {
        Ok(v) => v,
        Err(e) => {
            if first.framer.started() {
                // Tell the application why, as PostgreSQL would, rather than just closing.
                let msg = super::error_response(&format!("pgcompress tunnel: {e}"));
                let _ = first.app.write_all(&msg).await;
                let _ = first.app.shutdown().await;
            }
            return Err(e);
        }
    };
    let config = &shared.config;
    let encoder = LinkEncoder::new(
        Direction::FrontendToBackend,
        SenderConfig {
            spec: accept.frontend_spec,
            compress: config.compress_types.clone(),
            threshold: config.threshold,
            columns: accept.version >= COLUMNS_VERSION,
        },
    )?;
    let decoder = LinkDecoder::new(Direction::BackendToFrontend, accept.backend_spec)?
        .with_columns(accept.version >= COLUMNS_VERSION);
    let mut sender = Sender::new(first.framer, encoder);
    if config.auto {
        sender = sender.adapt(shared.settled.clone());
    }
    sender.push_message(None, &first.packet)?;
    sender.feed(&first.rest)?;
    let ready = Arc::new(AtomicBool::new(false));
    let session_over = Arc::new(AtomicBool::new(false));
    let f2b = DirectionCtx {
        direction: Direction::FrontendToBackend,
        ready: ready.clone(),
        session_over: session_over.clone(),
        counters: [conn_f2b, stats.f2b.clone()],
        tap: None,
    };
    let b2f = DirectionCtx {
        direction: Direction::BackendToFrontend,
        ready,
        session_over,
        counters: [conn_b2f, stats.b2f.clone()],
        tap: None,
    };
    let (link_r, mut link_w) = tokio::io::split(link);
    let (app_r, app_w) = tokio::io::split(first.app);
    let result = {
        let encode = pump::encode(app_r, &mut link_w, sender, &f2b);
        let decode = pump::decode(link_r, app_w, decoder, rest, &b2f);
        tokio::pin!(encode, decode);
        tokio::select! {
            // PostgreSQL ended the session: the application's socket closes whole, as a
            // direct connection's would, so a write after that meets a reset instead of a
            // socket that still takes bytes nobody reads (pg8000's broken-pipe tests tell the
            // two apart).
            r = &mut decode => r,
            r = &mut encode => match r {
                Ok(()) => decode.await,
                Err(e) => Err(e),
            },
            // The drain is over: the connection ends here, its link properly.
            _ = shared.stop.now() => Ok(()),
        }
    };
    // However the connection ended, the server half gets close_notify, not a bare close.
    pump::close_link(&mut link_w).await;
    result
}
