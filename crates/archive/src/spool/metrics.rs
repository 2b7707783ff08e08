//! Counters of the long-lived archive processes, rendered in the Prometheus text format
//! (which `--metrics ADDR` serves at `GET /metrics`), with the names and conventions of the
//! tunnel's (`pgcompress_<part>_*`, units in the names, `_total` counters).

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Latency buckets, seconds: a segment takes milliseconds to a few seconds.
fn latency_buckets() -> impl Iterator<Item = f64> {
    [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ]
    .into_iter()
}

/// What the serving and prefetching processes count; shared by their threads.
#[derive(Debug)]
pub struct SpoolMetrics {
    registry: Registry,
    pushed: Counter,
    pushed_bytes: Counter,
    pushed_stored_bytes: Counter,
    push_errors: Counter,
    push_seconds: Histogram,
    backlog: Gauge,
    in_flight: Gauge,
    backlog_full: Gauge,
    fetched: Counter,
    fetched_bytes: Counter,
    get_errors: Counter,
    get_seconds: Histogram,
    prefetch_queue: Gauge,
    prefetch_hits: Counter,
    prefetch_misses: Counter,
}

impl Default for SpoolMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl SpoolMetrics {
    /// Zeroed counters, registered as `pgcompress_archive_*`.
    pub fn new() -> SpoolMetrics {
        let mut root = Registry::default();
        let r = root.sub_registry_with_prefix("pgcompress_archive");
        let m = SpoolMetrics {
            registry: Registry::default(),
            pushed: Counter::default(),
            pushed_bytes: Counter::default(),
            pushed_stored_bytes: Counter::default(),
            push_errors: Counter::default(),
            push_seconds: Histogram::new(latency_buckets()),
            backlog: Gauge::default(),
            in_flight: Gauge::default(),
            backlog_full: Gauge::default(),
            fetched: Counter::default(),
            fetched_bytes: Counter::default(),
            get_errors: Counter::default(),
            get_seconds: Histogram::new(latency_buckets()),
            prefetch_queue: Gauge::default(),
            prefetch_hits: Counter::default(),
            prefetch_misses: Counter::default(),
        };
        r.register(
            "pushed_files",
            "Files durably stored (or found already archived identically)",
            m.pushed.clone(),
        );
        r.register_with_unit(
            "pushed",
            "Original bytes of the files stored",
            Unit::Bytes,
            m.pushed_bytes.clone(),
        );
        r.register_with_unit(
            "pushed_stored",
            "Container bytes of the files stored",
            Unit::Bytes,
            m.pushed_stored_bytes.clone(),
        );
        r.register(
            "push_errors",
            "Failed attempts to store a file (each is retried)",
            m.push_errors.clone(),
        );
        r.register_with_unit(
            "push_duration",
            "Time to pack, check and durably store one file",
            Unit::Seconds,
            m.push_seconds.clone(),
        );
        r.register(
            "backlog_files",
            "Files PostgreSQL marked .ready that are not stored yet",
            m.backlog.clone(),
        );
        r.register(
            "in_flight_files",
            "Files being packed and stored now",
            m.in_flight.clone(),
        );
        r.register(
            "backlog_full",
            "1 while the backlog exceeds the queue maximum (nothing is dropped)",
            m.backlog_full.clone(),
        );
        r.register(
            "fetched_files",
            "Files restored from the repository (prefetched or on demand)",
            m.fetched.clone(),
        );
        r.register_with_unit(
            "fetched",
            "Original bytes of the files restored",
            Unit::Bytes,
            m.fetched_bytes.clone(),
        );
        r.register(
            "get_errors",
            "Files that could not be restored (damaged or unreachable)",
            m.get_errors.clone(),
        );
        r.register_with_unit(
            "get_duration",
            "Time to read, decode and check one file",
            Unit::Seconds,
            m.get_seconds.clone(),
        );
        r.register(
            "prefetch_queue_files",
            "Files restored ahead and waiting to be asked for",
            m.prefetch_queue.clone(),
        );
        r.register(
            "prefetch_hits",
            "Requests answered from the prefetch queue",
            m.prefetch_hits.clone(),
        );
        r.register(
            "prefetch_misses",
            "Requests the prefetch queue could not answer",
            m.prefetch_misses.clone(),
        );
        SpoolMetrics {
            registry: root,
            ..m
        }
    }

    /// One file stored: `original` bytes as a `stored`-byte container, in `took`.
    pub fn pushed(&self, original: u64, stored: u64, took: Duration) {
        self.pushed.inc();
        self.pushed_bytes.inc_by(original);
        self.pushed_stored_bytes.inc_by(stored);
        self.push_seconds.observe(took.as_secs_f64());
    }

    /// One failed attempt to store a file.
    pub fn push_failed(&self) {
        self.push_errors.inc();
    }

    /// The backlog and the files in flight, as of the last scan.
    pub fn set_backlog(&self, backlog: usize, in_flight: usize) {
        self.backlog.set(i64::try_from(backlog).unwrap_or(i64::MAX));
        self.in_flight
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
    }

    /// Whether the backlog is over the queue maximum.
    pub fn set_full(&self, full: bool) {
        self.backlog_full.set(i64::from(full));
    }

    /// One file restored: `original` bytes in `took`.
    pub fn fetched(&self, original: u64, took: Duration) {
        self.fetched.inc();
        self.fetched_bytes.inc_by(original);
        self.get_seconds.observe(took.as_secs_f64());
    }

    /// One file that could not be restored.
    pub fn get_failed(&self) {
        self.get_errors.inc();
    }

    /// Files waiting in the prefetch queue.
    pub fn set_prefetch_queue(&self, files: usize) {
        self.prefetch_queue
            .set(i64::try_from(files).unwrap_or(i64::MAX));
    }

    /// Requests answered from the prefetch queue (`hits`) and not (`misses`) since the
    /// last call.
    pub fn prefetch_counts(&self, hits: u64, misses: u64) {
        self.prefetch_hits.inc_by(hits);
        self.prefetch_misses.inc_by(misses);
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_with_their_units() {
        let m = SpoolMetrics::new();
        m.pushed(16 << 20, 3 << 20, Duration::from_millis(40));
        m.push_failed();
        m.set_backlog(7, 2);
        m.set_full(true);
        m.fetched(16 << 20, Duration::from_millis(20));
        m.prefetch_counts(1, 1);
        let text = m.render();
        for line in [
            "pgcompress_archive_pushed_files_total 1",
            "pgcompress_archive_pushed_bytes_total 16777216",
            "pgcompress_archive_pushed_stored_bytes_total 3145728",
            "pgcompress_archive_push_errors_total 1",
            "pgcompress_archive_backlog_files 7",
            "pgcompress_archive_in_flight_files 2",
            "pgcompress_archive_backlog_full 1",
            "pgcompress_archive_fetched_files_total 1",
            "pgcompress_archive_prefetch_hits_total 1",
            "pgcompress_archive_prefetch_misses_total 1",
            "pgcompress_archive_push_duration_seconds_count 1",
            "pgcompress_archive_get_duration_seconds_count 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}
