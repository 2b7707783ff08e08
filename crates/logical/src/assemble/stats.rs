//! Byte counters of the spill store: raw change bytes against bytes on disk, per transaction
//! and in total (the seed patch's open item: `spill_bytes` next to what was really written).

/// What one committed transaction cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnStats {
    /// Payload bytes of its surviving changes (what pgoutput sent for them).
    pub raw_bytes: u64,
    /// Of those, the bytes held in its spill file (the rest stayed in memory).
    pub spilled_raw_bytes: u64,
    /// Size of its spill file at commit, headers included; 0 when it never spilled.
    pub disk_bytes: u64,
    /// Number of stored messages (changes, Relation, Type, Message, Origin).
    pub changes: u64,
}

/// Totals of an [`crate::Assembler`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillStats {
    /// Payload bytes of every stored message received, cumulative.
    pub received_bytes: u64,
    /// Payload bytes written to spill files, cumulative (the server's `spill_bytes`).
    pub raw_bytes: u64,
    /// Bytes written to spill files, cumulative, headers included (compare with `raw_bytes`).
    pub disk_written_bytes: u64,
    /// Bytes in spill files now (files of committed transactions not yet dropped included).
    pub disk_bytes: u64,
    /// Bytes of changes held in memory by open transactions now.
    pub memory_bytes: u64,
    /// Transactions open now.
    pub open_txns: u64,
    /// Transactions that have had a spill file, cumulative.
    pub spilled_txns: u64,
    /// Spill files existing now.
    pub files: u64,
}
