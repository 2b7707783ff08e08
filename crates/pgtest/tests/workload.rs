//! The shared workloads run and write WAL.

use pgtest::{workload, Cluster};

#[test]
fn workloads_write_wal() {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .start()
        .expect("cluster starts");

    let tpcb = workload::pgbench_tpcb(&cluster, 1, 50, 2).expect("tpcb");
    assert!(tpcb.wal_bytes > 1 << 20, "{tpcb:?}");
    assert!(
        tpcb.output.contains("actually processed: 100"),
        "{}",
        tpcb.output
    );

    let text = workload::text_heavy(&cluster, 2000).expect("text");
    assert!(text.wal_bytes > 500_000, "{text:?}");
    assert_eq!(
        cluster
            .query_one("SELECT count(*) FROM text_heavy WHERE body LIKE '%[updated%'")
            .expect("q"),
        "666"
    );

    let bulk = workload::bulk_updates(&cluster, 2000, 2).expect("bulk");
    assert!(bulk.wal_bytes > 100_000, "{bulk:?}");
    assert_eq!(
        cluster
            .query_one("SELECT min(counter) FROM bulk_updates")
            .expect("q"),
        "2"
    );
}

#[test]
fn text_heavy_is_deterministic() {
    let a = Cluster::start().expect("cluster a");
    let b = Cluster::start().expect("cluster b");
    workload::text_heavy(&a, 300).expect("a");
    workload::text_heavy(&b, 300).expect("b");
    let digest = "SELECT md5(string_agg(body, '' ORDER BY id)) FROM text_heavy";
    assert_eq!(
        a.query_one(digest).expect("a"),
        b.query_one(digest).expect("b")
    );
}

#[test]
fn prose_is_english_like_and_deterministic() {
    let a = Cluster::start().expect("cluster a");
    let b = Cluster::start().expect("cluster b");
    for round in 0..2 {
        let ra = workload::prose_round(&a, round, 300).expect("a");
        workload::prose_round(&b, round, 300).expect("b");
        assert!(ra.wal_bytes > 150_000, "{ra:?}");
    }
    let digest = "SELECT md5(string_agg(author || title || body, '' ORDER BY id)) FROM prose";
    assert_eq!(
        a.query_one(digest).expect("a"),
        b.query_one(digest).expect("b")
    );
    assert_eq!(a.query_one("SELECT count(*) FROM prose").expect("q"), "600");
    // Round 1 appended to one in eight of round 0's rows.
    let edited = a
        .query_one("SELECT count(*) FROM prose WHERE body LIKE '%Edit: %'")
        .expect("q");
    assert_eq!(edited, "37");
    // Sentences of words from the vocabulary, stored uncompressed in the heap (below the TOAST threshold).
    let lengths = a
        .query_one("SELECT min(length(body)) || ' ' || max(length(body)) FROM prose")
        .expect("q");
    let (min, max) = lengths.split_once(' ').expect("two numbers");
    let (min, max): (u32, u32) = (min.parse().expect("min"), max.parse().expect("max"));
    assert!(min > 60 && max < 2000, "body lengths {min}..{max}");
    let odd = a
        .query_one(
            "SELECT coalesce(min(body), 'none') FROM prose
             WHERE body !~ '^[A-Z][a-z'',]*( [a-z'',]+)+\\.( [A-Z][a-z'',]*( [a-z'',]+)+\\.)+( Edit:( [a-z'']+){8})?$'",
        )
        .expect("q");
    assert_eq!(odd, "none", "a body that is not sentences of words");
}
