// openplaybook console: follows the page's event stream (the
// <meta name="openplaybook-events"> URL, server-sent events). On a
// "status" event the page is reloaded, unless the operator is typing in
// a form, then a banner offers the reload; "progress" lines are shown in
// the page's #live list. Nothing else: every action is a plain form.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="openplaybook-events"]');
  if (!meta || !window.EventSource) {
    return;
  }
  var timer = null;
  function busy() {
    var a = document.activeElement;
    if (a && (a.tagName === "INPUT" || a.tagName === "TEXTAREA") && a.type !== "hidden" && a.type !== "submit") {
      return true;
    }
    var fields = document.querySelectorAll('input[type="text"], textarea');
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) {
        return true;
      }
    }
    return false;
  }
  function changed() {
    if (timer !== null) {
      return;
    }
    timer = setTimeout(function () {
      timer = null;
      if (busy()) {
        document.getElementById("changed").hidden = false;
      } else {
        window.location.reload();
      }
    }, 250);
  }
  var es = new EventSource(meta.content);
  es.addEventListener("status", changed);
  es.addEventListener("progress", function (ev) {
    var list = document.getElementById("live");
    if (!list) {
      return;
    }
    var data;
    try {
      data = JSON.parse(ev.data);
    } catch (e) {
      return;
    }
    var li = document.createElement("li");
    li.textContent = data.text || "";
    list.appendChild(li);
    while (list.children.length > 200) {
      list.removeChild(list.firstElementChild);
    }
  });
})();
