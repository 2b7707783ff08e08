//! The log lines of a half: each [`Report`] (and a fatal error) as one [`LogRecord`] with a level, an
//! event name and its fields, rendered as the traditional text line or as one JSON object
//! (`--log-format json`) that log shippers parse without patterns.
//!
//! Every JSON line has `ts` (RFC 3339, UTC, milliseconds), `level` (`info`, `warn`, `error`), `half`,
//! `event` and `message` (the text line without its prefix), then the event's own fields.

use std::num::NonZeroU8;
use std::time::SystemTime;

use serde::Serialize;
use time::format_description::well_known::{iso8601, Iso8601};

use super::stats::Half;
use super::{ConnectionReport, Report};

/// How a half writes its log lines (stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `pgcompress tunnel <half>: <message>` lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// How much a log line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Normal operation: listening, a connection that ended well, a drain.
    Info,
    /// Something refused or a connection that ended with an error; the half carries on.
    Warn,
    /// The half stops.
    Error,
}

impl Level {
    /// The level's name in JSON lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// One log line of a half, before rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// How much it matters.
    pub level: Level,
    /// The half that logs; `None` for an error before the half is known.
    pub half: Option<Half>,
    /// What happened: `listening`, `metrics_listening`, `refused`, `too_many_connections`,
    /// `connection`, `draining`, `error`.
    pub event: &'static str,
    /// The human text, without the `pgcompress tunnel <half>:` prefix.
    pub message: String,
    /// The event's fields.
    pub fields: Fields,
}

/// The fields of an event, after the envelope of its JSON line; none of them is named like a
/// key of the envelope.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Fields {
    /// An event without fields of its own (`error`).
    None,
    /// `listening`, `metrics_listening`: the address listened on.
    Address {
        /// `host:port`.
        address: String,
    },
    /// `refused`: who and why.
    Refused {
        /// The peer's address.
        peer: String,
        /// Why it was refused.
        reason: String,
    },
    /// `too_many_connections`: the limit reached.
    TooManyConnections {
        /// The connection limit.
        limit: usize,
        /// The peer's address.
        peer: String,
    },
    /// `connection`: the fields of [`ConnectionReport`].
    Connection(ConnectionReport),
    /// `draining`: the connections still open.
    Draining {
        /// How many.
        open: u64,
    },
}

/// A JSON line: the envelope first (`ts`, `level`, `half`, `event`, `message`), in that order
/// for people reading the log, then the event's fields.
#[derive(Serialize)]
struct JsonLine<'a> {
    ts: String,
    level: Level,
    #[serde(skip_serializing_if = "Option::is_none")]
    half: Option<Half>,
    event: &'a str,
    message: &'a str,
    #[serde(flatten)]
    fields: &'a Fields,
}

impl LogRecord {
    /// The record of a half's report.
    pub fn from_report(half: Half, report: &Report) -> LogRecord {
        let (level, event, message, fields) = match report {
            Report::Listening { address, .. } => (
                Level::Info,
                "listening",
                format!("listening on {address}"),
                Fields::Address {
                    address: address.clone(),
                },
            ),
            Report::MetricsListening { address, .. } => (
                Level::Info,
                "metrics_listening",
                format!("metrics on http://{address}/metrics"),
                Fields::Address {
                    address: address.clone(),
                },
            ),
            Report::Refused { peer, reason } => (
                Level::Warn,
                "refused",
                format!("refused peer {peer}: {reason}"),
                Fields::Refused {
                    peer: peer.clone(),
                    reason: reason.clone(),
                },
            ),
            Report::TooManyConnections { peer, limit } => (
                Level::Warn,
                "too_many_connections",
                format!("refused {peer}: too many connections ({limit})"),
                Fields::TooManyConnections {
                    limit: *limit,
                    peer: peer.clone(),
                },
            ),
            Report::Connection(c) => {
                let level = if c.error.is_some() {
                    Level::Warn
                } else {
                    Level::Info
                };
                (
                    level,
                    "connection",
                    connection_message(c),
                    Fields::Connection(c.clone()),
                )
            }
            Report::Draining { open } => (
                Level::Info,
                "draining",
                format!("shutting down, draining {open} connection(s)"),
                Fields::Draining { open: *open },
            ),
        };
        LogRecord {
            level,
            half: Some(half),
            event,
            message,
            fields,
        }
    }

    /// The record of an error that stops the half (or the command).
    pub fn fatal(half: Option<Half>, error: &str) -> LogRecord {
        LogRecord {
            level: Level::Error,
            half,
            event: "error",
            message: format!("error: {error}"),
            fields: Fields::None,
        }
    }

    /// The text line: `pgcompress tunnel <half>: <message>` (`pgcompress tunnel: ...` without a half).
    pub fn text(&self) -> String {
        match self.half {
            Some(half) => format!("pgcompress tunnel {half}: {}", self.message),
            None => format!("pgcompress tunnel: {}", self.message),
        }
    }

    /// The JSON line, stamped `now`: the envelope first (`ts`, `level`, `half`, `event`,
    /// `message`), in that order for people reading the log, then the fields.
    pub fn json(&self, now: SystemTime) -> String {
        let line = JsonLine {
            ts: rfc3339(now),
            level: self.level,
            half: self.half,
            event: self.event,
            message: &self.message,
            fields: &self.fields,
        };
        // Strings, numbers and string keys only: serde_json has no error to return here.
        serde_json::to_string(&line).unwrap_or_default()
    }

    /// The line in `format`, stamped now.
    pub fn render(&self, format: LogFormat) -> String {
        match format {
            LogFormat::Text => self.text(),
            LogFormat::Json => self.json(SystemTime::now()),
        }
    }
}

/// `connection ID from PEER ended after S s: <direction>; <direction>[; error: E]`.
fn connection_message(c: &ConnectionReport) -> String {
    let direction = |name: &str, d: &super::DirectionStats| {
        let pct = if d.raw_bytes == 0 {
            0.0
        } else {
            100.0 * d.link_bytes as f64 / d.raw_bytes as f64
        };
        format!(
            "{name} {} raw, {} link ({pct:.1}%)",
            d.raw_bytes, d.link_bytes
        )
    };
    let mut line = format!(
        "connection {} from {} ended after {:.3} s: {}; {}",
        c.id,
        c.peer,
        c.duration_secs,
        direction("frontend->backend", &c.frontend_to_backend),
        direction("backend->frontend", &c.backend_to_frontend),
    );
    if let Some(e) = &c.error {
        line.push_str(&format!("; error: {e}"));
    }
    line
}

/// RFC 3339 in UTC with milliseconds, always three digits (`2026-11-24T02:40:30.123Z`):
/// the form the JSON log promises to scripts.
const TIMESTAMP: Iso8601<
    {
        iso8601::Config::DEFAULT
            .set_time_precision(iso8601::TimePrecision::Second {
                decimal_digits: NonZeroU8::new(3),
            })
            .encode()
    },
> = Iso8601;

/// `t` in [`TIMESTAMP`]'s form.
fn rfc3339(t: SystemTime) -> String {
    // Only a year past 9999 does not fit the form; a clock that far off gets no stamp.
    time::OffsetDateTime::from(t)
        .format(&TIMESTAMP)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};
    use std::time::{Duration, UNIX_EPOCH};

    fn parse(line: &str) -> Map<String, Value> {
        match serde_json::from_str(line) {
            Ok(Value::Object(m)) => m,
            other => panic!("not a JSON object: {line} ({other:?})"),
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_833_630_123);
        assert_eq!(rfc3339(t), "2026-11-28T02:40:30.123Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn every_report_has_the_envelope_and_its_fields() {
        // From JSON, as the stats file would be read: fields added later take their defaults.
        let conn: ConnectionReport = serde_json::from_value(serde_json::json!({
            "id": 3,
            "peer": "127.0.0.1:5000",
            "duration_secs": 1.5,
            "frontend_to_backend": {"raw_bytes": 100, "link_bytes": 50, "chunks": 1, "frames": 2},
            "backend_to_frontend": {"raw_bytes": 0, "link_bytes": 0, "chunks": 0, "frames": 0},
            "error": "link frame: bad",
        }))
        .expect("a connection report");
        let cases = [
            (
                Report::Listening {
                    half: Half::Server,
                    address: "10.0.0.1:7432".into(),
                },
                "listening",
                "info",
                "pgcompress tunnel server: listening on 10.0.0.1:7432",
            ),
            (
                Report::MetricsListening {
                    half: Half::Server,
                    address: "127.0.0.1:9187".into(),
                },
                "metrics_listening",
                "info",
                "pgcompress tunnel server: metrics on http://127.0.0.1:9187/metrics",
            ),
            (
                Report::Refused {
                    peer: "1.2.3.4:5".into(),
                    reason: "no certificate".into(),
                },
                "refused",
                "warn",
                "pgcompress tunnel server: refused peer 1.2.3.4:5: no certificate",
            ),
            (
                Report::TooManyConnections {
                    peer: "1.2.3.4:5".into(),
                    limit: 2,
                },
                "too_many_connections",
                "warn",
                "pgcompress tunnel server: refused 1.2.3.4:5: too many connections (2)",
            ),
            (
                Report::Connection(conn),
                "connection",
                "warn",
                "pgcompress tunnel server: connection 3 from 127.0.0.1:5000 ended after 1.500 s: \
                 frontend->backend 100 raw, 50 link (50.0%); backend->frontend 0 raw, 0 link (0.0%); \
                 error: link frame: bad",
            ),
            (
                Report::Draining { open: 4 },
                "draining",
                "info",
                "pgcompress tunnel server: shutting down, draining 4 connection(s)",
            ),
        ];
        for (report, event, level, text) in cases {
            let record = LogRecord::from_report(Half::Server, &report);
            assert_eq!(record.text(), text);
            let v = parse(&record.render(LogFormat::Json));
            assert_eq!(v["event"], event);
            assert_eq!(v["level"], level);
            assert_eq!(v["half"], "server");
            assert!(v["ts"].as_str().is_some_and(|t| t.ends_with('Z')), "{v:?}");
            assert_eq!(
                format!(
                    "pgcompress tunnel server: {}",
                    v["message"].as_str().unwrap_or("")
                ),
                text
            );
        }
        let v = parse(
            &LogRecord::from_report(
                Half::Client,
                &Report::TooManyConnections {
                    peer: "p".into(),
                    limit: 7,
                },
            )
            .render(LogFormat::Json),
        );
        assert_eq!(v["limit"], 7);
        assert_eq!(v["peer"], "p");
    }

    #[test]
    fn a_fatal_error_without_a_half() {
        let line = LogRecord::fatal(Some(Half::Client), "x")
            .json(std::time::UNIX_EPOCH + Duration::from_millis(5));
        assert_eq!(
            line,
            r#"{"ts":"1970-01-01T00:00:00.005Z","level":"error","half":"client","event":"error","message":"error: x"}"#
        );
        let r = LogRecord::fatal(None, "--metrics x: invalid");
        assert_eq!(r.text(), "pgcompress tunnel: error: --metrics x: invalid");
        let v = parse(&r.render(LogFormat::Json));
        assert_eq!(v["level"], "error");
        assert_eq!(v["event"], "error");
        assert!(!v.contains_key("half"));
    }
}
