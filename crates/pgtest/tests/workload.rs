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
