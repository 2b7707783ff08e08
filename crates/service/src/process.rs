//! What the kernel says about this process (`/proc/self`), exported by every long-running
//! command's metrics endpoint as `process_*`.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

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

#[cfg(test)]
mod tests {
    use super::*;

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
