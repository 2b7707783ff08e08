//! codec crate of pgcompress.
