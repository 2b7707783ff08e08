//! The first packet of a connection: no type byte, an Int32 length (counting itself) and an
//! Int32 code (`src/include/libpq/pqcomm.h`, protocol.sgml "Message Formats").
//!
//! The limits mirror the server's `ProcessStartupPacket` (`src/backend/tcop/backend_startup.c`,
//! `postmaster.c` before PostgreSQL 18): the packet after its length word must hold at least the
//! 4-byte code and at most `MAX_STARTUP_PACKET_LENGTH` bytes.

/// `MAX_STARTUP_PACKET_LENGTH` (pqcomm.h): the largest startup packet body, length word excluded.
pub const MAX_STARTUP_PACKET_LENGTH: u32 = 10_000;
/// Smallest first-packet body: the 4-byte code (`sizeof(ProtocolVersion)`).
pub const MIN_STARTUP_PACKET_LENGTH: u32 = 4;

/// `PG_PROTOCOL(3,0)`: StartupMessage of protocol 3.0 (196608).
pub const PROTOCOL_3_0: u32 = 3 << 16;
/// `PG_PROTOCOL(3,2)`: StartupMessage of protocol 3.2, PostgreSQL 18 (196610).
pub const PROTOCOL_3_2: u32 = (3 << 16) | 2;
/// `CANCEL_REQUEST_CODE`, `PG_PROTOCOL(1234,5678)` (80877102).
pub const CANCEL_REQUEST_CODE: u32 = (1234 << 16) | 5678;
/// `NEGOTIATE_SSL_CODE`, `PG_PROTOCOL(1234,5679)` (80877103).
pub const NEGOTIATE_SSL_CODE: u32 = (1234 << 16) | 5679;
/// `NEGOTIATE_GSS_CODE`, `PG_PROTOCOL(1234,5680)` (80877104).
pub const NEGOTIATE_GSS_CODE: u32 = (1234 << 16) | 5680;

/// Total length of an SSLRequest or GSSENCRequest (length word and code; libpq sends exactly 8).
pub const ENCRYPTION_REQUEST_LENGTH: u32 = 8;
/// Shortest cancel key (protocol 3.0 keys are 4 bytes; protocol.sgml "BackendKeyData").
pub const MIN_CANCEL_KEY_LENGTH: u32 = 4;
/// Longest cancel key protocol 3.2 allows (protocol.sgml "BackendKeyData": 4 to 256 bytes).
pub const MAX_CANCEL_KEY_LENGTH: u32 = 256;
/// CancelRequest bytes before the key: length word, code and backend pid.
pub const CANCEL_HEADER_LENGTH: u32 = 12;

/// First byte of a TLS handshake record: a client using PostgreSQL 17's `sslnegotiation=direct`.
pub const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The protocol major version of a StartupMessage code (`PG_PROTOCOL_MAJOR`).
pub const fn protocol_major(code: u32) -> u16 {
    (code >> 16) as u16
}

/// The protocol minor version of a StartupMessage code (`PG_PROTOCOL_MINOR`).
pub const fn protocol_minor(code: u32) -> u16 {
    (code & 0xffff) as u16
}
