//! Hard caps that every decoder in this crate obeys, whatever its caller asks for.

/// Hard cap on any decompressed size this crate will produce (1 GiB), whatever a caller asks for:
/// PostgreSQL's own limit on a single allocation (`MaxAllocSize`, `utils/memutils.h`) is 1 GB - 1.
pub const MAX_DECOMPRESSED_SIZE: usize = 1 << 30;
