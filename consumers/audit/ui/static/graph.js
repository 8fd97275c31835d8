// The lineage graph: fetch /ui/api/graph, lay it out in layers from left to right, draw it as SVG.
// Hand-written on purpose (about 180 lines): the UI ships no npm build and loads nothing from a CDN, and the
// layout needed is the simple layered one (longest-path layers, barycenter ordering), not a general engine.
// Names are set with textContent only, so a dataset called <script> is drawn as text.
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var W = 210, H = 40, GAP_X = 90, GAP_Y = 18, MAX_CHARS = 28;
  var STATUS_FILL = {FINISHED: "#1a7f37", COMPLETED: "#1a7f37", FAILED: "#cf222e", RUNNING: "#0969da",
                     CREATED: "#9a6700", QUEUED: "#9a6700", CANCELLED: "#8250df", CANCELED: "#8250df"};

  function el(name, attrs, parent) {
    var e = document.createElementNS(SVGNS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  // the end of a long name is the part that tells paths apart (/data/raw/orders vs /data/marts/revenue)
  function short(text) { return text.length > MAX_CHARS ? "…" + text.slice(text.length - MAX_CHARS + 1) : text; }
  function hue(text) {
    var h = 0;
    for (var i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) % 360;
    return "hsl(" + h + ", 55%, 38%)";
  }

  // Layers: longest path from the sources (Kahn's order); nodes on a cycle get a layer after their known
  // predecessors, so a cycle does not stop the layout. Then a few barycenter sweeps order each layer.
  function layout(nodes, edges) {
    var byId = {}, preds = {}, succs = {}, indeg = {};
    nodes.forEach(function (n) { byId[n.id] = n; preds[n.id] = []; succs[n.id] = []; indeg[n.id] = 0; n.layer = 0; });
    edges.forEach(function (e) {
      if (!byId[e.source] || !byId[e.target] || e.source === e.target) return;
      succs[e.source].push(e.target); preds[e.target].push(e.source); indeg[e.target]++;
    });
    var queue = nodes.filter(function (n) { return indeg[n.id] === 0; }).map(function (n) { return n.id; });
    var done = {}, head = 0;
    for (;;) {
      while (head < queue.length) {
        var id = queue[head++];
        done[id] = true;
        succs[id].forEach(function (s) {
          byId[s].layer = Math.max(byId[s].layer, byId[id].layer + 1);
          if (--indeg[s] === 0) queue.push(s);
        });
      }
      var left = nodes.filter(function (n) { return !done[n.id] && queue.indexOf(n.id) < 0; });
      if (!left.length) break;
      var pick = left[0];  // on a cycle: release one node and go on
      preds[pick.id].forEach(function (p) { if (done[p]) pick.layer = Math.max(pick.layer, byId[p].layer + 1); });
      indeg[pick.id] = 0; queue.push(pick.id);
    }
    var layers = [];
    nodes.forEach(function (n) { (layers[n.layer] = layers[n.layer] || []).push(n); });
    layers = layers.filter(Boolean);
    layers.forEach(function (layer) {
      layer.sort(function (a, b) { return a.label < b.label ? -1 : a.label > b.label ? 1 : 0; });
      layer.forEach(function (n, i) { n.order = i; });
    });
    for (var sweep = 0; sweep < 4; sweep++) {
      var down = sweep % 2 === 0;
      var seq = down ? layers : layers.slice().reverse();
      seq.forEach(function (layer) {
        layer.forEach(function (n) {
          var nb = down ? preds[n.id] : succs[n.id];
          n.bary = nb.length ? nb.reduce(function (s, m) { return s + byId[m].order; }, 0) / nb.length : n.order;
        });
        layer.sort(function (a, b) { return a.bary - b.bary; });
        layer.forEach(function (n, i) { n.order = i; });
      });
    }
    var tallest = Math.max.apply(null, layers.map(function (l) { return l.length; }));
    layers.forEach(function (layer, li) {
      var offset = (tallest - layer.length) * (H + GAP_Y) / 2;
      layer.forEach(function (n, i) { n.x = li * (W + GAP_X); n.y = offset + i * (H + GAP_Y); });
    });
    return {width: layers.length * (W + GAP_X), height: tallest * (H + GAP_Y), byId: byId};
  }

  function draw(box, data, color) {
    var t0 = performance.now();
    var geo = layout(data.nodes, data.edges);
    var t1 = performance.now();
    box.textContent = "";
    var svg = el("svg", {role: "group", "aria-label": "lineage graph, " + data.nodes.length + " nodes"}, box);
    var defs = el("defs", {}, svg);
    var marker = el("marker", {id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7",
                               markerHeight: "7", orient: "auto-start-reverse"}, defs);
    el("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#8c959f"}, marker);
    var world = el("g", {"class": "world"}, svg);
    var edgeLayer = el("g", {}, world), nodeLayer = el("g", {}, world);
    data.edges.forEach(function (e) {
      var a = geo.byId[e.source], b = geo.byId[e.target];
      if (!a || !b) return;
      var x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      var p = el("path", {"class": "edge " + (e.type || "DIRECT"), d: "M" + x1 + "," + y1 + " C" + mx + "," + y1 +
                          " " + mx + "," + y2 + " " + x2 + "," + y2, "marker-end": "url(#arrow)",
                          "data-source": e.source, "data-target": e.target}, edgeLayer);
      var tip = el("title", {}, p);
      tip.textContent = e.source + " → " + e.target + (e.type ? " (" + e.type + (e.transformation ? ": " + e.transformation : "") + ")" : "");
    });
    data.nodes.forEach(function (n) {
      var status = n.kind === "job" ? (n.status || "no run") : "";
      var label = n.kind === "column" ? n.dataset + " · " + n.label : n.label;
      var a = el("a", {href: n.url, "class": "node " + n.kind + (n.id === data.root ? " root" : ""),
                       transform: "translate(" + n.x + "," + n.y + ")", "data-id": n.id,
                       "aria-label": n.kind + " " + n.namespace + " " + label + (status ? ", last status " + status : "") +
                                     (n.more ? ", more beyond" : "")}, nodeLayer);
      var fill = color === "namespace" ? hue(n.namespace) : (n.kind === "job" ? (STATUS_FILL[n.status] || "#6e7781") : null);
      var rect = el("rect", {width: W, height: H, rx: n.kind === "job" ? 14 : 2}, a);
      if (fill) rect.setAttribute("style", "fill:" + fill);
      var title = el("title", {}, a);
      title.textContent = n.namespace + " " + label + (status ? " (" + status + ")" : "");
      var text = el("text", {x: 8, y: status ? 16 : 24, "class": "label"}, a);
      text.textContent = short(n.kind === "column" ? n.label + " @ " + n.dataset.split("/").pop() : n.label);
      if (status) {
        var st = el("text", {x: 8, y: 32, "class": "st"}, a);
        st.textContent = status;
      }
      if (n.more) {
        var more = el("text", {x: W + 4, y: H + 12, "class": "more"}, a);
        more.textContent = "more …";
      }
    });
    // pan and zoom: the view box follows drags, the wheel and the +/−/fit buttons
    // at most life size at first: a small graph is not blown up, a large one is fitted
    var fitW = geo.width + 40, fitH = geo.height + 40;
    var scale = Math.max(fitW / (box.clientWidth || fitW), fitH / (box.clientHeight || fitH), 1);
    var vw = (box.clientWidth || fitW) * scale, vh = (box.clientHeight || fitH) * scale;
    var view = {x: -20 - (vw - fitW) / 2, y: -20 - (vh - fitH) / 2, w: vw, h: vh};
    var fit = {x: view.x, y: view.y, w: view.w, h: view.h};
    function apply() { svg.setAttribute("viewBox", view.x + " " + view.y + " " + view.w + " " + view.h); }
    function zoom(f, cx, cy) {
      cx = cx === undefined ? view.x + view.w / 2 : cx; cy = cy === undefined ? view.y + view.h / 2 : cy;
      view.x = cx - (cx - view.x) * f; view.y = cy - (cy - view.y) * f; view.w *= f; view.h *= f; apply();
    }
    apply();
    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var r = svg.getBoundingClientRect();
      zoom(ev.deltaY > 0 ? 1.15 : 1 / 1.15, view.x + (ev.clientX - r.left) / r.width * view.w,
           view.y + (ev.clientY - r.top) / r.height * view.h);
    }, {passive: false});
    var drag = null;
    svg.addEventListener("pointerdown", function (ev) {
      if (ev.target.closest("a")) return;
      drag = {x: ev.clientX, y: ev.clientY, vx: view.x, vy: view.y}; svg.setPointerCapture(ev.pointerId);
    });
    svg.addEventListener("pointermove", function (ev) {
      if (!drag) return;
      var r = svg.getBoundingClientRect();
      view.x = drag.vx - (ev.clientX - drag.x) / r.width * view.w;
      view.y = drag.vy - (ev.clientY - drag.y) / r.height * view.h; apply();
    });
    svg.addEventListener("pointerup", function () { drag = null; });
    var tools = document.createElement("div");
    tools.className = "tools";
    [["+", "zoom in", function () { zoom(1 / 1.25); }], ["−", "zoom out", function () { zoom(1.25); }],
     ["⤢", "fit the whole graph", function () { view = {x: fit.x, y: fit.y, w: fit.w, h: fit.h}; apply(); }]]
      .forEach(function (b) {
        var btn = document.createElement("button");
        btn.type = "button"; btn.textContent = b[0]; btn.setAttribute("aria-label", b[1]);
        btn.addEventListener("click", b[2]); tools.appendChild(btn);
      });
    box.appendChild(tools);
    requestAnimationFrame(function () {
      requestAnimationFrame(function () {
        box.dataset.layoutMs = (t1 - t0).toFixed(1);
        box.dataset.paintMs = (performance.now() - t0).toFixed(1);
        box.dataset.nodes = String(data.nodes.length);
        box.dataset.ready = "1";
      });
    });
  }

  function load(box) {
    var color = box.dataset.color || "status";
    fetch(box.dataset.graph, {credentials: "same-origin"}).then(function (resp) {
      return resp.json().then(function (body) { return {ok: resp.ok, body: body}; });
    }).then(function (res) {
      if (!res.ok) { box.textContent = String(res.body.detail || "the graph could not be read"); box.dataset.ready = "error"; return; }
      if (!res.body.nodes.length) { box.textContent = "No lineage recorded."; box.dataset.ready = "1"; return; }
      draw(box, res.body, color);
    }).catch(function (err) { box.textContent = "the graph could not be read: " + err; box.dataset.ready = "error"; });
  }

  window.lineagewireGraph = {layout: layout, draw: draw};
  document.querySelectorAll(".graph[data-graph]").forEach(load);
})();
