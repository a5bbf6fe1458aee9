/* torchgrade pages: small, dependency-free, and the page works without it (every section is a
   native <details>, every table readable unsorted). */
(function () {
  "use strict";
  var allDetails = function () { return Array.prototype.slice.call(document.querySelectorAll("details")); };

  /* Printing shows everything: open every section, and close again what was closed. */
  var closedBeforePrint = [];
  window.addEventListener("beforeprint", function () {
    closedBeforePrint = allDetails().filter(function (d) { return !d.open; });
    closedBeforePrint.forEach(function (d) { d.open = true; });
  });
  window.addEventListener("afterprint", function () {
    closedBeforePrint.forEach(function (d) { d.open = false; });
    closedBeforePrint = [];
  });

  /* "Expand all" / "Collapse all" buttons: <button data-details="open|close" data-scope="css"> */
  document.querySelectorAll("button[data-details]").forEach(function (button) {
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-details") === "open";
      var scope = button.getAttribute("data-scope") || "details";
      document.querySelectorAll(scope).forEach(function (d) { d.open = open; });
    });
  });

  /* Sortable tables: click (or Enter/Space on) a heading; cells with data-sort sort by number. */
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      if (th.hasAttribute("data-nosort")) { return; }
      th.tabIndex = 0;
      /* a heading may say the order the rows come in (aria-sort in the page): kept */
      if (!th.hasAttribute("aria-sort")) { th.setAttribute("aria-sort", "none"); }
      th.title = th.title ? th.title + " (click to sort)" : "Sort by this column";
      function sort() {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) {
          if (h.hasAttribute("aria-sort")) { h.setAttribute("aria-sort", "none"); }
        });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        function key(row) {
          var cell = row.cells[col];
          if (!cell) { return ""; }
          if (cell.hasAttribute("data-sort")) {
            var n = parseFloat(cell.getAttribute("data-sort"));
            if (!isNaN(n)) { return n; }
            return cell.getAttribute("data-sort").toLowerCase();
          }
          return cell.textContent.trim().toLowerCase();
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var c = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
          return ascending ? c : -c;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); }
      });
    });
  });

  /* Filter boxes: <input data-filter="table-id"> hides rows whose text does not contain it;
     <input type="checkbox" data-filter-only="table-id" data-row-class="c"> shows only rows
     of class c while it is ticked. */
  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-filter"));
    var status = document.getElementById(input.getAttribute("aria-describedby") || "");
    if (!table) { return; }
    var only = document.querySelector("input[data-filter-only='" + table.id + "']");
    function apply() {
      var words = input.value.trim().toLowerCase();
      var needed = only && only.checked ? only.getAttribute("data-row-class") : "";
      var shown = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
        var match = (!words || row.textContent.toLowerCase().indexOf(words) !== -1) &&
          (!needed || row.classList.contains(needed));
        row.hidden = !match;
        if (match) { shown += 1; }
      });
      if (status) { status.textContent = shown + " of " + table.tBodies[0].rows.length + " shown"; }
    }
    input.addEventListener("input", apply);
    if (only) { only.addEventListener("change", apply); }
    if (input.value || (only && only.checked)) { apply(); }  /* kept by the browser on reload */
  });

  /* A link to a closed section (<details id="checks-x">) opens it. */
  function openTarget() {
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (target && target.tagName === "DETAILS" && !target.open) {
      target.open = true;
      target.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", openTarget);
  if (location.hash) { openTarget(); }
})();
