//! Arbitrary bytes as a session of pgoutput messages: the decoder must never panic, a failed
//! message must leave its stream state alone, and only Stream Start and Stop may move it.
//!
//! Byte 0 picks the options: bits 0-1 the protocol version minus one, bits 2-3 streaming
//! (0 off, 1 on, 2-3 parallel), bit 4 opens a streamed block for xid 1 first. The rest is a
//! sequence of messages, each a 2-byte big-endian length and that many bytes (the last one
//! takes what is left). Every message is also tried as a replication CopyData message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use logical::{CopyMessage, Decoder, Message, Options, Streaming};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let options = Options {
        proto_version: u32::from(flags & 3) + 1,
        streaming: match (flags >> 2) & 3 {
            0 => Streaming::Off,
            1 => Streaming::On,
            _ => Streaming::Parallel,
        },
    };
    let mut dec = Decoder::new(options).expect("versions 1 to 4 are supported");
    if flags & 0x10 != 0 {
        dec.decode(&[b'S', 0, 0, 0, 1, 1]).expect("stream start");
    }
    while !rest.is_empty() {
        let n = if rest.len() >= 2 {
            let n = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
            rest = &rest[2..];
            n.min(rest.len())
        } else {
            rest.len()
        };
        let (msg, tail) = rest.split_at(n);
        rest = tail;
        let _ = CopyMessage::decode(msg);
        let before = dec.stream_xid();
        let again = dec.clone().decode(msg);
        match dec.decode(msg) {
            Ok(m) => {
                assert_eq!(Ok(&m), again.as_ref(), "decoding is deterministic");
                match m {
                    Message::StreamStart(s) => assert_eq!(dec.stream_xid(), Some(s.xid)),
                    Message::StreamStop => assert_eq!(dec.stream_xid(), None),
                    _ => assert_eq!(dec.stream_xid(), before),
                }
            }
            Err(e) => {
                assert_eq!(Err(&e), again.as_ref());
                assert!(e.offset <= msg.len(), "{e}");
                let _ = e.to_string();
                assert_eq!(dec.stream_xid(), before, "a failed message moved the state");
            }
        }
    }
});
