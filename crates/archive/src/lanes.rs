//! Work spread over two threads: packing and unpacking a segment are a handful of independent
//! jobs (one per stream) of very different sizes, and archive_command runs one file at a time,
//! so the second core is otherwise idle.

/// Below this much work in total, one thread does everything (a thread costs more than it
/// saves on a history file).
const MIN_PARALLEL_WEIGHT: usize = 256 << 10;

/// Runs `work` on every item and returns the results in item order. Items go, heaviest first
/// by `weight`, to whichever of two threads has less work so far; each thread makes its own
/// state with `init` (a compressor, a decompressor). A thread stops at its first failure;
/// the error returned is that of the lowest item among those that failed.
pub(crate) fn two_lanes<T, S, R, E>(
    items: Vec<T>,
    weight: impl Fn(&T) -> usize,
    init: impl Fn() -> Result<S, E> + Sync,
    work: impl Fn(&mut S, T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E>
where
    T: Send,
    R: Send,
    E: Send,
{
    let total: usize = items.iter().map(&weight).sum();
    let n = items.len();
    if n < 2 || total < MIN_PARALLEL_WEIGHT {
        let mut state = init()?;
        return items
            .into_iter()
            .map(|item| work(&mut state, item))
            .collect();
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(weight(&items[i])));
    let mut load = [0usize; 2];
    let mut lane_of = vec![0usize; n];
    for i in order.iter().copied() {
        let lane = usize::from(load[0] > load[1]);
        load[lane] += weight(&items[i]);
        lane_of[i] = lane;
    }
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    let mut lanes: [Vec<(usize, T)>; 2] = Default::default();
    for i in order {
        if let Some(item) = slots[i].take() {
            lanes[lane_of[i]].push((i, item));
        }
    }
    let [mine, theirs] = lanes;
    // Each lane stops at its first failure; the caller gets the failure of the lowest item.
    let run = |jobs: Vec<(usize, T)>| -> Vec<(usize, Result<R, E>)> {
        let mut out = Vec::with_capacity(jobs.len());
        let first = jobs.first().map_or(0, |j| j.0);
        let mut state = match init() {
            Ok(s) => s,
            Err(e) => {
                out.push((first, Err(e)));
                return out;
            }
        };
        for (i, item) in jobs {
            let r = work(&mut state, item);
            let failed = r.is_err();
            out.push((i, r));
            if failed {
                break;
            }
        }
        out
    };
    let (a, b) = std::thread::scope(|scope| {
        let other = scope.spawn(|| run(theirs));
        let mine = run(mine);
        (mine, other.join().expect("worker thread panicked"))
    });
    let mut results: Vec<Option<Result<R, E>>> = (0..n).map(|_| None).collect();
    for (i, r) in a.into_iter().chain(b) {
        results[i] = Some(r);
    }
    let mut out = Vec::with_capacity(n);
    let mut missing = false;
    for r in results {
        match r {
            Some(Ok(r)) => out.push(r),
            Some(Err(e)) => return Err(e),
            // Skipped after a failure in the same lane; that failure comes later in item
            // order and is returned below.
            None => missing = true,
        }
    }
    assert!(!missing, "a lane skipped work without failing");
    Ok(out)
}

/// Cuts the largest inputs so that two lanes get about the same number of bytes: a segment
/// of pgbench WAL is mostly page images, one stream, which would otherwise keep one core
/// busy while the other waits. Each input is `(tag, bytes)`; a cut input becomes consecutive
/// pieces with the same tag, in order. At most `max_extra` pieces are added, and no piece
/// is smaller than `min_piece` bytes.
pub(crate) fn balance<'a, K: Copy>(
    inputs: &[(K, &'a [u8])],
    max_extra: usize,
    min_piece: usize,
) -> Vec<(K, &'a [u8])> {
    let mut out: Vec<(K, &'a [u8])> = inputs.to_vec();
    for _ in 0..max_extra {
        // Simulate the lanes as `two_lanes` fills them.
        let mut order: Vec<usize> = (0..out.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(out[i].1.len()));
        let mut load = [0usize; 2];
        let mut largest: [Option<usize>; 2] = [None, None];
        for i in order {
            let lane = usize::from(load[0] > load[1]);
            load[lane] += out[i].1.len();
            largest[lane].get_or_insert(i);
        }
        let heavy = usize::from(load[1] > load[0]);
        let excess = (load[heavy] - load[1 - heavy]) / 2;
        let Some(big) = largest[heavy] else { break };
        if excess < min_piece || out[big].1.len() - excess < min_piece {
            break;
        }
        let (tag, bytes) = out[big];
        let cut = bytes.len() - excess;
        out[big] = (tag, &bytes[..cut]);
        out.insert(big + 1, (tag, &bytes[cut..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_and_a_failure_is_returned() {
        let items: Vec<usize> = (0..40).map(|i| (i * 7919) % 1000 * 1000).collect();
        let out = two_lanes(
            items.clone(),
            |&w| w,
            || Ok::<_, String>(()),
            |_, w| Ok(w + 1),
        )
        .expect("no failure");
        assert_eq!(out, items.iter().map(|w| w + 1).collect::<Vec<_>>());
        let err = two_lanes(
            items,
            |&w| w,
            || Ok::<_, usize>(()),
            |_, w| if w % 3 == 0 { Err(w) } else { Ok(w) },
        )
        .expect_err("fails");
        assert_eq!(err % 3, 0, "the error is one an item returned");
    }

    #[test]
    fn the_lowest_failing_item_is_reported_whichever_lane_fails_first() {
        use std::sync::Mutex;
        use std::time::Duration;
        // Eight equal items: heaviest first, ties in item order, each to the lane with less
        // work, so items 0, 2, 4, 6 go to one lane and 1, 3, 5, 7 to the other. Items 3 and
        // 4 fail, one in each lane; item 3, the lowest, fails last in time (it sleeps), so
        // a "first failure wins" join would report 4.
        let items: Vec<(usize, usize)> = (0..8).map(|i| (i, 100_000)).collect();
        for round in 0..10u64 {
            let failed_on = Mutex::new(Vec::new());
            let err = two_lanes(
                items.clone(),
                |&(_, w)| w,
                || Ok::<_, usize>(()),
                |_, (i, _)| {
                    if i == 3 {
                        std::thread::sleep(Duration::from_millis(20 + round));
                    }
                    if i == 3 || i == 4 {
                        failed_on
                            .lock()
                            .expect("lock")
                            .push((i, std::thread::current().id()));
                        return Err(i);
                    }
                    Ok(i)
                },
            )
            .expect_err("items 3 and 4 fail");
            assert_eq!(err, 3, "round {round}: the lowest failing item is reported");
            let mut failed = failed_on.into_inner().expect("lock");
            failed.sort_by_key(|f| f.0);
            assert_eq!(
                failed.iter().map(|f| f.0).collect::<Vec<_>>(),
                [3, 4],
                "both failing items ran"
            );
            assert_ne!(failed[0].1, failed[1].1, "they ran in different lanes");
        }
    }

    #[test]
    fn balance_cuts_the_big_input_and_keeps_every_byte_in_order() {
        let big: Vec<u8> = (0..10_000_000u32).map(|i| (i % 251) as u8).collect();
        let small = vec![7u8; 1_000_000];
        let inputs = [(0u8, big.as_slice()), (1u8, small.as_slice())];
        let out = balance(&inputs, 4, 256 << 10);
        assert!(out.len() > 2, "the big input was cut");
        for tag in [0u8, 1] {
            let joined: Vec<u8> = out
                .iter()
                .filter(|(t, _)| *t == tag)
                .flat_map(|(_, b)| b.iter().copied())
                .collect();
            assert_eq!(joined, inputs[usize::from(tag)].1);
        }
        let tags: Vec<u8> = out.iter().map(|(t, _)| *t).collect();
        assert!(
            tags.windows(2).all(|w| w[0] <= w[1]),
            "pieces stay in order"
        );
        // The lanes are now within a piece's worth of each other.
        let mut load = [0usize; 2];
        let mut sizes: Vec<usize> = out.iter().map(|(_, b)| b.len()).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        for s in sizes {
            let lane = usize::from(load[0] > load[1]);
            load[lane] += s;
        }
        assert!(load[0].abs_diff(load[1]) < 600_000, "{load:?}");
        // Small inputs are left alone.
        assert_eq!(balance(&[(0u8, &small[..1000])], 4, 256 << 10).len(), 1);
    }
}
