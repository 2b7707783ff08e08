//! The Prometheus endpoint (`--metrics ADDR:PORT`, `GET /metrics`) of the long-lived commands
//! that run on threads: `archive serve`, `archive get --prefetch` and `logical recv`. (The
//! tunnel's halves answer theirs on their own runtime, in `wire`.) A minimal HTTP/1.1
//! responder on a thread of its own, one request per connection, answered with what the
//! command's `render` gives at that moment, with the process's resident memory and open
//! descriptors added (`process_*`, as the tunnel gives them); anything but `GET /metrics` is a
//! 404.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use anyhow::Context;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use wire::net::ProcessFacts;

/// Longest request head read.
const MAX_REQUEST: usize = 8 * 1024;
/// Time a scraper gets to send its request and take the answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The exposition format's content type (OpenMetrics text, which Prometheus reads).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds `addr` (`ADDR:PORT`) for [`serve`]; an address in use is a usage error, reported
/// before the command starts its work.
pub(crate) fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).with_context(|| format!("--metrics {addr}"))
}

/// Answers scrapes on `listener` from a thread of its own, for the life of the process. A
/// slow or silent scraper holds the thread for at most [`REQUEST_TIMEOUT`].
pub(crate) fn serve(listener: TcpListener, render: impl Fn() -> String + Send + 'static) {
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
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_REQUEST {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            );
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next(), parts.next());
    let path = target.map(|t| t.split(|&b| b == b'?').next().unwrap_or_default());
    if method == Some(b"GET") && path == Some(b"/metrics") {
        let body = with_process(&render(), &ProcessFacts::read());
        respond(&mut stream, "200 OK", CONTENT_TYPE, &body)
    } else {
        respond(&mut stream, "404 Not Found", "text/plain", "not found\n")
    }
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

/// The last line of an OpenMetrics exposition.
const EOF: &str = "# EOF\n";

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    fn request(port: u16, raw: &[u8]) -> String {
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
            let out = request(port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
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
            let out = request(port, raw);
            assert!(out.starts_with("HTTP/1.1 404 Not Found\r\n"), "{out}");
        }
        // A head past the limit is refused, not gathered. One byte past it, so that the
        // server has read everything sent when it closes (unread bytes would make its close
        // a reset, which may discard the answer before this side reads it).
        let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_REQUEST + 1, b'a');
        let out = request(port, &big);
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
            format!("{err:#}").starts_with(&format!("--metrics {addr}: ")),
            "{err:#}"
        );
    }
}
