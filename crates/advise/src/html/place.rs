//! Where the scatter chart's labels and whiskers go: boxes that collide with
//! nothing already drawn, so close points keep readable labels and an interval is
//! never drawn across another candidate's marker.

/// A box in SVG user units: left, top, right, bottom.
pub type Box2 = (f64, f64, f64, f64);

/// True when two boxes share some area (touching edges do not count).
pub fn overlaps(a: Box2, b: Box2) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Half the width of a whisker's caps.
pub const CAP: f64 = 4.0;

/// The box of a text of width `tw` and size `th` whose baseline starts at (`lx`, `ly`).
pub fn text_box(lx: f64, ly: f64, tw: f64, th: f64) -> Box2 {
    (lx, ly - th + 2.0, lx + tw, ly + 2.0)
}

/// Where the label (`tw` wide, `th` high) of the point at (`x`, `y`) goes: the
/// first free spot inside `area` among the usual eight around the point, then on
/// rings further out (a leader line then joins it to its point). Returns the
/// baseline start, or `None` when the plot has no free spot within 160 px.
pub fn label_spot(
    x: f64,
    y: f64,
    tw: f64,
    th: f64,
    area: Box2,
    taken: &[Box2],
) -> Option<(f64, f64)> {
    let near = [
        (x + 8.0, y + 4.0),
        (x - 8.0 - tw, y + 4.0),
        (x - tw / 2.0, y - 9.0),
        (x - tw / 2.0, y + 17.0),
        (x + 8.0, y - 8.0),
        (x + 8.0, y + 16.0),
        (x - 8.0 - tw, y - 8.0),
        (x - 8.0 - tw, y + 16.0),
    ];
    // Rings: the box's nearest corner or edge at distance r in one of 16 directions.
    let rings = (1..=12).flat_map(move |k| {
        let r = 10.0 + 12.5 * k as f64;
        (0..16).map(move |s| {
            let t = s as f64 * std::f64::consts::PI / 8.0;
            let (dx, dy) = (r * t.cos(), r * t.sin());
            let lx = if dx >= 0.0 { x + dx } else { x + dx - tw };
            // Vertically centred on the direction's point.
            (lx, y + dy + th / 2.0 - 2.0)
        })
    });
    let fits = |(lx, ly): (f64, f64)| {
        let b = text_box(lx, ly, tw, th);
        b.0 >= area.0
            && b.2 <= area.2
            && b.1 >= area.1
            && b.3 <= area.3
            && !taken.iter().any(|o| overlaps(b, *o))
    };
    near.into_iter().chain(rings).find(|&s| fits(s))
}

/// The x of the whisker of marker `own` (at `x`, from `ya` to `yb`): through the
/// point when that crosses no other marker, else beside it; `None` when every
/// place would cross one (the interval is then left to the table).
pub fn whisker_x(own: usize, x: f64, ya: f64, yb: f64, markers: &[Box2]) -> Option<f64> {
    [0.0, 10.0, -10.0, 16.0, -16.0]
        .into_iter()
        .map(|dx| x + dx)
        .find(|&wx| {
            let seg = (wx - CAP, ya.min(yb), wx + CAP, ya.max(yb));
            markers
                .iter()
                .enumerate()
                .all(|(j, m)| j == own || !overlaps(seg, *m))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_of_a_crowd_all_find_free_spots() {
        let area = (0.0, 0.0, 400.0, 300.0);
        let mut taken: Vec<Box2> = Vec::new();
        // Twenty points within a few pixels of each other.
        for i in 0..20 {
            let (x, y) = (200.0 + (i % 4) as f64, 150.0 + (i / 4) as f64);
            let (lx, ly) = label_spot(x, y, 42.0, 12.0, area, &taken).expect("a spot");
            let b = text_box(lx, ly, 42.0, 12.0);
            assert!(taken.iter().all(|o| !overlaps(b, *o)));
            taken.push(b);
        }
    }

    #[test]
    fn whiskers_step_aside_from_other_markers() {
        let markers = [(95.0, 45.0, 105.0, 55.0), (95.0, 95.0, 105.0, 105.0)];
        // Marker 0's interval reaches over marker 1: drawn beside it.
        assert_eq!(whisker_x(0, 100.0, 30.0, 120.0, &markers), Some(110.0));
        assert_eq!(whisker_x(0, 100.0, 30.0, 70.0, &markers), Some(100.0));
    }
}
