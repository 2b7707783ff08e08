//! Hand-built pgoutput messages (protocol.sgml "Logical Replication Message Formats") for the
//! assembler tests.
#![allow(dead_code)]

use logical::{Lsn, Options, Streaming};

/// Protocol v2 with streaming on, as the tests' server sessions negotiate.
pub const V2: Options = Options {
    proto_version: 2,
    streaming: Streaming::On,
};

pub fn stream_start(xid: u32, first: bool) -> Vec<u8> {
    let mut m = vec![b'S'];
    m.extend(xid.to_be_bytes());
    m.push(u8::from(first));
    m
}

pub fn stream_stop() -> Vec<u8> {
    vec![b'E']
}

pub fn stream_commit(xid: u32, commit_lsn: u64, end_lsn: u64, time: i64) -> Vec<u8> {
    let mut m = vec![b'c'];
    m.extend(xid.to_be_bytes());
    m.push(0);
    m.extend(commit_lsn.to_be_bytes());
    m.extend(end_lsn.to_be_bytes());
    m.extend(time.to_be_bytes());
    m
}

pub fn stream_abort(xid: u32, subxid: u32) -> Vec<u8> {
    let mut m = vec![b'A'];
    m.extend(xid.to_be_bytes());
    m.extend(subxid.to_be_bytes());
    m
}

pub fn begin(final_lsn: u64, time: i64, xid: u32) -> Vec<u8> {
    let mut m = vec![b'B'];
    m.extend(final_lsn.to_be_bytes());
    m.extend(time.to_be_bytes());
    m.extend(xid.to_be_bytes());
    m
}

pub fn commit(commit_lsn: u64, end_lsn: u64, time: i64) -> Vec<u8> {
    let mut m = vec![b'C', 0];
    m.extend(commit_lsn.to_be_bytes());
    m.extend(end_lsn.to_be_bytes());
    m.extend(time.to_be_bytes());
    m
}

/// Insert of one text column into `relid`; `xid` is the subxid inside a streamed block.
pub fn insert(xid: Option<u32>, relid: u32, text: &[u8]) -> Vec<u8> {
    let mut m = vec![b'I'];
    if let Some(x) = xid {
        m.extend(x.to_be_bytes());
    }
    m.extend(relid.to_be_bytes());
    m.push(b'N');
    m.extend(1u16.to_be_bytes());
    m.push(b't');
    m.extend((text.len() as i32).to_be_bytes());
    m.extend(text);
    m
}

/// Relation `public.name` with one text column `t`.
pub fn relation(xid: Option<u32>, relid: u32, name: &str) -> Vec<u8> {
    let mut m = vec![b'R'];
    if let Some(x) = xid {
        m.extend(x.to_be_bytes());
    }
    m.extend(relid.to_be_bytes());
    m.extend(b"public\0");
    m.extend(name.as_bytes());
    m.push(0);
    m.push(b'd');
    m.extend(1u16.to_be_bytes());
    m.push(1);
    m.extend(b"t\0");
    m.extend(25u32.to_be_bytes());
    m.extend((-1i32).to_be_bytes());
    m
}

/// A logical message; `transactional` sets flag 1.
pub fn message(xid: Option<u32>, transactional: bool, prefix: &str, content: &[u8]) -> Vec<u8> {
    let mut m = vec![b'M'];
    if let Some(x) = xid {
        m.extend(x.to_be_bytes());
    }
    m.push(u8::from(transactional));
    m.extend(0x100u64.to_be_bytes());
    m.extend(prefix.as_bytes());
    m.push(0);
    m.extend((content.len() as i32).to_be_bytes());
    m.extend(content);
    m
}

pub fn lsn(n: u64) -> Lsn {
    Lsn(n)
}

/// Deterministic filler text of `len` bytes that compresses like row data (not random).
pub fn row_text(seed: u64, len: usize) -> Vec<u8> {
    let mut s = Vec::with_capacity(len);
    let mut i = seed;
    while s.len() < len {
        s.extend(format!("Hello number n°{i} ").as_bytes());
        i += 1;
    }
    s.truncate(len);
    s
}

/// Incompressible bytes from a small xorshift generator.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
