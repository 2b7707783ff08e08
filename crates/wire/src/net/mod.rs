//! The async tunnel halves (feature `net`): sockets, TLS and the pumps around the sans-IO
//! [`crate::framer`] and [`crate::link`] (docs/TUNNEL.md).
//!
//! [`run_server`] runs beside PostgreSQL, [`run_client`] beside the applications; both serve
//! until their [`Shutdown`] is triggered, then drain. [`run_blocking`] runs either on a
//! multi-threaded runtime with SIGTERM and SIGINT wired to the shutdown, for the CLI.

mod client;
mod endpoint;
pub mod error;
pub mod keys;
pub mod log;
mod meter;
mod metrics;
mod plain;
mod pump;
mod sender;
mod server;
pub mod stats;
pub mod tap;
pub mod tls;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use client::{run_client, ClientConfig};
pub use endpoint::Endpoint;
pub use error::NetError;
pub use keys::{write_keys, KeysConfig};
pub use log::{Level, LogFormat, LogRecord};
pub use server::{run_server, ServerConfig};
pub use stats::{ConnectionReport, DirectionStats, Half, StatsSnapshot};
pub use tap::{FrameTap, TapEvent};

use stats::Stats;

/// Default time open connections get to finish after a shutdown.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Time a peer gets for the TLS and link handshakes, and a half for reaching the other end.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default most connections a half serves at once (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;
/// Time connections get to end their links properly once the drain is cut short.
const CLOSE_GRACE: Duration = Duration::from_secs(3);
/// Time a connection past the limit gets to reach the point where it can be told so.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(5);

/// Something a running half tells its caller.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Report {
    /// The half accepts connections at `address` (a socket address or a socket path).
    Listening {
        /// Which half.
        half: Half,
        /// Where.
        address: String,
    },
    /// The half serves its Prometheus endpoint (`GET /metrics`) at `address`.
    MetricsListening {
        /// Which half.
        half: Half,
        /// Where.
        address: String,
    },
    /// A link peer was refused (TLS or link handshake).
    Refused {
        /// The peer's address.
        peer: String,
        /// Why.
        reason: String,
    },
    /// A connection was refused because the half already serves its maximum.
    TooManyConnections {
        /// The peer's address.
        peer: String,
        /// The limit (`--max-connections`).
        limit: usize,
    },
    /// A connection ended.
    Connection(ConnectionReport),
    /// A shutdown began; `open` connections are draining.
    Draining {
        /// Connections still open.
        open: u64,
    },
}

/// Receives the [`Report`]s of a half; must be quick.
pub type Reporter = Arc<dyn Fn(Report) + Send + Sync>;

/// Tells a running half to stop accepting and drain, or to stop at once. Clones share the
/// signal.
#[derive(Clone, Debug)]
pub struct Shutdown {
    /// 0 running, 1 draining, 2 stopping now.
    tx: Arc<tokio::sync::watch::Sender<u8>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    /// A shutdown not yet triggered.
    pub fn new() -> Self {
        Shutdown {
            tx: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Starts the shutdown: stop accepting, let open connections finish.
    pub fn trigger(&self) {
        self.tx.send_if_modified(|v| {
            let was = *v;
            *v = was.max(1);
            *v != was
        });
    }

    /// Ends the drain at once: open connections are closed.
    pub fn trigger_now(&self) {
        self.tx.send_replace(2);
    }

    /// True once triggered.
    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow() >= 1
    }

    async fn reached(&self, level: u8) {
        let mut rx = self.tx.subscribe();
        // The sender lives in `self`, so the channel cannot close while waiting.
        let _ = rx.wait_for(|v| *v >= level).await;
    }

    /// Waits until triggered.
    pub async fn triggered(&self) {
        self.reached(1).await;
    }

    /// Waits until [`Shutdown::trigger_now`].
    pub async fn now(&self) {
        self.reached(2).await;
    }
}

/// Runs `half` (from [`run_client`] or [`run_server`]) on a multi-threaded runtime until it
/// returns; SIGTERM or SIGINT (or SIGHUP, as for every command: [`service::stop`]) triggers its
/// shutdown, a second one ends the drain at once.
pub fn run_blocking<F, Fut>(half: F) -> Result<StatsSnapshot, NetError>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = Result<StatsSnapshot, NetError>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| NetError::io("starting the async runtime", e))?;
    let stop = service::stop::install().map_err(|e| NetError::Io {
        what: "starting the tunnel half".into(),
        source: std::io::Error::other(e),
    })?;
    runtime.block_on(async {
        let shutdown = Shutdown::new();
        let trigger = shutdown.clone();
        tokio::spawn(async move {
            stop.signalled(1).await;
            trigger.trigger();
            stop.signalled(2).await;
            trigger.trigger_now();
        });
        half(shutdown).await
    })
}

/// A FATAL ErrorResponse with SQLSTATE 08006 (connection_failure).
pub(crate) fn error_response(message: &str) -> Vec<u8> {
    error_response_code("08006", message)
}

/// A FATAL ErrorResponse with SQLSTATE `code`.
pub(crate) fn error_response_code(code: &str, message: &str) -> Vec<u8> {
    let mut body = Vec::new();
    for (field, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', code),
        (b'M', message),
    ] {
        body.push(field);
        body.extend_from_slice(value.replace('\0', " ").as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut msg = vec![b'E'];
    msg.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    msg.extend_from_slice(&body);
    msg
}

/// Writes the stats file once a second until dropped (the caller writes the final one).
fn spawn_stats_writer(
    stats: Arc<Stats>,
    path: Option<PathBuf>,
    gate: StatsGate,
) -> Option<tokio::task::JoinHandle<()>> {
    let path = path?;
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let snapshot = stats.snapshot();
            let path = path.clone();
            let gate = Arc::clone(&gate);
            // File I/O off the async workers. A failed periodic write is retried next
            // second; the final one reports its error.
            let _ = tokio::task::spawn_blocking(move || {
                let closed = gate.lock().unwrap_or_else(|e| e.into_inner());
                if !*closed {
                    let _ = snapshot.write_atomic(&path);
                }
            })
            .await;
        }
    }))
}

/// Orders the writes of the stats file. Aborting the periodic writer does not stop a write
/// it already handed to a blocking thread: without the gate, that write and the final one
/// shared the temporary file, and whichever renamed second failed ("No such file or
/// directory") or put an older snapshot over the final one. The final write sets the flag;
/// a periodic write that comes after it writes nothing.
type StatsGate = Arc<std::sync::Mutex<bool>>;

/// Joins the tasks that already finished; returns how many still run.
fn reap(tasks: &mut tokio::task::JoinSet<()>) -> usize {
    while tasks.try_join_next().is_some() {}
    tasks.len()
}

/// Where and how many connections a half serves; shared by both halves.
struct Serving<'a> {
    stats: Arc<Stats>,
    stats_file: Option<&'a Path>,
    drain_timeout: Duration,
    max_connections: usize,
    shutdown: Shutdown,
    report: Reporter,
    listener: endpoint::Listener,
    /// The bound Prometheus endpoint, served until the half returns.
    metrics: Option<tokio::net::TcpListener>,
}

/// Binds `--metrics ADDR` if given and tells `report` where it listens.
async fn bind_metrics(
    addr: Option<&str>,
    half: Half,
    report: &Reporter,
) -> Result<Option<tokio::net::TcpListener>, NetError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let listener = metrics::bind(addr).await?;
    let address = listener
        .local_addr()
        .map_or_else(|_| addr.to_owned(), |a| a.to_string());
    report(Report::MetricsListening { half, address });
    Ok(Some(listener))
}

/// Serves connections from `listener` with `handle` until the shutdown, closes it, then
/// drains the open connections for at most `drain_timeout` and writes the final stats.
/// A connection arriving while `max_connections` are open goes to `refuse` instead (given
/// at most [`REFUSAL_TIMEOUT`]) and is counted. Shared by both halves.
async fn serve<H, HF, R, RF>(
    s: Serving<'_>,
    handle: H,
    refuse: R,
) -> Result<StatsSnapshot, NetError>
where
    H: Fn(endpoint::Stream, String) -> HF,
    HF: Future<Output = ()> + Send + 'static,
    R: Fn(endpoint::Stream, String) -> RF,
    RF: Future<Output = ()> + Send + 'static,
{
    let Serving {
        stats,
        stats_file,
        drain_timeout,
        max_connections,
        shutdown,
        report,
        listener,
        metrics,
    } = s;
    let gate = StatsGate::default();
    let writer = spawn_stats_writer(
        stats.clone(),
        stats_file.map(Path::to_path_buf),
        Arc::clone(&gate),
    );
    let scraper = metrics.map(|l| metrics::spawn(l, stats.clone()));
    let mut tasks = tokio::task::JoinSet::new();
    let mut refusals = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.triggered() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            Some(_) = refusals.join_next(), if !refusals.is_empty() => {}
            r = listener.accept() => match r {
                // Connections that just ended are not counted against the limit.
                Ok((stream, peer)) if reap(&mut tasks) >= max_connections => {
                    stats.refused_connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    report(Report::TooManyConnections {
                        peer: peer.clone(),
                        limit: max_connections,
                    });
                    let work = refuse(stream, peer);
                    refusals.spawn(async move {
                        let _ = tokio::time::timeout(REFUSAL_TIMEOUT, work).await;
                    });
                }
                Ok((stream, peer)) => { tasks.spawn(handle(stream, peer)); }
                // Out of descriptors and the like: keep serving the open connections.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
        }
    }
    // New connections are refused at once instead of waiting in the backlog.
    drop(listener);
    refusals.abort_all();
    report(Report::Draining {
        open: tasks.len() as u64,
    });
    let drained = tokio::select! {
        r = tokio::time::timeout(drain_timeout, async {
            while tasks.join_next().await.is_some() {}
        }) => r.is_ok(),
        _ = shutdown.now() => false,
    };
    if !drained {
        // The open connections end their links properly (close_notify) when told "now";
        // what still runs after a grace period is aborted.
        shutdown.trigger_now();
        let closed = tokio::time::timeout(CLOSE_GRACE, async {
            while tasks.join_next().await.is_some() {}
        })
        .await
        .is_ok();
        if !closed {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
    }
    if let Some(w) = writer {
        w.abort();
    }
    if let Some(m) = scraper {
        m.abort();
    }
    let snapshot = stats.snapshot();
    if let Some(path) = stats_file {
        let (s, p) = (snapshot.clone(), path.to_path_buf());
        tokio::task::spawn_blocking(move || {
            let mut closed = gate.lock().unwrap_or_else(|e| e.into_inner());
            *closed = true;
            s.write_atomic(&p)
        })
        .await
        .map_err(|e| NetError::io("writing the stats file", std::io::Error::other(e)))??;
    }
    Ok(snapshot)
}
