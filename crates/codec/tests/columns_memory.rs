//! Memory of `codec::columns::encode` on wide rows: a chunk of 1 600-column lines (the
//! most fields a PostgreSQL row has) must be coded in memory of the order of the
//! chunk, not a reservation per column of a share of the whole chunk.
//!
//! A counting global allocator (`memcount`) measures the peak of live heap bytes while `encode`
//! runs; this file holds one test so no other test allocates meanwhile.

use sha2::Digest;

#[global_allocator]
static ALLOC: memcount::Counting = memcount::Counting;

/// A 128 KiB chunk (the link's) of lines of `cols` comma-separated small numbers.
fn chunk(cols: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 << 10);
    let mut n = 0u64;
    'rows: loop {
        let mut line = Vec::new();
        for c in 0..cols {
            if c > 0 {
                line.push(b',');
            }
            n = n
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            line.extend_from_slice((n >> 60).to_string().as_bytes());
        }
        line.push(b'\n');
        if out.len() + line.len() > 128 << 10 {
            break 'rows;
        }
        out.extend_from_slice(&line);
    }
    out
}

#[test]
fn wide_rows_are_coded_in_memory_of_the_order_of_the_chunk() {
    for cols in [1_600, 400, 16] {
        let data = chunk(cols);
        let (coded, peak) = memcount::peak_of(|| codec::columns::encode(&data));
        let coded = coded.unwrap_or_else(|| panic!("{cols} columns: accepted"));
        assert_eq!(
            codec::columns::decode(&coded, data.len()).expect("decodes"),
            data,
            "{cols} columns: comes back"
        );
        // The digest of the coding, to compare with another build's: reserving less
        // must not change a byte.
        let digest = sha2::Sha256::digest(&coded);
        eprintln!(
            "{cols} columns: {} bytes in, peak {peak} bytes live while encoding, coded sha256 {digest:x}",
            data.len()
        );
        // The columns hold the chunk's bytes once, the output once more; growth by
        // doubling may leave each with up to twice what it holds.
        assert!(
            peak <= 5 * data.len(),
            "{cols} columns: {peak} bytes live for a {}-byte chunk",
            data.len()
        );
    }
}
