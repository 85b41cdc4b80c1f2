// personaq console: live updates by server-sent events. No framework, no
// build step; every value is inserted as text, never as HTML.
"use strict";

(function () {
  function cell(text, cls) {
    var td = document.createElement("td");
    td.textContent = text || "";
    if (cls) td.className = cls;
    return td;
  }

  function taskLink(task) {
    var td = document.createElement("td");
    var a = document.createElement("a");
    a.href = "/task?q=" + encodeURIComponent(task || "");
    a.textContent = task || "";
    td.appendChild(a);
    return td;
  }

  function liveRow(ev) {
    var tr = document.createElement("tr");
    tr.className = ev.kind + " " + ev.tone + " fresh";
    tr.dataset.request = ev.request_id;
    tr.appendChild(cell(ev.clock || new Date(ev.at).toISOString().slice(11, 23)));
    tr.appendChild(cell(ev.persona));
    tr.appendChild(cell(ev.what, "what"));
    tr.appendChild(taskLink(ev.task_id));
    tr.appendChild(cell(ev.request_id, "req"));
    tr.appendChild(cell(ev.detail, "err"));
    return tr;
  }

  function live() {
    var table = document.getElementById("live");
    var body = document.getElementById("live-body");
    var status = document.getElementById("live-status");
    var es = new EventSource("/events?after=" + encodeURIComponent(table.dataset.after || "0"));
    function add(msg) {
      body.insertBefore(liveRow(JSON.parse(msg.data)), body.firstChild);
      while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
    }
    es.addEventListener("outcome", add);
    es.addEventListener("attempt", add);
    es.onopen = function () { status.textContent = "live"; status.className = "small ok-text"; };
    es.onerror = function () { status.textContent = "reconnecting…"; status.className = "small bad-text"; };
  }

  function overview() {
    var box = document.getElementById("personas");
    var es = new EventSource("/events?after=" + encodeURIComponent(box.dataset.lastEvent || "0"));
    var timer = null;
    function refresh() {
      timer = null;
      fetch("/fragments/personas", { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) { box.innerHTML = html; })
        .catch(function () {});
    }
    function soon() { if (!timer) timer = setTimeout(refresh, 1000); }
    es.addEventListener("outcome", soon);
    es.addEventListener("attempt", soon);
  }

  function job() {
    var el = document.getElementById("job");
    if (el.dataset.state !== "running") return;
    var es = new EventSource("/jobs/" + encodeURIComponent(el.dataset.job) + "/events");
    es.addEventListener("status", function (msg) {
      var st = JSON.parse(msg.data);
      document.getElementById("job-progress").value = st.done;
      var counts = document.getElementById("job-counts");
      counts.querySelector(".done").textContent = st.done;
      counts.querySelector(".ok-n").textContent = st.ok;
      counts.querySelector(".dup-n").textContent = st.duplicates;
      counts.querySelector(".fail-n").textContent = st.failed;
      if (st.state === "finished") { es.close(); window.location.reload(); }
    });
  }

  // liveOutput shows a running request's live output as its persona
  // writes it; a retry that voids it starts the text over.
  function liveOutput(pre) {
    var note = pre.nextElementSibling;
    var es = new EventSource("/requests/" + encodeURIComponent(pre.dataset.request) + "/output");
    es.addEventListener("output", function (msg) {
      var c = JSON.parse(msg.data);
      pre.textContent += c.data;
      if (c.truncated) note.textContent = "over the live output cap: " + c.truncated + " bytes not shown";
    });
    es.addEventListener("output_superseded", function (msg) {
      var c = JSON.parse(msg.data);
      pre.textContent = "";
      note.textContent = "attempt " + c.attempt + " started over (the output of attempt " + c.supersedes + " is void)";
    });
    es.addEventListener("end", function () {
      es.close();
      pre.dataset.ended = "true";
      note.textContent += (note.textContent ? " · " : "") + "ended: reload for the terminal record";
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("pre.live-output").forEach(liveOutput);
    if (document.getElementById("live")) live();
    if (document.getElementById("personas")) overview();
    if (document.getElementById("job")) job();
  });
})();
