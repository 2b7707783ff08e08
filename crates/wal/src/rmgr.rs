//! Resource manager names as pg_waldump prints them (access/rmgrlist.h, 15-18).

/// Names of the built-in resource managers, indexed by `RmgrId`.
pub const BUILTIN_NAMES: [&str; 22] = [
    "XLOG",
    "Transaction",
    "Storage",
    "CLOG",
    "Database",
    "Tablespace",
    "MultiXact",
    "RelMap",
    "Standby",
    "Heap2",
    "Heap",
    "Btree",
    "Hash",
    "Gin",
    "Gist",
    "Sequence",
    "SPGist",
    "BRIN",
    "CommitTs",
    "ReplicationOrigin",
    "Generic",
    "LogicalMessage",
];

/// True for ids PostgreSQL accepts (`RmgrIdIsValid`): built-in 0..=21 or custom 128..=255.
pub fn is_valid(rmid: u8) -> bool {
    rmid <= crate::consts::RM_MAX_BUILTIN_ID || rmid >= crate::consts::RM_MIN_CUSTOM_ID
}

/// True for custom resource manager ids (128..=255).
pub fn is_custom(rmid: u8) -> bool {
    rmid >= crate::consts::RM_MIN_CUSTOM_ID
}

/// The name pg_waldump prints: the built-in name or `custom%03d`.
pub fn name(rmid: u8) -> String {
    match BUILTIN_NAMES.get(usize::from(rmid)) {
        Some(n) => (*n).to_string(),
        None => format!("custom{rmid:03}"),
    }
}
