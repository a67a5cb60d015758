// The report's only script, inlined into the page: client and session filters, one section
// at a time (#only=NAME, e.g. for a screenshot), and a self-test (#selftest) that works a
// filter and writes what it saw into <output id="selftest"> for the Chromium tests.
(function () {
  "use strict";
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

  boxes.forEach(function (b) { b.addEventListener("change", apply); });
  if (find) { find.addEventListener("input", apply); }
  if (eventful) { eventful.addEventListener("change", apply); }
  var all = document.getElementById("all-clients");
  if (all) {
    all.addEventListener("click", function () {
      boxes.forEach(function (b) { b.checked = true; });
      apply();
    });
  }

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

  function selftest() {
    var result = { errors: window.reportErrors || [], charts: 0, marks: 0 };
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
  if (hash.indexOf("only=") === 0) { only(hash.slice(5)); }
  apply();
  if (hash === "selftest") { selftest(); }
})();
