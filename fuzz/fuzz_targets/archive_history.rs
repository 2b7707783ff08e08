//! Arbitrary bytes and names as backup and timeline history files, which `archive expire`
//! reads from the repository: parsing must reject anything malformed with an error, never
//! panic, and a parsed backup must agree with its name.
#![no_main]

use archive::retention::{classify, parse_backup_label, parse_timeline_history, Backup, FileKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_backup_label(data);
    let _ = parse_timeline_history(data);
    let split = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    if let Ok(name) = std::str::from_utf8(&data[..split]) {
        let kind = classify(name);
        if let Ok(b) = Backup::new(name, &data[split.min(data.len())..]) {
            assert!(matches!(kind, FileKind::BackupHistory { .. }));
            assert!(name.starts_with(&b.label.start_segment));
        }
    }
});
