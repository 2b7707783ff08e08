//! The `--metrics ADDR:PORT` endpoint of the commands that run on threads (`archive serve`,
//! `archive get --prefetch`, `logical recv`), by the rules of [`crate::scrape`]: bound with
//! [`bind`], answered with [`serve`], which adds the process's resident memory and open
//! descriptors (`process_*`, as a tunnel half gives them) to what the command renders.
//!
//! One scraper cannot hold the endpoint: each connection is answered on a thread of its own
//! (at most [`MAX_SCRAPES`] at once; a connection past them is closed unanswered) and gets
//! [`REQUEST_TIMEOUT`] for the whole exchange, from accept to the last byte of the answer,
//! however it paces its bytes. The tunnel's halves bound theirs the same way on their runtime.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use crate::error::ServiceError;
use crate::process::ProcessFacts;
use crate::scrape::{request, response, Request, REQUEST_TIMEOUT};

/// The last line of an OpenMetrics exposition.
const EOF: &str = "# EOF\n";

/// Binds `addr` (`ADDR:PORT`) for [`serve`]; an address in use is a configuration error,
/// reported before the command starts its work.
pub fn bind(addr: &str) -> Result<TcpListener, ServiceError> {
    TcpListener::bind(addr).map_err(|e| ServiceError::Config(format!("--metrics {addr}: {e}")))
}

/// Scrapes answered at once; a connection past them is closed without an answer.
pub const MAX_SCRAPES: usize = 4;

/// What [`serve_with`] allows each scraper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time for the whole exchange, from accept to the last byte of the answer.
    pub exchange: Duration,
    /// Connections answered at once.
    pub connections: usize,
}

impl Default for Limits {
    /// [`REQUEST_TIMEOUT`] and [`MAX_SCRAPES`].
    fn default() -> Self {
        Limits {
            exchange: REQUEST_TIMEOUT,
            connections: MAX_SCRAPES,
        }
    }
}

/// Answers scrapes on `listener` for the life of the process, with what `render` gives at
/// that moment and the process's `process_*` metrics, within the default [`Limits`].
pub fn serve(listener: TcpListener, render: impl Fn() -> String + Send + Sync + 'static) {
    serve_with(listener, render, Limits::default());
}

/// [`serve`] within `limits`.
pub fn serve_with(
    listener: TcpListener,
    render: impl Fn() -> String + Send + Sync + 'static,
    limits: Limits,
) {
    let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(render);
    let busy = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else {
                // Out of descriptors, say: wait instead of spinning.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let deadline = Instant::now() + limits.exchange;
            if busy.fetch_add(1, Ordering::SeqCst) >= limits.connections.max(1) {
                busy.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            let slot = Slot(Arc::clone(&busy));
            let render = Arc::clone(&render);
            // A thread that cannot be started drops the connection, and its slot with it.
            let _ = std::thread::Builder::new()
                .name("scrape".into())
                .spawn(move || {
                    let _slot = slot;
                    let _ = answer(stream, &*render, deadline);
                });
        }
    });
}

/// One of the connections being answered; frees its place when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Time left before `deadline`, or a timeout error once it has passed.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| std::io::Error::new(ErrorKind::TimedOut, "scrape deadline passed"))
}

fn answer(
    mut stream: TcpStream,
    render: &dyn Fn() -> String,
    deadline: Instant,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    let asked = loop {
        match request(&head) {
            Request::Incomplete => {}
            asked => break asked,
        }
        // Each read gets only what remains of the exchange's time.
        stream.set_read_timeout(Some(left(deadline)?))?;
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        head.extend_from_slice(&chunk[..n]);
    };
    let reply = response(asked, || with_process(&render(), &ProcessFacts::read()));
    let mut rest = &reply[..];
    while !rest.is_empty() {
        stream.set_write_timeout(Some(left(deadline)?))?;
        match stream.write(rest) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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

    /// A scraper that sends its head one byte at a time, waiting `pace` between bytes, until
    /// the endpoint closes on it or `guard` passes; whether it was closed on.
    fn trickle(port: u16, pace: Duration, guard: Duration) -> bool {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(pace)).expect("timeout");
        let began = std::time::Instant::now();
        let head = b"GET /metrics HTTP/1.1\r\nX: ";
        let mut sent = 0usize;
        let mut byte = [0u8; 1];
        while began.elapsed() < guard {
            let b = head.get(sent).copied().unwrap_or(b'a');
            if s.write_all(&[b]).is_err() {
                return true;
            }
            sent += 1;
            match s.read(&mut byte) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                // Closed, reset, or (never) answered: the endpoint is done with it.
                _ => return true,
            }
        }
        false
    }

    /// A scraper that sends a byte every 100 ms never completes its head: the endpoint
    /// answers a normal scraper beside it and cuts it at the exchange's deadline, not after
    /// 10 s of silence per read (which it never reaches).
    #[test]
    fn a_slow_scraper_does_not_hold_the_endpoint() {
        let listener = bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let limits = Limits {
            exchange: Duration::from_secs(1),
            ..Limits::default()
        };
        serve_with(listener, || "up 1\n# EOF\n".into(), limits);
        let slow = std::thread::spawn(move || {
            trickle(port, Duration::from_millis(100), Duration::from_secs(30))
        });
        // Let the slow one be accepted first.
        std::thread::sleep(Duration::from_millis(300));
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        // A hang guard, not a timing assertion.
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out)
            .expect("the normal scraper is answered beside the slow one");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            slow.join().expect("slow scraper"),
            "the slow scraper was never cut"
        );
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
}
