/**
 * The explorer's stylesheet and its one small script, served as they are (no build step, no CDN: it works offline).
 * The script only enhances server-rendered pages: values on demand, live env updates over Server-Sent Events, the
 * tree and transcript following their run's feed (streamed text as it is generated, stored steps redrawn from the
 * server's own markup), and the name a person decides approvals under, remembered in the browser. It builds every
 * node with `textContent` (or takes it from the server's page, parsed inert), never `innerHTML`.
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
.status-running, .status-active, .status-pending, .status-open, .status-paused { background: #fff0d6; color: var(--run); }
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
.badge-watcher { background: #efe7fb; color: #5b3fa3; text-decoration: none; }
.watcher { background: var(--card); border: 1px solid var(--line); border-left: 4px solid #7b5cc4; border-radius: 6px; padding: .45em .7em; margin: .4em 0; }
.watcher table.wakeups { margin-top: .4em; } .wakeups caption { text-align: left; color: var(--muted); font-size: 12.5px; }
ul.changes { margin: 0; padding-left: 1.1em; }
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
.live-stream, .live-reply { margin: .4em 0 0; padding: .3em .6em; border-radius: 4px; }
.live-stream { background: #fbf7ff; border: 1px dashed #b9a3e6; }
.live-stream .live-head strong { color: #7b5cc4; }
.live-stream .live-text:empty { display: none; }
.live-stream .live-text::after { content: '▍'; color: #7b5cc4; animation: blink 1s steps(2) infinite; }
@keyframes blink { 50% { opacity: 0; } }
.live-reply { background: #f6f8fb; border: 1px solid var(--line); }
.live-reply pre, .live-stream pre { margin: .2em 0; max-height: 14em; }
pre.live-calls { background: #eef1f5; color: var(--muted); }
li.live-stream { list-style: none; }
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
  function fillDecider(within) {
    var decider = storage() && storage().getItem(DECIDER_KEY);
    Array.prototype.forEach.call(within.querySelectorAll('form.decide input[name="by"]'), function (input) {
      if (decider && !input.value) input.value = decider;
    });
  }
  fillDecider(document);
  document.addEventListener('submit', function (event) {
    var form = event.target;
    if (!form || !form.matches || !form.matches('form.decide')) return;
    var by = form.querySelector('input[name="by"]');
    var store = storage();
    if (by && store && by.value.trim() !== '') store.setItem(DECIDER_KEY, by.value.trim());
  }, true);

  // Whether the person is writing in \`within\`: an answer, a reason, a field in use. Redrawing it would lose that.
  function writingIn(within) {
    var drafts = within.querySelectorAll('textarea, form.decide input[name="reason"]');
    if (Array.prototype.some.call(drafts, function (field) { return field.value !== ''; })) return true;
    var active = document.activeElement;
    return !!active && within.contains(active) && (active.tagName === 'INPUT' || active.tagName === 'TEXTAREA');
  }

  function startPoll() {
    var poll = document.body.dataset.poll;
    if (!poll) return;
    setInterval(function () {
      if (document.hidden) return;
      fetch(poll, { headers: { accept: 'application/json' } }).then(function (r) { return r.ok ? r.json() : undefined; }).then(function (view) {
        if (!view || view.signature === document.body.dataset.signature) return;
        if (!writingIn(document)) location.reload();
      }).catch(function () { /* the next poll tries again */ });
    }, 2000);
  }

  // ---- The run, live: the tree and the transcript follow the root's run feed (Server-Sent Events). Streamed text is
  // drawn from the deltas with textContent; everything stored is redrawn from the page as the server renders it
  // (fetched, parsed inert with DOMParser, and swapped in part by part), so the page never shows anything the
  // server would not, and model text only ever reaches the page escaped.
  var here = document.body.dataset.thread;
  var onTranscript = here !== undefined;
  var streams = {};
  var ended = {};
  var replies = {};
  var lastSeq = 0;

  function isMine(thread) { return !onTranscript || thread === here; }
  function operationOf(stream) { var at = stream.lastIndexOf('#'); return at < 0 ? stream : stream.slice(0, at); }
  function nodeCard(thread) {
    var cards = document.querySelectorAll('#tree .node[data-thread]');
    for (var i = 0; i < cards.length; i++) if (cards[i].dataset.thread === thread) return cards[i];
    return undefined;
  }
  // A box goes under its thread's card on the tree (when the card is drawn yet), at the end of the transcript.
  function place(box, thread) {
    if (onTranscript) { var list = document.getElementById('transcript'); if (list) list.append(box); emptyNote(); return; }
    var card = nodeCard(thread);
    if (card) card.append(box); else box.remove();
  }
  function emptyNote() {
    var list = document.getElementById('transcript'), empty = document.getElementById('transcript-empty');
    if (list && empty) empty.hidden = list.children.length > 0;
  }
  function head(parts) {
    var div = document.createElement('div'); div.className = 'msg-head live-head';
    div.append.apply(div, parts);
    return div;
  }
  function strong(text) { var b = document.createElement('strong'); b.textContent = text; return b; }

  function streamOf(delta) {
    var entry = streams[delta.stream];
    if (entry || ended[delta.stream]) return entry;
    var box = document.createElement(onTranscript ? 'li' : 'div');
    box.className = onTranscript ? 'msg role-assistant live-stream' : 'live-stream';
    box.dataset.stream = delta.stream;
    box.dataset.thread = delta.threadId;
    var text = document.createElement('pre'); text.className = 'content live-text';
    var calls = document.createElement('pre'); calls.className = 'live-calls'; calls.hidden = true;
    box.append(head([strong('streaming'), ' (' + delta.agent + ') · step ' + delta.step + (delta.attempt > 1 ? ', attempt ' + delta.attempt : '') + ' …']), text, calls);
    entry = { stream: delta.stream, thread: delta.threadId, operation: operationOf(delta.stream), box: box, text: text.appendChild(document.createTextNode('')), calls: calls, callList: [], next: 0 };
    streams[delta.stream] = entry;
    // A newer reply of the thread replaces the last stored one shown on the tree.
    var reply = replies[delta.threadId];
    if (reply) { reply.box.remove(); delete replies[delta.threadId]; }
    place(box, delta.threadId);
    return entry;
  }
  function addDelta(delta) {
    var entry = streamOf(delta);
    if (!entry) return;
    // Parts are numbered per stream: a gap is text published while this page was not listening.
    if (delta.part !== entry.next) entry.text.appendData(' … ');
    entry.next = delta.part + 1;
    if (delta.text) entry.text.appendData(delta.text);
    (delta.toolCalls || []).forEach(function (call) {
      var last = entry.callList[entry.callList.length - 1];
      if (!last || call.id !== undefined || call.name !== undefined || last.index !== call.index) {
        last = { index: call.index, name: call.name || '', args: '' };
        entry.callList.push(last);
      }
      last.args += call.arguments || '';
    });
    if (entry.callList.length > 0) {
      entry.calls.hidden = false;
      entry.calls.textContent = entry.callList.map(function (call) { return '→ ' + call.name + ' ' + call.args; }).join('\\n');
    }
  }
  function endStream(stream) {
    ended[stream] = true;
    var entry = streams[stream];
    if (!entry) return;
    entry.box.remove();
    delete streams[stream];
    emptyNote();
  }
  function eachStream(test, act) {
    Object.keys(streams).forEach(function (stream) { if (test(streams[stream])) act(streams[stream]); });
  }

  // A call waiting for room under a limit every worker shares: a line where its streamed text will come, until it does.
  var waits = {};
  function waitingCall(event) {
    endWaiting(event.operationId);
    var box = document.createElement(onTranscript ? 'li' : 'div');
    box.className = onTranscript ? 'msg role-assistant live-stream live-waiting' : 'live-stream live-waiting';
    box.dataset.thread = event.threadId;
    box.append(head([strong('waiting for capacity'), ' (' + (event.agent || '') + ') · ' + event.scope + ': ' + event.reason]));
    waits[event.operationId] = { box: box, thread: event.threadId };
    place(box, event.threadId);
  }
  function endWaiting(operation) {
    var wait = waits[operation];
    if (!wait) return;
    wait.box.remove();
    delete waits[operation];
    emptyNote();
  }

  // On the tree, the stored reply takes the place of its streamed text under the thread's card.
  function storedReply(event) {
    var old = replies[event.threadId];
    if (old) old.box.remove();
    var box = document.createElement('div'); box.className = 'live-reply'; box.dataset.thread = event.threadId;
    var time = document.createElement('time'); time.dateTime = event.at; time.title = event.at; time.textContent = String(event.at).slice(11, 19);
    var text = document.createElement('pre'); text.className = 'content'; text.hidden = true;
    var calls = document.createElement('pre'); calls.className = 'live-calls'; calls.hidden = true;
    box.append(head([strong('reply'), ' (' + (event.agent || '') + ') ', time]), text, calls);
    var reply = { seq: event.seq, box: box, text: text, calls: calls };
    replies[event.threadId] = reply;
    var streamed;
    eachStream(function (entry) { return entry.operation === event.operationId; }, function (entry) { streamed = entry; });
    if (streamed && streamed.box.parentNode) streamed.box.replaceWith(box); else place(box, event.threadId);
    if (streamed) { ended[streamed.stream] = true; delete streams[streamed.stream]; }
  }
  function replyPart(event) {
    var reply = replies[event.threadId];
    if (!reply || reply.seq !== event.seq) return;
    if (event.type === 'assistant_message') { reply.text.textContent = event.content; reply.text.hidden = false; }
    if (event.type === 'tool_call') {
      reply.calls.hidden = false;
      reply.calls.textContent += (reply.calls.textContent ? '\\n' : '') + '→ ' + event.name + ' ' + event.arguments;
    }
  }

  var TREE_CHANGES = ['turn_started', 'turn_ended', 'model_call_ended', 'delegation_started', 'delegation_ended', 'fork_started', 'fork_ended', 'fork_task_started', 'fork_task_ended', 'question_asked', 'question_closed', 'approval_requested', 'approval_decided'];
  var TRANSCRIPT_CHANGES = ['turn_started', 'turn_ended', 'message', 'model_call_ended', 'tool_result', 'approval_requested', 'approval_decided'];

  function onEvent(event) {
    if (event.seq > lastSeq) lastSeq = event.seq;
    switch (event.type) {
      case 'delta':
        endWaiting(operationOf(event.stream));
        if (isMine(event.threadId)) addDelta(event);
        return;
      case 'model_call_waiting':
        if (isMine(event.threadId)) waitingCall(event);
        return;
      case 'stream_abandoned':
        endStream(event.stream);
        return;
      case 'model_call_started':
        // A newer attempt of a call abandons what an older one streamed.
        eachStream(function (entry) { return entry.operation === event.operationId && entry.stream !== event.stream; }, function (entry) { endStream(entry.stream); });
        break;
      case 'model_call_ended':
        endWaiting(event.operationId);
        if (!onTranscript) storedReply(event);
        // On the transcript the streamed text stays until the page shows the stored message (see apply).
        else eachStream(function (entry) { return entry.operation === event.operationId; }, function (entry) { entry.storedAt = event.seq; });
        break;
      case 'assistant_message':
      case 'tool_call':
        if (!onTranscript) replyPart(event);
        break;
      case 'turn_ended':
        Object.keys(waits).forEach(function (operation) { if (waits[operation].thread === event.threadId) endWaiting(operation); });
        eachStream(function (entry) { return entry.thread === event.threadId && entry.storedAt === undefined; }, function (entry) { endStream(entry.stream); });
        break;
    }
    var changes = onTranscript ? TRANSCRIPT_CHANGES : TREE_CHANGES;
    if (changes.indexOf(event.type) >= 0 && (isMine(event.threadId) || event.type.indexOf('approval_') === 0)) refresh();
    // A watcher added, paused, resumed, removed or stopped, woken or done: the tree's Watchers section shows it.
    else if (!onTranscript && event.type.indexOf('watch') === 0) refresh();
  }

  // Open or closed as the person left them: a redrawn part keeps the state of each <details> it had.
  var KEYS = ['thread', 'fork', 'task', 'seq', 'call', 'approval', 'question'];
  function detailsKey(details) {
    var owner = details.parentElement && details.parentElement.closest('[data-thread], [data-fork], [data-seq], [data-call], [data-approval], [data-question], section');
    var scope = owner || document.body;
    var index = Array.prototype.indexOf.call(scope.querySelectorAll('details'), details);
    return (owner ? owner.id + KEYS.map(function (key) { return owner.dataset[key] || ''; }).join('|') : '') + '#' + index;
  }
  function detailsState(within) {
    var state = {};
    Array.prototype.forEach.call(within.querySelectorAll('details'), function (d) { state[detailsKey(d)] = d.open; });
    return state;
  }
  function keepDetails(node, state) {
    Array.prototype.forEach.call(node.querySelectorAll('details'), function (d) {
      var key = detailsKey(d);
      if (key in state) d.open = state[key];
    });
  }
  function replace(old, next) {
    var state = detailsState(old);
    old.replaceWith(next);
    keepDetails(next, state);
    fillDecider(next);
  }
  // Swaps the part \`id\` for the server's; a part the person is writing in is left for a later refresh.
  function swap(doc, id, guarded) {
    var old = document.getElementById(id), next = doc.getElementById(id);
    if (!old || !next || old.isEqualNode(next)) return true;
    if (guarded && writingIn(old)) return false;
    replace(old, document.adoptNode(next));
    return true;
  }
  // A part the page may not have had when it was served (the watchers, once the root has one) goes before \`before\`.
  function swapOrAdd(doc, id, before) {
    var old = document.getElementById(id), next = doc.getElementById(id), anchor = document.getElementById(before);
    if (!old && next && anchor) { anchor.parentNode.insertBefore(document.adoptNode(next), anchor); return true; }
    if (old && !next) { old.remove(); return true; }
    return swap(doc, id, false);
  }
  function mergeTranscript(doc, upTo) {
    var list = document.getElementById('transcript'), next = doc.getElementById('transcript');
    if (!list || !next) return true;
    var done = true;
    var firstLive = list.querySelector('li.live-stream');
    Array.prototype.slice.call(next.children).forEach(function (li) {
      var old = Array.prototype.find.call(list.children, function (item) { return item.dataset.seq === li.dataset.seq; });
      var adopted = document.adoptNode(li);
      if (!old) { list.insertBefore(adopted, firstLive); fillDecider(adopted); }
      else if (!old.isEqualNode(adopted)) { if (writingIn(old)) done = false; else replace(old, adopted); }
    });
    // The stored message of a stream is on the page now if it committed before this refresh began.
    eachStream(function (entry) { return entry.storedAt !== undefined && entry.storedAt <= upTo; }, function (entry) { endStream(entry.stream); });
    emptyNote();
    return done;
  }
  function apply(doc, upTo) {
    var done = swap(doc, 'title', false);
    if (onTranscript) done = mergeTranscript(doc, upTo) && done;
    else {
      done = swap(doc, 'usage', false) && done;
      done = swap(doc, 'questions', true) && done;
      done = swap(doc, 'approvals', true) && done;
      done = swapOrAdd(doc, 'watchers', 'tree') && done;
      done = swap(doc, 'tree', false) && done;
      // The new tree's cards take the streamed text and the replies shown so far.
      Object.keys(streams).forEach(function (stream) { place(streams[stream].box, streams[stream].thread); });
      Object.keys(replies).forEach(function (thread) { place(replies[thread].box, thread); });
      Object.keys(waits).forEach(function (operation) { place(waits[operation].box, waits[operation].thread); });
    }
    if (!done) setTimeout(refresh, 2000);
  }
  var fetching = false, queued = false;
  function refresh() {
    if (fetching) { queued = true; return; }
    fetching = true;
    var upTo = lastSeq;
    fetch(location.pathname, { headers: { accept: 'text/html' }, cache: 'no-store' })
      .then(function (r) { return r.ok ? r.text() : undefined; })
      .then(function (text) { if (text !== undefined) apply(new DOMParser().parseFromString(text, 'text/html'), upTo); })
      .catch(function () { /* the next event refreshes again */ })
      .then(function () { fetching = false; if (queued) { queued = false; refresh(); } });
  }

  var feed = document.body.dataset.events;
  var line = document.getElementById('run-live');
  if (feed && window.EventSource && window.DOMParser) {
    var source = new EventSource(feed);
    if (line) line.hidden = false;
    source.addEventListener('message', function (message) { onEvent(JSON.parse(message.data)); });
    source.addEventListener('open', function () {
      if (line) { line.textContent = 'Live: following the run; new steps and streamed text appear as they happen.'; line.classList.add('connected'); }
    });
    source.addEventListener('error', function () {
      if (source.readyState === EventSource.CLOSED) {
        // Refused (too many streams, say): the page reloads itself when the run moves on instead.
        if (line) { line.textContent = 'Live: not connected; the page reloads when the run moves on.'; line.classList.remove('connected'); }
        startPoll();
      } else if (line) { line.textContent = 'Live: reconnecting…'; line.classList.remove('connected'); }
    });
  } else startPoll();
})();
`;
