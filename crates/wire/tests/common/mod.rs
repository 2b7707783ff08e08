//! Builders for PostgreSQL messages from protocol.sgml's "Message Formats".
#![allow(dead_code)]

use wire::{Direction, Framer};

/// A typed message: tag, length word (counting itself), body.
pub fn typed(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// A first packet: length word, code, body.
pub fn first(code: u32, body: &[u8]) -> Vec<u8> {
    let mut m = (body.len() as u32 + 8).to_be_bytes().to_vec();
    m.extend_from_slice(&code.to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// StartupMessage of protocol 3.`minor` with `name=value` parameters.
pub fn startup(minor: u16, params: &[(&str, &str)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (k, v) in params {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    first((3 << 16) | u32::from(minor), &body)
}

/// A NUL-terminated string.
pub fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// A DataRow of text columns.
pub fn data_row(cols: &[&str]) -> Vec<u8> {
    let mut body = (cols.len() as u16).to_be_bytes().to_vec();
    for c in cols {
        body.extend_from_slice(&(c.len() as i32).to_be_bytes());
        body.extend_from_slice(c.as_bytes());
    }
    typed(b'D', &body)
}

/// The backend's side of a session start: AuthenticationOk, ParameterStatus, BackendKeyData,
/// ReadyForQuery.
pub fn backend_start() -> Vec<u8> {
    let mut s = typed(b'R', &0u32.to_be_bytes());
    for (k, v) in [
        ("server_version", "15.8"),
        ("client_encoding", "UTF8"),
        ("DateStyle", "ISO, MDY"),
    ] {
        s.extend(typed(b'S', &[cstr(k), cstr(v)].concat()));
    }
    s.extend(typed(
        b'K',
        &[1234u32.to_be_bytes(), 0xdead_beefu32.to_be_bytes()].concat(),
    ));
    s.extend(typed(b'Z', b"I"));
    s
}

/// `n` realistic rows of a query result, then CommandComplete and ReadyForQuery.
pub fn backend_rows(n: usize) -> Vec<u8> {
    let mut s = typed(
        b'T',
        &[1u16.to_be_bytes().to_vec(), cstr("aid"), vec![0; 18]].concat(),
    );
    for i in 0..n {
        let a = format!("{i}");
        let b = format!("{}", (i * 7919) % 100_000);
        let c = format!(
            "2026-11-{:02} 12:{:02}:{:02}+00",
            1 + i % 28,
            i % 60,
            (i * 13) % 60
        );
        let d = format!(
            "customer {} ordered {} units of item {}",
            i % 977,
            i % 13,
            i % 101
        );
        s.extend(data_row(&[&a, &b, &c, &d]));
    }
    s.extend(typed(b'C', &cstr(&format!("SELECT {n}"))));
    s.extend(typed(b'Z', b"I"));
    s
}

/// Frames `bytes` whole: every message with its kind's tag.
pub fn frame_all(direction: Direction, bytes: &[u8]) -> Vec<(Option<u8>, Vec<u8>)> {
    let mut f = Framer::new(direction);
    let mut rest = bytes;
    let mut out = Vec::new();
    while let Some(m) = f.poll(rest).expect("valid stream") {
        out.push((m.tag(), m.bytes.to_vec()));
        rest = &rest[m.bytes.len()..];
    }
    assert!(rest.is_empty(), "{} bytes left unframed", rest.len());
    out
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}
