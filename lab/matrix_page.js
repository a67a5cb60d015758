// lab/MATRIX.html's grouped matrix (mcp_layers_lab/matrix_page.py): the filter, grouping by
// client or by fault, and the page's self-test (#selftest), which writes what it saw into
// <output id="matrix-selftest"> for the Chromium tests.
(function () {
  "use strict";
  var root = document.getElementById("matrix");
  if (!root) { return; }
  var groupsEl = document.getElementById("mx-groups");
  var input = document.getElementById("mx-filter");
  var count = document.getElementById("mx-count");
  var spec = JSON.parse(root.getAttribute("data-summary") || "{}");
  var template = groupsEl.querySelector("table.mx-table");
  var rows = Array.prototype.slice.call(groupsEl.querySelectorAll("table.mx-table tbody tr"));
  var full = Array.prototype.slice.call(document.querySelectorAll("table.full tbody tr"));
  var total = rows.length;

  function keyOf(tr, by) {
    return tr.getAttribute(by === "fault" ? "data-fault" : "data-client");
  }

  // The same words as matrix_page.summary() writes into the page.
  function summary(trs) {
    var parts = [trs.length + (trs.length === 1 ? " row" : " rows")];
    if (spec.calls) {
      var calls = 0;
      trs.forEach(function (tr) { calls += parseInt(tr.getAttribute("data-calls"), 10) || 0; });
      parts.push(calls.toLocaleString("en-US") + " calls");
    }
    (spec.flags || []).forEach(function (f) {
      var n = trs.filter(function (tr) { return tr.hasAttribute("data-" + f[0]); }).length;
      parts.push(f[1] + " " + n);
    });
    return parts.join(" · ");
  }

  function group(key, trs) {
    var details = document.createElement("details");
    details.className = "mx-group";
    details.setAttribute("data-key", key);
    var s = document.createElement("summary");
    var b = document.createElement("b");
    b.textContent = key;
    var span = document.createElement("span");
    span.className = "mx-sum";
    span.textContent = summary(trs);
    s.appendChild(b);
    s.appendChild(document.createTextNode(" "));
    s.appendChild(span);
    details.appendChild(s);
    var table = template.cloneNode(false);
    table.appendChild(template.querySelector("colgroup").cloneNode(true));
    table.appendChild(template.querySelector("thead").cloneNode(true));
    var body = document.createElement("tbody");
    trs.forEach(function (tr) { body.appendChild(tr); });
    table.appendChild(body);
    details.appendChild(table);
    return details;
  }

  function regroup(by) {
    var order = [];
    var byKey = {};
    rows.forEach(function (tr) {
      var k = keyOf(tr, by);
      if (!byKey[k]) { byKey[k] = []; order.push(k); }
      byKey[k].push(tr);
    });
    var made = order.map(function (k) { return group(k, byKey[k]); });
    template = made[0].querySelector("table");
    groupsEl.textContent = "";
    made.forEach(function (d) { groupsEl.appendChild(d); });
    groupsEl.setAttribute("data-by", by);
    filter();
  }

  function matches(text, terms) {
    text = text.toLowerCase();
    return terms.every(function (t) { return text.indexOf(t) >= 0; });
  }

  function filter() {
    var terms = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (tr) {
      var text = tr.getAttribute("data-client") + " " + tr.getAttribute("data-scenario");
      var ok = matches(text, terms);
      tr.classList.toggle("mx-out", !ok);
      if (ok) { shown += 1; }
    });
    groupsEl.querySelectorAll("details.mx-group").forEach(function (d) {
      var left = d.querySelectorAll("tbody tr:not(.mx-out)").length;
      d.classList.toggle("mx-out", left === 0);
      if (terms.length) { d.open = left > 0; }
    });
    full.forEach(function (tr) {
      var th = tr.querySelector("th");
      tr.classList.toggle("mx-out", !matches(th ? th.textContent : tr.textContent, terms));
    });
    count.textContent = terms.length ? shown + " of " + total + " rows" : total + " rows";
  }

  function setOpen(open) {
    groupsEl.querySelectorAll("details.mx-group").forEach(function (d) { d.open = open; });
  }

  input.addEventListener("input", filter);
  document.querySelectorAll("input[name=mx-by]").forEach(function (r) {
    r.addEventListener("change", function () { if (r.checked) { regroup(r.value); } });
  });
  document.getElementById("mx-open").addEventListener("click", function () { setOpen(true); });
  document.getElementById("mx-close").addEventListener("click", function () { setOpen(false); });
  // A browser that restores form fields on reload finds them as they were left.
  var checked = document.querySelector("input[name=mx-by]:checked");
  if (checked && checked.value !== "client") { regroup(checked.value); } else { filter(); }

  // ------------------------------------------------------------------ self-test

  // Laid out and not inside a closed group (its summary excepted), nor filtered out.
  function shown(el) {
    if (el.closest(".mx-out,[hidden]") || el.getClientRects().length === 0) { return false; }
    var group = el.closest("details");
    return !group || group.open || el.closest("summary") !== null;
  }

  function where(el) {
    var home = el.closest("[id]");
    return home ? home.id : el.tagName.toLowerCase();
  }

  // Content the reader cannot reach: an element whose content is larger than its box
  // while its overflow neither shows it nor scrolls to it, a table cell whose text spills
  // over its neighbour, or a page wider than the window that the window cannot scroll.
  function clipped() {
    var found = [];
    document.querySelectorAll("body *").forEach(function (el) {
      if (!(el instanceof HTMLElement) || !shown(el)) { return; }
      var style = getComputedStyle(el);
      var cut = function (o) { return o === "hidden" || o === "clip"; };
      var wide = el.scrollWidth > el.clientWidth + 1;
      var high = el.scrollHeight > el.clientHeight + 1;
      if ((cut(style.overflowX) && wide) || (cut(style.overflowY) && high)) {
        found.push({ where: where(el), what: el.tagName.toLowerCase() + "." + el.className,
          scrollWidth: el.scrollWidth, clientWidth: el.clientWidth });
      }
      if ((el.tagName === "TH" || el.tagName === "TD") && wide) {
        found.push({ where: where(el), what: "cell", text: el.textContent.slice(0, 60) });
      }
    });
    var page = getComputedStyle(document.documentElement).overflowX;
    if ((page === "hidden" || page === "clip") &&
        document.documentElement.scrollWidth > window.innerWidth + 1) {
      found.push({ where: "page", what: "html" });
    }
    // Every column of the matrix can be scrolled to: its container scrolls as far as its
    // widest table reaches.
    var box = groupsEl.parentElement;
    var left = box.getBoundingClientRect().left + box.clientLeft - box.scrollLeft;
    var reach = 0;
    groupsEl.querySelectorAll("table.mx-table").forEach(function (t) {
      if (shown(t)) { reach = Math.max(reach, t.getBoundingClientRect().right - left); }
    });
    if (reach > box.scrollWidth + 1) {
      found.push({ where: "matrix", what: "tables past the scroll", reach: reach,
        scrollWidth: box.scrollWidth });
    }
    return found;
  }

  function visibleRows() {
    return rows.filter(function (tr) { return shown(tr) && tr.offsetParent !== null; });
  }

  function summaries() {
    return Array.prototype.map.call(groupsEl.querySelectorAll("details.mx-group"),
      function (d) { return d.querySelector("summary").textContent; });
  }

  function selftest() {
    var result = { errors: (window.reportErrors || []).slice(), width: window.innerWidth };
    result.rows = total;
    result.groups = groupsEl.querySelectorAll("details.mx-group").length;
    result.keys = Array.prototype.map.call(groupsEl.querySelectorAll("details.mx-group"),
      function (d) { return d.getAttribute("data-key"); });
    var written = summaries();
    result.closedRows = visibleRows().length;
    setOpen(true);
    result.openRows = visibleRows().length;
    result.clipped = clipped();
    var box = groupsEl.parentElement;
    result.scroll = { overflowX: getComputedStyle(box).overflowX, scrollWidth: box.scrollWidth,
      clientWidth: box.clientWidth };
    setOpen(false);
    // Typing a client's name leaves only that client's rows, its group open.
    var client = result.keys[0];
    input.value = client;
    input.dispatchEvent(new Event("input"));
    var left = visibleRows();
    result.filter = {
      typed: client,
      expected: rows.filter(function (tr) { return tr.getAttribute("data-client") === client; })
        .length,
      visible: left.length,
      others: left.filter(function (tr) { return tr.getAttribute("data-client") !== client; })
        .length,
      groupsShown: Array.prototype.filter.call(groupsEl.querySelectorAll("details.mx-group"),
        shown).length,
      count: count.textContent,
      clipped: clipped(),
    };
    // By fault: one group per fault, the filter still applied; then back.
    var byFault = document.querySelector("input[name=mx-by][value=fault]");
    byFault.checked = true;
    byFault.dispatchEvent(new Event("change"));
    result.fault = {
      groups: groupsEl.querySelectorAll("details.mx-group").length,
      keys: Array.prototype.map.call(groupsEl.querySelectorAll("details.mx-group"),
        function (d) { return d.getAttribute("data-key"); }),
      rows: groupsEl.querySelectorAll("tbody tr").length,
      visible: visibleRows().length,
      others: visibleRows().filter(function (tr) {
        return tr.getAttribute("data-client") !== client;
      }).length,
    };
    input.value = "";
    input.dispatchEvent(new Event("input"));
    setOpen(true);
    result.fault.clipped = clipped();
    setOpen(false);
    var byClient = document.querySelector("input[name=mx-by][value=client]");
    byClient.checked = true;
    byClient.dispatchEvent(new Event("change"));
    result.restored = rows.filter(function (tr) { return !tr.classList.contains("mx-out"); })
      .length;
    result.summariesAgree = JSON.stringify(summaries()) === JSON.stringify(written);
    result.summaries = written;
    result.errors = result.errors.concat((window.reportErrors || []).slice(result.errors.length));
    var out = document.getElementById("matrix-selftest");
    out.textContent = JSON.stringify(result);
    out.setAttribute("data-done", "1");
  }

  // #find=codex opens the page filtered (a link to one client's rows); #selftest tests it.
  var hash = decodeURIComponent(window.location.hash.slice(1));
  if (hash.indexOf("find=") === 0) {
    input.value = hash.slice(5);
    filter();
  }
  if (hash === "selftest") { selftest(); }
})();
