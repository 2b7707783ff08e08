//! `pgcompress archive list` and `archive info`: two reports, each with a purpose. `list` is
//! one line per archived file with the essentials (size, stored, ratio, method), within 100
//! columns; `info` sums up the repository, or with a NAME details one file, as `key: value`
//! lines. `--json` keeps everything either way.

use std::collections::BTreeMap;
use std::process::ExitCode;

use ::archive::repo::Entry;
use ::archive::retention::{classify, FileKind};
use ::archive::{Header, Role};
use serde_json::json;

use super::{failure, ratio, repo};
use crate::args::archive::{InfoArgs, ListArgs};
use crate::output::bytes;

/// Width of the keys of `info`'s `key: value` lines.
const KEY_WIDTH: usize = 16;

fn file_json(e: &Entry) -> serde_json::Value {
    match &e.header {
        Ok(h) => json!({
            "name": e.name,
            "size": h.original_size,
            "stored": e.stored_size,
            "ratio": ratio(h.original_size, e.stored_size),
            "method": h.spec.to_string(),
            "transform": h.transform.name(),
            "valid_wal_bytes": h.transform.wal_info().map(|w| w.valid_len),
            "parts": h.parts.iter().map(|p| json!({
                "role": p.role.name(), "raw": p.raw_len, "stored": p.stored_len,
                "word_coded": p.words,
            })).collect::<Vec<_>>(),
            "sha256": h.sha256_hex(),
            "xxh3_128": h.xxh3_hex(),
        }),
        Err(err) => json!({ "name": e.name, "stored": e.stored_size, "error": err.to_string() }),
    }
}

/// `archive list`: a header and one aligned line per file.
pub fn list(a: ListArgs) -> anyhow::Result<ExitCode> {
    let repo = repo(&a.repo)?;
    let entries = match repo.list() {
        Ok(e) => e,
        Err(e) => return Ok(failure(&e)),
    };
    if a.json {
        let files: Vec<_> = entries.iter().map(file_json).collect();
        outln!(
            "{}",
            json!({ "repository": repo.location(), "files": files })
        );
        return Ok(ExitCode::SUCCESS);
    }
    let w = entries
        .iter()
        .map(|e| e.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    outln!(
        "{:<w$}  {:>10}  {:>10}  {:>7}  method",
        "name",
        "size",
        "stored",
        "ratio"
    );
    for e in &entries {
        match &e.header {
            Ok(h) => outln!(
                "{:<w$}  {:>10}  {:>10}  {:>7}  {}",
                e.name,
                bytes(h.original_size),
                bytes(e.stored_size),
                ratio_text(ratio(h.original_size, e.stored_size)),
                h.spec
            ),
            Err(err) => outln!(
                "{:<w$}  {:>10}  {:>10}  {:>7}  unreadable: {err}",
                e.name,
                "?",
                bytes(e.stored_size),
                "?"
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A ratio in at most 7 characters: two decimals, fewer as it grows (a zero-filled segment
/// stores a few hundred bytes for 16 MiB).
fn ratio_text(r: f64) -> String {
    match r {
        r if r < 100.0 => format!("{r:.2}x"),
        r if r < 10_000.0 => format!("{r:.1}x"),
        r => format!("{r:.0}x"),
    }
}

/// `archive info [NAME]`.
pub fn info(a: InfoArgs) -> anyhow::Result<ExitCode> {
    let repo = repo(&a.repo)?;
    let entries = match repo.list() {
        Ok(e) => e,
        Err(e) => return Ok(failure(&e)),
    };
    if let Some(name) = &a.name {
        let Some(e) = entries.iter().find(|e| &e.name == name) else {
            crate::errors::print(format_args!("{name} is not in {}", repo.location()));
            return Ok(ExitCode::from(1));
        };
        if a.json {
            outln!("{}", file_json(e));
        } else {
            one_file(e);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let t = Totals::of(&entries);
    if a.json {
        let files: Vec<_> = entries.iter().map(file_json).collect();
        let obj = json!({
            "repository": repo.location(),
            "files": files,
            "total": {
                "files": entries.len(),
                "unreadable": t.unreadable,
                "original_bytes": t.original,
                "stored_bytes": t.stored,
                "ratio": ratio(t.original, t.stored),
                "zero_tail_bytes": t.zero_tail,
            },
        });
        outln!("{obj}");
        return Ok(ExitCode::SUCCESS);
    }
    line("repository", &repo.location());
    let kinds: Vec<String> = t.kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let kinds = if kinds.is_empty() {
        String::new()
    } else {
        format!(" ({})", kinds.join(", "))
    };
    line("files", &format!("{}{kinds}", entries.len()));
    if t.unreadable > 0 {
        line("unreadable", &t.unreadable.to_string());
    }
    line("original", &bytes(t.original));
    line(
        "stored",
        &format!(
            "{} ({:.2}x smaller)",
            bytes(t.stored),
            ratio(t.original, t.stored)
        ),
    );
    line(
        "zero tails",
        &format!("{} kept as lengths", bytes(t.zero_tail)),
    );
    let methods: Vec<String> = t
        .methods
        .iter()
        .map(|(m, n)| format!("{m} ({n} files)"))
        .collect();
    if !methods.is_empty() {
        line("methods", &methods.join(", "));
    }
    if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
        line("first", &first.name);
        line("last", &last.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// What `info` sums up over a repository.
#[derive(Default)]
struct Totals {
    original: u64,
    stored: u64,
    zero_tail: u64,
    unreadable: usize,
    kinds: BTreeMap<&'static str, usize>,
    methods: BTreeMap<String, usize>,
}

impl Totals {
    fn of(entries: &[Entry]) -> Totals {
        let mut t = Totals::default();
        for e in entries {
            let kind = match classify(&e.name) {
                FileKind::Segment { .. } => "WAL segments",
                FileKind::Partial { .. } => "partial segments",
                FileKind::BackupHistory { .. } => "backup history",
                FileKind::TimelineHistory { .. } => "timeline history",
                _ => "other",
            };
            *t.kinds.entry(kind).or_default() += 1;
            t.stored += e.stored_size;
            match &e.header {
                Ok(h) => {
                    t.original += h.original_size;
                    t.zero_tail += zero_tail(h);
                    *t.methods.entry(h.spec.to_string()).or_default() += 1;
                }
                Err(_) => t.unreadable += 1,
            }
        }
        t
    }
}

fn zero_tail(h: &Header) -> u64 {
    h.parts
        .iter()
        .filter(|p| p.role == Role::ZeroTail)
        .map(|p| p.raw_len)
        .sum()
}

/// One `key: value` line, the values aligned.
fn line(key: &str, value: &str) {
    outln!("{:<KEY_WIDTH$}{value}", format!("{key}:"));
}

/// `info NAME`: one file's container, key by key, its parts one per line.
fn one_file(e: &Entry) {
    line("name", &e.name);
    let h = match &e.header {
        Ok(h) => h,
        Err(err) => {
            line("stored", &bytes(e.stored_size));
            line("unreadable", &err.to_string());
            return;
        }
    };
    line(
        "size",
        &format!("{} ({} bytes)", bytes(h.original_size), h.original_size),
    );
    line(
        "stored",
        &format!(
            "{} ({} bytes, {:.2}x smaller)",
            bytes(e.stored_size),
            e.stored_size,
            ratio(h.original_size, e.stored_size)
        ),
    );
    line("method", &h.spec.to_string());
    line("layout", h.transform.name());
    if let Some(w) = h.transform.wal_info() {
        line("valid WAL", &format!("{} bytes", w.valid_len));
    }
    line("sha256", &h.sha256_hex());
    line("xxh3-128", &h.xxh3_hex());
    if h.parts.is_empty() {
        return;
    }
    outln!("parts:");
    for p in &h.parts {
        outln!(
            "  {:<20} {:>10} -> {:>10}{}",
            p.role.name(),
            bytes(p.raw_len),
            bytes(p.stored_len),
            if p.words { "  word-coded" } else { "" }
        );
    }
}
