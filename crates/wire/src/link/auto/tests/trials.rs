//! What a trial measures: held directions, pauses of the source, results too close to call.

use super::*;

#[test]
fn a_held_direction_does_not_climb_on_link_pressure() {
    let mut p = compressing();
    while p.level() != Level::None {
        p.observe(&obs(&p, 1, 64 * 1024, 64 * 1024));
    }
    // The link is slow, but the data does not compress: stay verbatim until the probe.
    for _ in 0..1 {
        let mut o = pressure(&p, 90, 1, 0);
        o.eligible = 1 << 20;
        assert_eq!(p.observe(&o), None);
    }
    assert_eq!(p.level(), Level::None);
}

#[test]
fn a_pause_of_the_source_does_not_fail_a_trial() {
    // At lz4 on a slow link, settled: 2 MiB per interval.
    let mut p = verbatim();
    while !(p.level() == Level::Lz4 && p.trial.is_none()) {
        run(&mut p, slow_link, 1);
    }
    let mib = |p: &AutoPolicy, n: u64, write, read| interval(p, n << 20, write, 10, read);
    // The base after a kept step is measured afresh.
    for _ in 1..T.base_intervals {
        assert_eq!(switch(&mut p, |p| mib(p, 2, 80, 0)), None);
    }
    assert_eq!(
        switch(&mut p, |p| mib(p, 2, 80, 0)).as_deref(),
        Some("zstd:1")
    );
    assert_eq!(switch(&mut p, |p| mib(p, 3, 80, 0)), None, "skipped");
    assert_eq!(switch(&mut p, |p| mib(p, 3, 80, 0)), None);
    // psql between two tables: the source had bytes ready for a third of the interval, and a
    // third of the usual bytes went; in the next the link's queue, drained meanwhile, takes
    // more than the link carries. Neither is measured.
    assert_eq!(switch(&mut p, |p| mib(p, 1, 27, 66)), None);
    assert_eq!(switch(&mut p, |p| mib(p, 5, 60, 0)), None);
    assert!(p.trial.is_some(), "still measuring");
    assert_eq!(switch(&mut p, |p| mib(p, 3, 80, 0)), None);
    assert!(p.trial.is_none(), "judged");
    assert_eq!(p.level(), Level::Zstd(1), "kept");
    // A source that pauses in every interval leaves a trial judged on what it measured.
    let mut q = compressing();
    run(&mut q, slow_link, 1);
    assert_eq!(q.level(), Level::Zstd(3), "on trial");
    for _ in 0..2 * T.trial_max + T.trial_skip {
        q.observe(&mib(&q, 1, 60, 30));
    }
    assert!(q.trial.is_none(), "judged");
    assert_eq!(q.level(), Level::Zstd(1), "nothing measured, nothing kept");
}

#[test]
fn a_trial_too_close_to_call_measures_longer() {
    // compressing() ends at zstd:1 moving 3 MiB per interval; a link-bound interval starts a
    // trial of zstd:3.
    let trial = |gains: &[u64]| {
        let mut p = compressing();
        let mib3 = |p: &AutoPolicy, hundredths: u64| {
            interval(p, (3 << 20) * hundredths / 100, 80, ENCODE, 0)
        };
        assert_eq!(switch(&mut p, |p| mib3(p, 100)).as_deref(), Some("zstd:3"));
        assert_eq!(switch(&mut p, |p| mib3(p, 100)), None, "skipped");
        let mut measured = 0;
        for &g in gains {
            let o = mib3(&p, g);
            p.observe(&o);
            measured += 1;
            if p.trial.is_none() {
                break;
            }
        }
        (measured, p.level())
    };
    // 1% more: neither a gain nor a loss, so it goes on; a third interval 10% up carries it.
    assert_eq!(trial(&[101, 101, 110]), (3, Level::Zstd(3)));
    // 1% more for as long as it may measure: undone after T.trial_max.
    assert_eq!(trial(&[101; 10]), (T.trial_max, Level::Zstd(1)));
    // A clear loss is undone after T.trial_intervals.
    assert_eq!(trial(&[80; 10]), (T.trial_intervals, Level::Zstd(1)));
}
