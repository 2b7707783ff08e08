//! The rules of a `--metrics ADDR:PORT` endpoint, without I/O: `GET /metrics` answers the
//! command's figures in the Prometheus text format, anything else 404, a request head past
//! [`MAX_REQUEST`] 431; one request per connection. The tunnel's halves answer by them on
//! their runtime, and the commands that run on threads (`archive serve`, `archive get
//! --prefetch`, `logical recv`) with [`crate::endpoint::serve`].

use std::time::Duration;

/// Longest request head read.
pub const MAX_REQUEST: usize = 8 * 1024;
/// Time a scraper gets for the whole exchange, from accept to the last byte of the answer,
/// however it paces its bytes.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The exposition format's content type (OpenMetrics text, which Prometheus reads).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the bytes of a request read so far ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// The head is not complete yet: read more.
    Incomplete,
    /// More than [`MAX_REQUEST`] bytes without the end of a head: answer 431.
    TooLarge,
    /// `GET /metrics` (a query string is ignored).
    Metrics,
    /// Anything else: answer 404.
    Other,
}

/// Reads the request in `head`, the bytes received so far.
pub fn request(head: &[u8]) -> Request {
    if !head.windows(4).any(|w| w == b"\r\n\r\n") {
        return if head.len() > MAX_REQUEST {
            Request::TooLarge
        } else {
            Request::Incomplete
        };
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next(), parts.next());
    let path = target.map(|t| t.split(|&b| b == b'?').next().unwrap_or_default());
    if method == Some(b"GET") && path == Some(b"/metrics") {
        Request::Metrics
    } else {
        Request::Other
    }
}

/// The whole response to a request that is not [`Request::Incomplete`]; `metrics` renders the
/// body of [`Request::Metrics`] and is called only for it.
pub fn response(request: Request, metrics: impl FnOnce() -> String) -> Vec<u8> {
    let (status, content_type, body) = match request {
        Request::Metrics => ("200 OK", CONTENT_TYPE, metrics()),
        Request::TooLarge => (
            "431 Request Header Fields Too Large",
            "text/plain",
            String::new(),
        ),
        Request::Other | Request::Incomplete => {
            ("404 Not Found", "text/plain", "not found\n".into())
        }
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_are_read_by_the_endpoint_rules() {
        assert_eq!(request(b""), Request::Incomplete);
        assert_eq!(
            request(b"GET /metrics HTTP/1.1\r\nHost: h\r\n"),
            Request::Incomplete
        );
        assert_eq!(request(b"GET /metrics HTTP/1.1\r\n\r\n"), Request::Metrics);
        assert_eq!(
            request(b"GET /metrics?a=b HTTP/1.0\r\n\r\n"),
            Request::Metrics
        );
        assert_eq!(request(b"GET /metricsx HTTP/1.1\r\n\r\n"), Request::Other);
        assert_eq!(request(b"HEAD /metrics HTTP/1.1\r\n\r\n"), Request::Other);
        assert_eq!(request(b"\r\n\r\n"), Request::Other);
        let big = vec![b'a'; MAX_REQUEST + 1];
        assert_eq!(request(&big[..MAX_REQUEST]), Request::Incomplete);
        assert_eq!(request(&big), Request::TooLarge);
        let mut rendered = false;
        let not_found = response(Request::Other, || {
            rendered = true;
            String::new()
        });
        assert!(!rendered, "rendered for a 404");
        assert_eq!(
            not_found,
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\
              Connection: close\r\n\r\nnot found\n"
        );
    }
}
