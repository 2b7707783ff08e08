//! `PGLZ_Strategy` (`src/include/common/pg_lzcompress.h`) and its two stock instances.

/// Tuning knobs of the pglz encoder; same six `int32` fields as PostgreSQL's `PGLZ_Strategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Strategy {
    /// Inputs shorter than this are not compressed.
    pub min_input_size: i32,
    /// Inputs longer than this are not compressed.
    pub max_input_size: i32,
    /// Minimum saving in percent (clamped to 0..=99) or the result is refused.
    pub min_comp_rate: i32,
    /// Give up if no match was found once this many output bytes were written.
    pub first_success_by: i32,
    /// Stop searching history once a match this long is found (clamped to 17..=273).
    pub match_size_good: i32,
    /// Percent by which `match_size_good` shrinks per candidate visited (clamped to 0..=100).
    pub match_size_drop: i32,
}

impl Strategy {
    /// `PGLZ_strategy_default` (`pg_lzcompress.c`), which `xloginsert.c` uses for WAL images.
    pub const DEFAULT: Strategy = Strategy {
        min_input_size: 32,
        max_input_size: i32::MAX,
        min_comp_rate: 25,
        first_success_by: 1024,
        match_size_good: 128,
        match_size_drop: 10,
    };

    /// `PGLZ_strategy_always` (`pg_lzcompress.c`): compress anything that saves a byte.
    pub const ALWAYS: Strategy = Strategy {
        min_input_size: 0,
        max_input_size: i32::MAX,
        min_comp_rate: 0,
        first_success_by: i32::MAX,
        match_size_good: 128,
        match_size_drop: 6,
    };
}

impl Default for Strategy {
    fn default() -> Self {
        Strategy::DEFAULT
    }
}
