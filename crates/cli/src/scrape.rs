//! The Prometheus endpoint (`--metrics ADDR:PORT`, `GET /metrics`) of the long-lived commands
//! that run on threads: `archive serve`, `archive get --prefetch` and `logical recv`. (The
//! tunnel's halves answer theirs on their own runtime, in `wire`.) A minimal HTTP/1.1
//! responder on a thread of its own, one request per connection, answered with what the
//! command's `render` gives at that moment; anything but `GET /metrics` is a 404.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use anyhow::Context;

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
        respond(&mut stream, "200 OK", CONTENT_TYPE, &render())
    } else {
        respond(&mut stream, "404 Not Found", "text/plain", "not found\n")
    }
}

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
            let body = format!("up {n}\n# EOF\n");
            assert!(
                out.contains(&format!("Content-Length: {}\r\n", body.len())),
                "{out}"
            );
            assert!(out.ends_with(&format!("\r\n\r\n{body}")), "{out}");
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
