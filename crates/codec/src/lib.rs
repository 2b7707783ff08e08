//! Compression codecs for pgcompress: a hand-written, byte-exact pglz, block and streaming
//! APIs over pglz, lz4, zstd, snappy, gzip and xz, PostgreSQL's compression-specification
//! syntax, and the full-page-image codec of `src/backend/access/transam/xloginsert.c`.
//!
//! Every decoder takes an output cap and never panics on input; see each module.
#![deny(missing_docs)]

pub mod block;
pub mod columns;
pub mod cursor;
pub mod error;
pub mod limits;
pub mod method;
pub mod page;
pub mod pglz;
pub mod spec;
pub mod stream;
pub mod words;

pub use block::{BlockCompressor, BlockDecompressor, PartFeed};
pub use cursor::{Cursor, ShortRead};
pub use error::{CodecError, MAX_DECOMPRESSED_SIZE};
pub use method::Method;
pub use page::{PageLayout, StoredImage};
pub use pglz::PglzError;
pub use spec::{parse_spec_list, Spec, SpecError};
pub use stream::{Decoder, Encoder, Framing};
