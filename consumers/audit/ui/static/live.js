// Live status: every few seconds, ask the server for the current status of the runs and jobs this page
// shows (elements with data-run / data-job) and update them in place, so a running job's status changes
// without a reload. A short poll, not SSE: one small GET per page, no connection held per browser tab.
(function () {
  "use strict";
  var script = document.currentScript;
  var every = 1000 * parseFloat((script && script.dataset.poll) || "2");

  function duration(ms) {
    if (ms === null || ms === undefined) return "–";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    var m = Math.floor(s / 60), sec = Math.floor(s) % 60;
    if (m < 60) return m + " min " + String(sec).padStart(2, "0") + " s";
    return Math.floor(m / 60) + " h " + String(m % 60).padStart(2, "0") + " min";
  }
  function time(iso) {
    return iso ? iso.replace("T", " ").replace(/(\.\d+)?Z$/, "") + " UTC" : "–";
  }
  function setStatus(el, status) {
    var word = status || "no run";
    if (el.textContent !== word) {
      el.textContent = word;
      el.className = "status s-" + (status || "NONE");
    }
  }
  function poll() {
    var runs = {}, jobs = {};
    document.querySelectorAll("[data-run]").forEach(function (el) { runs[el.dataset.run] = 1; });
    document.querySelectorAll("[data-job]").forEach(function (el) { jobs[el.dataset.job] = 1; });
    var r = Object.keys(runs), j = Object.keys(jobs);
    if (!r.length && !j.length) return;
    var url = "/ui/api/live?runs=" + encodeURIComponent(r.join(",")) + "&jobs=" + encodeURIComponent(j.join(","));
    fetch(url, {credentials: "same-origin"}).then(function (resp) { return resp.ok ? resp.json() : null; })
      .then(function (data) {
        if (!data) return;
        document.querySelectorAll("[data-run]").forEach(function (el) {
          var info = data.runs[el.dataset.run];
          if (!info) return;
          setStatus(el, info.status);
          var row = el.closest("tr") || el.closest("p");
          if (!row) return;
          var end = row.querySelector("[data-field=ended_at]"), dur = row.querySelector("[data-field=duration]");
          if (end) end.textContent = time(info.ended_at);
          if (dur) dur.textContent = duration(info.duration_ms);
        });
        document.querySelectorAll("[data-job]").forEach(function (el) {
          var info = data.jobs[el.dataset.job];
          if (info) setStatus(el, info.status);
        });
      }).catch(function () { /* the next poll tries again */ });
  }
  setInterval(poll, every);
})();
