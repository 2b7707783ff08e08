//! pgtest crate of pgcompress.
