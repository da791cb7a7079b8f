{# The report's only script. No user text ever goes into it: it only reads the DOM. The page's
   content-security-policy allows it by the sha256 of its rendered text. #}
(function () {
  var box = document.getElementById("filter");
  var shown = document.getElementById("shown");
  var bodies = Array.prototype.slice.call(document.querySelectorAll("tbody.item"));
  function apply() {
    var query = box.value.trim().toLowerCase();
    var count = 0;
    bodies.forEach(function (body) {
      var hit = !query || body.textContent.toLowerCase().indexOf(query) !== -1;
      body.hidden = !hit;
      if (hit) { count += 1; }
    });
    shown.textContent = count + " of " + bodies.length + " items";
  }
  function openAll(open) {
    document.querySelectorAll("tr.more > td > details").forEach(function (d) { d.open = open; });
  }
  box.addEventListener("input", apply);
  document.getElementById("expand").addEventListener("click", function () { openAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { openAll(false); });
  apply();
})();
