//! Block API: every method and level round-trips, sizes are exact, hostile input is refused.

use super::*;
use proptest::prelude::*;

fn specs() -> Vec<Spec> {
    let mut v = Vec::new();
    for m in Method::ALL {
        v.push(Spec::new(m));
        if let Some(r) = m.level_range() {
            v.push(Spec {
                level: Some(*r.start()),
                ..Spec::new(m)
            });
            v.push(Spec {
                level: Some(*r.end().min(&12)),
                ..Spec::new(m)
            });
        }
    }
    for s in [
        "lz4:2",
        "lz4:9",
        "zstd:level=5,long",
        "zstd:long=20,workers=2",
        "zstd:-7",
    ] {
        v.push(s.parse().expect("valid"));
    }
    v
}

fn page() -> Vec<u8> {
    let mut p: Vec<u8> = (0..8192u32).map(|i| (i % 97) as u8).collect();
    p[1000..5000].fill(0);
    p
}

#[test]
fn all_methods_round_trip() {
    let mut dec = BlockDecompressor::new().expect("ctx");
    for spec in specs() {
        let mut c = BlockCompressor::new(&spec).expect("ctx");
        for input in [
            page(),
            Vec::new(),
            vec![7u8],
            (0..3000u32).map(|i| (i * 7919 % 251) as u8).collect(),
        ] {
            let mut z = Vec::new();
            c.compress(&input, &mut z)
                .unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(
                z.len() <= max_compressed_size(spec.method, input.len()),
                "{spec}"
            );
            let mut out = Vec::new();
            dec.decompress(spec.method, &z, input.len(), &mut out)
                .unwrap_or_else(|e| panic!("{spec} len {}: {e}", input.len()));
            assert_eq!(out, input, "{spec}");
            // Into a slice of exactly the right size, and never into a wrong one.
            let mut slot = vec![0xAAu8; input.len() + 1];
            dec.decompress_into(spec.method, &z, &mut slot[..input.len()])
                .unwrap_or_else(|e| panic!("{spec} into: {e}"));
            assert_eq!(&slot[..input.len()], &input[..], "{spec} into");
            assert!(
                dec.decompress_into(spec.method, &z, &mut slot).is_err(),
                "{spec} into a slice too long"
            );
            if !input.is_empty() {
                assert!(
                    dec.decompress_into(spec.method, &z, &mut slot[..input.len() - 1])
                        .is_err(),
                    "{spec} into a slice too short"
                );
            }
            // Wrong expected length is an error, never a silent truncation.
            assert!(
                dec.decompress(spec.method, &z, input.len() + 1, &mut out)
                    .is_err(),
                "{spec}"
            );
            if !input.is_empty() {
                assert!(
                    dec.decompress(spec.method, &z, input.len() - 1, &mut out)
                        .is_err(),
                    "{spec}"
                );
            }
            // Capped decoding.
            assert_eq!(
                decompress_capped(spec.method, &z, input.len()).ok(),
                Some(input.clone()),
                "{spec}"
            );
            if input.len() > 1 && spec.method != Method::Lz4 {
                assert!(
                    decompress_capped(spec.method, &z, input.len() - 1).is_err(),
                    "{spec} {} {:?}",
                    input.len(),
                    decompress_capped(spec.method, &z, input.len() - 1).map(|v| v.len())
                );
            }
        }
    }
}

#[test]
fn lz4_level_one_is_compress_default() {
    // PostgreSQL's xloginsert.c calls LZ4_compress_default; our level 1 must match it.
    let p = page();
    let mut z = Vec::new();
    compress(&"lz4".parse().expect("valid"), &p, &mut z).expect("ok");
    let reference = lz4::block::compress(&p, None, false).expect("lz4");
    assert_eq!(z, reference);
}

#[test]
fn zstd_level_three_is_zstd_compress_default() {
    let p = page();
    let mut z = Vec::new();
    compress(&"zstd".parse().expect("valid"), &p, &mut z).expect("ok");
    assert_eq!(z, zstd::bulk::compress(&p, 3).expect("zstd"));
}

/// Word-like bytes: words of a small vocabulary picked by a fixed pseudo-random sequence.
fn wordy(n: usize) -> Vec<u8> {
    let vocabulary: [&[u8]; 16] = [
        b"the ",
        b"archive ",
        b"of ",
        b"segment ",
        b"and ",
        b"replica ",
        b"\x81",
        b"recovery ",
        b"a ",
        b"\x9c",
        b"page ",
        b"is ",
        b"to ",
        b"write ",
        b"\xfe",
        b"backup ",
    ];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(vocabulary[(x % 16) as usize]);
    }
    out.truncate(n);
    out
}

#[test]
fn coded_bytes_get_the_fast_strategy_at_zstd_level_three_only() {
    let data = wordy(1 << 20);
    let level3: Spec = "zstd".parse().expect("valid");
    let mut c = BlockCompressor::new(&level3).expect("compressor");
    let (mut plain, mut coded) = (Vec::new(), Vec::new());
    c.compress(&data, &mut plain).expect("compress");
    c.compress_coded(&data, &mut coded).expect("compress_coded");
    let mut fast = zstd::bulk::Compressor::new(3).expect("zstd");
    fast.set_parameter(zstd::stream::raw::CParameter::Strategy(
        zstd::zstd_safe::Strategy::ZSTD_fast,
    ))
    .expect("strategy");
    assert_eq!(coded, fast.compress(&data).expect("zstd"));
    assert_ne!(coded, plain, "level 3 is double-fast for plain bytes");
    assert_eq!(
        decompress_capped(Method::Zstd, &coded, data.len()).expect("decode"),
        data
    );
    // Again on the same compressor: the coded context is kept, the plain one untouched.
    let (mut plain2, mut coded2) = (Vec::new(), Vec::new());
    c.compress_coded(&data, &mut coded2)
        .expect("compress_coded");
    c.compress(&data, &mut plain2).expect("compress");
    assert_eq!((coded2, plain2), (coded, plain));
    // Up to the threshold, and with every other spec, coded bytes are compressed as any bytes.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let small = wordy(CODED_FAST_ABOVE);
    c.compress(&small, &mut a).expect("compress");
    c.compress_coded(&small, &mut b).expect("compress_coded");
    assert!(a == b, "{CODED_FAST_ABOVE} bytes");
    let small = wordy(CODED_FAST_ABOVE + 1);
    for spec in specs() {
        if spec.method == Method::Zstd && spec.effective_level() == Some(3) && spec.long.is_none() {
            continue;
        }
        let mut c = BlockCompressor::new(&spec).expect("compressor");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        c.compress(&small, &mut a).expect("compress");
        c.compress_coded(&small, &mut b).expect("compress_coded");
        assert!(a == b, "{spec}");
    }
}

#[test]
fn bomb_is_refused() {
    let big = vec![0u8; 4 << 20];
    for m in [
        Method::Zstd,
        Method::Gzip,
        Method::Xz,
        Method::Snappy,
        Method::Pglz,
    ] {
        let mut z = Vec::new();
        compress(&Spec::new(m), &big, &mut z).expect("ok");
        assert!(
            matches!(
                decompress_capped(m, &z, 1 << 20),
                Err(CodecError::OutputTooLarge { .. })
            ),
            "{m}"
        );
    }
    let mut out = Vec::new();
    assert!(matches!(
        decompress(Method::Zstd, &[], MAX_DECOMPRESSED_SIZE + 1, &mut out),
        Err(CodecError::CapTooLarge { .. })
    ));
}

#[test]
fn trailing_garbage_is_refused() {
    for m in [Method::Gzip, Method::Xz] {
        let mut z = Vec::new();
        compress(&Spec::new(m), &page(), &mut z).expect("ok");
        z.push(0x42);
        let mut out = Vec::new();
        assert!(decompress(m, &z, 8192, &mut out).is_err(), "{m}");
    }
}

#[test]
fn invalid_hand_built_spec_is_refused() {
    let s = Spec {
        level: Some(99),
        ..Spec::new(Method::Zstd)
    };
    assert!(matches!(
        BlockCompressor::new(&s),
        Err(CodecError::InvalidSpec { .. })
    ));
    let s = Spec {
        long: Some(27),
        ..Spec::new(Method::Lz4)
    };
    assert!(BlockCompressor::new(&s).is_err());
    let s = Spec {
        level: Some(1),
        ..Spec::new(Method::Pglz)
    };
    assert!(BlockCompressor::new(&s).is_err());
}

use crate::error::MAX_DECOMPRESSED_SIZE;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400), len in 0usize..20000) {
        let mut dec = BlockDecompressor::new().expect("ctx");
        let mut out = Vec::new();
        for m in Method::ALL {
            let _ = dec.decompress(m, &data, len, &mut out);
            prop_assert!(out.len() <= len);
            if let Ok(v) = decompress_capped(m, &data, len) {
                prop_assert!(v.len() <= len);
            }
        }
    }

    #[test]
    fn round_trip_any(data in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..3000)) {
        let mut dec = BlockDecompressor::new().expect("ctx");
        for m in Method::ALL {
            let mut z = Vec::new();
            compress(&Spec::new(m), &data, &mut z).expect("compress");
            let mut out = Vec::new();
            dec.decompress(m, &z, data.len(), &mut out).expect("decompress");
            prop_assert_eq!(&out, &data);
        }
    }
}

/// Reads `feed` to its end in reads of the sizes in `steps`, cycled.
fn read_all(feed: &mut PartFeed<'_>, steps: &[usize]) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    for &step in steps.iter().cycle() {
        let mut buf = vec![0u8; step];
        let n = feed.read(&mut buf)?;
        out.extend_from_slice(&buf[..n]);
        if n < step {
            return Ok(out);
        }
    }
    unreachable!("cycle never ends")
}

#[test]
fn part_feed_reads_every_method_in_pieces_of_any_size() {
    let data: Vec<u8> = (0..600_000u32)
        .map(|i| ((i / 7) % 251) as u8 ^ (i % 13) as u8)
        .collect();
    let cuts = [0, 1, 70_000, 70_000, 300_001, 600_000];
    for spec in specs() {
        let mut c = BlockCompressor::new(&spec).expect("compressor");
        let mut stored = Vec::new();
        for w in cuts.windows(2) {
            let mut block = Vec::new();
            c.compress(&data[w[0]..w[1]], &mut block).expect("compress");
            stored.push((block, w[1] - w[0]));
        }
        let parts: Vec<(&[u8], usize)> = stored.iter().map(|(b, n)| (b.as_slice(), *n)).collect();
        for steps in [&[1usize, 4093][..], &[65_536], &[1 << 20]] {
            let mut feed = PartFeed::new(spec.method, parts.clone());
            let out = read_all(&mut feed, steps).expect("read");
            assert!(out == data, "{spec}: {steps:?}");
        }
    }
}

#[test]
fn part_feed_refuses_wrong_sizes_truncation_and_trailing_bytes() {
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 97) as u8).collect();
    let spec: Spec = "zstd:3".parse().expect("spec");
    let mut block = Vec::new();
    BlockCompressor::new(&spec)
        .expect("compressor")
        .compress(&data, &mut block)
        .expect("compress");
    let mut trailing = block.clone();
    trailing.push(0);
    let cases: [(&[u8], usize); 4] = [
        (&block, data.len() + 1),
        (&block, data.len() - 1),
        (&block[..block.len() - 3], data.len()),
        (&trailing, data.len()),
    ];
    for (i, (src, size)) in cases.into_iter().enumerate() {
        let mut feed = PartFeed::new(Method::Zstd, vec![(src, size)]);
        assert!(read_all(&mut feed, &[8192]).is_err(), "case {i} passed");
    }
}

/// A zstd frame without a content size whose header declares a window of `2^log` bytes,
/// holding one raw block with the byte `x`.
fn frame_with_window(log: u8) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (log - 10) << 3];
    f.extend_from_slice(&[0x09, 0x00, 0x00, b'x']);
    f
}

#[test]
fn capped_zstd_refuses_a_forged_huge_window_and_keeps_ordinary_ones() {
    // Found by the block_decompress fuzz target: a 2 GiB window was allocated for a frame
    // whose output is capped at a few bytes.
    assert!(decompress_capped(Method::Zstd, &frame_with_window(31), 100).is_err());
    assert_eq!(
        decompress_capped(Method::Zstd, &frame_with_window(23), 100).expect("8 MiB window"),
        b"x"
    );
    assert_eq!(
        decompress_capped(Method::Zstd, &frame_with_window(27), 200 << 20).expect("cap-sized"),
        b"x"
    );
}

#[test]
fn part_feed_reads_a_frame_without_a_size_a_window_at_a_time_and_caps_its_window() {
    // A streaming encoder's frame, as archive push writes page images.
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| ((i / 5) % 241) as u8 ^ (i % 11) as u8)
        .collect();
    let spec: Spec = "zstd:3".parse().expect("spec");
    let mut enc = crate::Encoder::new(&spec, Vec::new()).expect("encoder");
    for piece in data.chunks(8000) {
        std::io::Write::write_all(&mut enc, piece).expect("write");
    }
    let frame = enc.finish().expect("finish");
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&frame).ok(),
        Some(None),
        "the frame states no size"
    );
    for steps in [&[1usize, 4093][..], &[65_536]] {
        let mut feed = PartFeed::new(Method::Zstd, vec![(&frame, data.len())]);
        assert!(
            read_all(&mut feed, steps).expect("read") == data,
            "{steps:?}"
        );
    }
    for size in [data.len() - 1, data.len() + 1] {
        let mut feed = PartFeed::new(Method::Zstd, vec![(&frame, size)]);
        assert!(
            read_all(&mut feed, &[65_536]).is_err(),
            "size {size} passed"
        );
    }
    // A window beyond what the part's size needs (and above 8 MiB) is refused before the
    // decoder allocates it; an 8 MiB one is not.
    let forged = frame_with_window(31);
    let mut feed = PartFeed::new(Method::Zstd, vec![(&forged, 1)]);
    assert!(
        read_all(&mut feed, &[16]).is_err(),
        "a 2 GiB window for one byte"
    );
    let ordinary = frame_with_window(23);
    let mut feed = PartFeed::new(Method::Zstd, vec![(&ordinary, 1)]);
    assert_eq!(read_all(&mut feed, &[16]).expect("8 MiB window"), b"x");
}

/// An xz stream of `data` whose block header declares a dictionary of 4 GiB (its CRC-32
/// made right again).
fn xz_with_huge_dictionary(data: &[u8]) -> Vec<u8> {
    let mut z = Vec::new();
    compress(&Spec::new(Method::Xz), data, &mut z).expect("compress");
    // Stream header (12 bytes), then a 12-byte block header: size, flags, LZMA2 filter id,
    // properties size, the dictionary byte, padding, CRC-32.
    assert_eq!(z[12..16], [0x02, 0x00, 0x21, 0x01], "block header layout");
    z[16] = 40; // 4 GiB - 1
    let mut crc = flate2::Crc::new();
    crc.update(&z[12..20]);
    z[20..24].copy_from_slice(&crc.sum().to_le_bytes());
    z
}

#[test]
fn xz_refuses_a_forged_huge_dictionary_before_allocating_it() {
    // Found by the stream_decompress fuzz target: a 4 GiB dictionary was allocated for a
    // stream whose output is capped at 1 MiB.
    let data = b"the same few words, the same few words, the same few words".repeat(20);
    let z = xz_with_huge_dictionary(&data);
    let err = decompress_capped(Method::Xz, &z, 1 << 20).expect_err("capped");
    assert!(err.to_string().contains("emory"), "{err}");
    let mut out = Vec::new();
    assert!(decompress(Method::Xz, &z, data.len(), &mut out).is_err());
    // The same stream with its own dictionary size decodes.
    let mut ok = Vec::new();
    compress(&Spec::new(Method::Xz), &data, &mut ok).expect("compress");
    assert_eq!(
        decompress_capped(Method::Xz, &ok, 1 << 20).expect("decodes"),
        data
    );
}
