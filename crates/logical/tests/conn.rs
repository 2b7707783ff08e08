//! The replication connection against a real PostgreSQL 15: every authentication method it
//! speaks (trust, cleartext, md5, SCRAM-SHA-256) over a Unix socket and TCP, the password file,
//! and a replication session from slot creation to decoded changes.

use std::time::{Duration, Instant};

use logical::conn::{ConnConfig, ConnError, Connection, CopyEvent, Env, Host, StartOptions};
use logical::{CopyMessage, Decoder, Lsn, Message, Options, StandbyStatus, Streaming};
use pgtest::Cluster;

fn cluster() -> Cluster {
    let c = Cluster::builder()
        .guc("wal_level", "logical")
        .listen_tcp(true)
        .start()
        .expect("start cluster");
    c.psql(
        "SET password_encryption = 'md5';
         CREATE ROLE md5u LOGIN REPLICATION PASSWORD 'pw md5';
         CREATE ROLE clearu LOGIN REPLICATION PASSWORD 'clear''pw';
         SET password_encryption = 'scram-sha-256';
         CREATE ROLE scramu LOGIN REPLICATION PASSWORD 'pw:scram';",
    )
    .expect("roles");
    let hba = c.data_dir().join("pg_hba.conf");
    let old = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
    let new = format!(
        "local all md5u md5\nlocal all clearu password\nlocal all scramu scram-sha-256\n\
         host all scramu 127.0.0.1/32 scram-sha-256\n{old}"
    );
    std::fs::write(&hba, new).expect("write pg_hba.conf");
    // Any reload will do; this one waits until new sessions see it.
    c.set_guc_and_reload("log_connections", "on")
        .expect("reload");
    c
}

fn config(c: &Cluster, user: &str, password: Option<&str>) -> ConnConfig {
    ConnConfig {
        host: Host::Unix(c.socket_dir()),
        hostaddr: None,
        connect_timeout: None,
        port: c.port(),
        user: user.into(),
        dbname: "postgres".into(),
        password: password.map(Into::into),
        application_name: "conn-test".into(),
        tls: Default::default(),
    }
}

#[test]
fn every_authentication_method_and_the_password_file() {
    let c = cluster();
    for (user, pw) in [
        ("postgres", None),
        ("clearu", Some("clear'pw")),
        ("md5u", Some("pw md5")),
        ("scramu", Some("pw:scram")),
    ] {
        let mut conn =
            Connection::connect(&config(&c, user, pw)).unwrap_or_else(|e| panic!("{user}: {e}"));
        assert_eq!(conn.server_major().expect("server_version"), 15);
        let sys = conn.identify_system().expect("IDENTIFY_SYSTEM");
        assert_eq!(sys.dbname.as_deref(), Some("postgres"));
        assert!(sys.xlogpos > Lsn::INVALID);
    }
    // TCP, SCRAM.
    let mut tcp = config(&c, "scramu", Some("pw:scram"));
    tcp.host = Host::Tcp("127.0.0.1".into());
    Connection::connect(&tcp).expect("scram over TCP");

    // A wrong password is the server's error; a missing one is ours, before anything is sent.
    let e = Connection::connect(&config(&c, "scramu", Some("nope")))
        .err()
        .expect("wrong password fails");
    assert_eq!(e.sqlstate(), Some("28P01"), "{e}");
    let e = Connection::connect(&config(&c, "md5u", None))
        .err()
        .expect("no password fails");
    assert!(matches!(e, ConnError::Auth(_)), "{e}");

    // The password file, found through PGPASSFILE.
    let dir = tempfile::tempdir().expect("tempdir");
    let passfile = dir.path().join("pgpass");
    std::fs::write(&passfile, "localhost:*:*:md5u:pw md5\n").expect("write passfile");
    let env = Env {
        passfile: Some(passfile.to_string_lossy().into_owned()),
        ..Env::default()
    };
    let conninfo = format!(
        "host={} port={} user=md5u dbname=postgres",
        c.socket_dir().display(),
        c.port()
    );
    let from_file = ConnConfig::parse(&conninfo, &env).expect("parse");
    assert_eq!(from_file.password.as_deref(), Some("pw md5"));
    Connection::connect(&from_file).expect("md5 with the password file");
}

#[test]
fn slot_to_decoded_changes() {
    let c = cluster();
    c.psql("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE PUBLICATION p FOR TABLE t;")
        .expect("schema");
    let mut conn = Connection::connect(&config(&c, "postgres", None)).expect("connect");
    let slot = conn.create_slot("s_1").expect("create slot");
    assert!(slot.consistent_point > Lsn::INVALID);
    let e = conn.create_slot("s_1").expect_err("duplicate");
    assert_eq!(e.sqlstate(), Some("42710"));
    c.psql("INSERT INTO t VALUES (1, 'one'), (2, 'two');")
        .expect("insert");
    conn.start_replication(&StartOptions {
        slot: "s_1".into(),
        start: Lsn::INVALID,
        proto_version: 3,
        publications: vec!["p".into()],
        streaming: true,
        messages: true,
    })
    .expect("START_REPLICATION");
    let mut dec = Decoder::new(Options {
        proto_version: 3,
        streaming: Streaming::On,
    })
    .expect("decoder");
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains(&'C') {
        assert!(Instant::now() < deadline, "no commit arrived: {seen:?}");
        let Some(CopyEvent::Data(d)) = conn.recv_copy(Duration::from_millis(200)).expect("recv")
        else {
            continue;
        };
        match CopyMessage::decode(&d).expect("copy message") {
            CopyMessage::XLogData(x) => {
                let tag = match dec.decode(x.payload).expect("pgoutput") {
                    Message::Begin(_) => 'B',
                    Message::Relation(r) => {
                        assert_eq!(r.name, b"t");
                        'R'
                    }
                    Message::Insert(_) => 'I',
                    Message::Commit(cm) => {
                        conn.send_status(&StandbyStatus {
                            written: cm.end_lsn,
                            flushed: cm.end_lsn,
                            applied: cm.end_lsn,
                            client_time: 0,
                            reply_requested: false,
                        })
                        .expect("status");
                        'C'
                    }
                    other => panic!("unexpected {other:?}"),
                };
                seen.push(tag);
            }
            CopyMessage::Keepalive(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ['B', 'R', 'I', 'I', 'C']);
    conn.close();
}
