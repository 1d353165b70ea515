//! Steps 5-6: vertical coordinates by isotonic regression (pava) and the
//! wrap of a tall layer into sub-columns, the one that fits the viewport best.

use super::*;

/// Coordinates for one wrap.
pub(super) struct Placed {
    pub(super) rect: Vec<Rect>,
    /// Per vertex: its layer, sub-column, and half the height of its cell.
    pub(super) layer: Vec<usize>,
    pub(super) col: Vec<usize>,
    pub(super) half: Vec<f64>,
    pub(super) columns: Vec<usize>,
    /// Per gap after layer l: per source vertex its lane x.
    pub(super) lane_x: std::collections::HashMap<usize, f64>,
    pub(super) node_gap: f64,
    pub(super) column_gap: f64,
    pub(super) width: f64,
    pub(super) height: f64,
}

impl Placed {
    pub(super) fn gutter_below(&self, v: usize) -> f64 {
        self.rect[v].cy() + self.half[v] + self.node_gap / 2.0
    }
    pub(super) fn gutter_above(&self, v: usize) -> f64 {
        self.rect[v].cy() - self.half[v] - self.node_gap / 2.0
    }
}

/// Isotonic regression (pool adjacent violators): non-decreasing `z`
/// closest to `t` in weighted least squares.
pub(super) fn pava(t: &[f64], w: &[f64]) -> Vec<f64> {
    // blocks: (weighted sum, weight, count)
    let mut blocks: Vec<(f64, f64, usize)> = Vec::with_capacity(t.len());
    for (i, &x) in t.iter().enumerate() {
        blocks.push((x * w[i], w[i], 1));
        while blocks.len() > 1 {
            let b = blocks[blocks.len() - 1];
            let a = blocks[blocks.len() - 2];
            if a.0 / a.1 > b.0 / b.1 {
                blocks.pop();
                let last = blocks.last_mut().expect("two blocks");
                *last = (a.0 + b.0, a.1 + b.1, a.2 + b.2);
            } else {
                break;
            }
        }
    }
    let mut out = Vec::with_capacity(t.len());
    for (s, wt, c) in blocks {
        out.extend(std::iter::repeat_n(s / wt, c));
    }
    out
}

pub(super) fn place(p: &Proper, order: &[Vec<usize>], rows_max: usize, opt: &Options) -> Placed {
    let nv = p.vx.len();
    let nl = order.len();
    let mut col = vec![0usize; nv];
    let mut row = vec![0usize; nv];
    let mut columns = vec![1usize; nl];
    let mut cell_w = vec![0f64; nl];
    // Wrapped layers: per row its height and its offset from the block's top.
    let mut row_h: Vec<Vec<f64>> = vec![Vec::new(); nl];
    let mut row_off: Vec<Vec<f64>> = vec![Vec::new(); nl];
    for (l, vs) in order.iter().enumerate() {
        let k = vs.len().div_ceil(rows_max.max(1)).max(1);
        columns[l] = k;
        // Row by row; a family (the children of one parent) that would
        // not fit in what is left of a row starts the next one.
        let (mut r, mut c) = (0usize, 0usize);
        for (i, &v) in vs.iter().enumerate() {
            let parent = p.up[v].first();
            if c > 0 && i > 0 && p.up[vs[i - 1]].first() != parent {
                let family = vs[i..]
                    .iter()
                    .take_while(|&&w| p.up[w].first() == parent)
                    .count();
                if c + family > k && family <= k {
                    r += 1;
                    c = 0;
                }
            }
            if c == k {
                r += 1;
                c = 0;
            }
            col[v] = c;
            row[v] = r;
            c += 1;
        }
        cell_w[l] = vs.iter().map(|&v| p.vx[v].w).fold(0.0, f64::max);
        let rows = vs.iter().map(|&v| row[v] + 1).max().unwrap_or(0);
        row_h[l] = vec![0.0; rows];
        for &v in vs {
            row_h[l][row[v]] = row_h[l][row[v]].max(p.vx[v].h);
        }
        let mut off = 0.0;
        for &rh in &row_h[l] {
            row_off[l].push(off);
            off += rh + opt.node_gap;
        }
    }
    // Heights: a dummy in a wrapped layer takes a whole cell.
    let h = |v: usize| -> f64 {
        let l = p.vx[v].layer;
        if columns[l] > 1 {
            row_h[l][row[v]]
        } else {
            p.vx[v].h
        }
    };
    // Vertical centres.
    let mut cy = vec![0f64; nv];
    for (l, vs) in order.iter().enumerate() {
        if columns[l] > 1 {
            for &v in vs {
                cy[v] = row_off[l][row[v]] + row_h[l][row[v]] / 2.0;
            }
        } else {
            let mut y = 0.0;
            for &v in vs {
                cy[v] = y + h(v) / 2.0;
                y += h(v) + opt.node_gap;
            }
        }
    }
    let place_layer = |l: usize, cy: &mut Vec<f64>, downward: bool| {
        let vs = &order[l];
        if vs.is_empty() {
            return;
        }
        let desire: Vec<Option<f64>> = vs
            .iter()
            .map(|&v| {
                let nb = if downward { &p.up[v] } else { &p.down[v] };
                (!nb.is_empty()).then(|| nb.iter().map(|&u| cy[u]).sum::<f64>() / nb.len() as f64)
            })
            .collect();
        if columns[l] > 1 {
            // The grid moves as one: its rows' centre to the mean desire.
            let (mut sum, mut cnt, mut own) = (0.0, 0.0, 0.0);
            for (i, &v) in vs.iter().enumerate() {
                if let Some(d) = desire[i] {
                    sum += d;
                    own += row_off[l][row[v]] + row_h[l][row[v]] / 2.0;
                    cnt += 1.0;
                }
            }
            if cnt > 0.0 {
                let top = (sum - own) / cnt;
                for &v in vs {
                    cy[v] = top + row_off[l][row[v]] + row_h[l][row[v]] / 2.0;
                }
            }
            return;
        }
        let mut t = Vec::with_capacity(vs.len());
        let mut w = Vec::with_capacity(vs.len());
        let mut s = 0.0;
        for (i, &v) in vs.iter().enumerate() {
            if i > 0 {
                s += (h(vs[i - 1]) + h(v)) / 2.0 + opt.node_gap;
            }
            match desire[i] {
                Some(d) => {
                    t.push(d - s);
                    w.push(if p.vx[v].dummy { 2.0 } else { 1.0 });
                }
                None => {
                    t.push(cy[v] - s);
                    w.push(0.05);
                }
            }
        }
        let z = pava(&t, &w);
        let mut s = 0.0;
        for (i, &v) in vs.iter().enumerate() {
            if i > 0 {
                s += (h(vs[i - 1]) + h(v)) / 2.0 + opt.node_gap;
            }
            cy[v] = z[i] + s;
        }
    };
    for _ in 0..4 {
        for l in 1..nl {
            place_layer(l, &mut cy, true);
        }
        for l in (0..nl.saturating_sub(1)).rev() {
            place_layer(l, &mut cy, false);
        }
    }
    for l in 1..nl {
        place_layer(l, &mut cy, true);
    }
    // Normalise to a top at 0.
    let top = (0..nv)
        .map(|v| cy[v] - h(v) / 2.0)
        .fold(f64::INFINITY, f64::min);
    for y in cy.iter_mut() {
        *y -= top;
    }
    // Lanes: per gap, one per source vertex, by interval colouring of the
    // vertical runs.
    let gutter_below = |v: usize| cy[v] + h(v) / 2.0 + opt.node_gap / 2.0;
    let gutter_above = |v: usize| cy[v] - h(v) / 2.0 - opt.node_gap / 2.0;
    let mut lane_of: std::collections::HashMap<usize, (usize, usize)> = Default::default();
    let mut lanes_in = vec![0usize; nl];
    for l in 0..nl.saturating_sub(1) {
        let mut runs: Vec<(f64, f64, usize)> = Vec::new();
        for &u in &order[l] {
            if p.down[u].is_empty() {
                continue;
            }
            let y0 = if col[u] + 1 < columns[l] {
                gutter_below(u)
            } else {
                cy[u]
            };
            let (mut lo, mut hi) = (y0, y0);
            for &v in &p.down[u] {
                let y1 = if col[v] > 0 { gutter_above(v) } else { cy[v] };
                lo = lo.min(y1);
                hi = hi.max(y1);
            }
            runs.push((lo, hi, u));
        }
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut ends: Vec<f64> = Vec::new();
        for (lo, hi, u) in runs {
            let lane = match ends.iter().position(|&e| e < lo - 3.0) {
                Some(i) => {
                    ends[i] = hi;
                    i
                }
                None => {
                    ends.push(hi);
                    ends.len() - 1
                }
            };
            lane_of.insert(u, (l, lane));
        }
        lanes_in[l] = ends.len();
    }
    // Horizontal positions.
    let mut block_left = vec![0f64; nl];
    let mut block_right = vec![0f64; nl];
    let mut gap_w = vec![0f64; nl];
    let mut x = 0.0;
    for l in 0..nl {
        block_left[l] = x;
        let k = columns[l] as f64;
        block_right[l] = x + k * cell_w[l] + (k - 1.0) * opt.column_gap;
        gap_w[l] = opt.layer_gap.max((lanes_in[l] + 1) as f64 * 7.0);
        x = block_right[l] + gap_w[l];
    }
    let width = block_right[nl - 1];
    let mut lane_x = std::collections::HashMap::new();
    for (&u, &(l, lane)) in &lane_of {
        let n = lanes_in[l] as f64;
        lane_x.insert(
            u,
            block_right[l] + gap_w[l] * (lane as f64 + 1.0) / (n + 1.0),
        );
    }
    let mut rect = vec![
        Rect {
            x: 0.0,
            y: 0.0,
            w: 0.0,
            h: 0.0
        };
        nv
    ];
    let mut height: f64 = 0.0;
    for (l, vs) in order.iter().enumerate() {
        for &v in vs {
            let left = block_left[l] + col[v] as f64 * (cell_w[l] + opt.column_gap);
            let (w, hh) = if p.vx[v].dummy {
                (cell_w[l], p.vx[v].h)
            } else {
                (p.vx[v].w, p.vx[v].h)
            };
            // real boxes keep their own height, centred in their cell
            rect[v] = Rect {
                x: left,
                y: cy[v] - hh / 2.0,
                w,
                h: hh,
            };
            height = height.max(cy[v] + h(v) / 2.0);
        }
    }
    Placed {
        rect,
        layer: (0..nv).map(|v| p.vx[v].layer).collect(),
        col,
        half: (0..nv).map(|v| h(v) / 2.0).collect(),
        columns,
        lane_x,
        node_gap: opt.node_gap,
        column_gap: opt.column_gap,
        width,
        height,
    }
}
