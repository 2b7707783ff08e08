//! `pgcompress archive expire`: retention by base backups.

use std::process::ExitCode;
use std::time::SystemTime;

use ::archive::retention::Backup;
use ::archive::{Expired, Retain};
use serde_json::json;

use crate::args::archive::{Age, ExpireArgs, Point};
use crate::output::bytes;

pub fn run(a: ExpireArgs) -> anyhow::Result<ExitCode> {
    let repo = super::repo(&a.repo)?;
    let retain = match (a.keep, a.before) {
        (Some(n), _) => Retain::Newest(n),
        (None, Some(Point::Segment(s))) => Retain::BeforeSegment(s),
        (None, Some(Point::Lsn(lsn))) => Retain::BeforeLsn(lsn),
        (None, None) => anyhow::bail!("give --keep N or --before SEGMENT|LSN"),
    };
    let done = match repo.expire(&retain, a.min_age.duration, a.dry_run) {
        Ok(d) => d,
        Err(e) => return Ok(super::failure(&e)),
    };
    if a.json {
        outln!("{}", to_json(&repo.location(), &a.min_age, &done));
    } else {
        print_text(&repo.location(), &a.min_age, &done);
    }
    Ok(ExitCode::SUCCESS)
}

fn backup_json(b: &Backup) -> serde_json::Value {
    json!({
        "name": b.name,
        "timeline": b.tli,
        "start_segment": b.label.start_segment,
        "start_lsn": lsn(b.label.start_lsn),
        "stop_lsn": b.label.stop_lsn.map(lsn),
        "label": b.label.label,
        "start_time": b.label.start_time,
    })
}

fn lsn(l: u64) -> String {
    format!("{:X}/{:X}", l >> 32, l & 0xffff_ffff)
}

/// `t`, to the second, as PostgreSQL prints a `timestamptz` in UTC.
fn utc(t: SystemTime) -> String {
    let secs = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    let pg_secs = secs.saturating_sub(logical::PG_EPOCH_UNIX_SECS);
    logical::output::format_timestamp(pg_secs.saturating_mul(1_000_000))
}

fn to_json(location: &str, min_age: &Age, d: &Expired) -> serde_json::Value {
    json!({
        "repository": location,
        "dry_run": d.dry_run,
        "cutoff": d.plan.cutoff.map(|c| c.to_string()),
        "retention_cutoff": d.plan.retention_cutoff.map(|c| c.to_string()),
        "min_age": min_age.to_string(),
        "min_age_seconds": min_age.duration.as_secs(),
        "held_since": d.hold.since().map(utc),
        "held_from": d.plan.held_from.map(|c| c.to_string()),
        "held": d.plan.held,
        "held_files": d.plan.held.len(),
        "kept_backups": d.plan.kept.iter().map(backup_json).collect::<Vec<_>>(),
        "expired_backups": d.plan.expired.iter().map(backup_json).collect::<Vec<_>>(),
        "removed": d.removed.iter().map(|(n, s)| json!({"name": n, "stored": s})).collect::<Vec<_>>(),
        "removed_files": d.removed.len(),
        "removed_bytes": d.removed.iter().map(|(_, s)| s).sum::<u64>(),
        "remaining_files": d.remaining,
    })
}

fn print_text(location: &str, min_age: &Age, d: &Expired) {
    let verb = if d.dry_run { "would remove" } else { "removed" };
    for (name, _) in &d.removed {
        outln!("{verb} {name}");
    }
    let Some(cutoff) = d.plan.cutoff else {
        outln!("no base backup history file in {location}: nothing removed");
        return;
    };
    // Positions hold on every timeline; they are named as segments of the oldest kept
    // backup's timeline, the one a DBA reads in that backup's file names.
    let tli = d.plan.kept.first().map_or(1, |b| b.tli);
    if let (Some(since), false) = (d.hold.since(), d.plan.held.is_empty()) {
        let since = utc(since);
        let recent = match d.plan.held_from {
            Some(from) => format!(
                "files archived since {since} start at segment {}",
                from.segment_name(tli)
            ),
            None => format!("archived since {since}"),
        };
        outln!(
            "kept by --min-age {min_age}: {} files the retention alone would remove ({recent})",
            d.plan.held.len(),
        );
    }
    let kept: Vec<&str> = d.plan.kept.iter().map(|b| b.name.as_str()).collect();
    outln!(
        "{location}: kept {} backups ({}), expired {}; {verb} {} files ({}) before segment {} \
         (on every timeline); {} files {}",
        kept.len(),
        kept.join(", "),
        d.plan.expired.len(),
        d.removed.len(),
        bytes(d.removed.iter().map(|(_, s)| s).sum()),
        cutoff.segment_name(tli),
        d.remaining,
        if d.dry_run { "would remain" } else { "remain" },
    );
}
