//! A hook that sees every link frame a half sends or receives after the handshake, so tests
//! can check what was compressed and when.

use std::sync::Arc;

use crate::Direction;

/// One link frame seen by a half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapEvent {
    /// The direction the frame travels.
    pub direction: Direction,
    /// The frame type (`b'V'`, `b'Z'`, `b'M'`, `b'R'`).
    pub frame_type: u8,
    /// Payload bytes after the 5-byte header.
    pub payload_len: usize,
    /// True while the session is not ready: backend->frontend, up to and including the Ready
    /// frame; frontend->backend, until this half's own encoder has passed the first
    /// ReadyForQuery (server half) or the Ready frame has arrived (client half).
    pub before_ready: bool,
}

/// Called for every frame; must be quick (it runs on the connection's task).
pub type FrameTap = Arc<dyn Fn(TapEvent) + Send + Sync>;
