// ferry dashboard: keeps <main> current from the server's event stream
// (re-fetching it on a "changed" notice, at most every 250 ms), and posts the
// action forms after a confirmation, showing the answer in #notice.
(function () {
  'use strict';
  var main = document.getElementById('main');
  var live = document.getElementById('live');
  var notice = document.getElementById('notice');
  var timer = null, inflight = false, again = false;
  // Hub notices counted when what is shown was rendered.
  var seen = document.querySelector('meta[name="ferry-changes"]').content;

  // A selector for the focused element, so focus survives a refresh.
  function keyOf(el) {
    if (!el || !main.contains(el) || el === main) return null;
    if (el.tagName === 'A' && el.getAttribute('href')) {
      return 'a[href="' + CSS.escape(el.getAttribute('href')) + '"]';
    }
    if (el.tagName === 'BUTTON' && el.dataset.action) {
      var scope = '';
      var rs = el.closest('[data-replica-set]');
      var gate = el.closest('[data-gate]');
      if (rs) scope += '[data-replica-set="' + CSS.escape(rs.dataset.replicaSet) + '"] ';
      if (gate) scope += '[data-gate="' + CSS.escape(gate.dataset.gate) + '"] ';
      return scope + 'button[data-action="' + CSS.escape(el.dataset.action) + '"]';
    }
    return null;
  }

  function typing() {
    var el = document.activeElement;
    return el && main.contains(el) && (el.tagName === 'INPUT' || el.tagName === 'SELECT');
  }

  function refresh() {
    if (inflight || typing()) { again = true; schedule(1000); return; }
    inflight = true;
    fetch(location.href, { headers: { 'X-Ferry-Fragment': 'main' }, cache: 'no-store' })
      .then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status);
        seen = r.headers.get('X-Ferry-Changes') || seen;
        return r.text();
      })
      .then(function (html) {
        var key = keyOf(document.activeElement);
        main.innerHTML = html;
        if (key) {
          var el = main.querySelector(key);
          if (el) el.focus();
        }
        live.textContent = 'live · updated ' + new Date().toLocaleTimeString();
      })
      .catch(function (e) { live.textContent = 'update failed: ' + e.message; })
      .then(function () {
        inflight = false;
        if (again) { again = false; schedule(250); }
      });
  }

  function schedule(delay) {
    if (timer) return;
    timer = setTimeout(function () { timer = null; refresh(); }, delay);
  }

  var source = new EventSource('/events');
  source.addEventListener('hello', function (e) {
    live.textContent = 'live';
    // Changes between rendering and subscribing (or while reconnecting)
    // came as no notice: the count says so.
    if (e.data !== seen) schedule(0);
  });
  source.addEventListener('changed', function () { schedule(250); });
  source.onerror = function () { live.textContent = 'reconnecting to the dashboard…'; };

  function show(ok, text) {
    notice.textContent = text;
    notice.className = 'notice ' + (ok ? 'ok' : 'error');
    notice.focus();
  }

  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (!form.matches('form.action')) return;
    ev.preventDefault();
    if (!window.confirm(form.dataset.confirm)) return;
    notice.textContent = '';
    notice.className = 'notice';
    fetch(form.action, {
      method: 'POST',
      body: new URLSearchParams(new FormData(form)),
      headers: { 'X-Ferry-Fragment': 'result' }
    })
      .then(function (r) { return r.text().then(function (t) { show(r.ok, t); }); })
      .catch(function (e) { show(false, 'the dashboard is unreachable: ' + e.message); });
  });
})();
