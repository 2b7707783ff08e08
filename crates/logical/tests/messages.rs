//! Every pgoutput message built by hand from protocol.sgml's layouts: decoded whole, and
//! truncated at every byte (always an error, never a panic).

use logical::dml::OldTuple;
use logical::{
    CopyMessage, DecodeError, Decoder, ErrorKind, Keepalive, Lsn, Message, Options, StandbyStatus,
    Streaming, Value,
};

/// Big-endian message builder.
#[derive(Default)]
struct B(Vec<u8>);

impl B {
    fn tag(t: u8) -> Self {
        B(vec![t])
    }
    fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn s(mut self, v: &str) -> Self {
        self.0.extend_from_slice(v.as_bytes());
        self.0.push(0);
        self
    }
    fn text(self, v: &[u8]) -> Self {
        let mut b = self.u8(b't').i32(v.len() as i32);
        b.0.extend_from_slice(v);
        b
    }
}

fn opts(v: u32, s: Streaming) -> Options {
    Options {
        proto_version: v,
        streaming: s,
    }
}

fn dec(v: u32, s: Streaming, in_stream: Option<u32>) -> Decoder {
    let mut d = Decoder::new(opts(v, s)).expect("version");
    if let Some(x) = in_stream {
        d.decode(&B::tag(b'S').u32(x).u8(1).0)
            .expect("stream start");
    }
    d
}

/// Decodes `msg` with a fresh decoder in the given state, and checks that every strict prefix
/// fails with a Truncated (or count) error that names the tag and lies within the prefix.
fn check<'a>(d: &Decoder, msg: &'a [u8]) -> Message<'a> {
    for n in 0..msg.len() {
        let mut d2 = d.clone();
        let err = d2
            .decode(&msg[..n])
            .expect_err(&format!("prefix of {n} bytes decoded"));
        assert!(err.offset <= n, "{err}");
        if n > 0 {
            assert_eq!(err.tag, Some(msg[0]));
        }
        assert!(
            matches!(
                err.kind,
                ErrorKind::Truncated { .. } | ErrorKind::CountTooLarge { .. } | ErrorKind::Empty
            ),
            "{err}"
        );
        assert_eq!(
            d2.stream_xid(),
            d.stream_xid(),
            "a failed decode moved the state"
        );
    }
    // Trailing garbage is refused too (except where the layout ends in an open payload).
    let mut longer = msg.to_vec();
    longer.push(0);
    assert!(matches!(
        d.clone().decode(&longer).map_err(|e| e.kind),
        Err(ErrorKind::TrailingBytes(1))
    ));
    d.clone().decode(msg).expect("whole message decodes")
}

#[test]
fn begin_commit_origin() {
    let d = dec(1, Streaming::Off, None);
    let m = B::tag(b'B').u64(0x1_0000_0010).u64(123).u32(77).0;
    match check(&d, &m) {
        Message::Begin(b) => {
            assert_eq!(
                (b.final_lsn, b.commit_time, b.xid),
                (Lsn(0x1_0000_0010), 123, 77)
            )
        }
        other => panic!("{other:?}"),
    }
    let m = B::tag(b'C').u8(0).u64(5).u64(6).u64(7).0;
    match check(&d, &m) {
        Message::Commit(c) => {
            assert_eq!(
                (c.commit_lsn, c.end_lsn, c.commit_time),
                (Lsn(5), Lsn(6), 7)
            )
        }
        other => panic!("{other:?}"),
    }
    let m = B::tag(b'O').u64(9).s("node_a").0;
    match check(&d, &m) {
        Message::Origin(o) => assert_eq!((o.commit_lsn, o.name), (Lsn(9), &b"node_a"[..])),
        other => panic!("{other:?}"),
    }
}

fn relation_body(b: B) -> B {
    b.u32(16384)
        .s("public")
        .s("t")
        .u8(b'd')
        .u16(2)
        .u8(1)
        .s("i")
        .u32(23)
        .i32(-1)
        .u8(0)
        .s("t")
        .u32(25)
        .i32(-1)
}

#[test]
fn relation_and_type_outside_and_inside_a_stream() {
    for xid in [None, Some(900)] {
        let d = dec(2, Streaming::On, xid);
        let mut b = B::tag(b'R');
        if let Some(x) = xid {
            b = b.u32(x);
        }
        let m = relation_body(b).0;
        match check(&d, &m) {
            Message::Relation(r) => {
                assert_eq!(r.xid, xid);
                assert_eq!(
                    (r.relid, r.namespace, r.name),
                    (16384, &b"public"[..], &b"t"[..])
                );
                assert_eq!(r.columns.len(), 2);
                assert!(r.columns[0].is_key() && !r.columns[1].is_key());
                assert_eq!(r.columns[1].type_oid, 25);
            }
            other => panic!("{other:?}"),
        }
        let mut b = B::tag(b'Y');
        if let Some(x) = xid {
            b = b.u32(x);
        }
        let m = b.u32(70000).s("public").s("mood").0;
        match check(&d, &m) {
            Message::Type(t) => assert_eq!((t.xid, t.type_oid, t.name), (xid, 70000, &b"mood"[..])),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn dml_with_every_column_kind() {
    for xid in [None, Some(901)] {
        let d = dec(2, Streaming::On, xid);
        let pre = |t: u8| {
            let b = B::tag(t);
            match xid {
                Some(x) => b.u32(x),
                None => b,
            }
        };
        let tuple = |b: B| {
            b.u16(4)
                .text(b"42")
                .u8(b'n')
                .u8(b'u')
                .u8(b'b')
                .i32(2)
                .u8(0xde)
                .u8(0xad)
        };
        let m = tuple(pre(b'I').u32(16384).u8(b'N')).0;
        match check(&d, &m) {
            Message::Insert(i) => {
                assert_eq!((i.xid, i.relid), (xid, 16384));
                assert_eq!(
                    i.new.columns,
                    vec![
                        Value::Text(b"42"),
                        Value::Null,
                        Value::UnchangedToast,
                        Value::Binary(&[0xde, 0xad])
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        for old in [None, Some(b'K'), Some(b'O')] {
            let mut b = pre(b'U').u32(16384);
            if let Some(k) = old {
                b = b.u8(k).u16(1).text(b"1");
            }
            let m = tuple(b.u8(b'N')).0;
            match check(&d, &m) {
                Message::Update(u) => {
                    assert_eq!(u.xid, xid);
                    assert_eq!(u.new.columns.len(), 4);
                    match (old, &u.old) {
                        (None, None) => {}
                        (Some(b'K'), Some(OldTuple::Key(t)))
                        | (Some(b'O'), Some(OldTuple::Full(t))) => {
                            assert_eq!(t.columns, vec![Value::Text(b"1")])
                        }
                        other => panic!("{other:?}"),
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        for k in [b'K', b'O'] {
            let m = tuple(pre(b'D').u32(16384).u8(k)).0;
            match check(&d, &m) {
                Message::Delete(del) => {
                    assert_eq!(del.xid, xid);
                    assert_eq!(del.old.tuple().columns.len(), 4);
                }
                other => panic!("{other:?}"),
            }
        }
        let m = pre(b'T').i32(2).u8(3).u32(1).u32(2).0;
        assert_eq!(check(&d, &m).stream_xid(), xid);
        match check(&d, &m) {
            Message::Truncate(t) => assert_eq!((t.xid, t.options, t.relids), (xid, 3, vec![1, 2])),
            other => panic!("{other:?}"),
        }
        let m = pre(b'M')
            .u8(1)
            .u64(44)
            .s("pfx")
            .i32(3)
            .u8(b'a')
            .u8(b'b')
            .u8(b'c')
            .0;
        match check(&d, &m) {
            Message::Message(msg) => {
                assert!(msg.is_transactional());
                assert_eq!(
                    (msg.xid, msg.lsn, msg.prefix, msg.content),
                    (xid, Lsn(44), &b"pfx"[..], &b"abc"[..])
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn bad_markers_kinds_and_counts() {
    let mut d = dec(1, Streaming::Off, None);
    let e = d
        .decode(&B::tag(b'I').u32(1).u8(b'K').u16(0).0)
        .expect_err("K in insert");
    assert_eq!(
        (e.kind, e.offset),
        (ErrorKind::UnexpectedTupleMarker(b'K'), 5)
    );
    let e = d
        .decode(&B::tag(b'D').u32(1).u8(b'N').u16(0).0)
        .expect_err("N in delete");
    assert_eq!(e.kind, ErrorKind::UnexpectedTupleMarker(b'N'));
    let e = d
        .decode(&B::tag(b'I').u32(1).u8(b'N').u16(1).u8(b'x').0)
        .expect_err("kind");
    assert_eq!((e.kind, e.offset), (ErrorKind::UnknownColumnKind(b'x'), 8));
    // 65535 columns announced, 3 bytes left: refused before allocating.
    let e = d
        .decode(
            &B::tag(b'I')
                .u32(1)
                .u8(b'N')
                .u16(0xffff)
                .u8(b'n')
                .u8(b'n')
                .u8(b'n')
                .0,
        )
        .expect_err("count");
    assert!(
        matches!(
            e.kind,
            ErrorKind::CountTooLarge {
                count: 65535,
                remaining: 3
            }
        ),
        "{e}"
    );
    let e = d
        .decode(&B::tag(b'T').i32(i32::MAX).u8(0).0)
        .expect_err("nrels");
    assert!(matches!(e.kind, ErrorKind::CountTooLarge { .. }));
    let e = d
        .decode(&B::tag(b'T').i32(-1).u8(0).0)
        .expect_err("negative nrels");
    assert!(matches!(e.kind, ErrorKind::CountTooLarge { count: -1, .. }));
    let e = d
        .decode(&B::tag(b'I').u32(1).u8(b'N').u16(1).u8(b't').i32(-5).0)
        .expect_err("len");
    assert!(matches!(e.kind, ErrorKind::CountTooLarge { count: -5, .. }));
    let e = d.decode(b"Z").expect_err("unknown tag");
    assert_eq!((e.tag, e.kind.clone()), (Some(b'Z'), ErrorKind::UnknownTag));
    let e = d.decode(b"").expect_err("empty");
    assert_eq!(e.kind, ErrorKind::Empty);
    let shown = e.clone().with_lsn(Lsn(0x1_0000_00A0)).to_string();
    assert!(shown.contains("1/A0"), "{shown}");
    assert!(DecodeError::to_string(&d.decode(b"Z").expect_err("z")).contains("'Z'"));
    assert!(matches!(
        Decoder::new(opts(5, Streaming::Off)).map_err(|e| e.kind),
        Err(ErrorKind::UnsupportedVersion(5))
    ));
    assert!(Decoder::new(opts(0, Streaming::Off)).is_err());
}

#[test]
fn stream_blocks_are_tracked() {
    let mut d = dec(2, Streaming::On, None);
    let start = B::tag(b'S').u32(700).u8(1).0;
    match check(&d, &start) {
        Message::StreamStart(s) => assert!(s.xid == 700 && s.first_segment),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(d.decode(&B::tag(b'S').u32(700).u8(0).0), Ok(Message::StreamStart(s)) if !s.first_segment)
    );
    assert_eq!(d.stream_xid(), Some(700));
    let e = d.decode(&start).expect_err("nested");
    assert_eq!(e.kind, ErrorKind::NestedStreamStart { open: 700 });
    // An insert inside the block carries the subxact xid.
    let ins = B::tag(b'I').u32(701).u32(5).u8(b'N').u16(0).0;
    assert!(matches!(d.decode(&ins), Ok(Message::Insert(i)) if i.xid == Some(701)));
    assert_eq!(check(&d, b"E"), Message::StreamStop);
    assert_eq!(d.decode(b"E"), Ok(Message::StreamStop));
    assert_eq!(d.stream_xid(), None);
    assert_eq!(
        d.decode(b"E").map_err(|e| e.kind),
        Err(ErrorKind::StreamStopOutsideStream)
    );
    // Outside the block the same bytes mean relid 701 and a bad marker.
    assert!(d.decode(&ins).is_err());

    let m = B::tag(b'c').u32(700).u8(0).u64(10).u64(11).u64(12).0;
    match check(&d, &m) {
        Message::StreamCommit(c) => {
            assert_eq!(
                (c.xid, c.commit_lsn, c.end_lsn, c.commit_time),
                (700, Lsn(10), Lsn(11), 12)
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn stream_abort_layout_depends_on_version_and_parallel() {
    let short = B::tag(b'A').u32(700).u32(702).0;
    let long = B::tag(b'A').u32(700).u32(700).u64(99).u64(1234).0;
    for (v, s) in [
        (2, Streaming::On),
        (3, Streaming::On),
        (4, Streaming::On),
        (1, Streaming::Off),
    ] {
        match check(&dec(v, s, None), &short) {
            Message::StreamAbort(a) => {
                assert_eq!((a.xid, a.subxid, a.abort), (700, 702, None));
                assert!(!a.is_top_level());
            }
            other => panic!("{other:?}"),
        }
        assert!(dec(v, s, None).decode(&long).is_err());
    }
    let d = dec(4, Streaming::Parallel, None);
    match check(&d, &long) {
        Message::StreamAbort(a) => {
            assert!(a.is_top_level());
            let info = a.abort.expect("v4 parallel carries abort info");
            assert_eq!((info.abort_lsn, info.abort_time), (Lsn(99), 1234));
        }
        other => panic!("{other:?}"),
    }
    assert!(dec(4, Streaming::Parallel, None).decode(&short).is_err());
}

#[test]
fn two_phase_messages() {
    let d = dec(3, Streaming::On, None);
    let m = B::tag(b'b').u64(1).u64(2).u64(3).u32(4).s("gid1").0;
    match check(&d, &m) {
        Message::BeginPrepare(b) => {
            assert_eq!(
                (b.prepare_lsn, b.end_lsn, b.prepare_time, b.xid, b.gid),
                (Lsn(1), Lsn(2), 3, 4, &b"gid1"[..])
            )
        }
        other => panic!("{other:?}"),
    }
    for tag in [b'P', b'K', b'p'] {
        let m = B::tag(tag).u8(0).u64(5).u64(6).u64(7).u32(8).s("g").0;
        let p = match check(&d, &m) {
            Message::Prepare(p) if tag == b'P' => p,
            Message::CommitPrepared(p) if tag == b'K' => p,
            Message::StreamPrepare(p) if tag == b'p' => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (p.lsn, p.end_lsn, p.time, p.xid, p.gid),
            (Lsn(5), Lsn(6), 7, 8, &b"g"[..])
        );
    }
    let m = B::tag(b'r')
        .u8(0)
        .u64(1)
        .u64(2)
        .u64(3)
        .u64(4)
        .u32(5)
        .s("g2")
        .0;
    match check(&d, &m) {
        Message::RollbackPrepared(r) => assert_eq!(
            (
                r.prepare_end_lsn,
                r.rollback_end_lsn,
                r.prepare_time,
                r.rollback_time,
                r.xid,
                r.gid
            ),
            (Lsn(1), Lsn(2), 3, 4, 5, &b"g2"[..])
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn copy_wrappers() {
    let payload = B::tag(b'B').u64(1).u64(2).u32(3).0;
    let mut w = B::tag(b'w').u64(0x10).u64(0x20).u64(0x30).0;
    w.extend_from_slice(&payload);
    match CopyMessage::decode(&w).expect("w") {
        CopyMessage::XLogData(x) => {
            assert_eq!(
                (x.start, x.end, x.send_time, x.payload),
                (Lsn(0x10), Lsn(0x20), 0x30, &payload[..])
            )
        }
        other => panic!("{other:?}"),
    }
    for n in 0..25 {
        assert!(CopyMessage::decode(&w[..n]).is_err(), "w prefix {n}");
    }
    let k = B::tag(b'k').u64(0x99).u64(5).u8(1).0;
    assert_eq!(
        CopyMessage::decode(&k),
        Ok(CopyMessage::Keepalive(Keepalive {
            wal_end: Lsn(0x99),
            send_time: 5,
            reply_requested: true
        }))
    );
    for n in 0..k.len() {
        assert!(CopyMessage::decode(&k[..n]).is_err(), "k prefix {n}");
    }
    assert!(CopyMessage::decode(b"x").is_err());
    let r = StandbyStatus {
        written: Lsn(0x0102_0304_0506_0708),
        flushed: Lsn(2),
        applied: Lsn(3),
        client_time: -1,
        reply_requested: true,
    }
    .encode();
    let want = B::tag(b'r')
        .u64(0x0102_0304_0506_0708)
        .u64(2)
        .u64(3)
        .u64(u64::MAX)
        .u8(1)
        .0;
    assert_eq!(&r[..], &want[..]);
}
