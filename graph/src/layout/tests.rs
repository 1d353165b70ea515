//! Layout unit tests: crossings, wraps and routes on small graphs.

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
