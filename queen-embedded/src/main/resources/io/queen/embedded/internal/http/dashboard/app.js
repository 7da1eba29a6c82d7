'use strict';
// Queen's dashboard: one page, no build step, no network beyond this node. Every figure comes from the same JSON
// routes a client uses, and every action goes through them too (so it is validated and refused the same way).
// Data is put into the page as text only (textContent), never as HTML: queue names and errors are user data.

const REFRESH_MS = 2000;
const SPARK_POINTS = 30;
const state = { tab: 'queues', queue: null, group: null, readOnly: true, history: new Map(), timer: null, busy: false };

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? '' : String(c)));
  return e;
}

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (r.status === 401) { location.reload(); throw new Error('sign in again'); }
  if (!r.ok) throw new Error((json && json.error) ? json.error + ' (' + json.code + ')' : 'HTTP ' + r.status);
  return json;
}

function flash(text, ok) {
  const f = document.getElementById('flash');
  f.textContent = text;
  f.className = ok ? 'ok' : '';
  f.hidden = false;
  clearTimeout(flash.t);
  flash.t = setTimeout(() => { f.hidden = true; }, ok ? 2500 : 8000);
}

function age(ms) {
  if (!ms) return '–';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
}

function when(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return d.toLocaleTimeString() + (Date.now() - d.getTime() > 86400000 ? ' ' + d.toLocaleDateString() : '');
}

function num(n) { return n == null ? '–' : Number(n).toLocaleString(); }

function groupName(g) { return g === '__QUEUE_MODE__' ? '(default)' : g; }

function spark(values) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'spark');
  svg.setAttribute('viewBox', '0 0 120 24');
  const max = Math.max(1, ...values);
  const step = 120 / Math.max(1, values.length - 1); // the points there are, over the whole width
  const pts = values.map((v, i) => (i * step).toFixed(1) + ',' + (22 - (v / max) * 20).toFixed(1));
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', pts.join(' '));
  svg.append(line);
  return svg;
}

// Throughput: the change of a queue's `pushed` (offsets handed out) between two refreshes of this page.
function rates(q, takenAt) {
  const t = new Date(takenAt).getTime();
  let h = state.history.get(q.name);
  if (!h) { h = { last: null, rates: [] }; state.history.set(q.name, h); }
  if (h.last && t > h.last.t) {
    h.rates.push(Math.max(0, (q.pushed - h.last.pushed) * 1000 / (t - h.last.t)));
    if (h.rates.length > SPARK_POINTS) h.rates.shift();
  }
  h.last = { t, pushed: q.pushed };
  return h.rates;
}

function renderQueues(st) {
  const body = document.querySelector('#queue-table tbody');
  body.replaceChildren();
  for (const q of st.queues) {
    const r = rates(q, st.takenAt);
    const row = el('tr', { class: 'queue-row' + (q.name === state.queue ? ' selected' : ''), 'data-queue': q.name,
      onclick: () => select(q.name) },
      el('td', {}, q.name),
      el('td', { class: 'num' }, num(q.partitions)),
      el('td', { class: 'num messages' }, num(q.messages)),
      el('td', { class: 'num lag' + (q.lag > 1000 ? ' lag-high' : '') }, num(q.lag)),
      el('td', { class: 'num pending' }, age(q.oldestPendingMs)),
      el('td', { class: 'num dead' }, num(q.deadLetters)),
      el('td', { class: 'num rate' }, r.length ? r[r.length - 1].toFixed(1) : '–'),
      el('td', {}, spark(r)));
    body.append(row);
  }
  document.getElementById('no-queues').hidden = st.queues.length > 0;
}

async function renderDetail(st) {
  const box = document.getElementById('queue-detail');
  const q = state.queue && st.queues.find((x) => x.name === state.queue);
  if (!q) { box.hidden = true; return; }
  box.hidden = false;
  document.getElementById('detail-title').textContent = 'Queue ' + q.name;
  const groups = document.querySelector('#group-table tbody');
  groups.replaceChildren();
  for (const g of q.groups) {
    groups.append(el('tr', { 'data-group': g.name }, el('td', {}, groupName(g.name)),
      el('td', { class: 'num lag' }, num(g.lag)), el('td', { class: 'num' }, age(g.pendingAgeMs)),
      el('td', { class: 'num' }, num(g.leases)), el('td', { class: 'num' }, num(g.deadLetters))));
  }
  const select = document.getElementById('dl-group');
  const names = q.groups.map((g) => g.name);
  if (!state.group || !names.includes(state.group)) {
    const withDead = q.groups.find((g) => g.deadLetters > 0);
    state.group = withDead ? withDead.name : (names[0] || '__QUEUE_MODE__');
  }
  select.replaceChildren(...(names.length ? names : ['__QUEUE_MODE__']).map((n) =>
    el('option', { value: n, selected: n === state.group }, groupName(n))));
  const enc = encodeURIComponent(q.name);
  const grp = state.group === '__QUEUE_MODE__' ? '' : '?consumerGroup=' + encodeURIComponent(state.group);
  const [parts, dls] = await Promise.all([
    api('GET', '/api/v1/queues/' + enc + '/partitions?limit=50'),
    api('GET', '/api/v1/queues/' + enc + '/dead-letters' + grp)]);
  const pbody = document.querySelector('#partition-table tbody');
  pbody.replaceChildren();
  for (const p of parts.partitions) {
    const cursors = p.cursors.map((c) => groupName(c.consumerGroup) + ': ' + c.committedOffset + ', lag ' + c.lag
      + (c.leaseOwner ? ', leased by ' + c.leaseOwner : '')).join('; ');
    pbody.append(el('tr', {}, el('td', {}, p.name), el('td', { class: 'num' }, num(p.nextOffset)),
      el('td', {}, when(p.lastMessageAt)), el('td', { class: 'counters' }, cursors || '–')));
  }
  document.getElementById('partition-note').textContent = parts.next ? '(first 50)' : '';
  const dbody = document.querySelector('#dl-table tbody');
  dbody.replaceChildren();
  for (const d of dls.deadLetters) {
    dbody.append(el('tr', { 'data-dead-letter': String(d.id) },
      el('td', { class: 'num' }, d.id), el('td', {}, d.partition), el('td', { class: 'num' }, d.offset),
      el('td', { class: 'error-text' }, d.error || '–'), el('td', { class: 'num' }, d.attempts),
      el('td', {}, when(d.failedAt)),
      el('td', { class: 'act-col' },
        el('button', { type: 'button', class: 'act redrive', onclick: () => act('POST', '/api/v1/queues/' + enc
          + '/dead-letters/redrive?id=' + d.id + (grp ? '&' + grp.slice(1) : ''), 'redriven') }, 'Redrive'), ' ',
        el('button', { type: 'button', class: 'act danger delete', onclick: () => act('DELETE', '/api/v1/queues/'
          + enc + '/dead-letters/' + d.id + grp, 'deleted') }, 'Delete'))));
  }
  document.getElementById('no-dl').hidden = dls.deadLetters.length > 0;
}

function counters(c) {
  const skip = new Set(['slotLagBytes']);
  return Object.entries(c.counters || {}).filter(([k]) => !skip.has(k)).map(([k, v]) => k + ' ' + num(v)).join(' · ');
}

function bytes(n) {
  if (n == null) return '–';
  if (n < 1024) return n + ' B';
  if (n < 1048576) return (n / 1024).toFixed(1) + ' KiB';
  if (n < 1073741824) return (n / 1048576).toFixed(1) + ' MiB';
  return (n / 1073741824).toFixed(2) + ' GiB';
}

function renderConnectors(st) {
  const body = document.querySelector('#connector-table tbody');
  body.replaceChildren();
  for (const c of st.pg.connectors) {
    const enc = encodeURIComponent(c.name);
    const paused = c.phase === 'disabled';
    body.append(el('tr', { 'data-connector': c.name },
      el('td', {}, c.name), el('td', {}, c.kind),
      el('td', {}, el('span', { class: 'phase ' + c.phase }, c.phase)),
      el('td', { class: 'error-text' }, c.errorCode ? c.errorCode + ': ' + (c.error || '') : ''),
      el('td', { class: 'counters' }, counters(c)),
      el('td', { class: 'num' }, bytes(c.counters ? c.counters.slotLagBytes : null)),
      el('td', {}, c.leaseNode || ''),
      el('td', { class: 'act-col' },
        el('button', { type: 'button', class: 'act', onclick: () => act('POST', '/api/v1/connectors/' + enc
          + (paused ? '/resume' : '/pause'), paused ? 'resumed' : 'paused') }, paused ? 'Resume' : 'Pause'))));
  }
  document.getElementById('no-connectors').hidden = st.pg.connectors.length > 0;
}

function renderNodes(st) {
  const body = document.querySelector('#node-table tbody');
  body.replaceChildren();
  for (const n of st.nodes) {
    body.append(el('tr', { 'data-node': n.id },
      el('td', {}, n.id + (n.id === st.node ? ' (this node)' : '')),
      el('td', {}, el('span', { class: 'phase ' + (n.alive ? 'alive' : 'dead') }, n.alive ? 'alive' : 'no heartbeat')),
      el('td', {}, n.version || ''), el('td', {}, when(n.startedAt)), el('td', {}, when(n.heartbeatAt)),
      el('td', { class: 'num' }, num(n.leases))));
  }
}

async function act(method, path, done) {
  try {
    await api(method, path);
    flash(done, true);
  } catch (e) {
    flash(e.message, false);
  }
  refresh();
}

async function refresh() {
  if (state.busy) return;
  state.busy = true;
  try {
    const st = await api('GET', '/api/v1/status');
    state.readOnly = st.readOnly;
    document.body.classList.toggle('read-only', st.readOnly);
    document.getElementById('mode').hidden = !st.readOnly;
    document.getElementById('node').textContent = 'node ' + st.node + ' · ' + st.version;
    renderQueues(st);
    renderConnectors(st);
    renderNodes(st);
    await renderDetail(st);
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    document.body.dataset.loaded = 'true';
  } catch (e) {
    flash('refresh failed: ' + e.message, false);
  } finally {
    state.busy = false;
  }
}

function select(name) {
  state.queue = state.queue === name ? null : name;
  state.group = null;
  refresh();
}

function show(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll('nav .tab')) b.classList.toggle('active', b.dataset.tab === tab);
  for (const s of document.querySelectorAll('main > section')) s.hidden = s.id !== tab;
}

function schedule() {
  clearInterval(state.timer);
  if (document.getElementById('live').checked) state.timer = setInterval(refresh, REFRESH_MS);
}

document.querySelectorAll('nav .tab').forEach((b) => b.addEventListener('click', () => show(b.dataset.tab)));
document.getElementById('live').addEventListener('change', schedule);
document.getElementById('dl-group').addEventListener('change', (e) => { state.group = e.target.value; refresh(); });
document.getElementById('redrive-all').addEventListener('click', () => {
  const grp = state.group === '__QUEUE_MODE__' ? '' : '?consumerGroup=' + encodeURIComponent(state.group);
  act('POST', '/api/v1/queues/' + encodeURIComponent(state.queue) + '/dead-letters/redrive' + grp, 'redriven');
});
document.getElementById('purge').addEventListener('click', () => {
  if (!window.confirm('Delete every dead letter of ' + groupName(state.group) + '? The messages stay in their partitions.')) return;
  const grp = state.group === '__QUEUE_MODE__' ? '' : '?consumerGroup=' + encodeURIComponent(state.group);
  act('DELETE', '/api/v1/queues/' + encodeURIComponent(state.queue) + '/dead-letters' + grp, 'deleted');
});
refresh();
schedule();
