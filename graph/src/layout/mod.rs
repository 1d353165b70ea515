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

mod order;
mod place;
mod proper;
mod route;

use order::*;
use place::*;
use proper::*;
use route::*;
#[cfg(test)]
mod tests;
