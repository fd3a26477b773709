"use strict";
// Sortable tables: click a header to sort by that column (numbers by value, text by text).
(function () {
  function key(td) {
    if (!td) return "";
    var s = td.getAttribute("data-sort");
    if (s === null) s = td.textContent.trim();
    var n = parseFloat(s);
    return isNaN(n) || !/^-?[0-9.]/.test(s) ? s.toLowerCase() : n;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.documentElement.setAttribute("data-ready", "1");
})();
