//! wal crate of pgcompress.
