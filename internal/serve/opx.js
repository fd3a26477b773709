// opx serve's one script: sorts tables by a header's column, and sends a triage form with
// its token (kept for the tab's session). Every page reads without it.
(function () {
  "use strict";
  function cellValue(row, i) {
    var t = row.cells[i] ? row.cells[i].textContent.trim() : "";
    var n = parseFloat(t.replace(/[^0-9eE+.\-]/g, ""));
    return isNaN(n) || /[a-df-z]/i.test(t.replace(/e[+-]?\d/i, "")) ? t.toLowerCase() : n;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, i) {
      var asc = true;
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, i), y = cellValue(b, i);
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        });
        asc = !asc;
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.querySelectorAll("form.triage").forEach(function (form) {
    var token = form.elements.token;
    token.value = sessionStorage.getItem("opx-token") || "";
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      sessionStorage.setItem("opx-token", token.value);
      var msg = form.querySelector(".msg");
      fetch(form.getAttribute("action"), {
        method: "POST",
        headers: {"Authorization": "Bearer " + token.value, "Content-Type": "application/json"},
        body: JSON.stringify({state: form.elements.state.value, note: form.elements.note.value, link: form.elements.link.value})
      }).then(function (r) {
        return r.text().then(function (t) {
          if (r.ok) { location.reload(); } else { msg.textContent = r.status + ": " + t; }
        });
      }).catch(function (err) { msg.textContent = String(err); });
    });
  });
})();
