//! The self-contained page: the scene inside a pan-and-zoom viewport, a
//! filter, a detail panel, its style sheet and script.

use super::card::scene;
use super::svg::{markers, stats_line, FONTS, SVG_CSS};
use super::*;

const PAGE_CSS: &str = r#"
* { box-sizing: border-box; }
html, body { margin: 0; height: 100%; overflow: hidden; background: #f7f8fa; color: #17202a; font: 13px var(--sans); }
:root { FONTS }
header { height: 52px; display: flex; align-items: center; gap: 16px; padding: 0 16px; background: #ffffff; border-bottom: 1px solid #dde3ea; }
header h1 { font-size: 15px; margin: 0; white-space: nowrap; }
header h1 span { font-weight: 400; color: #55616e; }
header .stats { color: #55616e; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; flex: 1; }
header input[type=search] { width: 220px; padding: 5px 8px; border: 1px solid #c9d1da; border-radius: 6px; font: inherit; }
header label { white-space: nowrap; user-select: none; }
header button { padding: 5px 10px; border: 1px solid #c9d1da; border-radius: 6px; background: #fff; font: inherit; cursor: pointer; }
main { position: absolute; top: 52px; left: 0; right: 0; bottom: 0; }
#canvas { width: 100%; height: 100%; display: block; cursor: grab; }
#canvas.panning { cursor: grabbing; }
.node { cursor: pointer; }
.node:hover .card { stroke: #17202a; }
.node.selected .card { stroke: #2a5aa6; stroke-width: 2.5; }
.node.dim, .edge.dim { opacity: 0.12; }
.legend { position: absolute; left: 12px; bottom: 12px; background: rgba(255,255,255,0.94); border: 1px solid #dde3ea; border-radius: 8px; padding: 6px 10px; display: flex; gap: 14px; align-items: center; font-size: 12px; color: #3d4752; }
.legend svg { vertical-align: middle; }
.legend .sw { display: inline-block; width: 18px; height: 12px; border-radius: 3px; border: 1px solid #cdd5de; background: #fff; vertical-align: middle; border-left: 4px solid #3aa57a; }
.legend .sw.due { border-color: #e0962a; background: #fff1d6; border-left-color: #e0962a; }
.legend .sw.revoked { border-left-color: #c83a2e; }
.legend .hint { color: #8a95a1; }
#panel { position: absolute; top: 0; right: 0; bottom: 0; width: 400px; background: #fff; border-left: 1px solid #dde3ea; box-shadow: -4px 0 16px rgba(0,0,0,0.06); padding: 14px 18px; overflow: auto; }
#panel[hidden] { display: none; }
#panel h2 { margin: 0 0 2px; font-size: 17px; }
#panel .sub { color: #55616e; margin-bottom: 10px; }
#panel h3 { font-size: 11px; text-transform: uppercase; letter-spacing: .05em; color: #8a95a1; margin: 14px 0 4px; }
#panel code, #panel .mono { font: 12px var(--mono); word-break: break-all; }
#panel ul { margin: 0; padding-left: 16px; }
#panel .due { color: #8a4b00; font-weight: 600; }
#panel table { border-collapse: collapse; width: 100%; font-size: 12px; }
#panel td { border-top: 1px solid #eef1f5; padding: 3px 4px; vertical-align: top; }
#panel td.d { color: #8a4b00; }
#panel .close { position: absolute; top: 10px; right: 12px; border: 0; background: none; font-size: 18px; cursor: pointer; color: #55616e; }
#panel pre { background: #f4f6f9; padding: 6px 8px; border-radius: 6px; white-space: pre-wrap; }
"#;

const SCRIPT: &str = r##"
(function () {
  "use strict";
  var svg = document.getElementById("canvas");
  var W = +svg.dataset.width, H = +svg.dataset.height, now = +svg.dataset.now || 0;
  var data = JSON.parse(document.getElementById("csis-graph").textContent);
  var byId = {};
  data.nodes.forEach(function (n) { byId[n.id] = n; });
  var vb = null;
  function setVB(x, y, w, h) { vb = { x: x, y: y, w: w, h: h }; svg.setAttribute("viewBox", x + " " + y + " " + w + " " + h); }
  function fit() {
    var r = svg.getBoundingClientRect();
    // the legend keeps the bottom of the window
    var ah = Math.max(r.height - 52, r.height / 2);
    var s = Math.min(r.width / W, ah / H, 1.25);
    var w = r.width / s, h = r.height / s;
    setVB((W - w) / 2, (H - ah / s) / 2, w, h);
  }
  function toSvg(cx, cy) {
    var r = svg.getBoundingClientRect();
    return { x: vb.x + (cx - r.left) / r.width * vb.w, y: vb.y + (cy - r.top) / r.height * vb.h, r: r };
  }
  svg.addEventListener("wheel", function (e) {
    e.preventDefault();
    var f = Math.exp(e.deltaY * 0.0015), p = toSvg(e.clientX, e.clientY);
    var w = vb.w * f, h = vb.h * f;
    setVB(p.x - (e.clientX - p.r.left) / p.r.width * w, p.y - (e.clientY - p.r.top) / p.r.height * h, w, h);
  }, { passive: false });
  var drag = null;
  svg.addEventListener("pointerdown", function (e) {
    if (e.target.closest(".node")) return;
    drag = { x: e.clientX, y: e.clientY, vx: vb.x, vy: vb.y };
    svg.classList.add("panning");
    svg.setPointerCapture(e.pointerId);
  });
  svg.addEventListener("pointermove", function (e) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    setVB(drag.vx - (e.clientX - drag.x) * vb.w / r.width, drag.vy - (e.clientY - drag.y) * vb.h / r.height, vb.w, vb.h);
  });
  function endDrag() { drag = null; svg.classList.remove("panning"); }
  svg.addEventListener("pointerup", endDrag);
  svg.addEventListener("pointercancel", endDrag);
  svg.addEventListener("dblclick", function (e) { if (!e.target.closest(".node")) fit(); });
  window.addEventListener("resize", fit);
  document.getElementById("fit").addEventListener("click", fit);

  var nodes = Array.prototype.slice.call(document.querySelectorAll("#canvas .node"));
  var edges = Array.prototype.slice.call(document.querySelectorAll("#canvas .edge"));
  var filter = document.getElementById("filter"), dueOnly = document.getElementById("dueonly");
  function apply() {
    var q = filter.value.trim().toLowerCase(), d = dueOnly.checked, shown = {};
    nodes.forEach(function (g) {
      var id = g.dataset.id, ok = (!q || id.toLowerCase().indexOf(q) >= 0 || g.dataset.series.toLowerCase().indexOf(q) >= 0) && (!d || g.dataset.due === "true");
      shown[id] = ok;
      g.classList.toggle("dim", !ok);
    });
    edges.forEach(function (p) { p.classList.toggle("dim", !(shown[p.dataset.from] && shown[p.dataset.to])); });
  }
  filter.addEventListener("input", apply);
  dueOnly.addEventListener("change", apply);

  function age(at) {
    if (!now || !at) return "";
    var s = Math.max(0, now - at);
    if (s < 60) return s + "s"; if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 86400) return Math.floor(s / 3600) + "h"; if (s < 1209600) return Math.floor(s / 86400) + "d";
    return Math.floor(s / 604800) + "w";
  }
  var panel = document.getElementById("panel");
  function el(tag, text, cls) { var e = document.createElement(tag); if (text != null) e.textContent = text; if (cls) e.className = cls; return e; }
  function section(title) { panel.appendChild(el("h3", title)); }
  function list(items, mono) { var ul = el("ul"); items.forEach(function (t) { ul.appendChild(el("li", t, mono ? "mono" : null)); }); panel.appendChild(ul); }
  function open(id) {
    var n = byId[id]; if (!n) return;
    nodes.forEach(function (g) { g.classList.toggle("selected", g.dataset.id === id); });
    panel.textContent = "";
    var x = el("button", "×", "close"); x.title = "close (Esc)"; x.onclick = close; panel.appendChild(x);
    panel.appendChild(el("h2", n.series));
    panel.appendChild(el("div", [n.kind, n.runtime].filter(Boolean).join(" · ") + (n.parent ? " · from " + n.parent : ""), "sub"));
    panel.appendChild(el("div", n.id, "mono"));
    section("status");
    if (n.due) {
      panel.appendChild(el("div", "due: " + n.due.reason, "due"));
      if (n.due.changed && n.due.changed.length) list(n.due.changed, true);
    } else panel.appendChild(el("div", "current"));
    section("current build");
    panel.appendChild(n.build ? el("div", n.build.id + (n.build.at ? " · " + age(n.build.at) + " old" : ""), "mono") : el("div", "no build yet"));
    var m = [];
    (n.released || []).forEach(function (r) { m.push("released as " + r); });
    if (n.tested === true) m.push("post-bake tests passed"); else if (n.tested === false) m.push("post-bake tests failed");
    (n.pinned_children || []).forEach(function (c) { m.push("pinned child: " + c); });
    if (n.behind) m.push("pinned to " + n.behind.pinned + ", behind the parent's head " + n.behind.head);
    (n.revoked || []).forEach(function (r) { m.push("revoked: " + r); });
    if (m.length) { section("marks"); list(m); }
    var e = n.entry || {};
    section("fingerprint"); panel.appendChild(el("div", e.fingerprint || "", "mono"));
    if (e.inputs && e.inputs.length) { section("inputs"); list(e.inputs, true); }
    if (e.deps && e.deps.length) { section("dependencies"); list(e.deps, true); }
    if (e.command) { section("build just this"); panel.appendChild(el("pre", e.command, "mono")); }
    if (n.steps && n.steps.length) {
      section("steps (" + n.steps.length + ")");
      var t = el("table");
      n.steps.forEach(function (s) {
        var tr = el("tr"); tr.appendChild(el("td", s.kind));
        tr.appendChild(el("td", s.due ? "due: " + s.reason : s.reason, s.due ? "d" : null));
        tr.appendChild(el("td", (s.fingerprint || "").slice(0, 12), "mono"));
        tr.title = s.label; t.appendChild(tr);
      });
      panel.appendChild(t);
    }
    panel.hidden = false;
  }
  function close() { panel.hidden = true; nodes.forEach(function (g) { g.classList.remove("selected"); }); }
  nodes.forEach(function (g) { g.addEventListener("click", function (ev) { ev.stopPropagation(); open(g.dataset.id); }); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") close();
    else if (e.target === filter) return;
    else if (e.key === "f") fit();
    else if (e.key === "/") { e.preventDefault(); filter.focus(); }
  });

  fit();
  // A link can open the page filtered or on one node:
  // `#filter=TEXT`, `#due`, `#node=ID` (joined by `&`).
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var i = kv.indexOf("="), k = i < 0 ? kv : kv.slice(0, i), v = i < 0 ? "" : decodeURIComponent(kv.slice(i + 1));
    if (k === "filter") filter.value = v;
    else if (k === "due") dueOnly.checked = true;
    else if (k === "node") open(v);
  });
  apply();
  // What the page looks like after the fit, for tests and tools: boxes in
  // window coordinates.
  function box(e) { var r = e.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; }
  var out = { window: { w: window.innerWidth, h: window.innerHeight }, canvas: box(svg), legend: box(document.querySelector(".legend")), nodes: [], reasons: [], edges: {} };
  out.panel = panel.hidden ? null : panel.innerText;
  nodes.forEach(function (g) {
    out.nodes.push({ id: g.dataset.id, kind: g.dataset.kind, due: g.dataset.due === "true", dim: g.classList.contains("dim"), box: box(g.querySelector(".card")) });
    g.querySelectorAll(".reason, .changed").forEach(function (t) {
      var cs = getComputedStyle(t);
      out.reasons.push({ id: g.dataset.id, cls: t.getAttribute("class"), text: t.textContent, box: box(t), visible: cs.visibility !== "hidden" && cs.display !== "none" && +cs.opacity > 0, px: parseFloat(cs.fontSize) * svg.getScreenCTM().a });
    });
  });
  edges.forEach(function (p) {
    var k = p.getAttribute("class").replace("edge ", "");
    if (out.edges[k]) return;
    var cs = getComputedStyle(p);
    out.edges[k] = { stroke: cs.stroke, dash: cs.strokeDasharray, width: cs.strokeWidth };
  });
  out.scale = svg.getScreenCTM().a;
  document.getElementById("csis-measure").textContent = JSON.stringify(out);
})();
"##;

/// The page: one self-contained file (inline SVG, CSS and script; nothing
/// loaded from elsewhere), fitted to the window.
pub fn html(g: &Graph) -> String {
    let sc = scene(g);
    let data = serde_json::to_string(g)
        .unwrap_or_else(|_| "{}".into())
        // `<` appears only inside JSON strings: as an escape it cannot end
        // the script element
        .replace('<', "\\u003c");
    let legend = r#"<div class="legend"><span><svg width="40" height="10"><path class="edge follow" d="M2 5 H32" marker-end="url(#arr-follow)"/></svg> follow</span><span><svg width="40" height="10"><path class="edge pinned" d="M2 5 H32" marker-end="url(#arr-pinned)"/></svg> pinned</span><span><svg width="40" height="10"><path class="edge pinned behind" d="M2 5 H32" marker-end="url(#arr-behind)"/></svg> pinned, behind</span><span><i class="sw due"></i> due</span><span><i class="sw"></i> current</span><span><i class="sw revoked"></i> revoked</span><span class="hint">drag to pan · wheel to zoom · click a node for its plan entry</span></div>"#;
    let css = PAGE_CSS.replace("FONTS", FONTS);
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}{SVG_CSS}</style>
</head>
<body>
<header>
<h1>csis graph <span>{tree}</span></h1>
<div class="stats">{stats}</div>
<input type="search" id="filter" placeholder="filter by label (/)" aria-label="filter by label">
<label><input type="checkbox" id="dueonly"> due only</label>
<button id="fit" title="fit to the window (f)">fit</button>
</header>
<main>
<svg id="canvas" xmlns="http://www.w3.org/2000/svg" data-width="{w:.0}" data-height="{h:.0}" data-now="{now}" viewBox="0 0 {w:.0} {h:.0}" preserveAspectRatio="xMidYMid meet">
{markers}
{body}</svg>
{legend}
<aside id="panel" hidden></aside>
</main>
<pre id="csis-measure" hidden></pre>
<script type="application/json" id="csis-graph">{data}</script>
<script>{SCRIPT}</script>
</body>
</html>
"#,
        title = esc(&format!("csis graph · {}", g.title)),
        tree = esc(&g.title),
        stats = esc(&stats_line(g)),
        w = sc.width,
        h = sc.height,
        now = g.now.unwrap_or(0),
        markers = markers(),
        body = sc.body,
    )
}
