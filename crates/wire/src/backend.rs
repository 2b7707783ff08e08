//! Message types the backend sends (`src/include/libpq/protocol.h`, protocol.sgml "Message
//! Formats"), and the length each may have.
//!
//! The reader of these messages is the client, so the limits follow libpq: `pqParseInput3`
//! in `src/interfaces/libpq/fe-protocol3.c` rejects a message longer than 30000 bytes unless
//! its type is in `VALID_LONG_MESSAGE_TYPE` (RowDescription, DataRow, CopyData,
//! FunctionCallResponse, ErrorResponse, NoticeResponse, NotificationResponse). The long types
//! are capped at `PQ_LARGE_MESSAGE_LIMIT`, as the server cannot build a larger message
//! (`MaxAllocSize`). ParameterDescription is treated as long as well: a statement may have up
//! to 65535 parameters (4 bytes each), and drivers other than libpq accept that.

use crate::frontend::PQ_LARGE_MESSAGE_LIMIT;

/// libpq's limit for the backend message types that are not "long" (fe-protocol3.c).
pub const LIBPQ_SHORT_MESSAGE_LIMIT: u32 = 30_000;

/// ParseComplete ('1').
pub const PARSE_COMPLETE: u8 = b'1';
/// BindComplete ('2').
pub const BIND_COMPLETE: u8 = b'2';
/// CloseComplete ('3').
pub const CLOSE_COMPLETE: u8 = b'3';
/// NotificationResponse ('A').
pub const NOTIFICATION_RESPONSE: u8 = b'A';
/// CommandComplete ('C').
pub const COMMAND_COMPLETE: u8 = b'C';
/// DataRow ('D').
pub const DATA_ROW: u8 = b'D';
/// ErrorResponse ('E').
pub const ERROR_RESPONSE: u8 = b'E';
/// CopyInResponse ('G').
pub const COPY_IN_RESPONSE: u8 = b'G';
/// CopyOutResponse ('H').
pub const COPY_OUT_RESPONSE: u8 = b'H';
/// EmptyQueryResponse ('I').
pub const EMPTY_QUERY_RESPONSE: u8 = b'I';
/// BackendKeyData ('K').
pub const BACKEND_KEY_DATA: u8 = b'K';
/// NoticeResponse ('N').
pub const NOTICE_RESPONSE: u8 = b'N';
/// Authentication requests ('R'): Ok, cleartext, MD5, SASL, GSS, SSPI.
pub const AUTHENTICATION: u8 = b'R';
/// ParameterStatus ('S').
pub const PARAMETER_STATUS: u8 = b'S';
/// RowDescription ('T').
pub const ROW_DESCRIPTION: u8 = b'T';
/// FunctionCallResponse ('V').
pub const FUNCTION_CALL_RESPONSE: u8 = b'V';
/// CopyBothResponse ('W'): walsender's START_REPLICATION.
pub const COPY_BOTH_RESPONSE: u8 = b'W';
/// ReadyForQuery ('Z'): the end of startup and of every query cycle.
pub const READY_FOR_QUERY: u8 = b'Z';
/// CopyData ('d'), also sent by the frontend.
pub const COPY_DATA: u8 = b'd';
/// CopyDone ('c'), also sent by the frontend.
pub const COPY_DONE: u8 = b'c';
/// NoData ('n').
pub const NO_DATA: u8 = b'n';
/// PortalSuspended ('s').
pub const PORTAL_SUSPENDED: u8 = b's';
/// ParameterDescription ('t').
pub const PARAMETER_DESCRIPTION: u8 = b't';
/// NegotiateProtocolVersion ('v').
pub const NEGOTIATE_PROTOCOL_VERSION: u8 = b'v';

/// The largest length word (length included) the tunnel accepts for a backend message `tag`.
pub const fn max_len(tag: u8) -> u32 {
    match tag {
        ROW_DESCRIPTION
        | DATA_ROW
        | COPY_DATA
        | FUNCTION_CALL_RESPONSE
        | ERROR_RESPONSE
        | NOTICE_RESPONSE
        | NOTIFICATION_RESPONSE
        | PARAMETER_DESCRIPTION => PQ_LARGE_MESSAGE_LIMIT,
        _ => LIBPQ_SHORT_MESSAGE_LIMIT,
    }
}
