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
    let g = Grid::new(p, order, rows_max, opt);
    let h = |v: usize| g.h(p, v);
    let cy = g.centres(p, order, opt);
    let (lane_of, lanes_in) = g.lanes(p, order, &cy, opt);
    // Horizontal positions.
    let mut block_left = vec![0f64; nl];
    let mut block_right = vec![0f64; nl];
    let mut gap_w = vec![0f64; nl];
    let mut x = 0.0;
    for l in 0..nl {
        block_left[l] = x;
        let k = g.columns[l] as f64;
        block_right[l] = x + k * g.cell_w[l] + (k - 1.0) * opt.column_gap;
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
            let left = block_left[l] + g.col[v] as f64 * (g.cell_w[l] + opt.column_gap);
            let (w, hh) = if p.vx[v].dummy {
                (g.cell_w[l], p.vx[v].h)
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
        half: (0..nv).map(|v| h(v) / 2.0).collect(),
        col: g.col,
        columns: g.columns,
        lane_x,
        node_gap: opt.node_gap,
        column_gap: opt.column_gap,
        width,
        height,
    }
}

/// The layers as grids: a layer taller than the viewport wraps into
/// sub-columns; per vertex its cell, per layer its cell width and, row by
/// row, its height and its offset from the block's top.
struct Grid {
    col: Vec<usize>,
    row: Vec<usize>,
    columns: Vec<usize>,
    cell_w: Vec<f64>,
    row_h: Vec<Vec<f64>>,
    row_off: Vec<Vec<f64>>,
}

impl Grid {
    fn new(p: &Proper, order: &[Vec<usize>], rows_max: usize, opt: &Options) -> Grid {
        let nv = p.vx.len();
        let nl = order.len();
        let mut g = Grid {
            col: vec![0usize; nv],
            row: vec![0usize; nv],
            columns: vec![1usize; nl],
            cell_w: vec![0f64; nl],
            row_h: vec![Vec::new(); nl],
            row_off: vec![Vec::new(); nl],
        };
        for (l, vs) in order.iter().enumerate() {
            let k = vs.len().div_ceil(rows_max.max(1)).max(1);
            g.columns[l] = k;
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
                g.col[v] = c;
                g.row[v] = r;
                c += 1;
            }
            g.cell_w[l] = vs.iter().map(|&v| p.vx[v].w).fold(0.0, f64::max);
            let rows = vs.iter().map(|&v| g.row[v] + 1).max().unwrap_or(0);
            g.row_h[l] = vec![0.0; rows];
            for &v in vs {
                g.row_h[l][g.row[v]] = g.row_h[l][g.row[v]].max(p.vx[v].h);
            }
            let mut off = 0.0;
            for &rh in &g.row_h[l] {
                g.row_off[l].push(off);
                off += rh + opt.node_gap;
            }
        }
        g
    }

    /// Heights: a dummy in a wrapped layer takes a whole cell.
    fn h(&self, p: &Proper, v: usize) -> f64 {
        let l = p.vx[v].layer;
        if self.columns[l] > 1 {
            self.row_h[l][self.row[v]]
        } else {
            p.vx[v].h
        }
    }

    /// The centre of `v`'s row within its wrapped layer's block.
    fn row_centre(&self, l: usize, v: usize) -> f64 {
        self.row_off[l][self.row[v]] + self.row_h[l][self.row[v]] / 2.0
    }

    /// Vertical centres: stacked, then swept down and up four times and
    /// down once more, then normalised to a top at 0.
    fn centres(&self, p: &Proper, order: &[Vec<usize>], opt: &Options) -> Vec<f64> {
        let nv = p.vx.len();
        let nl = order.len();
        let h = |v: usize| self.h(p, v);
        let mut cy = vec![0f64; nv];
        for (l, vs) in order.iter().enumerate() {
            if self.columns[l] > 1 {
                for &v in vs {
                    cy[v] = self.row_centre(l, v);
                }
            } else {
                let mut y = 0.0;
                for &v in vs {
                    cy[v] = y + h(v) / 2.0;
                    y += h(v) + opt.node_gap;
                }
            }
        }
        for _ in 0..4 {
            for (l, layer) in order.iter().enumerate().take(nl).skip(1) {
                self.sweep(p, layer, l, &mut cy, true, opt);
            }
            for l in (0..nl.saturating_sub(1)).rev() {
                self.sweep(p, &order[l], l, &mut cy, false, opt);
            }
        }
        for (l, layer) in order.iter().enumerate().take(nl).skip(1) {
            self.sweep(p, layer, l, &mut cy, true, opt);
        }
        // Normalise to a top at 0.
        let top = (0..nv)
            .map(|v| cy[v] - h(v) / 2.0)
            .fold(f64::INFINITY, f64::min);
        for y in cy.iter_mut() {
            *y -= top;
        }
        cy
    }

    /// One layer `vs` (layer `l`) placed towards its neighbours above
    /// (`downward`) or below: a wrapped layer moves as one, another by
    /// isotonic regression keeping its order and gaps.
    fn sweep(
        &self,
        p: &Proper,
        vs: &[usize],
        l: usize,
        cy: &mut [f64],
        downward: bool,
        opt: &Options,
    ) {
        if vs.is_empty() {
            return;
        }
        let h = |v: usize| self.h(p, v);
        let desire: Vec<Option<f64>> = vs
            .iter()
            .map(|&v| {
                let nb = if downward { &p.up[v] } else { &p.down[v] };
                (!nb.is_empty()).then(|| nb.iter().map(|&u| cy[u]).sum::<f64>() / nb.len() as f64)
            })
            .collect();
        if self.columns[l] > 1 {
            // The grid moves as one: its rows' centre to the mean desire.
            let (mut sum, mut cnt, mut own) = (0.0, 0.0, 0.0);
            for (i, &v) in vs.iter().enumerate() {
                if let Some(d) = desire[i] {
                    sum += d;
                    own += self.row_centre(l, v);
                    cnt += 1.0;
                }
            }
            if cnt > 0.0 {
                let top = (sum - own) / cnt;
                for &v in vs {
                    cy[v] = top + self.row_centre(l, v);
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
    }

    /// Lanes: per gap, one per source vertex, by interval colouring of the
    /// vertical runs; per source vertex its (gap, lane), per gap its lanes.
    #[allow(clippy::type_complexity)]
    fn lanes(
        &self,
        p: &Proper,
        order: &[Vec<usize>],
        cy: &[f64],
        opt: &Options,
    ) -> (std::collections::HashMap<usize, (usize, usize)>, Vec<usize>) {
        let nl = order.len();
        let h = |v: usize| self.h(p, v);
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
                let y0 = if self.col[u] + 1 < self.columns[l] {
                    gutter_below(u)
                } else {
                    cy[u]
                };
                let (mut lo, mut hi) = (y0, y0);
                for &v in &p.down[u] {
                    let y1 = if self.col[v] > 0 {
                        gutter_above(v)
                    } else {
                        cy[v]
                    };
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
        (lane_of, lanes_in)
    }
}
