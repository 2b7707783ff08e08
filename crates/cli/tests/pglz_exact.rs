//! pglz and the image-storage rules, against WAL that PostgreSQL 15 wrote.
//!
//! For every image of a wal_compression=pglz run: restore it, store it again the
//! way XLogCompressBackupBlock does, and require PostgreSQL's exact bytes (pglz
//! images) or PostgreSQL's decision to keep it raw (raw images).

mod common;

use codec::pglz::{self, Strategy};
use pgtest::Cluster;
use wal::source::SegmentSet;
use wal::{DecoderOptions, ImageMethod};

#[test]
fn pglz_reencoding_reproduces_postgres_bytes() {
    let cluster = Cluster::builder()
        .wal_segsize_mb(1)
        .archive_dir(true)
        .guc("wal_compression", "pglz")
        .start()
        .expect("cluster");
    // initdb writes its WAL in single-user mode without wal_compression; phase()
    // starts after a switch, so that WAL is left out.
    let files = common::phase(&cluster, "pglz", || {
        cluster.pgbench_init(2).expect("init");
        cluster.checkpoint().expect("checkpoint");
        cluster
            .pgbench(&["-n", "-t", "400", "-c", "2", "--random-seed=11"])
            .expect("pgbench");
        // Text pages, and pages that barely compress, so both outcomes occur.
        cluster
            .psql(
                "CREATE TABLE txt AS SELECT g, repeat(md5(g::text), 8) AS t FROM generate_series(1, 20000) g;
                 CREATE TABLE rnd AS SELECT g, decode(string_agg(lpad(to_hex((random()*255)::int), 2, '0'), ''), 'hex') AS b
                   FROM generate_series(1, 3000) g, generate_series(1, 200) x GROUP BY g;
                 CHECKPOINT;
                 UPDATE txt SET g = g WHERE g % 3 = 0;
                 UPDATE rnd SET g = g;",
            )
            .expect("workload");
    });
    let set = SegmentSet::from_paths(&files).expect("segments");

    let (mut pglz_images, mut raw_images, mut with_hole) = (0u64, 0u64, 0u64);
    let mut mismatches = Vec::new();
    let mut comp = pglz::Compressor::new();
    let mut out = Vec::new();
    set.read(DecoderOptions::default(), |r, _| {
        for b in &r.body.blocks {
            let Some(img) = b.image else { continue };
            let stored = r.image_bytes(b);
            let raw_len = img.raw_len(8192);
            let extra = if img.hole_length != 0 { 2 } else { 0 };
            match img.method() {
                ImageMethod::Pglz => {
                    pglz_images += 1;
                    if img.hole_length != 0 {
                        with_hole += 1;
                    }
                    let raw =
                        pglz::decompress(stored, raw_len, true).expect("PostgreSQL's pglz decodes");
                    let ok = comp.compress_into(&raw, &Strategy::DEFAULT, &mut out);
                    if !ok || out != stored {
                        mismatches.push(format!(
                            "{} blk {}: ours {} bytes, theirs {}",
                            r.lsn,
                            b.blkno,
                            out.len(),
                            stored.len()
                        ));
                    }
                }
                ImageMethod::None => {
                    raw_images += 1;
                    // PostgreSQL kept it raw: pglz failed or did not save enough.
                    let ok = comp.compress_into(stored, &Strategy::DEFAULT, &mut out);
                    if ok && out.len() + extra < raw_len {
                        mismatches.push(format!(
                            "{} blk {}: we would compress a raw image to {}",
                            r.lsn,
                            b.blkno,
                            out.len()
                        ));
                    }
                }
                m => panic!("unexpected {m:?} image in a pglz run"),
            }
        }
    })
    .expect("read");
    assert!(
        mismatches.is_empty(),
        "{} mismatches, first: {:?}",
        mismatches.len(),
        &mismatches[..mismatches.len().min(5)]
    );
    assert!(pglz_images > 500, "only {pglz_images} pglz images");
    assert!(with_hole > 0, "no pglz image with a hole");
    eprintln!("{pglz_images} pglz images re-encoded byte for byte ({with_hole} with a hole); {raw_images} raw images confirmed");
}

#[test]
fn pglz_decoder_rejects_malformed_streams() {
    // A tag pointing before the start of the output.
    assert!(pglz::decompress(&[0x01, 0x0f, 0x10], 100, true).is_err());
    // Offset zero.
    assert!(pglz::decompress(&[0x01, 0x00, 0x00], 3, true).is_err());
    // A tag cut off by the end of input.
    assert!(pglz::decompress(&[0x02, b'a', 0x0f], 20, true).is_err());
    // Trailing input after the output is complete.
    assert!(pglz::decompress(&[0x00, b'a', b'b'], 1, true).is_err());
    // Too little output for check_complete.
    assert!(pglz::decompress(&[0x00, b'a'], 2, true).is_err());
    assert_eq!(
        pglz::decompress(&[0x00, b'a', b'b'], 2, true).expect("valid"),
        b"ab"
    );
}
