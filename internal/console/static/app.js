// The Batchwork console: jobs, a job's DAG and task timeline, schedules.
// Every call goes to this page's own server (api/...), which forwards the
// allowed ones to the Batchwork API with the CLI's credentials. Server data
// is only ever set as text (textContent, SVG attributes), never as HTML.
'use strict';
(() => {
  const SVGNS = 'http://www.w3.org/2000/svg';
  const main = document.getElementById('main');
  const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
  let view = null;

  // ---- DOM helpers ----
  function build(make, tag, attrs, kids) {
    const e = make(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of kids.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const h = (tag, attrs, ...kids) => build(t => document.createElement(t), tag, attrs, kids);
  const s = (tag, attrs, ...kids) => build(t => document.createElementNS(SVGNS, t), tag, attrs, kids);
  const badge = (state) => h('span', { class: 'badge s-' + state, text: state });
  const link = (href, text) => h('a', { href, text });
  // traceURL is the operator's trace viewer (/info's traceUrl, an http(s)
  // URL with {traceId}); traceCell shows a task's trace id, linked to it
  // when set. Only an id of 32 hex digits goes into the URL.
  let traceURL = '';
  function traceCell(t) {
    const id = /^[0-9a-f]{32}$/.test(t.traceId || '') ? t.traceId : '';
    if (!id) return h('td', { class: 'muted', text: '-' });
    return h('td', { class: 'mono trace', 'data-trace': id }, traceURL
      ? h('a', { href: traceURL.split('{traceId}').join(id), target: '_blank', rel: 'noopener noreferrer', title: 'trace ' + id, text: id.slice(0, 8) })
      : h('span', { title: 'trace ' + id, text: id.slice(0, 8) }));
  }

  // ---- formatting ----
  const ms = (iso) => (iso ? Date.parse(iso) : NaN);
  function fmtTime(iso) {
    if (!iso) return '-';
    const d = new Date(iso);
    const today = new Date().toDateString() === d.toDateString();
    const t = d.toLocaleTimeString([], { hour12: false });
    return today ? t : d.toLocaleDateString() + ' ' + t;
  }
  function fmtDur(msec) {
    if (!isFinite(msec)) return '-';
    const sec = Math.max(0, msec / 1000);
    if (sec < 10) return sec.toFixed(1) + 's';
    if (sec < 60) return Math.round(sec) + 's';
    const m = Math.floor(sec / 60), r = Math.round(sec % 60);
    if (m < 60) return m + 'm' + (r ? String(r).padStart(2, '0') + 's' : '');
    return Math.floor(m / 60) + 'h' + String(m % 60).padStart(2, '0') + 'm';
  }
  const fmtRate = (r) => (r >= 10 ? r.toFixed(0) : r >= 1 ? r.toFixed(1) : r.toFixed(2));
  const fmtETA = (iso) => (iso ? 'ETA ' + fmtDur(ms(iso) - Date.now()) : '');
  const num = (n) => (n || 0).toLocaleString();

  // ---- API ----
  async function api(path, method) {
    const res = await fetch('api' + path, {
      method: method || 'GET', headers: { 'X-Batchwork-Console': '1' }, cache: 'no-store', credentials: 'same-origin',
    });
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) {
      const err = new Error((body && body.message) || res.status + ' ' + res.statusText);
      err.status = res.status;
      throw err;
    }
    return body;
  }
  // pages fetches a list route page by page (at most max pages) and
  // returns the items under key and the cursor left, if any.
  async function pages(path, key, params, max) {
    const items = [];
    let cursor = '';
    for (let i = 0; i < max; i++) {
      const q = new URLSearchParams(params);
      if (cursor) q.set('cursor', cursor);
      const p = await api(path + '?' + q);
      items.push(...(p[key] || []));
      cursor = p.nextCursor || '';
      if (!cursor) break;
    }
    return { items, more: cursor };
  }

  // failures.js: the job page's failed tasks, bad records and timeline marks.
  const F = window.BatchworkFailures({ h, s, badge, api, pages, fmtTime, num, attemptLogs, traceCell });

  function showError(e) {
    const d = document.getElementById('error');
    d.hidden = !e;
    d.textContent = e ? String(e.message || e) : '';
  }
  function stamp() {
    document.getElementById('live').textContent = 'updated ' + new Date().toLocaleTimeString([], { hour12: false });
  }
  // poller runs fn now and every ms after it returns, until stopped or
  // until fn returns false.
  function poller(fn, every) {
    let stopped = false, t = null;
    const tick = async () => {
      if (stopped) return;
      let again = true;
      try {
        again = (await fn()) !== false;
        showError(null);
        stamp();
      } catch (e) {
        if (!stopped) showError(e);
      }
      if (!stopped && again) t = setTimeout(tick, every);
    };
    tick();
    return { stop() { stopped = true; clearTimeout(t); } };
  }

  // ---- jobs ----
  function jobsView(params) {
    const status = params.get('status') || '', name = params.get('name') || '';
    let want = 1;
    const go = () => {
      const q = new URLSearchParams();
      if (sel.value) q.set('status', sel.value);
      if (inp.value.trim()) q.set('name', inp.value.trim());
      location.hash = '#/jobs' + (q.toString() ? '?' + q : '');
    };
    const sel = h('select', { id: 'filter-status', onchange: go },
      ['', 'WAITING', 'RUNNING', 'PUBLISHING', 'SUCCEEDED', 'FAILED', 'CANCELLED'].map(v => h('option', { value: v, selected: v === status, text: v || 'any state' })));
    const inp = h('input', { id: 'filter-name', placeholder: 'job name', value: name, onchange: go });
    const body = h('tbody', { id: 'jobs-body' });
    const more = h('button', { hidden: true, onclick: () => { want++; refresh(); } }, 'More');
    main.append(h('h1', { text: 'Jobs' }), h('div', { class: 'filters' }, 'State', sel, 'Name', inp),
      h('table', { id: 'jobs' }, h('thead', {}, h('tr', {}, ['Job', 'Name', 'State', 'Created', 'Took', 'Ended'].map(t => h('th', { text: t })))), body),
      h('p', {}, more));
    const q = { limit: '50' };
    if (status) q.status = status;
    if (name) q.name = name;
    async function refresh() {
      const { items, more: left } = await pages('/jobs', 'jobs', q, want);
      more.hidden = !left;
      body.replaceChildren(...(items.length ? items.map(j => h('tr', { 'data-job': j.id },
        h('td', { class: 'mono' }, link('#/job/' + j.id, j.id)), h('td', { text: j.name }), h('td', {}, badge(j.state)),
        h('td', { text: fmtTime(j.created) }),
        h('td', { text: j.ended ? fmtDur(ms(j.ended) - ms(j.created)) : 'running ' + fmtDur(Date.now() - ms(j.created)) }),
        h('td', { text: fmtTime(j.ended) }))) : [h('tr', {}, h('td', { colspan: 6, class: 'muted', text: 'No jobs.' }))]));
    }
    return poller(refresh, 2000);
  }

  // ---- a job ----
  function jobView(id) {
    const head = h('div', { id: 'job-head' });
    const dag = h('div', { id: 'dag', class: 'panel' });
    const timeline = h('div', { id: 'timeline', class: 'panel' });
    const failures = h('div', { id: 'failures' });
    const running = h('div', { id: 'running-tasks' });
    const failedBox = h('div', { id: 'failed-tasks' }), badBox = h('div', { id: 'bad-records' });
    const failed = F.failedTasks(failedBox, id), bad = F.badRecords(badBox, id);
    const history = h('div', { id: 'history' });
    main.append(h('p', {}, link('#/jobs', '← jobs')), head,
      h('h2', { text: 'Stages' }), dag,
      h('h2', { text: 'Task timeline' }),
      F.legend(),
      timeline,
      h('p', { class: 'muted' }, 'One row per executor (a long-polling process or a Lambda invocation), one bar per attempt, from its ' +
        'claim to its end, stacked where the executor ran several tasks at once. An attempt whose executor or start the API does not ' +
        'know (recorded before Batchwork kept them) gets a row of its task (stage/partition) and, drawn faded, an estimated start.'),
      h('h2', { text: 'Running tasks' }), running,
      h('h2', { text: 'Failed tasks' }), failedBox,
      h('h2', { text: 'Failed attempts' }), failures,
      h('h2', { text: 'Bad records' }), badBox,
      h('h2', { text: 'History' }), history);
    const seen = new Map(); // "stage/partition/attempt" -> when first seen running (ms)
    const openLogs = new Map(); // "stage/partition/attempt" -> its log lines shown under its failure
    let st = null, tasks = [], tasksMore = '', ended = false, tick = 0;
    async function refresh() {
      st = await api('/jobs/' + encodeURIComponent(id));
      const done = TERMINAL.has(st.state);
      renderHead(head, st);
      renderDAG(dag, st);
      // Tasks and history cost more (a read per 200 tasks): every second
      // while a small job runs, every 5 s for a big one, and once more
      // after the job ended.
      const every = (st.progress && st.progress.tasksTotal > 1000) ? 5 : 1;
      if (!ended && (tick++ % every === 0 || done)) {
        const tl = await pages('/jobs/' + encodeURIComponent(id) + '/tasks', 'tasks', { limit: '200' }, 20);
        tasks = tl.items;
        tasksMore = tl.more;
        const now = Date.now();
        for (const t of tasks) {
          for (const a of t.attempts) {
            const k = t.stage + '/' + t.partition + '/' + a.attempt;
            if (a.outcome === 'running' && !seen.has(k)) seen.set(k, now);
          }
        }
        const hist = await pages('/jobs/' + encodeURIComponent(id) + '/history', 'events', { limit: '200' }, 5);
        renderRunning(running, tasks, id, st.state === 'RUNNING');
        renderFailures(failures, tasks, id, openLogs);
        await failed.refresh(tasks, tasksMore);
        renderHistory(history, hist.items, hist.more);
        ended = done;
      }
      renderTimeline(timeline, st, tasks, seen, tasksMore);
      await bad.refresh(st);
      return !done || !ended;
    }
    return poller(refresh, 1000);
  }

  function renderHead(head, st) {
    const p = st.progress || {};
    const kids = [
      h('h1', {}, st.name + ' ', h('span', { id: 'job-state', class: 'badge s-' + st.state, text: st.state })),
      h('div', { class: 'kv' },
        h('span', {}, h('b', { text: 'id' }), h('code', { text: st.id })),
        h('span', {}, h('b', { text: 'created' }), fmtTime(st.created)),
        st.startAt && h('span', {}, h('b', { text: 'starts at' }), fmtTime(st.startAt)),
        h('span', {}, h('b', { text: 'started' }), fmtTime(st.started)),
        h('span', {}, h('b', { text: 'ended' }), fmtTime(st.ended)),
        h('span', { id: 'job-progress' }, h('b', { text: 'tasks' }), num(p.tasksDone) + '/' + num(p.tasksTotal)),
        h('span', {}, h('b', { text: 'records' }), num(p.recordsIn) + ' in, ' + num(p.recordsOut) + ' out'),
        p.tasksPerSec !== undefined && h('span', {}, h('b', { text: 'rate' }), fmtRate(p.tasksPerSec) + ' tasks/s'),
        st.eta && h('span', {}, h('b', { text: 'eta' }), fmtETA(st.eta)),
        st.started && h('span', {}, h('b', { text: 'took' }), fmtDur((st.ended ? ms(st.ended) : Date.now()) - ms(st.started))),
        (st.limits || []).map(l => h('span', {}, h('b', { text: l.kind + ' limit' }), l.running + '/' + l.max + (l.running >= l.max ? ' (full)' : ''))),
        st.output && h('span', {}, h('b', { text: 'output' }), h('code', { text: st.output }))),
      st.error && h('p', { class: 'error', id: 'job-error', text: st.error }),
      ...F.headNotes(st),
    ];
    if (st.state === 'RUNNING' || st.state === 'WAITING') {
      kids.push(h('p', {}, h('button', {
        class: 'danger', id: 'cancel', onclick: async (ev) => {
          if (!confirm('Cancel job ' + st.id + '? Running tasks stop at their next heartbeat; committed outputs are kept.')) return;
          ev.target.disabled = true;
          try { await api('/jobs/' + encodeURIComponent(st.id) + '/cancel', 'POST'); } catch (e) { showError(e); }
        },
      }, 'Cancel job')));
    }
    head.replaceChildren(...kids.filter(Boolean));
  }

  // renderDAG draws the stages as boxes in columns by depth (the longest
  // chain of "after" before them), with an edge from each stage it runs
  // after, labelled when it reads that stage's shuffle.
  function renderDAG(box, st) {
    const stages = st.stages || [];
    const index = new Map(stages.map((x, i) => [x.name, i]));
    const depth = new Array(stages.length).fill(-1);
    const depthOf = (i, guard) => {
      if (depth[i] >= 0) return depth[i];
      if (guard > stages.length) return 0; // a cycle: never in a valid job
      let d = 0;
      for (const a of stages[i].after || []) if (index.has(a)) d = Math.max(d, depthOf(index.get(a), guard + 1) + 1);
      return (depth[i] = d);
    };
    stages.forEach((_, i) => depthOf(i, 0));
    const W = 230, H = 86, GX = 80, GY = 22, PAD = 10;
    const rows = [];
    const pos = stages.map((_, i) => {
      const c = depth[i];
      rows[c] = (rows[c] || 0) + 1;
      return { x: PAD + c * (W + GX), y: PAD + (rows[c] - 1) * (H + GY) };
    });
    const width = PAD * 2 + (rows.length || 1) * (W + GX) - GX;
    const height = PAD * 2 + Math.max(1, ...rows.map(r => r || 0)) * (H + GY) - GY;
    const svg = s('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'stages of job ' + st.id },
      s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto' },
        s('path', { d: 'M0,0 L10,5 L0,10 z' }))));
    stages.forEach((x, i) => {
      for (const a of x.after || []) {
        if (!index.has(a)) continue;
        const u = index.get(a), p = pos[u], q = pos[i];
        const x1 = p.x + W, y1 = p.y + H / 2, x2 = q.x, y2 = q.y + H / 2, mx = (x1 + x2) / 2;
        svg.append(s('path', { class: 'edge', 'data-from': a, 'data-to': x.name, d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#arrow)' }));
        if (stages[u].shuffle) svg.append(s('text', { class: 'edge-label', x: mx, y: (y1 + y2) / 2 - 5, 'text-anchor': 'middle', text: 'shuffle ×' + stages[u].shuffle }));
      }
    });
    const now = Date.now();
    stages.forEach((x, i) => {
      const { x: bx, y: by } = pos[i];
      const frac = x.total ? Math.min(1, x.committed / x.total) : 0;
      let progress = x.total ? `${num(x.committed)}/${num(x.total)} tasks` : 'not planned yet';
      if (x.failures) progress += ` · ${num(x.failures)} failed`;
      const notes = F.stageNotes(x);
      progress += notes.progress;
      let rate = '';
      if (x.state === 'RUNNING') {
        rate = [x.tasksPerSec !== undefined ? fmtRate(x.tasksPerSec) + ' tasks/s' : '', fmtETA(x.eta)].filter(Boolean).join(' · ') || 'running';
      } else if (x.started && x.ended) {
        rate = 'took ' + fmtDur(ms(x.ended) - ms(x.started));
      } else if (x.started) {
        rate = 'for ' + fmtDur(now - ms(x.started));
      }
      svg.append(s('g', { class: 'stage st-' + x.state, 'data-stage': x.name, transform: `translate(${bx},${by})` },
        s('title', { text: `${x.name}: ${x.state}, ${x.committed}/${x.total} tasks, ${x.attempts} attempts, ${x.failures} failed; records ${x.recordsIn} in, ${x.recordsOut} out` + notes.title + (x.error ? '\n' + x.error : '') }),
        s('rect', { class: 'box', width: W, height: H, rx: 6 }),
        s('text', { class: 'name', x: 10, y: 19, text: x.name }),
        s('text', { class: 'sub state', x: W - 10, y: 19, 'text-anchor': 'end', text: x.state }),
        s('rect', { class: 'bar-bg', x: 10, y: 28, width: W - 20, height: 8, rx: 3 }),
        s('rect', { class: 'bar', x: 10, y: 28, width: (W - 20) * frac, height: 8, rx: 3 }),
        s('text', { class: 'progress', x: 10, y: 54, text: progress }),
        s('text', { class: 'sub rate', x: 10, y: 72, text: rate + (x.recordsOut ? ` · ${num(x.recordsOut)} records out` : '') + notes.sub })));
    });
    box.replaceChildren(stages.length ? svg : h('p', { class: 'muted', text: 'No stages.' }));
  }

  // renderTimeline draws one bar per attempt, from its claim (started) to
  // its end, in a row per executor (lanes for the tasks it ran at once);
  // an attempt whose executor is unknown gets a row of its task's.
  function renderTimeline(box, st, tasks, seen, more) {
    const MAXLANES = 400;
    if (!tasks.length) {
      box.replaceChildren(h('p', { class: 'muted', text: 'No tasks yet.' }));
      return;
    }
    const now = Date.now();
    const stageStart = new Map((st.stages || []).map(x => [x.name, ms(x.started)]));
    const t0 = ms(st.started) || ms(st.created);
    const t1 = Math.max(t0 + 1000, st.ended ? ms(st.ended) : now);
    // The bars, in task then attempt order (the DOM keeps it).
    const bars = [];
    for (const t of tasks) {
      let prevEnd = NaN;
      for (const a of t.attempts) {
        const k = t.stage + '/' + t.partition + '/' + a.attempt;
        const end = a.outcome === 'running' ? (st.ended ? ms(st.ended) : now) : (ms(a.at) || now);
        let start = ms(a.started), est = false;
        if (!(start <= end)) start = seen.get(k); // an attempt the API has no start of
        if (start === undefined || !(start <= end)) {
          est = true;
          start = isFinite(prevEnd) ? prevEnd : (stageStart.get(t.stage) || t0);
          if (!(start <= end)) start = end;
        }
        prevEnd = end;
        const row = a.executor ? 'x:' + a.executor : 't:' + t.stage + '/' + t.partition;
        bars.push({ t, a, start, end, est, row });
      }
    }
    // Rows: executors by their first start, then tasks with no executor;
    // each row's bars packed into lanes, earliest first.
    const rows = new Map();
    for (const b of [...bars].sort((p, q) => p.start - q.start || p.end - q.end)) {
      let r = rows.get(b.row);
      if (!r) rows.set(b.row, r = { key: b.row, first: b.start, lanes: [] });
      let lane = r.lanes.findIndex(end => end <= b.start);
      if (lane < 0) { lane = r.lanes.length; r.lanes.push(0); }
      r.lanes[lane] = Math.max(b.end, b.start + 1);
      b.lane = lane;
    }
    const order = [...rows.values()].sort((p, q) => (p.key[0] === q.key[0] ? p.first - q.first : (p.key[0] === 'x' ? -1 : 1)));
    const LABEL = 130, W = 1100, RH = 14, TOP = 20, GAP = 3;
    let y = TOP, lanes = 0, shown = 0;
    for (const r of order) {
      if (lanes + r.lanes.length > MAXLANES) break;
      r.y = y;
      y += r.lanes.length * RH + GAP;
      lanes += r.lanes.length;
      shown++;
    }
    const height = y + 6;
    const x = (t) => LABEL + Math.max(0, Math.min(1, (t - t0) / (t1 - t0))) * (W - LABEL - 20); // room for an end mark
    const svg = s('svg', { width: W, height, viewBox: `0 0 ${W} ${height}`, role: 'img', 'aria-label': 'task timeline' });
    const span = t1 - t0, step = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600].find(v => span / (v * 1000) <= 10) || 7200;
    for (let v = 0; v * 1000 <= span; v += step) {
      const gx = x(t0 + v * 1000);
      svg.append(s('line', { class: 'grid', x1: gx, x2: gx, y1: TOP - 4, y2: height }),
        s('text', { class: 'axis', x: gx + 2, y: 11, text: '+' + fmtDur(v * 1000) }));
    }
    for (const r of order.slice(0, shown)) {
      const exec = r.key[0] === 'x';
      const label = exec ? 'executor ' + r.key.slice(2, 10) : r.key.slice(2);
      svg.append(s('text', { class: 'row' + (exec ? ' executor' : ''), x: 4, y: r.y + RH - 3, 'data-row': r.key.slice(2) }, label,
        s('title', { text: exec ? `executor ${r.key.slice(2)}: ${r.lanes.length} task${r.lanes.length > 1 ? 's' : ''} at once at most` : `task ${label}: executor unknown` })));
    }
    for (const b of bars) {
      const r = rows.get(b.row);
      if (r.y === undefined) continue;
      const { t, a } = b;
      const x1 = x(b.start), w = Math.max(3, x(b.end) - x1);
      svg.append(s('rect', {
        class: F.attemptClass(t, a) + (b.est ? ' est' : ''), x: x1, y: r.y + b.lane * RH + 2, width: w, height: RH - 4, rx: 2,
        'data-task': `${t.stage}/${t.partition}`, 'data-attempt': a.attempt, 'data-outcome': a.outcome, 'data-executor': a.executor || '',
      }, s('title', { text: `${t.stage}/${t.partition} attempt ${a.attempt}: ${a.outcome}` + (a.executor ? ' on executor ' + a.executor : '') +
        (a.started ? ' from ' + fmtTime(a.started) : '') + (a.at ? ' to ' + fmtTime(a.at) : '') + (b.est ? ' (start estimated)' : '') + F.attemptNote(t, a) + (a.error ? '\n' + a.error : '') })),
        ...F.marks(t, a, x1, w, r.y + b.lane * RH, RH));
    }
    const notes = [];
    if (shown < order.length) notes.push(`Showing ${shown} of ${order.length} rows.`);
    if (more) notes.push('The job has more tasks than the console reads.');
    box.replaceChildren(svg, ...notes.map(n => h('p', { class: 'muted', text: n })));
  }

  // renderRunning lists the tasks running now, each with a button that
  // cancels that task alone (POST /jobs/{id}/cancel?task=STAGE/PARTITION):
  // it fails without retry, and its job goes on as its stage's
  // toleratedFailures allow.
  function renderRunning(box, tasks, id, jobRunning) {
    const rows = tasks.filter(t => t.state === 'CLAIMED').map(t => {
      const task = `${t.stage}/${t.partition}`;
      const cancel = async (ev) => {
        if (!confirm('Cancel task ' + task + '? It stops at its next heartbeat and fails without retry; the job fails with it unless its stage tolerates the failure.')) return;
        ev.target.disabled = true;
        try { await api('/jobs/' + encodeURIComponent(id) + '/cancel?' + new URLSearchParams({ task }), 'POST'); } catch (e) { showError(e); }
      };
      return h('tr', { 'data-task': task },
        h('td', { class: 'mono', text: task }), h('td', { text: `${t.attempt}/${t.maxAttempts}` }),
        h('td', { text: fmtTime(t.updated) }), traceCell(t),
        h('td', {}, jobRunning && h('button', { class: 'danger', 'data-cancel-task': task, onclick: cancel, text: 'cancel task' })));
    });
    box.replaceChildren(rows.length
      ? h('table', {}, h('thead', {}, h('tr', {}, ['Task', 'Attempt', 'Updated', 'Trace', ''].map(t => h('th', { text: t })))), h('tbody', {}, rows))
      : h('p', { class: 'muted', text: 'No task is running.' }));
  }

  // renderFailures lists the attempts that did not commit, each with a
  // toggle that shows the attempt's log lines (GET /jobs/{id}/logs).
  function renderFailures(box, tasks, id, openLogs) {
    const rows = [];
    for (const t of tasks) {
      for (const a of t.attempts) {
        if (a.outcome === 'committed' || a.outcome === 'running') continue;
        const task = `${t.stage}/${t.partition}`, key = task + '/' + a.attempt;
        const toggle = async () => {
          if (openLogs.has(key)) {
            openLogs.delete(key);
          } else {
            openLogs.set(key, 'reading the logs…');
            renderFailures(box, tasks, id, openLogs);
            openLogs.set(key, await attemptLogs(id, task, a.attempt));
          }
          renderFailures(box, tasks, id, openLogs);
        };
        rows.push(h('tr', { 'data-task': task },
          h('td', { class: 'mono', text: task }), h('td', { text: `${a.attempt}/${t.maxAttempts}` }),
          h('td', {}, badge(a.outcome)), h('td', { text: t.state === 'FAILED' && a.attempt === t.attempt ? 'task FAILED' : t.state }),
          h('td', { text: fmtTime(a.at) }), h('td', { class: 'err', text: a.error || '' }), traceCell(t),
          h('td', {}, h('button', { class: 'logs', 'data-logs': key, onclick: toggle, text: openLogs.has(key) ? 'hide logs' : 'logs' }))));
        if (openLogs.has(key)) {
          rows.push(h('tr', { class: 'logs', 'data-logs-of': key }, h('td', { colspan: 8 }, h('pre', { class: 'logs', text: openLogs.get(key) }))));
        }
      }
    }
    box.replaceChildren(rows.length
      ? h('table', {}, h('thead', {}, h('tr', {}, ['Task', 'Attempt', 'Outcome', 'Task now', 'At', 'Error', 'Trace', ''].map(t => h('th', { text: t })))), h('tbody', {}, rows))
      : h('p', { class: 'muted', text: 'No failed attempts.' }));
  }

  // attemptLogs is the text of one attempt's log lines: a task's lines,
  // then those of the attempt (lines of the task that name no attempt
  // stay).
  async function attemptLogs(id, task, attempt) {
    try {
      const lines = [];
      let cursor = '';
      for (let i = 0; i < 5; i++) {
        const q = new URLSearchParams({ task, limit: '1000' });
        if (cursor) q.set('cursor', cursor);
        const pg = await api('/jobs/' + encodeURIComponent(id) + '/logs?' + q);
        lines.push(...pg.lines);
        cursor = pg.next;
        if (pg.lines.length < 1000) break;
      }
      const text = lines.filter(l => l.fields.attempt === undefined || l.fields.attempt === attempt).map(l => {
        const f = l.fields;
        const rest = Object.entries(f).filter(([k]) => !['time', 'level', 'msg', 'job_id', 'stage', 'stage_name', 'partition', 'task', 'attempt', 'executor_id'].includes(k))
          .map(([k, v]) => k + '=' + (typeof v === 'string' ? v : JSON.stringify(v))).join(' ');
        return `${fmtTime(l.time)} ${f.level || ''} ${f.executor_id ? '@' + f.executor_id + ' ' : ''}${f.msg || ''}${rest ? ' ' + rest : ''}`;
      }).join('\n');
      return text || 'No log lines.';
    } catch (e) {
      return 'Could not read the logs: ' + e.message;
    }
  }

  function renderHistory(box, events, more) {
    const evs = events.slice(-200).reverse();
    box.replaceChildren(...[h('table', {}, h('thead', {}, h('tr', {}, ['At', 'Event', 'Subject', 'Message'].map(t => h('th', { text: t })))),
      h('tbody', {}, evs.map(e => h('tr', {},
        h('td', { text: fmtTime(e.at) }), h('td', { text: e.type }),
        h('td', { class: 'mono', text: e.partition !== undefined ? `${e.stage}/${e.partition} attempt ${e.attempt}` : (e.stage || '') }),
        h('td', { class: e.type.endsWith('failed') ? 'err' : '', text: e.message || '' }))))),
      more && h('p', { class: 'muted', text: 'The job has more events than the console reads (the first 1,000).' })].filter(Boolean));
  }

  // ---- schedules ----
  function schedulesView() {
    const body = h('tbody', { id: 'schedules-body' });
    main.append(h('h1', { text: 'Schedules' }),
      h('table', { id: 'schedules' }, h('thead', {}, h('tr', {}, ['Schedule', 'Name', 'Expression', 'State', 'Next', 'Last fired', 'Last job'].map(t => h('th', { text: t })))), body));
    return poller(async () => {
      const { items } = await pages('/schedules', 'schedules', { limit: '200' }, 5);
      body.replaceChildren(...(items.length ? items.map(x => h('tr', { 'data-schedule': x.id },
        h('td', { class: 'mono' }, link('#/schedules/' + x.id, x.id)), h('td', { text: x.name }),
        h('td', { class: 'mono', text: x.expression + (x.timeZone ? ' (' + x.timeZone + ')' : '') }),
        h('td', {}, badge(x.paused ? 'paused' : 'active')), h('td', { text: fmtTime(x.next) }), h('td', { text: fmtTime(x.lastFired) }),
        h('td', { class: 'mono' }, x.lastJobId ? link('#/job/' + x.lastJobId, x.lastJobId) : '-'))) : [h('tr', {}, h('td', { colspan: 7, class: 'muted', text: 'No schedules.' }))]));
    }, 2000);
  }

  function scheduleView(id) {
    const head = h('div', {}), body = h('tbody', { id: 'runs-body' });
    main.append(h('p', {}, link('#/schedules', '← schedules')), head, h('h2', { text: 'Runs' }),
      h('table', { id: 'runs' }, h('thead', {}, h('tr', {}, ['Scheduled', 'Action', 'Started', 'Job', 'Status', 'Note'].map(t => h('th', { text: t })))), body));
    return poller(async () => {
      const x = await api('/schedules/' + encodeURIComponent(id));
      head.replaceChildren(h('h1', {}, x.name + ' ', badge(x.paused ? 'paused' : 'active')),
        h('div', { class: 'kv' },
          h('span', {}, h('b', { text: 'id' }), h('code', { text: x.id })),
          h('span', {}, h('b', { text: 'expression' }), h('code', { text: x.expression })),
          x.timeZone && h('span', {}, h('b', { text: 'time zone' }), x.timeZone),
          h('span', {}, h('b', { text: 'overlap' }), x.overlap), h('span', {}, h('b', { text: 'catch up' }), x.catchUp),
          h('span', {}, h('b', { text: 'next' }), fmtTime(x.next)), h('span', {}, h('b', { text: 'created' }), fmtTime(x.createdAt))));
      const { items } = await pages('/schedules/' + encodeURIComponent(id) + '/runs', 'runs', { limit: '200' }, 1);
      body.replaceChildren(...(items.length ? items.map(r => h('tr', {},
        h('td', { text: fmtTime(r.scheduled) }), h('td', {}, badge(r.action)), h('td', { text: fmtTime(r.startedAt) }),
        h('td', { class: 'mono' }, r.jobId ? link('#/job/' + r.jobId, r.jobId) : '-'), h('td', {}, r.status ? badge(r.status) : '-'),
        h('td', { text: [r.catchUp ? `catch-up run for ${r.missedCount || 0} missed through ${fmtTime(r.through)}` : '', r.note || ''].filter(Boolean).join('; ') }))) :
        [h('tr', {}, h('td', { colspan: 6, class: 'muted', text: 'No runs yet.' }))]));
    }, 2000);
  }

  // ---- routing ----
  function route() {
    if (view) view.stop();
    const [path, qs] = (location.hash || '#/jobs').slice(1).split('?');
    const parts = path.split('/').filter(Boolean);
    main.replaceChildren();
    showError(null);
    if (parts[0] === 'job' && parts[1]) view = jobView(decodeURIComponent(parts[1]));
    else if (parts[0] === 'schedules' && parts[1]) view = scheduleView(decodeURIComponent(parts[1]));
    else if (parts[0] === 'schedules') view = schedulesView();
    else view = jobsView(new URLSearchParams(qs || ''));
  }
  window.addEventListener('hashchange', route);
  route();
  Promise.all([api('/info'), api('/whoami')]).then(([info, who]) => {
    document.getElementById('who').textContent = `${who.owner} at ${info.api}`;
    traceURL = info.traceUrl || '';
  }).catch(showError);
})();
