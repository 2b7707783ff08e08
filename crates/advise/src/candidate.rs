//! The candidates an advice compares: which ones stock PostgreSQL can write, the
//! default list, what each costs to run, and how much memory its context takes.

use codec::{Method, Spec};

/// zstd levels tried by default: a representative subset of -7..=22.
pub const DEFAULT_ZSTD_LEVELS: [i32; 10] = [-7, -1, 1, 3, 6, 9, 12, 15, 19, 22];
/// lz4 high-compression levels tried by default (2..=12 exist; 1 is stock `LZ4_compress_default`).
pub const DEFAULT_LZ4_HC_LEVELS: [i32; 3] = [4, 9, 12];

/// The default candidates: what stock PostgreSQL can write (`off`, `pglz`, `lz4`,
/// `zstd` = zstd level 3), then what it cannot: zstd at [`DEFAULT_ZSTD_LEVELS`], lz4
/// HC at [`DEFAULT_LZ4_HC_LEVELS`], and snappy.
pub fn default_candidates() -> Vec<Spec> {
    let mut v = vec![
        Spec::new(Method::None),
        Spec::new(Method::Pglz),
        Spec::new(Method::Lz4),
        Spec::new(Method::Zstd),
    ];
    for l in DEFAULT_ZSTD_LEVELS {
        v.push(with_level(Method::Zstd, l));
    }
    for l in DEFAULT_LZ4_HC_LEVELS {
        v.push(with_level(Method::Lz4, l));
    }
    v.push(Spec::new(Method::Snappy));
    dedup(v)
}

fn with_level(method: Method, level: i32) -> Spec {
    Spec {
        level: Some(level),
        ..Spec::new(method)
    }
}

/// Drops specifications that store images identically to an earlier one (`zstd` and
/// `zstd:3`, `lz4` and `lz4:1`), keeping the first spelling.
pub fn dedup(specs: Vec<Spec>) -> Vec<Spec> {
    let mut out: Vec<Spec> = Vec::with_capacity(specs.len());
    for s in specs {
        if !out.iter().any(|o| same_output(o, &s)) {
            out.push(s);
        }
    }
    out
}

fn same_output(a: &Spec, b: &Spec) -> bool {
    a.method == b.method
        && a.effective_level() == b.effective_level()
        && a.long == b.long
        && a.workers.unwrap_or(0) == b.workers.unwrap_or(0)
}

/// True when stock PostgreSQL 15-18 can write exactly this: `wal_compression` =
/// off, pglz, lz4 (`LZ4_compress_default`, level 1) or zstd (level 3,
/// `ZSTD_CLEVEL_DEFAULT`, no options) — xloginsert.c `XLogCompressBackupBlock`.
pub fn is_stock(spec: &Spec) -> bool {
    if spec.long.is_some() || spec.workers.is_some_and(|w| w > 0) {
        return false;
    }
    match spec.method {
        Method::None | Method::Pglz => true,
        Method::Lz4 => spec.effective_level() == Some(1),
        Method::Zstd => spec.effective_level() == Some(3),
        _ => false,
    }
}

/// The `wal_compression` value that writes a stock candidate, if it is one.
pub fn wal_compression_setting(spec: &Spec) -> Option<&'static str> {
    if !is_stock(spec) {
        return None;
    }
    Some(match spec.method {
        Method::None => "off",
        m => m.name(),
    })
}

/// Compression speed assumed when planning samples, in MB (10^6 bytes) of page data
/// per second on one core: rough speeds of `pgcompress wal advise` on pgbench WAL on the
/// development machine (`zstd -b19 -B8K` on the same WAL agrees that the high levels are
/// slow: btultra is slow on repetitive 8 KB pages). Only the sampling plan depends on
/// it, never a figure reported.
pub fn assumed_mb_per_s(spec: &Spec) -> f64 {
    match (spec.method, spec.effective_level()) {
        (Method::None, _) => f64::INFINITY,
        (Method::Pglz, _) => 15.0,
        (Method::Snappy, _) => 300.0,
        (Method::Lz4, Some(l)) if l <= 1 => 300.0,
        (Method::Lz4, Some(l)) if l <= 4 => 45.0,
        (Method::Lz4, Some(l)) if l <= 9 => 25.0,
        (Method::Lz4, _) => 5.0,
        (Method::Zstd, Some(l)) if l <= -5 => 120.0,
        (Method::Zstd, Some(l)) if l <= 1 => 70.0,
        (Method::Zstd, Some(l)) if l <= 3 => 50.0,
        (Method::Zstd, Some(l)) if l <= 6 => 25.0,
        (Method::Zstd, Some(l)) if l <= 9 => 17.0,
        (Method::Zstd, Some(l)) if l <= 12 => 4.0,
        (Method::Zstd, Some(l)) if l <= 15 => 0.8,
        (Method::Zstd, _) => 0.4,
        // Other methods (gzip, xz) are never written to WAL; assume slow.
        _ => 5.0,
    }
}

/// Bytes of compression context one backend would hold for this candidate, when knowable.
///
/// zstd: `ZSTD_sizeof_CCtx` of a context after compressing one 8 KB page at the
/// candidate's level (what `ZSTD_compress` allocates per call in xloginsert.c).
/// lz4: `LZ4_STREAM_MINSIZE` (16 416 B) or, for HC levels, `LZ4_STREAMHC_MINSIZE`
/// (262 200 B) from lz4.h / lz4hc.h 1.9-1.10. pglz: the static `hist_start` (8192 ×
/// int16) and `hist_entries` (4097 × 32 B on 64-bit) of pg_lzcompress.c. off: 0.
/// snappy and others: unknown (`None`).
pub fn context_bytes(spec: &Spec) -> Option<u64> {
    match spec.method {
        Method::None => Some(0),
        Method::Pglz => Some(8192 * 2 + 4097 * 32),
        Method::Lz4 => Some(if spec.effective_level().unwrap_or(1) <= 1 {
            16_416
        } else {
            262_200
        }),
        Method::Zstd => zstd_cctx_bytes(spec),
        _ => None,
    }
}

fn zstd_cctx_bytes(spec: &Spec) -> Option<u64> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let mut cctx = CCtx::try_create()?;
    cctx.set_parameter(CParameter::CompressionLevel(
        spec.effective_level().unwrap_or(3),
    ))
    .ok()?;
    let page: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    let mut out = vec![0u8; zstd::zstd_safe::compress_bound(page.len())];
    cctx.compress2(&mut out[..], &page).ok()?;
    Some(cctx.sizeof() as u64)
}

/// Version of the libzstd pgcompress links (bundled by the `zstd` crate).
pub fn zstd_version() -> String {
    zstd::zstd_safe::version_string().to_string()
}

/// Version of the liblz4 pgcompress links (bundled by the `lz4` crate).
pub fn lz4_version() -> String {
    let v = lz4::version();
    format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_deduplicated_and_stock_first() {
        let d = default_candidates();
        let names: Vec<String> = d.iter().map(|s| s.to_string()).collect();
        assert_eq!(&names[..4], ["none", "pglz", "lz4", "zstd"]);
        assert!(!names.contains(&"zstd:3".to_string()));
        assert!(names.contains(&"zstd:-7".to_string()));
        assert!(names.contains(&"lz4:12".to_string()));
        assert!(names.contains(&"snappy".to_string()));
        assert_eq!(d.iter().filter(|s| is_stock(s)).count(), 4);
    }

    #[test]
    fn stock_rules() {
        for (s, stock) in [
            ("off", true),
            ("zstd:3", true),
            ("zstd:level=3,long", false),
            ("zstd:4", false),
            ("lz4:1", true),
            ("lz4:2", false),
            ("snappy", false),
        ] {
            let spec: Spec = s.parse().expect("valid");
            assert_eq!(is_stock(&spec), stock, "{s}");
        }
    }

    #[test]
    fn context_sizes() {
        let z3 = context_bytes(&Spec::new(Method::Zstd)).expect("zstd known");
        let z19 = context_bytes(&"zstd:19".parse().expect("valid")).expect("zstd known");
        assert!(z3 > 10_000 && z19 >= z3, "{z3} {z19}");
        assert!(lz4_version().starts_with("1."));
        assert!(zstd_version().starts_with("1."));
    }
}
