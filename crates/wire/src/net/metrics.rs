//! The Prometheus endpoint of a half (`--metrics ADDR`): `GET /metrics` answers the half's
//! counters in the text exposition format, by the rules of [`service::scrape`], on the half's
//! runtime, one request per connection.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::error::NetError;
use super::stats::{Stats, StatsSnapshot};
use service::scrape::{self, Request, REQUEST_TIMEOUT};
use service::ProcessFacts;

type Labels = Vec<(String, String)>;

/// Binds the endpoint (`ADDR:PORT`); an address in use is a configuration error.
pub(crate) async fn bind(addr: &str) -> Result<TcpListener, NetError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| NetError::Config(format!("--metrics {addr}: {e}")))
}

/// Serves scrapes from `listener` until the task is aborted.
pub(crate) fn spawn(listener: TcpListener, stats: Arc<Stats>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut scrapes = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                Some(_) = scrapes.join_next(), if !scrapes.is_empty() => {}
                r = listener.accept() => match r {
                    Ok((stream, _)) => {
                        let stats = stats.clone();
                        scrapes.spawn(async move {
                            let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &stats)).await;
                        });
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                },
            }
        }
    })
}

/// Reads one request head and answers it, by the rules of [`service::scrape`].
async fn answer(mut stream: TcpStream, stats: &Stats) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    let asked = loop {
        match scrape::request(&head) {
            Request::Incomplete => {}
            asked => break asked,
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    };
    // /proc reads are file I/O: off the async workers.
    let process = match asked {
        Request::Metrics => tokio::task::spawn_blocking(ProcessFacts::read)
            .await
            .unwrap_or_default(),
        _ => ProcessFacts::default(),
    };
    let reply = scrape::response(asked, || render(&stats.snapshot(), &process));
    stream.write_all(&reply).await?;
    stream.shutdown().await
}

fn counter(v: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(v);
    c
}

fn gauge(v: u64) -> Gauge<i64> {
    let g = Gauge::<i64>::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    g
}

/// The snapshot's counters as `pgcompress_tunnel_*` metrics, and `process`'s as `process_*`
/// ones, all with a `half` label.
pub(crate) fn render(s: &StatsSnapshot, process: &ProcessFacts) -> String {
    let mut root = Registry::with_labels(
        [(Cow::Borrowed("half"), Cow::Owned(s.half.to_string()))].into_iter(),
    );
    process.register(&mut root);
    let registry = root.sub_registry_with_prefix("pgcompress_tunnel");
    registry.register(
        "connections_open",
        "Connections being served now",
        gauge(s.connections_open),
    );
    registry.register(
        "connections",
        "Connections accepted since start (refused ones excluded)",
        counter(s.connections_total),
    );
    registry.register(
        "refused_peers",
        "Link peers refused in the TLS or link handshake",
        counter(s.refused_peers),
    );
    registry.register(
        "refused_connections",
        "Connections refused past --max-connections",
        counter(s.refused_connections),
    );
    registry.register(
        "decompression_errors",
        "Connections closed because of a bad link frame or chunk",
        counter(s.decompression_errors),
    );
    registry.register(
        "links_cut",
        "Connections whose link peer went away mid-session without TLS close_notify",
        counter(s.links_cut),
    );
    registry.register(
        "method",
        "The compression method in use (the server half: the latest client half's)",
        Info::new(vec![("method".to_owned(), s.method.clone())]),
    );
    let raw = Family::<Labels, Counter>::default();
    let link = Family::<Labels, Counter>::default();
    let chunks = Family::<Labels, Counter>::default();
    let column_chunks = Family::<Labels, Counter>::default();
    let frames = Family::<Labels, Counter>::default();
    let switches = Family::<Labels, Counter>::default();
    for (name, d) in [
        ("frontend_to_backend", &s.frontend_to_backend),
        ("backend_to_frontend", &s.backend_to_frontend),
    ] {
        let labels = vec![("direction".to_owned(), name.to_owned())];
        raw.get_or_create(&labels).inc_by(d.raw_bytes);
        link.get_or_create(&labels).inc_by(d.link_bytes);
        chunks.get_or_create(&labels).inc_by(d.chunks);
        column_chunks.get_or_create(&labels).inc_by(d.column_chunks);
        frames.get_or_create(&labels).inc_by(d.frames);
        switches.get_or_create(&labels).inc_by(d.method_switches);
    }
    registry.register("raw_bytes", "PostgreSQL bytes carried", raw);
    registry.register(
        "link_bytes",
        "Bytes on the link socket, TLS records included",
        link,
    );
    registry.register("chunks", "Compressed chunks", chunks);
    registry.register(
        "column_chunks",
        "Compressed chunks that travelled column-coded",
        column_chunks,
    );
    registry.register("frames", "Link frames", frames);
    registry.register(
        "method_switches",
        "Method switches made by --method auto",
        switches,
    );
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &root);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::stats::{DirectionStats, Half};

    #[test]
    fn every_counter_is_rendered_with_its_labels() {
        let s = StatsSnapshot {
            half: Half::Client,
            method: "zstd:1".to_owned(),
            connections_open: 2,
            connections_total: 7,
            refused_peers: 1,
            decompression_errors: 3,
            refused_connections: 4,
            links_cut: 0,
            frontend_to_backend: DirectionStats {
                raw_bytes: 1000,
                link_bytes: 400,
                chunks: 5,
                column_chunks: 2,
                frames: 9,
                method_switches: 0,
            },
            backend_to_frontend: DirectionStats {
                raw_bytes: 123456,
                link_bytes: 23456,
                chunks: 11,
                column_chunks: 0,
                frames: 20,
                method_switches: 6,
            },
        };
        let process = ProcessFacts {
            resident_bytes: Some(9 * 1024 * 1024),
            open_fds: Some(12),
        };
        let text = render(&s, &process);
        for line in [
            "pgcompress_tunnel_connections_open{half=\"client\"} 2",
            "pgcompress_tunnel_connections_total{half=\"client\"} 7",
            "pgcompress_tunnel_refused_peers_total{half=\"client\"} 1",
            "pgcompress_tunnel_refused_connections_total{half=\"client\"} 4",
            "pgcompress_tunnel_decompression_errors_total{half=\"client\"} 3",
            "pgcompress_tunnel_method_info{half=\"client\",method=\"zstd:1\"} 1",
            "pgcompress_tunnel_raw_bytes_total{half=\"client\",direction=\"frontend_to_backend\"} 1000",
            "pgcompress_tunnel_raw_bytes_total{half=\"client\",direction=\"backend_to_frontend\"} 123456",
            "pgcompress_tunnel_link_bytes_total{half=\"client\",direction=\"backend_to_frontend\"} 23456",
            "pgcompress_tunnel_chunks_total{half=\"client\",direction=\"frontend_to_backend\"} 5",
            "pgcompress_tunnel_column_chunks_total{half=\"client\",direction=\"frontend_to_backend\"} 2",
            "pgcompress_tunnel_frames_total{half=\"client\",direction=\"backend_to_frontend\"} 20",
            "pgcompress_tunnel_method_switches_total{half=\"client\",direction=\"backend_to_frontend\"} 6",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        for line in [
            "process_resident_memory_bytes{half=\"client\"} 9437184",
            "process_open_fds{half=\"client\"} 12",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        let none = render(&s, &ProcessFacts::default());
        assert!(!none.contains("process_"), "{none}");
    }
}
