/**
 * The explorer's stylesheet and its one small script, served as they are (no build step, no CDN: it works offline).
 * The script only enhances server-rendered pages: values on demand, live env updates over Server-Sent Events, a
 * reload when a watched conversation moves on, and the name a person decides approvals under, remembered in the
 * browser. It builds every node with `textContent`, never `innerHTML`.
 */

export const EXPLORER_CSS = `
:root { --fg: #1d232b; --muted: #6a7380; --line: #d9dee5; --bg: #f7f8fa; --card: #fff; --accent: #2857c5;
  --ok: #1f7a3a; --run: #a86400; --bad: #b3261e; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); font-size: 14px; line-height: 1.45; }
header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1.2em; background: #18202b; color: #fff; }
header a { color: #fff; }
.brand { font-weight: 700; text-decoration: none; }
.crumbs a { color: #cfe0ff; }
main { max-width: 1280px; margin: 0 auto; padding: 1em 1.2em 3em; }
h1 { font-size: 1.4em; margin: .3em 0; } h1 small, h2 small { color: var(--muted); font-weight: 400; font-size: .7em; }
h2 { font-size: 1.1em; margin: 1.4em 0 .5em; }
a { color: var(--accent); }
.muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { text-align: left; padding: .35em .6em; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; background: #eef1f5; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
pre { white-space: pre-wrap; word-break: break-word; margin: .3em 0; background: #f1f3f6; padding: .5em .7em; border-radius: 4px; max-height: 32em; overflow: auto; }
.status { display: inline-block; padding: 0 .5em; border-radius: 9px; font-size: 12px; background: #e4e7ec; }
.status-completed, .status-success, .status-answered, .status-approved { background: #dcf3e2; color: var(--ok); }
.status-running, .status-active, .status-pending, .status-open { background: #fff0d6; color: var(--run); }
.status-failed, .status-timeout, .status-max_steps, .status-cancelled, .status-partial, .status-rejected, .status-expired { background: #fde2e0; color: var(--bad); }
.badge { display: inline-block; padding: 0 .45em; border-radius: 9px; font-size: 11.5px; background: #e5ecfb; color: var(--accent); }
.search { margin: .6em 0 1em; display: flex; gap: .5em; align-items: center; }
.search input { width: 28em; max-width: 100%; padding: .35em .5em; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 1.6em; }
ul.tree { padding-left: 0; }
ul.tree ul { border-left: 2px solid var(--line); margin-left: .6em; }
.node { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .45em .7em; margin: .4em 0; }
.node-head .agent { font-size: 1.05em; }
.node-meta { color: var(--muted); font-size: 12.5px; }
.thread-id { margin-left: .4em; font-size: 12.5px; }
.fork { border: 1px dashed #9aa8c0; border-radius: 6px; padding: .5em .7em; margin: .4em 0; background: #f3f6fc; }
.timeline { position: relative; margin: .5em 0; }
.lane { display: flex; align-items: center; gap: .6em; margin: 2px 0; }
.lane-label { width: 14em; font-size: 12px; color: var(--muted); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.lane-track { position: relative; flex: 1; height: 14px; background: #e6eaf0; border-radius: 3px; }
.bar { position: absolute; top: 2px; height: 10px; border-radius: 3px; background: var(--run); }
.bar-success { background: var(--ok); } .bar-failed, .bar-timeout, .bar-cancelled { background: var(--bad); }
.deadline { position: absolute; top: -2px; height: 18px; width: 2px; background: var(--bad); z-index: 1; }
.reclaimed { position: absolute; top: -2px; width: 3px; height: 18px; background: #000; }
.question { background: #fffaf0; border: 1px solid #f0d9a8; border-radius: 6px; padding: .6em .8em; margin: .5em 0; }
.question textarea { display: block; width: 100%; margin: .3em 0; font: inherit; }
.badge-approval { background: #fff0d6; color: var(--run); }
.approval { background: #f4f7ff; border: 1px solid #b9c8ee; border-radius: 6px; padding: .6em .8em; margin: .5em 0; }
.approval pre.arguments { background: #fff; }
.tool-call .approval, .tool-call .approval-note { margin: .3em 0 .3em 1.2em; }
.approval-note { font-size: 12.5px; }
form.decide { display: flex; flex-wrap: wrap; gap: .5em; align-items: center; margin-top: .4em; }
form.decide label { display: flex; gap: .4em; align-items: center; }
form.decide .reason { flex: 1; min-width: 18em; } form.decide .reason input { flex: 1; }
form.decide input { padding: .25em .4em; font: inherit; } form.decide .by input { width: 10em; }
form.decide button { padding: .25em .9em; font: inherit; border-radius: 4px; border: 1px solid; cursor: pointer; }
button.approve { background: #dcf3e2; color: var(--ok); border-color: #8fcca0; }
button.reject { background: #fde2e0; color: var(--bad); border-color: #eba59f; }
blockquote { margin: .4em 0; padding: .3em .7em; border-left: 3px solid #f0c36d; background: #fff; }
.transcript { list-style: none; padding: 0; }
.msg { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .45em .7em; margin: .5em 0; }
.role-user { border-left: 4px solid var(--accent); } .role-assistant { border-left: 4px solid #7b5cc4; } .role-tool { border-left: 4px solid #8a96a8; }
.msg-head { font-size: 12.5px; color: var(--muted); } .msg-head strong { color: var(--fg); }
.preamble pre { background: #eef3ff; }
.tool-result.error { background: #fdecea; border-radius: 4px; padding: .2em .4em; }
.tool-result.error pre { background: #fbd9d5; color: var(--bad); }
.error-text { color: var(--bad); }
.arrow { color: var(--muted); }
details > summary { cursor: pointer; }
.asof { display: flex; gap: .7em; align-items: center; margin: .6em 0; }
.asof input { width: 6em; }
.manifest td:last-child { width: 36%; }
.live { color: var(--muted); } .live.connected { color: var(--ok); }
.asof-banner { background: #fff0d6; border: 1px solid #f0d9a8; padding: .4em .7em; border-radius: 4px; }
tr.later { opacity: .45; }
.events td:last-child { white-space: nowrap; }
tr.action-rejected td { color: var(--bad); }
tr.flash { animation: flash 2s ease-out; }
@keyframes flash { from { background: #fff3b0; } to { background: transparent; } }
`;

export const EXPLORER_JS = `'use strict';
(function () {
  function threadLink(thread) {
    var a = document.createElement('a');
    a.href = '/threads/' + encodeURIComponent(thread) + '/transcript';
    a.textContent = thread;
    return a;
  }
  function actorCell(cell, by) {
    cell.textContent = '';
    cell.append(by.agent + ' (', threadLink(by.thread), ')');
    if (by.task) { var b = document.createElement('span'); b.className = 'badge'; b.textContent = by.task; cell.append(' ', b); }
  }
  function timeCell(cell, iso) {
    cell.textContent = '';
    var t = document.createElement('time'); t.dateTime = iso; t.title = iso; t.textContent = String(iso).slice(11, 19);
    cell.append(t);
  }
  function cell(row, text, className) {
    var td = row.insertCell(-1); if (className) td.className = className;
    if (text !== undefined && text !== null) td.textContent = String(text);
    return td;
  }

  function compactJson(value, indent) {
    indent = indent || '';
    var inner = indent + '  ';
    if (Array.isArray(value)) {
      if (value.every(function (item) { return item === null || typeof item !== 'object'; })) {
        return '[' + value.map(function (item) { return JSON.stringify(item); }).join(', ') + ']';
      }
      return '[\\n' + value.map(function (item) { return inner + compactJson(item, inner); }).join(',\\n') + '\\n' + indent + ']';
    }
    if (value !== null && typeof value === 'object') {
      var keys = Object.keys(value);
      if (keys.length === 0) return '{}';
      return '{\\n' + keys.map(function (key) { return inner + JSON.stringify(key) + ': ' + compactJson(value[key], inner); }).join(',\\n') + '\\n' + indent + '}';
    }
    return JSON.stringify(value);
  }

  function loadValue(details) {
    if (!details.open || details.dataset.loaded || !details.dataset.src) return;
    details.dataset.loaded = '1';
    var pre = details.querySelector('pre');
    fetch(details.dataset.src, { headers: { accept: 'application/json' } })
      .then(function (r) { return r.json().then(function (body) { if (!r.ok) throw new Error(body.error || r.statusText); return body; }); })
      .then(function (entry) { pre.textContent = compactJson(entry.value); })
      .catch(function (error) { pre.textContent = 'could not load the value: ' + error.message; delete details.dataset.loaded; });
  }
  document.addEventListener('toggle', function (event) {
    var target = event.target;
    if (target && target.matches && target.matches('details.value')) loadValue(target);
  }, true);

  function manifestRow(root, key) {
    var body = document.querySelector('#manifest tbody');
    var rows = Array.prototype.slice.call(body.rows);
    for (var i = 0; i < rows.length; i++) if (rows[i].dataset.key === key) return rows[i];
    var before = rows.find(function (r) { return r.dataset.key > key; });
    var row = body.insertRow(before ? before.sectionRowIndex : -1);
    row.dataset.key = key;
    var code = document.createElement('code'); code.textContent = key; cell(row).append(code);
    cell(row, '', 'num').dataset.field = 'version';
    cell(row).dataset.field = 'by';
    cell(row).dataset.field = 'updated';
    cell(row).dataset.field = 'description';
    var details = document.createElement('details'); details.className = 'value';
    details.dataset.src = '/api/threads/' + encodeURIComponent(root) + '/env/value?key=' + encodeURIComponent(key);
    var summary = document.createElement('summary'); summary.textContent = 'value';
    var pre = document.createElement('pre'); pre.textContent = 'loading…';
    details.append(summary, pre); cell(row).append(details);
    return row;
  }
  function field(row, name) { return row.querySelector('[data-field="' + name + '"]'); }

  function applyChange(root, change) {
    var event = change.event, entry = change.entry;
    if (!change.rootScope) {
      // A write in a fork task's own scope: the log shows it, the root-scope manifest is unchanged.
    } else if (entry) {
      var row = manifestRow(root, entry.key);
      field(row, 'version').textContent = String(entry.version);
      actorCell(field(row, 'by'), entry.storedBy);
      timeCell(field(row, 'updated'), entry.updatedAt);
      field(row, 'description').textContent = entry.shortDescription;
      var details = row.querySelector('details.value');
      if (details) { delete details.dataset.loaded; if (details.open) loadValue(details); else details.querySelector('pre').textContent = 'loading…'; }
      row.classList.remove('flash'); void row.offsetWidth; row.classList.add('flash');
    } else {
      var body = document.querySelector('#manifest tbody');
      Array.prototype.slice.call(body.rows).forEach(function (r) { if (r.dataset.key === event.key) r.remove(); });
    }
    var empty = document.getElementById('manifest-empty');
    if (empty) empty.hidden = document.querySelector('#manifest tbody').rows.length > 0;

    var log = document.querySelector('#events tbody');
    if (log && !log.querySelector('tr[data-seq="' + event.seq + '"]')) {
      var tr = log.insertRow(-1);
      tr.dataset.seq = String(event.seq);
      tr.className = 'action-' + event.action + ' flash';
      cell(tr, event.seq, 'num'); timeCell(cell(tr), event.createdAt); cell(tr, event.action);
      var code = document.createElement('code'); code.textContent = event.key; cell(tr).append(code);
      cell(tr, event.scope || '(root)'); cell(tr, event.version === null ? '' : event.version, 'num');
      actorCell(cell(tr), event.actor); cell(tr, event.valueSize === null ? '' : event.valueSize, 'num');
      cell(tr, event.reason || '', event.action === 'rejected' ? 'error-text' : 'muted');
      var asOf = document.createElement('a');
      asOf.href = '/threads/' + encodeURIComponent(root) + '/env?asOf=' + event.seq; asOf.textContent = 'as of';
      cell(tr).append(asOf);
    }
    var input = document.querySelector('form.asof input[name="asOf"]');
    if (input) { input.max = String(event.seq); input.value = String(event.seq); }
  }

  var live = document.getElementById('live-status');
  if (live && live.dataset.stream && window.EventSource) {
    var root = decodeURIComponent(live.dataset.stream.split('/')[3]);
    var source = new EventSource(live.dataset.stream);
    source.addEventListener('env', function (message) {
      applyChange(root, JSON.parse(message.data));
      live.dataset.lastSeq = String(JSON.parse(message.data).event.seq);
    });
    source.addEventListener('open', function () { live.textContent = 'Live: connected, changes appear as they commit.'; live.classList.add('connected'); });
    source.addEventListener('error', function () { live.textContent = 'Live: reconnecting…'; live.classList.remove('connected'); });
  }

  // The name approvals are decided under: remembered in this browser only, and filled into each decision form.
  var DECIDER_KEY = 'baton-explorer-decider';
  function storage() { try { return window.localStorage; } catch (error) { return undefined; } }
  var decider = storage() && storage().getItem(DECIDER_KEY);
  Array.prototype.forEach.call(document.querySelectorAll('form.decide input[name="by"]'), function (input) {
    if (decider && !input.value) input.value = decider;
  });
  document.addEventListener('submit', function (event) {
    var form = event.target;
    if (!form || !form.matches || !form.matches('form.decide')) return;
    var by = form.querySelector('input[name="by"]');
    var store = storage();
    if (by && store && by.value.trim() !== '') store.setItem(DECIDER_KEY, by.value.trim());
  }, true);

  var poll = document.body.dataset.poll;
  if (poll) {
    setInterval(function () {
      if (document.hidden) return;
      fetch(poll, { headers: { accept: 'application/json' } }).then(function (r) { return r.ok ? r.json() : undefined; }).then(function (view) {
        if (!view || view.signature === document.body.dataset.signature) return;
        // A reload would lose what the person is writing: an answer, a reason, a field in use.
        var drafts = document.querySelectorAll('textarea, form.decide input[name="reason"]');
        var writing = Array.prototype.some.call(drafts, function (field) { return field.value !== ''; });
        var active = document.activeElement;
        if (active && (active.tagName === 'INPUT' || active.tagName === 'TEXTAREA')) writing = true;
        if (!writing) location.reload();
      }).catch(function () { /* the next poll tries again */ });
    }, 2000);
  }
})();
`;
