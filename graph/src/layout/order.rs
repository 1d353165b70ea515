//! Step 4: the order within layers: depth-first first, barycenter sweeps
//! down and up keeping the fewest crossings, then adjacent swaps.

use super::*;

/// Layers in depth-first order from the sources (input order), so that a
/// tree starts with its subtrees contiguous.
pub(super) fn initial_order(p: &Proper, n: usize) -> Vec<Vec<usize>> {
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

pub(super) fn positions(p: &Proper, order: &[Vec<usize>]) -> Vec<usize> {
    let mut pos = vec![0usize; p.vx.len()];
    for l in order {
        for (i, &v) in l.iter().enumerate() {
            pos[v] = i;
        }
    }
    pos
}

/// Crossings between layer `l` and `l + 1` (inversions, with a Fenwick tree).
pub(super) fn crossings_between(
    p: &Proper,
    order: &[Vec<usize>],
    pos: &[usize],
    l: usize,
) -> usize {
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

pub(super) fn total_crossings(p: &Proper, order: &[Vec<usize>]) -> usize {
    let pos = positions(p, order);
    (0..order.len().saturating_sub(1))
        .map(|l| crossings_between(p, order, &pos, l))
        .sum()
}

/// Barycenter sweeps; the order with the fewest crossings is kept.
pub(super) fn order_sweeps(p: &Proper, order: &mut Vec<Vec<usize>>, sweeps: usize) {
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
pub(super) fn pair_crossings(nu: &[usize], nv: &[usize], pos: &[usize]) -> usize {
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
pub(super) fn transpose(p: &Proper, order: &mut [Vec<usize>]) {
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
