//! Replication through `pgcompress tunnel` with zstd:1 and lz4: pg_basebackup
//! -X stream gives a cluster that starts and matches, a streaming standby whose primary_conninfo points
//! at the client half replays pgbench, and a logical subscription (streaming = on) matches its publisher.

mod tunnel_support;

use std::time::{Duration, Instant};

use pgtest::Cluster;
use tunnel_support::{client, psql, run_ok, table_checksums, Keys, Tunnel, Upstream, Via, METHODS};

/// A primary with pgbench tables and a table of assorted types.
/// Whether the server's package lacks its own `program` (16's is server-only): the client
/// borrowed from a newer major then cannot drive this test, which is said on stderr.
fn no_own_client(cluster: &Cluster, program: &str) -> bool {
    let missing = cluster.install().own_bin(program).is_none();
    if missing {
        eprintln!(
            "PostgreSQL {} has no {program} of its own here: not tested",
            cluster.install().major()
        );
    }
    missing
}

fn primary(logical: bool) -> Cluster {
    let mut b = Cluster::builder();
    if logical {
        // The smallest work_mem makes every sizeable transaction stream to the subscriber.
        b = b
            .guc("wal_level", "logical")
            .guc("logical_decoding_work_mem", "64kB");
    }
    let cluster = b.start().expect("primary");
    cluster.pgbench_init(1).expect("pgbench -i");
    cluster
        .psql(
            "CREATE TABLE notes (id int PRIMARY KEY, at timestamptz, body text, tags text[]);
             INSERT INTO notes SELECT g, '2024-01-01'::timestamptz + g * interval '1 min',
                    repeat(md5(g::text), 1 + g % 20), ARRAY[md5(g::text), (g % 7)::text]
               FROM generate_series(1, 20000) g;",
        )
        .expect("notes");
    cluster
}

#[test]
fn pg_basebackup_stream_gives_a_cluster_that_matches() {
    let primary = primary(false);
    let expected = table_checksums(&primary, Via::Direct, "postgres");
    let keys = Keys::new();
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &primary, Upstream::Socket, method);
        let started = Instant::now();
        let copy = Cluster::builder()
            .from_base_backup(tunnel.conninfo("postgres"), false)
            .start()
            .unwrap_or_else(|e| panic!("base backup through {method}: {e}\n{}", tunnel.logs()));
        let took = started.elapsed();
        let fin = tunnel.finish();
        assert_eq!(
            copy.query_one("SELECT pg_is_in_recovery()").expect("q"),
            "f"
        );
        assert_eq!(
            table_checksums(&copy, Via::Direct, "postgres"),
            expected,
            "the copy made through {method} differs"
        );
        let b2f = fin.client.backend_to_frontend;
        eprintln!(
            "pg_basebackup -X stream through {method}: backup and start {:.2} s, {} bytes from the server, {} on the \
             link ({} connections)",
            took.as_secs_f64(),
            b2f.raw_bytes,
            b2f.link_bytes,
            fin.client.connections_total
        );
        // The base backup and its WAL stream: two replication connections.
        assert!(fin.client.connections_total >= 2, "{fin:?}");
        assert!(b2f.raw_bytes > 20_000_000, "{fin:?}");
    }
}

#[test]
fn streaming_standby_through_the_tunnel_replays_pgbench() {
    // (On a server-only package, pgtest writes the standby settings itself: the borrowed newer
    // pg_basebackup -R would write options of its own libpq that this server rejects.)
    let primary = primary(false);
    let keys = Keys::new();
    for method in METHODS {
        let tunnel = Tunnel::start(&keys, &primary, Upstream::Socket, method);
        let standby = Cluster::builder()
            .from_base_backup(tunnel.conninfo("postgres"), true)
            .start()
            .unwrap_or_else(|e| panic!("standby through {method}: {e}\n{}", tunnel.logs()));
        assert_eq!(
            standby.query_one("SELECT pg_is_in_recovery()").expect("q"),
            "t"
        );
        let receiver = format!("127.0.0.1|{}", tunnel.port);
        standby
            .wait_until("the WAL receiver", Duration::from_secs(30), || {
                Ok(standby.query_one(
                    "SELECT coalesce(string_agg(sender_host || '|' || sender_port, ','), '') FROM pg_stat_wal_receiver \
                     WHERE status = 'streaming'",
                )? == receiver)
            })
            .unwrap_or_else(|e| panic!("{e}: the standby does not stream through {method}"));
        let started = Instant::now();
        primary
            .pgbench(&["-n", "-c", "2", "-j", "2", "-t", "300"])
            .expect("pgbench on the primary");
        primary
            .psql("UPDATE notes SET body = upper(body) WHERE id % 3 = 0;")
            .expect("update");
        let lsn = primary.current_wal_lsn().expect("lsn");
        standby
            .wait_until("the standby to replay", Duration::from_secs(60), || {
                let q = format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn");
                Ok(standby.query_one(&q)? == "t")
            })
            .unwrap_or_else(|e| panic!("{e} through {method}\n{}", tunnel.logs()));
        let took = started.elapsed();
        assert_eq!(
            table_checksums(&standby, Via::Direct, "postgres"),
            table_checksums(&primary, Via::Direct, "postgres"),
            "the standby streaming through {method} differs from its primary"
        );
        // The standby's connection is open until it stops; then the halves drain at once.
        drop(standby);
        let fin = tunnel.finish();
        let b2f = fin.client.backend_to_frontend;
        eprintln!(
            "standby through {method}: pgbench replayed in {:.2} s; {} bytes from the primary, {} on the link",
            took.as_secs_f64(),
            b2f.raw_bytes,
            b2f.link_bytes
        );
        assert_eq!(fin.client.decompression_errors, 0, "{fin:?}");
    }
}

#[test]
fn logical_subscription_streaming_on_matches() {
    let publisher = primary(true);
    publisher
        .psql("CREATE PUBLICATION p FOR ALL TABLES;")
        .expect("publication");
    let schema = {
        let mut cmd = client(&publisher, "pg_dump", Via::Direct);
        cmd.args(["-s", "-d", "postgres"]);
        let schema = String::from_utf8(run_ok(&mut cmd).stdout).expect("utf8 schema");
        if no_own_client(&publisher, "pg_dump") {
            // The borrowed newer pg_dump's script sets transaction_timeout, a setting this
            // older server does not know; the rest of the schema is for it.
            eprintln!("dropping the newer pg_dump's SET transaction_timeout for this server");
            schema
                .lines()
                .filter(|l| !l.starts_with("SET transaction_timeout"))
                .map(|l| format!("{l}\n"))
                .collect()
        } else {
            schema
        }
    };
    let keys = Keys::new();
    for (round, method) in METHODS.into_iter().enumerate() {
        let subscriber = Cluster::start().expect("subscriber");
        let mut cmd = client(&subscriber, "psql", Via::Direct);
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1"]);
        pgtest::run::run_as_current_user(
            &mut cmd,
            Some(schema.as_bytes()),
            Duration::from_secs(60),
        )
        .expect("schema on the subscriber");
        let tunnel = Tunnel::start(&keys, &publisher, Upstream::Socket, method);
        let sub = format!("sub_{}", method.replace(':', "_"));
        psql(
            &subscriber,
            Via::Direct,
            &format!(
                "CREATE SUBSCRIPTION {sub} CONNECTION '{}' PUBLICATION p WITH (streaming = on)",
                tunnel.conninfo("postgres")
            ),
        );
        let started = Instant::now();
        publisher
            .pgbench(&["-n", "-c", "2", "-j", "2", "-t", "200"])
            .expect("pgbench on the publisher");
        // One transaction far over logical_decoding_work_mem: it is streamed before it commits.
        let first = 100_001 + round * 100_000;
        publisher
            .psql(&format!(
                "BEGIN;
                 INSERT INTO notes SELECT g, now(), repeat(md5(g::text), 4), NULL
                   FROM generate_series({first}, {}) g;
                 UPDATE notes SET tags = tags || 'streamed'::text WHERE id % 5 = 0;
                 COMMIT;",
                first + 50_000
            ))
            .expect("big transaction");
        let want = table_checksums(&publisher, Via::Direct, "postgres");
        subscriber
            .wait_until("the subscriber to match", Duration::from_secs(90), || {
                Ok(table_checksums(&subscriber, Via::Direct, "postgres") == want)
            })
            .unwrap_or_else(|e| {
                panic!(
                    "{e}: subscription through {method}\nsubscriber log:\n{}\n{}",
                    subscriber.log_tail(20),
                    tunnel.logs()
                )
            });
        let took = started.elapsed();
        // The walsender reports its slot's statistics a little after decoding.
        let streamed_query = format!(
            "SELECT coalesce(sum(stream_txns), 0) FROM pg_stat_replication_slots WHERE slot_name = '{sub}'"
        );
        let mut streamed = String::new();
        let _ = publisher.wait_until("streamed transactions", Duration::from_secs(15), || {
            streamed = publisher.query_one(&streamed_query)?;
            Ok(streamed != "0")
        });
        psql(
            &subscriber,
            Via::Direct,
            &format!("DROP SUBSCRIPTION {sub}"),
        );
        drop(subscriber);
        let fin = tunnel.finish();
        let b2f = fin.client.backend_to_frontend;
        eprintln!(
            "logical subscription through {method}: caught up in {:.2} s, {streamed} streamed transactions; \
             {} bytes from the publisher, {} on the link",
            took.as_secs_f64(),
            b2f.raw_bytes,
            b2f.link_bytes
        );
        assert!(
            streamed.parse::<u64>().expect("number") > 0,
            "nothing was streamed"
        );
        assert_eq!(fin.client.decompression_errors, 0, "{fin:?}");
    }
}
