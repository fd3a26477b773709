"use strict";
// The page's script: sortable small tables, and from the embedded data (opx-data: case
// and series dictionaries, rows as columns) the charts, the paged case table and the
// series-against-series comparison. Only the visible page of cases is in the DOM.
(function () {
  var palette = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];

  // small server-rendered tables: click a header to sort
  function key(td) {
    if (!td) return "";
    var s = td.getAttribute("data-sort");
    if (s === null) s = td.textContent.trim();
    var x = parseFloat(s);
    return isNaN(x) || !/^-?[0-9.]/.test(s) ? s.toLowerCase() : x;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows).filter(function (r) { return !r.classList.contains("why"); });
        var why = new Map();
        rows.forEach(function (r) { var w = r.nextElementSibling; if (w && w.classList.contains("why")) why.set(r, w); });
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        rows.forEach(function (r) { body.appendChild(r); if (why.has(r)) body.appendChild(why.get(r)); });
      });
    });
  });

  // the data is gzip-compressed JSON in base64 (the page is 2 MB at 128,000 cases, not 17)
  var packed = atob(JSON.parse(document.getElementById("opx-data").textContent)), bytes = new Uint8Array(packed.length);
  for (var i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
  if (typeof DecompressionStream === "undefined") {
    document.getElementById("count").textContent = "This browser cannot inflate the page's data (it needs DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or later); the tables above are complete.";
    return;
  }
  new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text().then(function (text) {
    start(JSON.parse(text));
  }).catch(function (e) { console.error("opx report: the page's data could not be read: " + e); });

  function start(D) {
    // the cases travel as columns: each case's object is made of them once
    var C = D.cases;
    D.cases = C.a.map(function (a, k) { return {t: C.tl[C.t[k]], o: C.ol[C.o[k]], a: a, x: C.x[k], i: C.i[k]}; });
    var n = D.st.length;
    var statusName = ["ok", "unsupported", "error", "other", "missing"];
    var spread = {}, impossible = {};
    D.impossible.forEach(function (i) { impossible[i] = true; });
    var throttled = {}, shared = {};
    D.throttled.forEach(function (i) { throttled[i] = true; });
    D.shared.forEach(function (i) { shared[i] = true; });
    var attOther = {}, gsOf = {};
    D.attOther.forEach(function (p) { attOther[p[0]] = p[1]; });
    D.gs.forEach(function (p) { gsOf[p[0]] = p[1]; });
    function att(i) { return i in attOther ? attOther[i] : D.attMost; }
    var aiOther = {};
    D.aiOther.forEach(function (p) { aiOther[p[0]] = p[1]; });
    function ai(i) { if (i in aiOther) return aiOther[i]; return D.cases[D.c[i]].i; }
    function gs(i) { return i in gsOf ? gsOf[i] : null; }
    D.spread.forEach(function (s) { spread[s[0]] = [s[1], s[2]]; });

    function el(tag, attrs, text) {
      var e = document.createElement(tag);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      if (text !== undefined) e.textContent = text;
      return e;
    }
    function sig(v) {
      if (v === null || v === undefined) return "";
      var a = Math.abs(v);
      if (a >= 1e4 || (a > 0 && a < 1e-2)) return v.toExponential(2);
      return a >= 100 ? v.toFixed(1) : a >= 10 ? v.toFixed(2) : v.toFixed(3);
    }
    function time(us) {
      if (us === null || us === undefined) return "";
      if (us >= 1e6) return sig(us / 1e6) + " s";
      if (us >= 1e3) return sig(us / 1e3) + " ms";
      if (us < 1) return sig(us * 1e3) + " ns";
      return sig(us) + " µs";
    }
    function caseLabel(i) { var c = D.cases[D.c[i]]; return c.t + " · " + c.a; }

    // each series' cluster: "vllm on h200 ×1" is on h200
    var clusterOf = D.series.map(function (ser) { var on = ser.split(" on ")[1]; return on ? on.replace(/ ×\d+$/, "") : ""; });
    // dots draws points ([x, y, colour] in pixels) as one path per colour, and a point that
    // lands on a pixel its colour already has once: 128,000 cases are a few thousand dots
    function dots(g, list, r, stroke) {
      var byCol = {}, cols = [], w = g.canvas.width;
      list.forEach(function (p) {
        var at = byCol[p[2]];
        if (!at) { at = byCol[p[2]] = new Map(); cols.push(p[2]); }
        at.set(Math.round(p[0]) + w * Math.round(p[1]), p);
      });
      cols.forEach(function (col) {
        g.beginPath();
        byCol[col].forEach(function (p) { g.moveTo(p[0] + r, p[1]); g.arc(p[0], p[1], r, 0, 2 * Math.PI); });
        if (stroke) { g.strokeStyle = col; g.stroke(); } else { g.fillStyle = col; g.fill(); }
      });
    }
    // charts: per op type and cluster, log-log, a colour per series, whiskers for spreads
    function charts() {
      var groups = {}, order = [];
      for (var i = 0; i < n; i++) {
        if (D.st[i] !== 0) continue;
        var c = D.cases[D.c[i]];
        var g = c.o + " on " + clusterOf[D.s[i]];
        if (!groups[g]) { groups[g] = {op: c.o, rows: []}; order.push(g); }
        groups[g].rows.push(i);
      }
      order.sort();
      var list = document.getElementById("chart-list");
      if (order.length === 0) list.appendChild(el("p", {"class": "note"}, "No ok row to draw."));
      order.forEach(function (g) {
        var grp = groups[g];
        list.appendChild(el("h3", {}, g));
        var legend = el("div", {"class": "legend"});
        var seen = {};
        grp.rows.forEach(function (i) { seen[D.s[i]] = true; });
        Object.keys(seen).map(Number).sort(function (a, b) { return a - b; }).forEach(function (s) {
          var sp = el("span"); var dot = el("i"); dot.style.background = palette[s % palette.length];
          sp.appendChild(dot); sp.appendChild(document.createTextNode(D.series[s])); legend.appendChild(sp);
        });
        list.appendChild(legend);
        var xlabel = grp.op === "gemm" ? "size: 2·m·n·k (FLOP)" : "size: product of numeric args";
        draw(list, grp.rows, function (i) { return D.lat[i]; }, g + ": latency", xlabel, "latency (µs), lower is better", true);
        if (D.thrName[grp.op]) draw(list, grp.rows, function (i) { return D.thr[i]; }, g + ": " + D.thrName[grp.op], xlabel, D.thrName[grp.op] + " (" + D.units[grp.op] + "), higher is better", false);
      });
    }
    function draw(parent, rows, val, title, xlabel, ylabel, whiskers) {
      var W = 960, H = 300, L = 70, R = 16, T = 24, B = 44;
      var pts = [], xs = [], ys = [];
      // cases without a size are ordered by their label, after the others
      var rank = {};
      rows.forEach(function (i) { if (!(D.cases[D.c[i]].x > 0)) rank[caseLabel(i)] = 0; });
      Object.keys(rank).sort().forEach(function (k, j) { rank[k] = j + 1; });
      rows.forEach(function (i) {
        var y = val(i); if (!(y > 0)) return;
        var x = D.cases[D.c[i]].x > 0 ? D.cases[D.c[i]].x : rank[caseLabel(i)];
        pts.push([x, y, i]); xs.push(x); ys.push(y);
        if (whiskers && spread[i]) { ys.push(spread[i][0]); ys.push(spread[i][1]); }
      });
      if (pts.length === 0) return;
      function span(a) { var lo = Infinity, hi = -Infinity; a.forEach(function (v) { if (v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }); return [Math.floor(Math.log10(lo)), Math.ceil(Math.log10(hi) + 1e-9)]; }
      var sx = span(xs), sy = span(ys);
      if (sx[1] === sx[0]) sx[1]++;
      if (sy[1] === sy[0]) sy[1]++;
      var cv = el("canvas", {width: W, height: H, "class": "chart", role: "img", "aria-label": title});
      parent.appendChild(cv);
      var g = cv.getContext("2d");
      function px(x) { return L + (Math.log10(x) - sx[0]) / (sx[1] - sx[0]) * (W - L - R); }
      function py(y) { return H - B - (Math.log10(y) - sy[0]) / (sy[1] - sy[0]) * (H - T - B); }
      g.font = "11px system-ui, sans-serif"; g.fillStyle = "#111827"; g.strokeStyle = "#e5e7eb";
      g.fillText(title, L, 14);
      for (var e = sx[0]; e <= sx[1]; e++) { var X = px(Math.pow(10, e)); g.beginPath(); g.moveTo(X, T); g.lineTo(X, H - B); g.stroke(); g.fillText("1e" + e, X - 10, H - B + 14); }
      for (e = sy[0]; e <= sy[1]; e++) { var Y = py(Math.pow(10, e)); g.beginPath(); g.moveTo(L, Y); g.lineTo(W - R, Y); g.stroke(); g.fillText("1e" + e, 30, Y + 4); }
      g.fillStyle = "#6b7280";
      g.fillText(xlabel, L + (W - L - R) / 2 - 60, H - 8);
      g.save(); g.translate(12, H - B); g.rotate(-Math.PI / 2); g.fillText(ylabel, 0, 0); g.restore();
      // whiskers, one path per colour (a whisker drawn already is not drawn again), then dots
      var wh = {}, cols = [], at = [];
      pts.forEach(function (p) {
        var col = palette[D.s[p[2]] % palette.length], X = px(p[0]);
        at.push([X, py(p[1]), col]);
        if (!whiskers || !spread[p[2]]) return;
        if (!wh[col]) { wh[col] = new Map(); cols.push(col); }
        var y0 = py(spread[p[2]][0]), y1 = py(spread[p[2]][1]);
        wh[col].set(Math.round(X) + W * (Math.round(y0) + H * Math.round(y1)), [X, y0, y1]);
      });
      cols.forEach(function (col) {
        g.strokeStyle = col; g.beginPath();
        wh[col].forEach(function (w) { g.moveTo(w[0], w[1]); g.lineTo(w[0], w[2]); });
        g.stroke();
      });
      dots(g, at, 2.5, false);
    }

    // rooflines: per cluster, achieved TFLOP/s against FLOP/byte under the family's ceilings
    function rooflines() {
      var groups = {}, order = [];
      for (var i = 0; i < n; i++) {
        if (D.st[i] !== 0 || ai(i) === null || !(D.tf[i] > 0)) continue;
        var fam = D.serFamily[D.s[i]];
        var g = clusterOf[D.s[i]] + " (" + fam + ")";
        if (!groups[g]) { groups[g] = {fam: fam, rows: []}; order.push(g); }
        groups[g].rows.push(i);
      }
      order.sort();
      var list = document.getElementById("roofline-list");
      if (order.length === 0) list.appendChild(el("p", {"class": "note"}, "No ok case with a known peak and work to place."));
      order.forEach(function (g) {
        var grp = groups[g], pk = D.peaks[grp.fam];
        list.appendChild(el("h3", {}, g));
        var W = 960, H = 320, L = 70, R = 16, T = 24, B = 44;
        var xs = grp.rows.map(function (i) { return ai(i); }), ys = grp.rows.map(function (i) { return D.tf[i]; });
        Object.keys(pk.tflops).forEach(function (k) { ys.push(pk.tflops[k]); xs.push(pk.tflops[k] / pk.hbm); });
        var sx = [Math.floor(Math.log10(Math.min.apply(null, xs))), Math.ceil(Math.log10(Math.max.apply(null, xs)) + 1e-9)];
        var sy = [Math.floor(Math.log10(Math.min.apply(null, ys))), Math.ceil(Math.log10(Math.max.apply(null, ys)) + 1e-9)];
        if (sx[0] === sx[1]) sx[1]++;
        if (sy[0] === sy[1]) sy[1]++;
        var cv = el("canvas", {width: W, height: H, "class": "chart", role: "img", "aria-label": g + " roofline"});
        list.appendChild(cv);
        var c = cv.getContext("2d");
        function px(x) { return L + (Math.log10(x) - sx[0]) / (sx[1] - sx[0]) * (W - L - R); }
        function py(y) { return H - B - (Math.log10(y) - sy[0]) / (sy[1] - sy[0]) * (H - T - B); }
        c.font = "11px system-ui, sans-serif"; c.fillStyle = "#111827"; c.strokeStyle = "#e5e7eb";
        c.fillText(g + ": achieved TFLOP/s against FLOP/byte (HBM " + pk.hbm + " TB/s)", L, 14);
        for (var e = sx[0]; e <= sx[1]; e++) { var X = px(Math.pow(10, e)); c.beginPath(); c.moveTo(X, T); c.lineTo(X, H - B); c.stroke(); c.fillText("1e" + e, X - 10, H - B + 14); }
        for (e = sy[0]; e <= sy[1]; e++) { var Y = py(Math.pow(10, e)); c.beginPath(); c.moveTo(L, Y); c.lineTo(W - R, Y); c.stroke(); c.fillText("1e" + e, 30, Y + 4); }
        c.fillStyle = "#6b7280";
        c.fillText("arithmetic intensity (FLOP/byte)", L + (W - L - R) / 2 - 80, H - 8);
        c.save(); c.translate(12, H - B); c.rotate(-Math.PI / 2); c.fillText("TFLOP/s", 0, 0); c.restore();
        c.strokeStyle = "#111827"; c.lineWidth = 1.5;
        Object.keys(pk.tflops).sort().forEach(function (k) {
          var peak = pk.tflops[k], ridge = peak / pk.hbm, x0 = Math.pow(10, sx[0]);
          c.beginPath(); c.moveTo(px(x0), py(Math.max(pk.hbm * x0, Math.pow(10, sy[0])))); c.lineTo(px(ridge), py(peak)); c.lineTo(W - R, py(peak)); c.stroke();
          c.fillStyle = "#111827"; c.fillText(k + " " + peak, W - R - 70, py(peak) - 4);
        });
        c.lineWidth = 1;
        var at = [], rings = [];
        grp.rows.forEach(function (i) {
          var p = [px(ai(i)), py(D.tf[i]), palette[D.s[i] % palette.length]];
          at.push(p);
          if (impossible[i]) rings.push([p[0], p[1], "#dc2626"]);
        });
        dots(c, at, 2.5, false);
        dots(c, rings, 6, true);
      });
    }

    // the case table: filter, sort, page
    var PAGE = 50, pageAt = 0, sortKey = null, asc = true, shown = [];
    var q = document.getElementById("q"), fop = document.getElementById("fop"), fst = document.getElementById("fst");
    var ops = {};
    D.cases.forEach(function (c) { ops[c.o] = true; });
    Object.keys(ops).sort().forEach(function (o) { fop.appendChild(el("option", {value: o}, o)); });
    function sortVal(i, k) {
      switch (k) {
        case "case": return caseLabel(i);
        case "op": return D.cases[D.c[i]].o;
        case "series": return D.series[D.s[i]];
        case "st": return D.st[i];
        case "lat": return D.lat[i] === null ? Infinity : D.lat[i];
        case "spread": return spread[i] ? spread[i][1] - spread[i][0] : Infinity;
        case "thr": return D.thr[i] === null ? -Infinity : D.thr[i];
        case "sol": return D.sol[i] === null ? -Infinity : D.sol[i];
        case "att": return att(i);
        case "gs": return gs(i) === null ? -Infinity : gs(i);
      }
    }
    function refilter() {
      var text = q.value.toLowerCase(), op = fop.value, st = fst.value;
      shown = [];
      for (var i = 0; i < n; i++) {
        if (op && D.cases[D.c[i]].o !== op) continue;
        if (st !== "" && D.st[i] !== Number(st)) continue;
        if (text && (caseLabel(i) + " " + D.series[D.s[i]] + " " + statusName[D.st[i]] + (throttled[i] ? " throttled" : "") + (shared[i] ? " shared" : "")).toLowerCase().indexOf(text) < 0) continue;
        shown.push(i);
      }
      if (sortKey) {
        shown.sort(function (a, b) {
          var x = sortVal(a, sortKey), y = sortVal(b, sortKey);
          return (x < y ? -1 : x > y ? 1 : a - b) * (asc ? 1 : -1);
        });
      }
      pageAt = 0; render();
    }
    function render() {
      var body = document.querySelector("#case-table tbody");
      body.textContent = "";
      var end = Math.min(shown.length, pageAt + PAGE);
      for (var j = pageAt; j < end; j++) {
        var i = shown[j], tr = el("tr");
        var thr = D.thr[i], unit = D.units[D.cases[D.c[i]].o] || "";
        [[caseLabel(i), "code"], [D.cases[D.c[i]].o], [D.series[D.s[i]]], [statusName[D.st[i]] + (throttled[i] ? " (throttled GPU)" : "") + (shared[i] ? " (shared machine)" : ""), "st"], [time(D.lat[i]), "n"],
         [spread[i] ? time(spread[i][0]) + " – " + time(spread[i][1]) : "", "n"], [thr === null ? "" : sig(thr) + " " + unit, "n"],
         [D.sol[i] === null ? "" : sig(D.sol[i]) + " %" + (impossible[i] ? " impossible" : ""), impossible[i] ? "imp" : "n"],
         [String(att(i)), "n"], [gs(i) === null ? "" : sig(gs(i)), "n"]].forEach(function (c) {
          var td = el("td", {}, c[0]);
          if (c[1] === "n") td.className = "n";
          if (c[1] === "imp") td.className = "n error";
          if (c[1] === "st") td.className = statusName[D.st[i]];
          tr.appendChild(td);
        });
        body.appendChild(tr);
      }
      document.getElementById("count").textContent = shown.length === 0 ? "no rows match" :
        "rows " + (pageAt + 1) + "–" + end + " of " + shown.length + (shown.length < n ? " (filtered from " + n + ")" : "");
    }
    document.querySelectorAll("#case-table th").forEach(function (th) {
      th.addEventListener("click", function () {
        var k = th.getAttribute("data-k");
        asc = sortKey === k ? !asc : true; sortKey = k;
        document.querySelectorAll("#case-table th").forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        refilter();
      });
    });
    q.addEventListener("input", refilter); fop.addEventListener("change", refilter); fst.addEventListener("change", refilter);
    document.getElementById("prev").addEventListener("click", function () { pageAt = Math.max(0, pageAt - PAGE); render(); });
    document.getElementById("next").addEventListener("click", function () { if (pageAt + PAGE < shown.length) { pageAt += PAGE; render(); } });

    // series against series: the speed-up of B over A on the cases both measured
    var va = document.getElementById("va"), vb = document.getElementById("vb");
    D.series.forEach(function (s, i) { va.appendChild(el("option", {value: i}, s)); vb.appendChild(el("option", {value: i}, s)); });
    if (D.series.length > 1) vb.value = "1";
    function versus() {
      var a = Number(va.value), b = Number(vb.value), at = {}, pairs = [];
      for (var i = 0; i < n; i++) if (D.s[i] === a && D.lat[i] > 0) at[D.c[i]] = D.lat[i];
      for (i = 0; i < n; i++) if (D.s[i] === b && D.lat[i] > 0 && at[D.c[i]] && a !== b) pairs.push([D.c[i], at[D.c[i]], D.lat[i]]);
      var faster = 0, slower = 0, logsum = 0;
      pairs.forEach(function (p) { var s = p[1] / p[2]; logsum += Math.log(s); if (s >= 1.02) faster++; else if (s <= 1 / 1.02) slower++; });
      pairs.sort(function (x, y) { return (x[1] / x[2]) - (y[1] / y[2]); });
      var body = document.querySelector("#vs-table tbody");
      body.textContent = "";
      var words = function (s) { return s >= 1 ? s.toFixed(2) + "x faster" : (1 / s).toFixed(2) + "x slower"; };
      document.getElementById("vsum").textContent = pairs.length === 0 ? "no case measured by both" :
        pairs.length + " case(s) in common: " + faster + " faster, " + slower + " slower (beyond 2 %); geometric mean " + words(Math.exp(logsum / pairs.length));
      pairs.slice(0, 10).concat(pairs.length > 20 ? pairs.slice(-10) : pairs.slice(10)).forEach(function (p) {
        var tr = el("tr"), c = D.cases[p[0]];
        [c.t + " · " + c.o + " · " + c.a, time(p[1]), time(p[2]), words(p[1] / p[2])].forEach(function (t, k) { tr.appendChild(el("td", k ? {"class": "n"} : {}, t)); });
        body.appendChild(tr);
      });
    }
    va.addEventListener("change", versus); vb.addEventListener("change", versus);

    charts();
    rooflines();
    refilter();
    versus();
    document.documentElement.setAttribute("data-ready", "1");
  }
})();
