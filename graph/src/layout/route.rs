//! Step 7: orthogonal edge routes through the gaps and gutters.

use super::*;

/// The orthogonal route of one proper edge `u -> v`.
pub(super) fn route(pl: &Placed, u: usize, v: usize) -> Vec<(f64, f64)> {
    let (ru, rv) = (pl.rect[u], pl.rect[v]);
    let lane = pl
        .lane_x
        .get(&u)
        .copied()
        .unwrap_or((ru.right() + rv.x) / 2.0);
    let mut pts = vec![(ru.right(), ru.cy())];
    let last_col = pl.col[u] + 1 >= pl.columns[pl.layer[u]];
    if last_col {
        pts.push((lane, ru.cy()));
    } else {
        let gx = ru.right() + pl.column_gap / 2.0;
        let gy = pl.gutter_below(u);
        pts.push((gx, ru.cy()));
        pts.push((gx, gy));
        pts.push((lane, gy));
    }
    if pl.col[v] == 0 {
        pts.push((lane, rv.cy()));
    } else {
        let gy = pl.gutter_above(v);
        let gx = rv.x - pl.column_gap / 2.0;
        pts.push((lane, gy));
        pts.push((gx, gy));
        pts.push((gx, rv.cy()));
    }
    pts.push((rv.x, rv.cy()));
    pts
}

/// Drop repeated and collinear points.
pub(super) fn simplify(pts: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(pts.len());
    for p in pts {
        if out
            .last()
            .is_some_and(|q| (q.0 - p.0).abs() < 0.01 && (q.1 - p.1).abs() < 0.01)
        {
            continue;
        }
        if out.len() >= 2 {
            let a = out[out.len() - 2];
            let b = out[out.len() - 1];
            let same_x = (a.0 - b.0).abs() < 0.01 && (b.0 - p.0).abs() < 0.01;
            let same_y = (a.1 - b.1).abs() < 0.01 && (b.1 - p.1).abs() < 0.01;
            if same_x || same_y {
                out.pop();
            }
        }
        out.push(p);
    }
    out
}
