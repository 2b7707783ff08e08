//! A consumer's [`Progress`] in the Prometheus text format (`logical recv --metrics ADDR`),
//! with the names and conventions of the tunnel's and the archive's: `pgcompress_logical_*`,
//! units in the names, `_total` counters.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::Progress;

fn counter(v: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(v);
    c
}

fn gauge(v: u64) -> Gauge {
    let g = Gauge::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    g
}

/// The text exposition of `p`. LSNs are given as numbers (the byte position in WAL), so
/// that the lag can be graphed and alerted on.
pub fn render_metrics(p: &Progress) -> String {
    let mut root = Registry::default();
    let r = root.sub_registry_with_prefix("pgcompress_logical");
    r.register(
        "transactions",
        "Committed transactions written to the output",
        counter(p.transactions),
    );
    r.register(
        "skipped_transactions",
        "Transactions skipped as already written by an earlier run",
        counter(p.skipped_transactions),
    );
    r.register(
        "changes",
        "Change lines written to the output",
        counter(p.changes),
    );
    r.register_with_unit(
        "output_durable",
        "Bytes of output made durable (0 on standard output)",
        Unit::Bytes,
        gauge(p.output_bytes),
    );
    r.register_with_unit(
        "received",
        "Payload bytes of the replication messages received",
        Unit::Bytes,
        counter(p.received_bytes),
    );
    r.register(
        "received_lsn",
        "Highest WAL position the server has sent",
        gauge(p.received.0),
    );
    r.register(
        "confirmed_lsn",
        "Flush position last confirmed to the server (output durable up to it)",
        gauge(p.confirmed.0),
    );
    r.register_with_unit(
        "lag",
        "Bytes of WAL sent by the server and not yet confirmed",
        Unit::Bytes,
        gauge(p.received.0.saturating_sub(p.confirmed.0)),
    );
    r.register(
        "open_transactions",
        "Transactions in progress, held until they commit or abort",
        gauge(p.open_transactions),
    );
    r.register_with_unit(
        "memory",
        "Bytes of changes open transactions hold in memory (bounded by --work-mem)",
        Unit::Bytes,
        gauge(p.memory_bytes),
    );
    r.register(
        "spilled_transactions",
        "Transactions that have had a spill file",
        counter(p.spilled_transactions),
    );
    r.register_with_unit(
        "spill_raw",
        "Change bytes written to spill files, before compression",
        Unit::Bytes,
        counter(p.spill_raw_bytes),
    );
    r.register_with_unit(
        "spill_written",
        "Bytes written to spill files, compressed, headers included",
        Unit::Bytes,
        counter(p.spill_disk_bytes),
    );
    r.register(
        "spill_files",
        "Spill files on disk now",
        gauge(p.spill_files),
    );
    r.register_with_unit(
        "spill_file",
        "Bytes in spill files on disk now",
        Unit::Bytes,
        gauge(p.spill_file_bytes),
    );
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &root);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Lsn;

    #[test]
    fn every_figure_is_rendered_with_its_unit() {
        let p = Progress {
            confirmed: Lsn(0x1_0000_0000),
            received: Lsn(0x1_0000_4000),
            transactions: 7,
            skipped_transactions: 2,
            changes: 1234,
            output_bytes: 56_789,
            received_bytes: 99_999,
            open_transactions: 3,
            memory_bytes: 65_536,
            spilled_transactions: 1,
            spill_raw_bytes: 400_000,
            spill_disk_bytes: 100_000,
            spill_files: 1,
            spill_file_bytes: 90_000,
        };
        let text = render_metrics(&p);
        for line in [
            "pgcompress_logical_transactions_total 7",
            "pgcompress_logical_skipped_transactions_total 2",
            "pgcompress_logical_changes_total 1234",
            "pgcompress_logical_output_durable_bytes 56789",
            "pgcompress_logical_received_bytes_total 99999",
            "pgcompress_logical_received_lsn 4294983680",
            "pgcompress_logical_confirmed_lsn 4294967296",
            "pgcompress_logical_lag_bytes 16384",
            "pgcompress_logical_open_transactions 3",
            "pgcompress_logical_memory_bytes 65536",
            "pgcompress_logical_spilled_transactions_total 1",
            "pgcompress_logical_spill_raw_bytes_total 400000",
            "pgcompress_logical_spill_written_bytes_total 100000",
            "pgcompress_logical_spill_files 1",
            "pgcompress_logical_spill_file_bytes 90000",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_confirmed_position_past_the_received_one_is_no_lag() {
        // A keepalive confirmed before the next XLogData moved `received`.
        let p = Progress {
            confirmed: Lsn(200),
            received: Lsn(100),
            ..Progress::default()
        };
        let text = render_metrics(&p);
        assert!(text.lines().any(|l| l == "pgcompress_logical_lag_bytes 0"));
    }
}
