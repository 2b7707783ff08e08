//! Message types the frontend sends after the first packet (`src/include/libpq/protocol.h`,
//! protocol.sgml "Message Formats"), and the length each may have.
//!
//! Limits follow the server, which is the reader of these messages: `SocketBackend` in
//! `src/backend/tcop/postgres.c` reads Query, FunctionCall, Bind, Parse and CopyData with
//! `PQ_LARGE_MESSAGE_LIMIT` and the rest with `PQ_SMALL_MESSAGE_LIMIT` (`pqcomm.h`), and
//! authentication replies ('p') are read with `PG_MAX_AUTH_TOKEN_LENGTH` (`libpq/auth.c`). All
//! limits count the length word itself, as `pq_getmessage` compares them.

/// `PQ_LARGE_MESSAGE_LIMIT` (pqcomm.h): `MaxAllocSize - 1`, 1 GB less two bytes.
pub const PQ_LARGE_MESSAGE_LIMIT: u32 = 0x3fff_ffff - 1;
/// `PQ_SMALL_MESSAGE_LIMIT` (pqcomm.h).
pub const PQ_SMALL_MESSAGE_LIMIT: u32 = 10_000;
/// `PG_MAX_AUTH_TOKEN_LENGTH` (libpq/auth.c): the cap on password, SASL and GSS replies.
pub const PG_MAX_AUTH_TOKEN_LENGTH: u32 = 65_535;

/// Bind ('B').
pub const BIND: u8 = b'B';
/// Close ('C').
pub const CLOSE: u8 = b'C';
/// Describe ('D').
pub const DESCRIBE: u8 = b'D';
/// Execute ('E').
pub const EXECUTE: u8 = b'E';
/// FunctionCall ('F').
pub const FUNCTION_CALL: u8 = b'F';
/// Flush ('H').
pub const FLUSH: u8 = b'H';
/// Parse ('P').
pub const PARSE: u8 = b'P';
/// Query ('Q'): simple query.
pub const QUERY: u8 = b'Q';
/// Sync ('S').
pub const SYNC: u8 = b'S';
/// Terminate ('X').
pub const TERMINATE: u8 = b'X';
/// CopyData ('d'), also sent by the backend.
pub const COPY_DATA: u8 = b'd';
/// CopyDone ('c'), also sent by the backend.
pub const COPY_DONE: u8 = b'c';
/// CopyFail ('f').
pub const COPY_FAIL: u8 = b'f';
/// PasswordMessage, SASLInitialResponse, SASLResponse and GSSResponse ('p').
pub const AUTH_RESPONSE: u8 = b'p';

/// The largest length word (length included) PostgreSQL accepts for a frontend message `tag`.
///
/// Types the server does not know get the small limit: the tunnel forwards them so that the
/// server itself answers "invalid frontend message type", as a direct connection would.
pub const fn max_len(tag: u8) -> u32 {
    match tag {
        QUERY | FUNCTION_CALL | BIND | PARSE | COPY_DATA => PQ_LARGE_MESSAGE_LIMIT,
        AUTH_RESPONSE => PG_MAX_AUTH_TOKEN_LENGTH,
        _ => PQ_SMALL_MESSAGE_LIMIT,
    }
}
