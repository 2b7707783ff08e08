//! The `--metrics ADDR:PORT` endpoint of the commands that run on threads (`archive serve`,
//! `archive get --prefetch`, `logical recv`), by the rules of [`crate::scrape`]: bound with
//! [`bind`], answered from a thread of its own with [`serve`], which adds the process's
//! resident memory and open descriptors (`process_*`, as a tunnel half gives them) to what
//! the command renders.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::error::NetError;
use crate::scrape::{request, response, Request, REQUEST_TIMEOUT};

/// What the kernel says about this process, for the `process_*` metrics (the names of
/// Prometheus's own process collector, so existing dashboards find them). The binary's other
/// long-running commands (`archive serve`, `logical recv`) report the same two.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessFacts {
    /// Resident memory (VmRSS), bytes.
    pub resident_bytes: Option<u64>,
    /// Open file descriptors: for a half, two sockets per connection, plus the listeners.
    pub open_fds: Option<u64>,
}

impl ProcessFacts {
    /// Reads `/proc/self` (blocking; absent values on systems without it).
    pub fn read() -> ProcessFacts {
        let resident_bytes = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
                let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().ok()?;
                kb.checked_mul(1024)
            });
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        ProcessFacts {
            resident_bytes,
            open_fds,
        }
    }

    /// Registers what was read as `process_resident_memory_bytes` and `process_open_fds`
    /// (neither when absent).
    pub fn register(&self, registry: &mut Registry) {
        if let Some(rss) = self.resident_bytes {
            registry.register_with_unit(
                "process_resident_memory",
                "Resident memory of the process (VmRSS)",
                Unit::Bytes,
                gauge(rss),
            );
        }
        if let Some(fds) = self.open_fds {
            registry.register("process_open_fds", "Open file descriptors", gauge(fds));
        }
    }
}

fn gauge(v: u64) -> Gauge<i64> {
    let g = Gauge::<i64>::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    g
}

/// The last line of an OpenMetrics exposition.
const EOF: &str = "# EOF\n";

/// Binds `addr` (`ADDR:PORT`) for [`serve`]; an address in use is a configuration error,
/// reported before the command starts its work.
pub fn bind(addr: &str) -> Result<TcpListener, NetError> {
    TcpListener::bind(addr).map_err(|e| NetError::Config(format!("--metrics {addr}: {e}")))
}

/// Answers scrapes on `listener` from a thread of its own, for the life of the process, with
/// what `render` gives at that moment and the process's `process_*` metrics. A slow or silent
/// scraper holds the thread for at most [`REQUEST_TIMEOUT`].
pub fn serve(listener: TcpListener, render: impl Fn() -> String + Send + 'static) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else {
                // Out of descriptors, say: wait instead of spinning.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let _ = answer(stream, &render);
        }
    });
}

fn answer(mut stream: TcpStream, render: &dyn Fn() -> String) -> std::io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    let asked = loop {
        match request(&head) {
            Request::Incomplete => {}
            asked => break asked,
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    };
    let reply = response(asked, || with_process(&render(), &ProcessFacts::read()));
    stream.write_all(&reply)?;
    stream.flush()
}

/// `body`, an exposition that ends in `# EOF`, with `facts` as `process_*` metrics added
/// before its end.
fn with_process(body: &str, facts: &ProcessFacts) -> String {
    let mut registry = Registry::default();
    facts.register(&mut registry);
    let mut process = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut process, &registry);
    let process = process.strip_suffix(EOF).unwrap_or(&process);
    match body.strip_suffix(EOF) {
        Some(families) => format!("{families}{process}{EOF}"),
        None => format!("{body}{process}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrape::{CONTENT_TYPE, MAX_REQUEST};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    fn exchange(port: u16, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.write_all(raw).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn answers_get_metrics_with_what_render_gives_now_and_nothing_else() {
        let listener = bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let scrapes = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&scrapes);
        serve(listener, move || {
            format!("up {}\n# EOF\n", seen.fetch_add(1, Ordering::SeqCst) + 1)
        });
        for n in 1..=2 {
            let out = exchange(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
            assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
            assert!(out.contains(CONTENT_TYPE), "{out}");
            let (head, body) = out.split_once("\r\n\r\n").expect("head and body");
            assert!(
                head.contains(&format!("Content-Length: {}\r\n", body.len())),
                "{out}"
            );
            // The command's figures as rendered now, then the process's, then one end.
            assert!(body.starts_with(&format!("up {n}\n")), "{body}");
            assert_eq!(body.matches(EOF).count(), 1, "{body}");
            assert!(body.ends_with(EOF), "{body}");
            for family in ["process_resident_memory_bytes ", "process_open_fds "] {
                assert!(
                    body.lines().any(|l| l.starts_with(family)),
                    "{family}: {body}"
                );
            }
        }
        for raw in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"POST /metrics HTTP/1.1\r\n\r\n",
        ] {
            let out = exchange(port, raw);
            assert!(out.starts_with("HTTP/1.1 404 Not Found\r\n"), "{out}");
        }
        // A head past the limit is refused, not gathered. One byte past it, so that the
        // server has read everything sent when it closes (unread bytes would make its close
        // a reset, which may discard the answer before this side reads it).
        let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_REQUEST + 1, b'a');
        let out = exchange(port, &big);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        // Only the two GET /metrics rendered.
        assert_eq!(scrapes.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn process_facts_go_before_the_end_and_only_when_read() {
        let facts = ProcessFacts {
            resident_bytes: Some(5 << 20),
            open_fds: Some(9),
        };
        let text = with_process("# TYPE up gauge\nup 1\n# EOF\n", &facts);
        assert!(text.starts_with("# TYPE up gauge\nup 1\n"), "{text}");
        assert!(text.ends_with("\nprocess_open_fds 9\n# EOF\n"), "{text}");
        assert!(
            text.contains("\nprocess_resident_memory_bytes 5242880\n"),
            "{text}"
        );
        assert_eq!(text.matches(EOF).count(), 1, "{text}");
        let none = with_process("up 1\n# EOF\n", &ProcessFacts::default());
        assert_eq!(none, "up 1\n# EOF\n");
    }

    #[test]
    fn an_address_in_use_is_an_error_naming_the_flag() {
        let taken = bind("127.0.0.1:0").expect("bind");
        let addr = taken.local_addr().expect("addr").to_string();
        let err = bind(&addr).expect_err("in use");
        assert!(
            err.to_string().contains(&format!("--metrics {addr}: ")),
            "{err}"
        );
    }

    #[test]
    fn process_facts_are_read_from_proc() {
        let facts = ProcessFacts::read();
        assert!(
            facts.resident_bytes.is_some_and(|b| b > 1024 * 1024),
            "{facts:?}"
        );
        assert!(facts.open_fds.is_some_and(|n| n >= 3), "{facts:?}");
    }
}
