// What went wrong in a job, for the console's job page (app.js): its
// failed tasks with their error, error class and log lines; its bad
// records, paged from GET /jobs/{id}/bad-records; the marks the task
// timeline puts on retries, failures, speculative copies and
// continuations; and the notes of a job that succeeded with tolerated
// failed partitions. Like app.js it uses only the public API through the
// console's own server, and sets server data only as text.
'use strict';
window.BatchworkFailures = (lib) => {
  const { h, s, badge, api, fmtTime, num, attemptLogs, traceCell } = lib;

  // The words of batch.ErrorClass.Ended: what ended a FAILED task.
  const ENDED = { permanent: 'permanent error', timed_out: 'timed out', out_of_memory: 'out of memory', lease_expired: 'lease expired', input_changed: 'input changed' };
  const ended = (cls) => ENDED[cls] || 'retries exhausted';
  // Attempt ends that are not failures of the task's work.
  const NOT_FAILED = new Set(['committed', 'running', 'cancelled', 'unknown', 'continued', 'speculation_lost']);
  const plural = (n, one, many) => num(n) + ' ' + (n === 1 ? one : many || one + 's');

  // The outcomes the timeline's legend names, besides those app.js draws.
  const LEGEND = ['committed', 'running', 'retried', 'lease_expired', 'timed_out', 'out_of_memory', 'permanent', 'failed',
    'tolerated', 'continued', 'speculation_lost', 'cancelled'];
  const MARKS = [['retry', '↻', 'retried'], ['failed', '✕', 'failed, not retried'], ['copy', '⊕', 'speculative copy'],
    ['won', '★', 'committed first'], ['lost', '⊘', 'lost to the other copy'], ['continued', '→', 'continued in a new invocation']];
  const GLYPH = Object.fromEntries(MARKS.map(([k, g]) => [k, g]));

  function legend() {
    return h('div', { class: 'legend' }, h('p', { class: 'muted legend' }, LEGEND.map(o => h('span', {}, badge(o)))),
      h('p', { class: 'muted legend marks' }, MARKS.map(([k, g, what]) => h('span', { class: 'mark-key m-' + k }, h('b', { text: g }), ' ' + what))));
  }

  // isCopy: the attempt is the task's speculative copy; won: the task ran
  // two claims and this one committed.
  const isCopy = (t, a) => !!(t.copy && t.copy.attempt && t.copy.attempt === a.attempt);
  const won = (t, a) => a.outcome === 'committed' && !!(t.copy && t.copy.attempt);

  // attemptClass is the timeline bar's class.
  const attemptClass = (t, a) => `attempt o-${a.outcome}` + (isCopy(t, a) ? ' copy' : '') + (won(t, a) ? ' won' : '');

  // markKinds are the marks at an attempt's bar: how it ended, and
  // whether it was a speculative copy.
  function markKinds(t, a) {
    const kinds = [];
    if (isCopy(t, a)) kinds.push('copy');
    if (won(t, a)) kinds.push('won');
    else if (a.outcome === 'speculation_lost') kinds.push('lost');
    else if (a.outcome === 'continued') kinds.push('continued');
    else if (!NOT_FAILED.has(a.outcome)) {
      // The last attempt of a FAILED task failed it, and so did an
      // attempt that failed beside a copy (the copy went on); any other
      // failed attempt was retried.
      const last = t.state === 'FAILED' && a.attempt === t.attempt;
      const final = last || ['failed', 'permanent', 'tolerated', 'failed_beside_copy'].includes(a.outcome);
      kinds.push(final ? 'failed' : 'retry');
    }
    return kinds;
  }

  // attemptNote is what the bar's tooltip adds about the attempt.
  function attemptNote(t, a) {
    const notes = [];
    if (isCopy(t, a)) notes.push(`speculative copy of attempt ${t.copy.holderAttempt}`);
    if (won(t, a)) notes.push('committed first of two claims');
    if (t.state === 'FAILED' && a.attempt === t.attempt) {
      notes.push(`failed the task (${ended(t.errorClass)})` + (t.tolerated ? ', tolerated by its stage' : ''));
    }
    return notes.length ? ' — ' + notes.join('; ') : '';
  }

  // marks are the SVG marks of one bar, drawn after its end (a copy's
  // mark before its start).
  function marks(t, a, x1, w, y, rh) {
    return markKinds(t, a).map(k => {
      const copyMark = k === 'copy';
      return s('text', {
        class: 'mark m-' + k, 'data-mark': k, 'data-task': `${t.stage}/${t.partition}`, 'data-attempt': a.attempt,
        x: copyMark ? x1 - 2 : x1 + w + 2, y: y + rh - 3, 'text-anchor': copyMark ? 'end' : 'start', text: GLYPH[k],
      }, s('title', { text: `${t.stage}/${t.partition} attempt ${a.attempt}: ${a.outcome}${attemptNote(t, a)}` + (a.error ? '\n' + a.error : '') }));
    });
  }

  // stageNotes adds a stage's tolerated failures and bad records to its
  // DAG node.
  function stageNotes(x) {
    const n = { progress: '', sub: '', title: '' };
    if (x.failedTasks) {
      n.progress = ` · ${num(x.failedTasks)} tolerated`;
      n.title += `\n${plural(x.failedTasks, 'task')} failed for good, within the stage's toleratedFailures`;
    }
    if (x.badRecords) {
      n.sub = ` · ${plural(x.badRecords, 'bad record')}`;
      n.title += `\n${plural(x.badRecords, 'bad record')} rejected`;
    }
    return n;
  }

  // headNotes are the job header's lines about its failures.
  function headNotes(st) {
    const bad = (st.stages || []).reduce((n, x) => n + (x.badRecords || 0), 0);
    const out = [];
    if (st.failedPartitions) {
      const what = st.state === 'SUCCEEDED' ? 'Succeeded with ' + plural(st.failedPartitions, 'failed partition') :
        plural(st.failedPartitions, 'failed partition') + ' tolerated';
      out.push(h('p', { class: 'warn', id: 'job-tolerated', text: what + ': their stages tolerated the failures (toleratedFailures); ' +
        'the failed tasks are listed below and in the job\'s manifest.' }));
    }
    if (bad) {
      out.push(h('p', { class: 'muted', id: 'job-bad-records', text: plural(bad, 'bad record') + ' skipped: listed under Bad records.' }));
    }
    if (st.cost) { // what the job's AWS requests cost (docs/operations.md)
      const d = st.cost.dollars, r = st.cost.requests, usd = (f) => '$' + (f || 0).toFixed(4);
      out.push(h('p', { class: 'muted', id: 'job-cost', text: `Cost: ${usd(d.requests)} in AWS requests (DynamoDB ${usd(d.dynamodb)}, ` +
        `SQS ${usd(d.sqs)}, S3 ${usd(d.s3)}, Lambda ${usd(d.lambda)}, EventBridge ${usd(d.eventbridge)}; us-east-1 list prices of ` +
        `${st.cost.pricesDate}); ${(r.computeSeconds || 0).toFixed(1)} s of task compute, ${(r.gbSeconds || 0).toFixed(1)} GB-s.` }));
    }
    if (st.redrives || st.rerunOf) {
      out.push(h('p', { class: 'muted' }, st.redrives ? `Redriven ${plural(st.redrives, 'time')}. ` : '',
        st.rerunOf ? h('span', {}, 'A rerun of ', h('a', { href: '#/job/' + st.rerunOf, class: 'mono', text: st.rerunOf }), '.') : ''));
    }
    return out;
  }

  // failedTasks keeps its box's open log toggles between refreshes; the
  // tasks are those app.js read, or, when it could not read them all, a
  // read of the FAILED ones alone.
  function failedTasks(box, id) {
    const open = new Map(); // "stage/partition" -> log text shown
    let failed = [];
    function render() {
      const rows = [];
      for (const t of failed) {
        const task = `${t.stage}/${t.partition}`;
        const toggle = async () => {
          if (open.has(task)) {
            open.delete(task);
          } else {
            open.set(task, 'reading the logs…');
            render();
            open.set(task, await attemptLogs(id, task, t.attempt));
          }
          render();
        };
        rows.push(h('tr', { 'data-task': task },
          h('td', { class: 'mono', text: task }), h('td', { text: `${t.attempt}/${t.maxAttempts}` }),
          h('td', { class: 'class' }, h('span', { class: 'badge s-' + (t.errorClass || 'error'), text: ended(t.errorClass) })),
          h('td', { class: 'tolerated', text: t.tolerated ? 'tolerated the failure' : 'failed with it' }),
          h('td', { text: fmtTime(t.updated) }), h('td', { class: 'err', text: t.lastError || '' }), traceCell(t),
          h('td', {}, h('button', { class: 'logs', 'data-logs': task, onclick: toggle, text: open.has(task) ? 'hide logs' : 'logs' }))));
        if (open.has(task)) {
          rows.push(h('tr', { class: 'logs', 'data-logs-of': task }, h('td', { colspan: 8 }, h('pre', { class: 'logs', text: open.get(task) }))));
        }
      }
      box.replaceChildren(rows.length
        ? h('table', {}, h('thead', {}, h('tr', {}, ['Task', 'Attempts', 'Ended by', 'Stage', 'At', 'Error', 'Trace', ''].map(x => h('th', { text: x })))), h('tbody', {}, rows))
        : h('p', { class: 'muted', text: 'No failed tasks.' }));
    }
    return {
      async refresh(tasks, more) {
        if (more) {
          const p = await lib.pages('/jobs/' + encodeURIComponent(id) + '/tasks', 'tasks', { state: 'FAILED', limit: '200' }, 5);
          failed = p.items;
        } else {
          failed = tasks.filter(t => t.state === 'FAILED');
        }
        render();
      },
    };
  }

  // badRecords shows the job's bad records a page at a time: the first
  // page again whenever the stages' counts change, more on request.
  function badRecords(box, id) {
    let records = [], cursor = '', seenCount = -1, note = '', readAt = 0;
    const path = '/jobs/' + encodeURIComponent(id) + '/bad-records';
    async function read(next) {
      const q = new URLSearchParams({ limit: '100' });
      if (next) q.set('cursor', next);
      try {
        const pg = await api(path + '?' + q);
        records = next ? records.concat(pg.records || []) : (pg.records || []);
        cursor = pg.nextCursor || '';
        note = '';
      } catch (e) {
        note = 'Could not read the bad records: ' + e.message;
      }
    }
    function render(total) {
      const kept = records.length;
      const omitted = records.reduce((n, r) => n + (r.omitted || 0), 0);
      const more = h('button', {
        id: 'bad-records-more', onclick: async () => { await read(cursor); render(total); }, text: 'More',
      });
      box.replaceChildren(...[
        total ? h('p', { class: 'muted', text: `${plural(total, 'record')} rejected by committed tasks; showing ${num(kept)}` +
          (omitted ? ` (${plural(omitted, 'more record')} counted but not kept)` : '') + '.' }) :
          h('p', { class: 'muted', text: 'No bad records.' }),
        note && h('p', { class: 'error', text: note }),
        kept && h('table', {}, h('thead', {}, h('tr', {}, ['Task', 'Attempt', 'Offset', 'Reason', 'Record'].map(x => h('th', { text: x })))),
          h('tbody', {}, records.map(r => h('tr', { 'data-task': `${r.stage}/${r.partition}` },
            h('td', { class: 'mono', text: `${r.stage}/${r.partition}` }), h('td', { text: r.attempt }),
            h('td', { text: r.offset >= 0 ? num(r.offset) : '?' }), h('td', { class: 'reason', text: r.reason }),
            h('td', { class: 'mono record', text: r.record }))))),
        cursor && h('p', {}, more),
      ].filter(Boolean));
    }
    return {
      // refresh reads the first page again when the count changed: at
      // most every 5 s while the job runs (a page may read 25 objects),
      // and once more when it ended.
      async refresh(st) {
        const total = (st.stages || []).reduce((n, x) => n + (x.badRecords || 0), 0);
        const ended = ['SUCCEEDED', 'FAILED', 'CANCELLED'].includes(st.state);
        if (total !== seenCount && (ended || Date.now() - readAt >= 5000)) {
          seenCount = total;
          readAt = Date.now();
          if (total) await read('');
          else records = [];
          render(total);
        }
      },
    };
  }

  return { legend, attemptClass, attemptNote, marks, stageNotes, headNotes, failedTasks, badRecords, ended };
};
