//! Steps 1-3: the back edges of a depth-first search reversed, layers by
//! longest path, a dummy vertex per layer an edge spans (the proper graph).

use super::*;

/// Break cycles, assign layers, add dummies.
pub(super) fn proper(sizes: &[(f64, f64)], edges: &[(usize, usize)]) -> Proper {
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
