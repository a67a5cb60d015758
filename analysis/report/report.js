// The report's only script, inlined into the page: client and session filters, one section
// at a time (#only=NAME, e.g. for a screenshot), labels moved apart where they collide, and
// a self-test (#selftest) that works a filter, measures the laid-out page (overlapping
// labels, content cut off out of reach) and writes what it saw into <output id="selftest">
// for the Chromium tests.
(function () {
  "use strict";

  // ---------------------------------------------------------------- labels apart
  // The charts are drawn in Python, which can only guess how wide a label is in the
  // reader's font; here the font is known. Each chart's labels are placed in document
  // order: one that collides with a label already placed, or sticks out of its chart
  // (an SVG clips what is outside it), moves sideways into the chart and then up or down a
  // line at a time to the nearest free place. An axis label (class "drop") that collides
  // is left out rather than moved off its tick (its neighbours carry the scale); any other
  // label that finds no place gets a new line at the chart's top (the chart grows), so
  // that no figure is lost.
  var GAP = 1; // user units kept between two labels

  function hit(a, b) {
    return a.x < b.x + b.width + GAP && b.x < a.x + a.width + GAP &&
      a.y < b.y + b.height && b.y < a.y + a.height;
  }

  function shifted(b, dx, dy) {
    return { x: b.x + dx, y: b.y + dy, width: b.width, height: b.height };
  }

  function move(t, dx, dy) {
    if (dx) { t.setAttribute("x", String(parseFloat(t.getAttribute("x") || "0") + dx)); }
    if (dy) { t.setAttribute("y", String(parseFloat(t.getAttribute("y") || "0") + dy)); }
  }

  function spread(svg) {
    var vb = svg.viewBox && svg.viewBox.baseVal;
    if (!vb || !vb.width) { return; }
    var top = vb.y;
    var placed = [];
    var texts = Array.prototype.slice.call(svg.querySelectorAll("text"));
    texts.forEach(function (t) {
      if (!t.textContent.trim()) { return; }
      var b;
      try { b = t.getBBox(); } catch (e) { return; }
      if (!b.width) { return; }
      var dx = 0;
      if (b.x + b.width > vb.x + vb.width - GAP) { dx = vb.x + vb.width - GAP - b.x - b.width; }
      if (b.x + dx < vb.x + GAP) { dx = vb.x + GAP - b.x; }
      var step = b.height + GAP;
      var free = function (c) {
        if (c.y < top || c.y + c.height > vb.y + vb.height) { return false; }
        return placed.every(function (p) { return !hit(c, p); });
      };
      var tries = t.classList.contains("drop") ? 0 : 16; // an axis label stays or goes
      for (var i = 0; i <= tries; i += 1) {
        var dy = (i % 2 ? -1 : 1) * Math.ceil(i / 2) * step; // 0, -1, +1, -2, +2 lines …
        var c = shifted(b, dx, dy);
        if (free(c)) {
          move(t, dx, dy);
          placed.push(c);
          return;
        }
      }
      if (t.classList.contains("drop")) {
        t.setAttribute("display", "none");
        return;
      }
      // A new line above everything placed: the chart grows upwards.
      var highest = placed.reduce(function (m, p) { return Math.min(m, p.y); }, b.y);
      var dyTop = highest - step - b.y;
      top = Math.min(top, b.y + dyTop - GAP);
      var cTop = shifted(b, dx, dyTop);
      move(t, dx, dyTop);
      placed.push(cTop);
    });
    if (top < vb.y) {
      var grow = vb.y - top;
      svg.setAttribute("viewBox", [vb.x, top, vb.width, vb.height + grow].join(" "));
    }
  }

  function spreadAll() {
    document.querySelectorAll("svg.chart").forEach(spread);
  }

  // ---------------------------------------------------------------- wide tables
  // A table wider than the window scrolls sideways in its own box, and says so above it:
  // a scroll bar may be hidden until used (overlay scroll bars), and the columns past the
  // edge (the compare heat map's last ones) must not pass for the end of the table. The
  // box takes the keyboard's focus, so that arrow keys scroll it.
  var MORE = "Wider than the window: scroll sideways for the rest \u2192";

  function hints() {
    document.querySelectorAll(".scroll").forEach(function (box) {
      var wide = box.clientWidth > 0 && box.scrollWidth > box.clientWidth + 1;
      var hint = box.previousElementSibling;
      if (!hint || !hint.classList.contains("more")) {
        if (!wide) { return; }
        hint = document.createElement("p");
        hint.className = "more";
        hint.textContent = MORE;
        box.parentNode.insertBefore(hint, box);
        box.tabIndex = 0;
        box.setAttribute("aria-label", "table, scrolls sideways");
      }
      hint.hidden = !wide;
    });
  }

  // ---------------------------------------------------------------- filters
  var boxes = Array.prototype.slice.call(document.querySelectorAll(".client-filter"));
  var find = document.getElementById("session-find");
  var eventful = document.getElementById("eventful-only");

  function shownClients() {
    var on = {};
    boxes.forEach(function (b) { if (b.checked) { on[b.value] = true; } });
    return on;
  }

  function apply() {
    var on = shownClients();
    var text = find ? find.value.trim().toLowerCase() : "";
    var onlyEventful = eventful ? eventful.checked : false;
    document.querySelectorAll("[data-client]").forEach(function (el) {
      var hide = !on[el.getAttribute("data-client")];
      if (el.tagName === "TR" && el.closest("table.sessions")) {
        if (text && el.textContent.toLowerCase().indexOf(text) < 0) { hide = true; }
        if (onlyEventful && !el.hasAttribute("data-eventful")) { hide = true; }
      }
      el.hidden = hide;
    });
  }

  boxes.forEach(function (b) { b.addEventListener("change", function () { apply(); hints(); }); });
  if (find) { find.addEventListener("input", apply); }
  if (eventful) { eventful.addEventListener("change", apply); }
  var all = document.getElementById("all-clients");
  if (all) {
    all.addEventListener("click", function () {
      boxes.forEach(function (b) { b.checked = true; });
      apply();
      hints();
    });
  }
  window.addEventListener("resize", hints);
  document.querySelectorAll("details").forEach(function (d) {
    d.addEventListener("toggle", hints);
  });

  function only(name) {
    document.querySelectorAll("section.part").forEach(function (s) {
      s.hidden = s.id !== name;
    });
  }

  function visible(selector) {
    return Array.prototype.filter.call(document.querySelectorAll(selector), function (el) {
      return !el.hidden && el.offsetParent !== null;
    });
  }

  function shown(el) {
    var box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && el.getClientRects().length > 0;
  }

  function where(el) {
    var home = el.closest("[id]");
    return home ? home.id : el.tagName.toLowerCase();
  }

  // Pairs of labels of one chart whose boxes, as laid out, overlap (by more than a pixel
  // each way: the boxes of two lines of text set tight touch).
  function overlaps() {
    var found = [];
    document.querySelectorAll("svg.chart").forEach(function (svg) {
      var boxes = [];
      svg.querySelectorAll("text").forEach(function (t) {
        if (t.textContent.trim() && shown(t)) {
          boxes.push([t.textContent, t.getBoundingClientRect()]);
        }
      });
      for (var i = 0; i < boxes.length; i += 1) {
        for (var j = i + 1; j < boxes.length; j += 1) {
          var a = boxes[i][1], b = boxes[j][1];
          var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
          var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
          if (w > 1 && h > 1) {
            found.push({ chart: where(svg), a: boxes[i][0], b: boxes[j][0] });
          }
        }
      }
    });
    // A table cell whose text is wider than the cell spills over its neighbour (a heat
    // map's header with a long word in a narrow column).
    document.querySelectorAll("th, td").forEach(function (cell) {
      if (shown(cell) && cell.scrollWidth > cell.clientWidth + 1) {
        found.push({ chart: where(cell), a: cell.textContent, b: "(its neighbour)" });
      }
    });
    return found;
  }

  // Content the reader cannot reach: an element wider than its box whose overflow is
  // neither shown nor scrollable, a label sticking out of its chart (an SVG clips), or a
  // page wider than the window that the window cannot scroll.
  function clipped() {
    var found = [];
    document.querySelectorAll("body *").forEach(function (el) {
      if (!(el instanceof HTMLElement) || !shown(el)) { return; }
      var x = getComputedStyle(el).overflowX;
      if ((x === "hidden" || x === "clip") && el.scrollWidth > el.clientWidth + 1) {
        found.push({ where: where(el), what: el.tagName.toLowerCase() + "." + el.className,
          scrollWidth: el.scrollWidth, clientWidth: el.clientWidth });
      }
    });
    document.querySelectorAll("svg.chart").forEach(function (svg) {
      var box = svg.getBoundingClientRect();
      svg.querySelectorAll("text").forEach(function (t) {
        if (!t.textContent.trim() || !shown(t)) { return; }
        var r = t.getBoundingClientRect();
        if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 ||
            r.bottom > box.bottom + 1) {
          found.push({ where: where(svg), what: "text", text: t.textContent });
        }
      });
    });
    var page = getComputedStyle(document.documentElement).overflowX;
    if ((page === "hidden" || page === "clip") &&
        document.documentElement.scrollWidth > window.innerWidth + 1) {
      found.push({ where: "page", what: "html" });
    }
    return found;
  }

  function selftest() {
    var result = { errors: window.reportErrors || [], charts: 0, marks: 0 };
    result.width = window.innerWidth;
    // Every box wider than the window, and whether it says so (its hint shown).
    result.wide = Array.prototype.filter.call(document.querySelectorAll(".scroll"), shown)
      .filter(function (box) { return box.scrollWidth > box.clientWidth + 1; })
      .map(function (box) {
        var hint = box.previousElementSibling;
        return { where: where(box), said: !!hint && hint.classList.contains("more") &&
          shown(hint) };
      });
    result.overlaps = overlaps();
    result.clipped = clipped();
    // What the timelines mark as a session's end, and whether a GET stream is among them.
    result.ends = Array.prototype.map.call(document.querySelectorAll("svg.timeline g.end text"),
      function (t) { return t.textContent; });
    result.streamEnds = Array.prototype.filter.call(
      document.querySelectorAll("svg.timeline g.end title"),
      function (t) { return t.textContent.indexOf("GET stream") >= 0; }).length;
    result.streams = document.querySelectorAll("svg.timeline .bar.stream").length;
    result.arcLabels = Array.prototype.map.call(
      document.querySelectorAll("svg.timeline .link-lbl"), function (t) { return t.textContent; });
    // The model's lane: its turns, the arrows to the calls they asked for, and the stalls'
    // labels shown (a label the page had to leave out would hide who was waited on).
    result.modelBars = document.querySelectorAll("svg.timeline .bar.model").length;
    result.asks = document.querySelectorAll("svg.timeline .link.ask").length;
    result.stallLabels = Array.prototype.filter.call(
      document.querySelectorAll("svg.timeline .stall-lbl"), shown)
      .map(function (t) { return t.textContent; });
    document.querySelectorAll("svg.chart").forEach(function (s) {
      var box = s.getBoundingClientRect();
      if (box.width > 0 && box.height > 0) { result.charts += 1; }
    });
    result.marks = document.querySelectorAll("svg.chart rect, svg.chart path").length;
    result.clients = boxes.map(function (b) { return b.value; });
    result.before = visible("[data-client]").length;
    if (boxes.length > 1) {
      var keep = boxes[0].value;
      boxes.forEach(function (b) {
        b.checked = b === boxes[0];
        b.dispatchEvent(new Event("change"));
      });
      var left = visible("[data-client]");
      result.kept = keep;
      result.after = left.length;
      result.othersHidden = left.every(function (el) {
        return el.getAttribute("data-client") === keep;
      });
      all.click();
      result.restored = visible("[data-client]").length;
    }
    var out = document.getElementById("selftest");
    out.textContent = JSON.stringify(result);
    out.setAttribute("data-done", "1");
  }

  var hash = decodeURIComponent(window.location.hash.slice(1));
  // Labels are moved apart while every chart is laid out (a hidden one has no size);
  // #selftest-raw leaves them where Python drew them, for the self-test's own test.
  if (hash === "selftest-raw") { hash = "selftest"; } else { spreadAll(); }
  if (hash.indexOf("only=") === 0) { only(hash.slice(5)); }
  apply();
  hints();
  if (hash === "selftest") { selftest(); }
})();
