//! A layered drawing of a directed graph, left to right (Sugiyama):
//!
//! 1. cycles are broken by reversing the back edges of a depth-first search;
//! 2. layers by longest path from the sources (a source sits just before its
//!    first dependent);
//! 3. an edge that spans several layers gets a dummy vertex per layer;
//! 4. the order within layers: depth-first first, then barycenter sweeps
//!    down and up, keeping the order with the fewest crossings, then
//!    adjacent swaps while they remove crossings;
//! 5. vertical coordinates: each layer is placed as close as it can to the
//!    mean of its neighbours (isotonic regression under the spacing
//!    constraints), alternating down and up;
//! 6. a layer taller than the viewport allows is wrapped into sub-columns
//!    (row by row, so that siblings stay next to their parent): the wrap
//!    that gives the largest scale for the viewport wins;
//! 7. edges are orthogonal routes through the gaps: each source has its own
//!    lane in the gap after its layer, and a wrapped layer is entered and
//!    left through the gutters between its rows and sub-columns, so that no
//!    route crosses a box.
//!
//! No crate in the ecosystem does 6 and 7 with boxes of given sizes; the
//! whole is small enough to keep here.

/// A box: top-left corner and size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    pub fn right(&self) -> f64 {
        self.x + self.w
    }
    pub fn bottom(&self) -> f64 {
        self.y + self.h
    }
    pub fn cy(&self) -> f64 {
        self.y + self.h / 2.0
    }
    /// Do two boxes overlap (touching edges do not count)?
    pub fn overlaps(&self, o: &Rect) -> bool {
        self.x < o.right() && o.x < self.right() && self.y < o.bottom() && o.y < self.bottom()
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    /// Horizontal gap between layers (it holds the edge lanes).
    pub layer_gap: f64,
    /// Vertical gap between the boxes of a layer.
    pub node_gap: f64,
    /// Gap between the sub-columns of a wrapped layer.
    pub column_gap: f64,
    /// The viewport (width, height) wide layers are wrapped for; `None`
    /// never wraps.
    pub fit: Option<(f64, f64)>,
    /// Barycenter sweeps (each one down and one up).
    pub sweeps: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            layer_gap: 46.0,
            node_gap: 12.0,
            column_gap: 22.0,
            fit: None,
            sweeps: 12,
        }
    }
}

/// The drawing.
#[derive(Clone, Debug)]
pub struct Layout {
    /// One box per input node.
    pub boxes: Vec<Rect>,
    /// The layer of each input node.
    pub layers: Vec<usize>,
    /// Sub-columns of each layer (1 when not wrapped).
    pub columns: Vec<usize>,
    /// One orthogonal route per input edge, from the source's right side to
    /// the target's left side (empty for a self-loop or a bad index).
    pub routes: Vec<Vec<(f64, f64)>>,
    pub width: f64,
    pub height: f64,
    /// Edge crossings between adjacent layers in the final order.
    pub crossings: usize,
}

/// A vertex of the proper graph: an input node or a dummy.
#[derive(Clone, Debug)]
struct Vx {
    layer: usize,
    w: f64,
    h: f64,
    dummy: bool,
}

struct Proper {
    vx: Vec<Vx>,
    /// Per vertex: neighbours in the layer above (sources) and below.
    up: Vec<Vec<usize>>,
    down: Vec<Vec<usize>>,
    /// Per input edge: the vertex chain from source to target, and whether
    /// it was reversed to break a cycle.
    chains: Vec<(Vec<usize>, bool)>,
    nlayers: usize,
}

/// Lay out `sizes.len()` boxes of the given (width, height) joined by
/// `edges` (from, to).
pub fn layout(sizes: &[(f64, f64)], edges: &[(usize, usize)], opt: &Options) -> Layout {
    let n = sizes.len();
    if n == 0 {
        return Layout {
            boxes: Vec::new(),
            layers: Vec::new(),
            columns: Vec::new(),
            routes: vec![Vec::new(); edges.len()],
            width: 0.0,
            height: 0.0,
            crossings: 0,
        };
    }
    let p = proper(sizes, edges);
    let mut order = initial_order(&p, n);
    order_sweeps(&p, &mut order, opt.sweeps);
    transpose(&p, &mut order);
    let crossings = total_crossings(&p, &order);

    let maxn = order.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let mut candidates = vec![maxn];
    if opt.fit.is_some() && maxn > 3 {
        for k in 2..=8usize {
            let r = maxn.div_ceil(k);
            if r >= 2 && !candidates.contains(&r) {
                candidates.push(r);
            }
        }
    }
    let mut best: Option<(f64, usize, Placed)> = None;
    for &rows in &candidates {
        let placed = place(&p, &order, rows, opt);
        let score = match opt.fit {
            Some((vw, vh)) => (vw / placed.width.max(1.0)).min(vh / placed.height.max(1.0)),
            None => 1.0,
        };
        let cols: usize = placed.columns.iter().sum();
        let better = match &best {
            None => true,
            // fewer sub-columns unless the scale is clearly larger
            Some((s, c, _)) => score > s * 1.03 || (score > s * 0.97 && cols < *c),
        };
        if better {
            best = Some((score, cols, placed));
        }
    }
    let placed = best.expect("one candidate").2;
    let routes = p
        .chains
        .iter()
        .map(|(chain, reversed)| {
            let mut pts: Vec<(f64, f64)> = Vec::new();
            for w in chain.windows(2) {
                let seg = route(&placed, w[0], w[1]);
                if pts.is_empty() {
                    pts.extend(seg);
                } else {
                    pts.extend(seg.into_iter().skip(1));
                }
            }
            let mut pts = simplify(pts);
            if *reversed {
                pts.reverse();
            }
            pts
        })
        .collect();
    Layout {
        boxes: placed.rect[..n].to_vec(),
        layers: p.vx[..n].iter().map(|v| v.layer).collect(),
        columns: placed.columns.clone(),
        routes,
        width: placed.width,
        height: placed.height,
        crossings,
    }
}

/// Break cycles, assign layers, add dummies.
fn proper(sizes: &[(f64, f64)], edges: &[(usize, usize)]) -> Proper {
    let n = sizes.len();
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        if a < n && b < n && a != b {
            out[a].push(b);
        }
    }
    // Back edges of an iterative depth-first search are reversed.
    let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    let mut back: std::collections::HashSet<(usize, usize)> = Default::default();
    for s in 0..n {
        if state[s] != 0 {
            continue;
        }
        let mut stack = vec![(s, 0usize)];
        state[s] = 1;
        while let Some(&mut (v, ref mut i)) = stack.last_mut() {
            if *i < out[v].len() {
                let w = out[v][*i];
                *i += 1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => {
                        back.insert((v, w));
                    }
                    _ => {}
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
    }
    let oriented: Vec<Option<(usize, usize, bool)>> = edges
        .iter()
        .map(|&(a, b)| {
            if a >= n || b >= n || a == b {
                None
            } else if back.contains(&(a, b)) {
                Some((b, a, true))
            } else {
                Some((a, b, false))
            }
        })
        .collect();
    // Longest path layering (Kahn).
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for &(a, b, _) in oriented.iter().flatten() {
        succ[a].push(b);
        indeg[b] += 1;
    }
    let mut layer = vec![0usize; n];
    let mut queue: std::collections::VecDeque<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut topo = Vec::with_capacity(n);
    let mut deg = indeg.clone();
    while let Some(v) = queue.pop_front() {
        topo.push(v);
        for &w in &succ[v] {
            layer[w] = layer[w].max(layer[v] + 1);
            deg[w] -= 1;
            if deg[w] == 0 {
                queue.push_back(w);
            }
        }
    }
    // A source sits just before its first dependent.
    for &v in topo.iter().rev() {
        if indeg[v] == 0 {
            if let Some(m) = succ[v].iter().map(|&w| layer[w]).min() {
                layer[v] = m.saturating_sub(1);
            }
        }
    }
    let nlayers = layer.iter().copied().max().unwrap_or(0) + 1;
    let mut vx: Vec<Vx> = (0..n)
        .map(|i| Vx {
            layer: layer[i],
            w: sizes[i].0,
            h: sizes[i].1,
            dummy: false,
        })
        .collect();
    let mut up: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut down: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut chains = Vec::with_capacity(edges.len());
    for o in &oriented {
        let Some((a, b, rev)) = *o else {
            chains.push((Vec::new(), false));
            continue;
        };
        let mut chain = vec![a];
        let mut prev = a;
        for l in layer[a] + 1..layer[b] {
            let d = vx.len();
            vx.push(Vx {
                layer: l,
                w: 0.0,
                h: 2.0,
                dummy: true,
            });
            up.push(Vec::new());
            down.push(Vec::new());
            down[prev].push(d);
            up[d].push(prev);
            chain.push(d);
            prev = d;
        }
        down[prev].push(b);
        up[b].push(prev);
        chain.push(b);
        chains.push((chain, rev));
    }
    Proper {
        vx,
        up,
        down,
        chains,
        nlayers,
    }
}

/// Layers in depth-first order from the sources (input order), so that a
/// tree starts with its subtrees contiguous.
fn initial_order(p: &Proper, n: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); p.nlayers];
    let mut seen = vec![false; p.vx.len()];
    let starts: Vec<usize> = (0..n)
        .filter(|&v| p.up[v].is_empty())
        .chain(0..p.vx.len())
        .collect();
    for s in starts {
        if seen[s] {
            continue;
        }
        let mut stack = vec![s];
        while let Some(v) = stack.pop() {
            if seen[v] {
                continue;
            }
            seen[v] = true;
            order[p.vx[v].layer].push(v);
            for &w in p.down[v].iter().rev() {
                if !seen[w] {
                    stack.push(w);
                }
            }
        }
    }
    order
}

fn positions(p: &Proper, order: &[Vec<usize>]) -> Vec<usize> {
    let mut pos = vec![0usize; p.vx.len()];
    for l in order {
        for (i, &v) in l.iter().enumerate() {
            pos[v] = i;
        }
    }
    pos
}

/// Crossings between layer `l` and `l + 1` (inversions, with a Fenwick tree).
fn crossings_between(p: &Proper, order: &[Vec<usize>], pos: &[usize], l: usize) -> usize {
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for &v in &order[l] {
        for &w in &p.down[v] {
            pairs.push((pos[v], pos[w]));
        }
    }
    pairs.sort_unstable();
    let m = order.get(l + 1).map_or(0, Vec::len);
    let mut tree = vec![0usize; m + 1];
    let mut count = 0;
    for (i, &(_, b)) in pairs.iter().enumerate() {
        // entries so far with a target position greater than b
        let mut le = 0;
        let mut j = b + 1;
        while j > 0 {
            le += tree[j];
            j &= j - 1;
        }
        count += i - le;
        let mut j = b + 1;
        while j <= m {
            tree[j] += 1;
            j += j & j.wrapping_neg();
        }
    }
    count
}

fn total_crossings(p: &Proper, order: &[Vec<usize>]) -> usize {
    let pos = positions(p, order);
    (0..order.len().saturating_sub(1))
        .map(|l| crossings_between(p, order, &pos, l))
        .sum()
}

/// Barycenter sweeps; the order with the fewest crossings is kept.
fn order_sweeps(p: &Proper, order: &mut Vec<Vec<usize>>, sweeps: usize) {
    let mut best = order.clone();
    let mut best_c = total_crossings(p, order);
    for _ in 0..sweeps {
        if best_c == 0 {
            break;
        }
        for downward in [true, false] {
            let mut pos = positions(p, order);
            let layers: Vec<usize> = if downward {
                (1..order.len()).collect()
            } else {
                (0..order.len().saturating_sub(1)).rev().collect()
            };
            for l in layers {
                let mut keyed: Vec<(f64, usize, usize)> = order[l]
                    .iter()
                    .map(|&v| {
                        let nb = if downward { &p.up[v] } else { &p.down[v] };
                        let key = if nb.is_empty() {
                            pos[v] as f64
                        } else {
                            nb.iter().map(|&u| pos[u] as f64).sum::<f64>() / nb.len() as f64
                        };
                        (key, pos[v], v)
                    })
                    .collect();
                keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                order[l] = keyed.into_iter().map(|k| k.2).collect();
                for (i, &v) in order[l].iter().enumerate() {
                    pos[v] = i;
                }
            }
            let c = total_crossings(p, order);
            if c < best_c {
                best_c = c;
                best = order.clone();
            }
        }
    }
    *order = best;
}

/// Crossings between the edges of `u` and `v` (u placed before v) on one
/// side, given the other side's positions.
fn pair_crossings(nu: &[usize], nv: &[usize], pos: &[usize]) -> usize {
    let mut c = 0;
    for &a in nu {
        for &b in nv {
            if pos[a] > pos[b] {
                c += 1;
            }
        }
    }
    c
}

/// Swap adjacent vertices while it removes crossings (bounded passes).
fn transpose(p: &Proper, order: &mut [Vec<usize>]) {
    // bounded: a few passes, and only on graphs of a reasonable size
    if p.vx.len() > 20_000 {
        return;
    }
    let mut pos = positions(p, order);
    for _ in 0..6 {
        let mut improved = false;
        for layer in order.iter_mut() {
            for i in 0..layer.len().saturating_sub(1) {
                let (u, v) = (layer[i], layer[i + 1]);
                let now = pair_crossings(&p.up[u], &p.up[v], &pos)
                    + pair_crossings(&p.down[u], &p.down[v], &pos);
                let swapped = pair_crossings(&p.up[v], &p.up[u], &pos)
                    + pair_crossings(&p.down[v], &p.down[u], &pos);
                if swapped < now {
                    layer.swap(i, i + 1);
                    pos[u] = i + 1;
                    pos[v] = i;
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
}

/// Coordinates for one wrap.
struct Placed {
    rect: Vec<Rect>,
    /// Per vertex: its layer, sub-column, and half the height of its cell.
    layer: Vec<usize>,
    col: Vec<usize>,
    half: Vec<f64>,
    columns: Vec<usize>,
    /// Per gap after layer l: per source vertex its lane x.
    lane_x: std::collections::HashMap<usize, f64>,
    node_gap: f64,
    column_gap: f64,
    width: f64,
    height: f64,
}

impl Placed {
    fn gutter_below(&self, v: usize) -> f64 {
        self.rect[v].cy() + self.half[v] + self.node_gap / 2.0
    }
    fn gutter_above(&self, v: usize) -> f64 {
        self.rect[v].cy() - self.half[v] - self.node_gap / 2.0
    }
}

/// Isotonic regression (pool adjacent violators): non-decreasing `z`
/// closest to `t` in weighted least squares.
fn pava(t: &[f64], w: &[f64]) -> Vec<f64> {
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

fn place(p: &Proper, order: &[Vec<usize>], rows_max: usize, opt: &Options) -> Placed {
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

/// The orthogonal route of one proper edge `u -> v`.
fn route(pl: &Placed, u: usize, v: usize) -> Vec<(f64, f64)> {
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
fn simplify(pts: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn boxes(n: usize) -> Vec<(f64, f64)> {
        vec![(100.0, 40.0); n]
    }

    fn no_overlaps(l: &Layout) {
        for i in 0..l.boxes.len() {
            for j in i + 1..l.boxes.len() {
                assert!(
                    !l.boxes[i].overlaps(&l.boxes[j]),
                    "boxes {i} {:?} and {j} {:?} overlap",
                    l.boxes[i],
                    l.boxes[j]
                );
            }
        }
    }

    #[test]
    fn layers_respect_edges_and_boxes_do_not_overlap() {
        // a diamond with a long edge and a tail
        let edges = [(0, 1), (0, 2), (1, 3), (2, 3), (0, 3), (3, 4), (5, 4)];
        let l = layout(&boxes(6), &edges, &Options::default());
        for &(a, b) in &edges {
            assert!(l.layers[a] < l.layers[b], "{a} -> {b}: {:?}", l.layers);
            assert!(l.boxes[a].right() < l.boxes[b].x);
        }
        // the source 5 sits just before its dependent
        assert_eq!(l.layers[5] + 1, l.layers[4]);
        no_overlaps(&l);
        // every route starts at its source and ends at its target
        for (i, &(a, b)) in edges.iter().enumerate() {
            let r = &l.routes[i];
            assert_eq!(r[0], (l.boxes[a].right(), l.boxes[a].cy()));
            assert_eq!(*r.last().unwrap(), (l.boxes[b].x, l.boxes[b].cy()));
            // orthogonal
            for w in r.windows(2) {
                assert!(
                    (w[0].0 - w[1].0).abs() < 0.01 || (w[0].1 - w[1].1).abs() < 0.01,
                    "{r:?}"
                );
            }
        }
    }

    #[test]
    fn crossings_are_removed_on_a_known_case() {
        // 0:a 1:b 2:c above 3:x 4:y 5:z, a -> z, b -> y, c -> x: drawn in
        // that order every pair crosses (3); reversed, none does.
        let edges = [(0, 5), (1, 4), (2, 3)];
        let p = proper(&boxes(6), &edges);
        let mut order = vec![vec![0, 1, 2], vec![3, 4, 5]];
        assert_eq!(total_crossings(&p, &order), 3);
        order_sweeps(&p, &mut order, 4);
        assert_eq!(total_crossings(&p, &order), 0);
        // and the adjacent swaps alone untangle a single crossing
        let mut order = vec![vec![0, 1, 2], vec![5, 3, 4]];
        let p2 = proper(&boxes(6), &[(0, 5), (1, 3), (2, 4)]);
        assert_eq!(total_crossings(&p2, &order), 0);
        order[1].swap(0, 1);
        assert_eq!(total_crossings(&p2, &order), 1);
        transpose(&p2, &mut order);
        assert_eq!(total_crossings(&p2, &order), 0);
        // the whole layout of a crossed input comes out uncrossed
        let l = layout(
            &boxes(6),
            &[(0, 5), (1, 4), (2, 3), (0, 4), (2, 4)],
            &Options::default(),
        );
        assert_eq!(l.crossings, 0);
        no_overlaps(&l);
    }

    #[test]
    fn a_crossing_that_must_stay_is_counted() {
        // K(2,2) with one more: a bipartite graph with one crossing forced
        // (a->x, a->y, b->x, b->y): one crossing whatever the order.
        let edges = [(0, 2), (0, 3), (1, 2), (1, 3)];
        let l = layout(&boxes(4), &edges, &Options::default());
        assert_eq!(l.crossings, 1);
    }

    #[test]
    fn a_wide_layer_wraps_to_fit_the_viewport_without_overlaps() {
        // one root, 40 children: 41 boxes cannot stack in 900 px
        let n = 41;
        let edges: Vec<(usize, usize)> = (1..n).map(|i| (0, i)).collect();
        let opt = Options {
            fit: Some((1400.0, 900.0)),
            ..Options::default()
        };
        let l = layout(&boxes(n), &edges, &opt);
        assert!(l.columns[1] > 1, "{:?}", l.columns);
        let scale = (1400.0 / l.width).min(900.0 / l.height);
        let unwrapped = layout(&boxes(n), &edges, &Options::default());
        let scale0 = (1400.0 / unwrapped.width).min(900.0 / unwrapped.height);
        assert!(scale > scale0 * 1.5, "{scale} vs {scale0}");
        no_overlaps(&l);
        // no route passes through a box other than its ends
        for (i, r) in l.routes.iter().enumerate() {
            let (a, b) = edges[i];
            for w in r.windows(2) {
                for (j, bx) in l.boxes.iter().enumerate() {
                    if j == a || j == b {
                        continue;
                    }
                    let seg = Rect {
                        x: w[0].0.min(w[1].0),
                        y: w[0].1.min(w[1].1),
                        w: (w[0].0 - w[1].0).abs().max(0.001),
                        h: (w[0].1 - w[1].1).abs().max(0.001),
                    };
                    assert!(!seg.overlaps(bx), "edge {i} crosses box {j}");
                }
            }
        }
    }

    #[test]
    fn a_cycle_is_drawn_without_looping() {
        let edges = [(0, 1), (1, 2), (2, 0)];
        let l = layout(&boxes(3), &edges, &Options::default());
        no_overlaps(&l);
        assert!(l.routes.iter().all(|r| r.len() >= 2));
    }

    #[test]
    fn parents_sit_level_with_their_children() {
        // 0 -> 1, 0 -> 2: the parent is centred on its two children
        let l = layout(&boxes(3), &[(0, 1), (0, 2)], &Options::default());
        let mid = (l.boxes[1].cy() + l.boxes[2].cy()) / 2.0;
        assert!((l.boxes[0].cy() - mid).abs() < 1.0);
    }
}
