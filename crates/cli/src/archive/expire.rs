//! `pgcompress archive expire`: retention by base backups.

use std::process::ExitCode;

use ::archive::retention::Backup;
use ::archive::{Expired, Retain};
use serde_json::json;

use crate::args::archive::{ExpireArgs, Point};
use crate::output::bytes;

pub fn run(a: ExpireArgs) -> anyhow::Result<ExitCode> {
    let repo = super::repo(&a.repo)?;
    let retain = match (a.keep, a.before) {
        (Some(n), _) => Retain::Newest(n),
        (None, Some(Point::Segment(s))) => Retain::BeforeSegment(s),
        (None, Some(Point::Lsn(lsn))) => Retain::BeforeLsn(lsn),
        (None, None) => anyhow::bail!("give --keep N or --before SEGMENT|LSN"),
    };
    let done = match repo.expire(&retain, a.dry_run) {
        Ok(d) => d,
        Err(e) => return Ok(super::failure(&e)),
    };
    if a.json {
        outln!("{}", to_json(&repo.location(), &done));
    } else {
        print_text(&repo.location(), &done);
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

fn to_json(location: &str, d: &Expired) -> serde_json::Value {
    json!({
        "repository": location,
        "dry_run": d.dry_run,
        "cutoff": d.plan.cutoff.map(|c| c.to_string()),
        "kept_backups": d.plan.kept.iter().map(backup_json).collect::<Vec<_>>(),
        "expired_backups": d.plan.expired.iter().map(backup_json).collect::<Vec<_>>(),
        "removed": d.removed.iter().map(|(n, s)| json!({"name": n, "stored": s})).collect::<Vec<_>>(),
        "removed_files": d.removed.len(),
        "removed_bytes": d.removed.iter().map(|(_, s)| s).sum::<u64>(),
        "remaining_files": d.remaining,
    })
}

fn print_text(location: &str, d: &Expired) {
    let verb = if d.dry_run { "would remove" } else { "removed" };
    for (name, _) in &d.removed {
        outln!("{verb} {name}");
    }
    let Some(cutoff) = d.plan.cutoff else {
        outln!("no base backup history file in {location}: nothing removed");
        return;
    };
    let kept: Vec<&str> = d.plan.kept.iter().map(|b| b.name.as_str()).collect();
    outln!(
        "{location}: kept {} backups ({}), expired {}; {verb} {} files ({}) before segment position {cutoff}; {} files remain",
        kept.len(),
        kept.join(", "),
        d.plan.expired.len(),
        d.removed.len(),
        bytes(d.removed.iter().map(|(_, s)| s).sum()),
        d.remaining,
    );
}
