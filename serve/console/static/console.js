// openplaybook console. The session's CSRF token is never in a page
// (a page can be read with the session cookie alone, which browsers send
// to every port of the host): the login answer hands it over once, it is
// kept in this origin's localStorage, and every form's csrf field is
// filled from there.
(function () {
  "use strict";
  var key = "openplaybook-csrf";
  var login = document.getElementById("openplaybook-login");
  if (login) {
    try { window.localStorage.setItem(key, login.getAttribute("data-csrf")); } catch (e) {}
    var next = login.getAttribute("data-next") || "/";
    if (next.charAt(0) !== "/" || next.charAt(1) === "/" || next.indexOf("\\") >= 0) {
      next = "/";
    }
    window.location.replace(next);
    return;
  }
  var token = "";
  try { token = window.localStorage.getItem(key) || ""; } catch (e) {}
  var fields = document.querySelectorAll('input[name="csrf"]');
  for (var i = 0; i < fields.length; i++) {
    fields[i].value = token;
  }
  var out = document.querySelector("form.logout");
  if (out) {
    out.addEventListener("submit", function () {
      try { window.localStorage.removeItem(key); } catch (e) {}
    });
  }
})();

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
  var keep = "openplaybook-keep";
  // What a reload keeps: the element that had focus (by id, else by its
  // place among the page's focusable elements) and which <details> were
  // open, so a live update neither moves focus nor closes what the
  // operator opened.
  var focusable = "a[href], button, input, select, textarea, summary, [tabindex]";
  function save() {
    var st = { path: window.location.pathname + window.location.search, open: [], focus: null, index: -1 };
    var ds = document.querySelectorAll("details");
    for (var i = 0; i < ds.length; i++) {
      if (ds[i].open) {
        st.open.push(ds[i].id || String(i));
      }
    }
    var a = document.activeElement;
    if (a && a !== document.body) {
      if (a.id) {
        st.focus = a.id;
      } else {
        st.index = Array.prototype.indexOf.call(document.querySelectorAll(focusable), a);
      }
    }
    try { window.sessionStorage.setItem(keep, JSON.stringify(st)); } catch (e) {}
  }
  (function restore() {
    var st = null;
    try {
      st = JSON.parse(window.sessionStorage.getItem(keep) || "null");
      window.sessionStorage.removeItem(keep);
    } catch (e) {}
    if (!st || st.path !== window.location.pathname + window.location.search) {
      return;
    }
    var ds = document.querySelectorAll("details");
    for (var i = 0; i < ds.length; i++) {
      if (st.open.indexOf(ds[i].id || String(i)) >= 0) {
        ds[i].open = true;
      }
    }
    var el = st.focus ? document.getElementById(st.focus) : null;
    if (!el && st.index >= 0) {
      el = document.querySelectorAll(focusable)[st.index] || null;
    }
    if (el && el.focus) {
      el.focus({ preventScroll: true });
    }
  })();
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
        save();
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
