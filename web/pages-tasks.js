// pages-tasks.js — the Queue page (live, filtered, with the actions the user may take) and the
// Task page (attempts, a live log tail, the task's GPU memory and utilisation over time).
import { api, clear, fmtBytes, fmtDuration, fmtTime, h, readStream, authHeaders, showMessage,
  stateBadge } from './util.js';
import { onEvent } from './app.js';
import { lineChart } from './charts.js';

const STATES = ['queued', 'pending', 'held', 'running', 'retrying', 'succeeded', 'failed',
  'timed_out', 'cancelled', 'upstream_failed'];
const PAGE = 500;   // tasks listed at once (the API's limit is 1000)
const ACTIVE = new Set(['queued', 'pending', 'held', 'running', 'retrying']);

// What a user may do to a task: their own, or any when admin; never with a read-only token.
function mayTouch(session, task) {
  return !session.read_only && (session.admin || task.uid === session.uid);
}

// The actions that make sense in the task's state (the daemon decides in the end).
function actionsFor(task) {
  const acts = [];
  if (ACTIVE.has(task.state)) acts.push('cancel');
  if (task.state === 'queued' || task.state === 'pending') acts.push('hold');
  if (task.state === 'held') acts.push('release');
  if (!ACTIVE.has(task.state)) acts.push('retry');
  return acts;
}

const ACTION_REQUEST = {
  cancel: (id) => [`/api/v1/tasks/${id}`, 'DELETE'],
  retry: (id) => [`/api/v1/tasks/${id}/retry`, 'POST'],
  hold: (id) => [`/api/v1/tasks/${id}/hold`, 'POST'],
  release: (id) => [`/api/v1/tasks/${id}/release`, 'POST'],
};

// A click on any [data-act][data-id] button: the request, then the daemon's answer shown (its
// one-line message when it refuses: not yours, wrong state, …).
async function runAction(button, after) {
  const act = button.dataset.act;
  const id = button.dataset.id;
  const make = ACTION_REQUEST[act];
  if (!make) return;
  const [path, method] = make(id);
  button.disabled = true;
  try {
    const reply = await api(path, { method });
    const newId = reply && reply.id && act === 'retry' && reply.id !== Number(id) ? ` as task ${reply.id}` : '';
    showMessage(`task ${id}: ${act} done${newId}`, 'ok');
    if (after) after();
  } catch (e) {
    if (e.status !== 401) showMessage(`task ${id}: ${act} refused: ${e.message}`);
  } finally {
    button.disabled = false;
  }
}

function actionButtons(session, task) {
  if (!mayTouch(session, task)) return null;
  return actionsFor(task).map((act) => h('button', {
    type: 'button', class: `act act-${act}`, dataset: { act, id: String(task.id) },
    title: `${act} task ${task.id}`,
  }, act));
}

function waitReason(task) {
  if (task.reason) return task.reason;
  if (task.state === 'held') return 'held';
  return '';
}

function taskRow(session, task) {
  const gpus = task.gpus && task.gpus.length ? task.gpus.join(',') :
    (task.request && task.request.gpus ? `(${task.request.gpus})` : '—');
  return h('tr', { dataset: { id: String(task.id), state: task.state, uid: String(task.uid) } },
    h('td', { class: 'num' }, h('a', { href: `#/task/${task.id}` }, String(task.id))),
    h('td', { class: 'name' }, h('a', { href: `#/task/${task.id}` }, task.name || task.command?.join(' ') || '')),
    h('td', { class: 'cell-state' }, stateBadge(task.state)),
    h('td', { class: 'hide-narrow' }, task.user),
    h('td', { class: 'hide-narrow', title: 'assigned GPUs (requested count)' }, gpus),
    h('td', { class: 'reason' }, waitReason(task)),
    h('td', { class: 'hide-narrow', title: fmtTime(task.submit_time) }, fmtTime(task.start_time ?? task.submit_time)),
    h('td', { class: 'actions' }, actionButtons(session, task)));
}

export async function queuePage(main, session) {
  const params = new URLSearchParams(sessionStorage.getItem('drover-queue-filter') || 'all=1');
  const stateSel = h('select', { id: 'filter-state', 'aria-label': 'state' },
    h('option', { value: '' }, 'any state'),
    STATES.map((s) => h('option', { value: s, selected: params.get('state') === s }, s.replace('_', ' '))));
  const userInput = h('input', { id: 'filter-user', type: 'search', placeholder: 'user', value: params.get('user') || '', size: 10 });
  const mine = h('input', { id: 'filter-mine', type: 'checkbox', checked: params.get('mine') === '1' });
  const finished = h('input', { id: 'filter-all', type: 'checkbox', checked: params.get('all') !== '0' });
  const body = h('tbody', {});
  const count = h('span', { class: 'muted' });
  const table = h('table', { class: 'tasks', id: 'queue' },
    h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'id'), h('th', {}, 'name'), h('th', {}, 'state'),
      h('th', { class: 'hide-narrow' }, 'user'), h('th', { class: 'hide-narrow' }, 'GPUs'),
      h('th', {}, 'why / reason'), h('th', { class: 'hide-narrow' }, 'started'), h('th', {}, ''))),
    body);
  clear(main,
    h('div', { class: 'toolbar' }, h('h1', {}, 'Queue'), stateSel, userInput,
      h('label', {}, mine, ' mine'), h('label', {}, finished, ' finished too'), count),
    h('div', { class: 'scroll' }, table));

  // One listing at a time: a reload asked for while one is in flight runs once it is done (a
  // busy daemon answering slower than events arrive still gets the page refreshed).
  let loading = false;
  let again = false;
  let gone = false;
  async function load() {
    if (loading) { again = true; return; }
    loading = true;
    try {
      do {
        again = false;
        await loadOnce();
      } while (again && !gone);
    } finally {
      loading = false;
    }
  }
  async function loadOnce() {
    const q = new URLSearchParams();
    if (finished.checked) q.set('all', '1');
    if (stateSel.value) q.set('state', stateSel.value);
    const user = mine.checked ? session.user : userInput.value.trim();
    if (user) q.set('user', user);
    q.set('limit', String(PAGE));
    sessionStorage.setItem('drover-queue-filter', new URLSearchParams({
      all: finished.checked ? '1' : '0', state: stateSel.value, user: userInput.value.trim(),
      mine: mine.checked ? '1' : '0' }).toString());
    let tasks;
    let total;
    try {
      // Pages run by id from the oldest: when more match than one page holds, the newest page.
      let response = await api(`/api/v1/tasks?${q}`, { raw: true });
      total = Number(response.headers.get('X-Total-Count'));
      if (total > PAGE) {
        q.set('offset', String(total - PAGE));
        response = await api(`/api/v1/tasks?${q}`, { raw: true });
        total = Number(response.headers.get('X-Total-Count')) || total;
      }
      const reply = await response.json();
      tasks = Array.isArray(reply) ? reply : (reply && reply.tasks) || [];
    } catch (e) {
      if (e.status !== 401 && !gone) showMessage(`Cannot list tasks: ${e.message}`);
      return;
    }
    if (gone) return;
    tasks.sort((a, b) => b.id - a.id);
    clear(body, tasks.length ? tasks.map((t) => taskRow(session, t)) :
      h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No tasks.')));
    count.textContent = total > tasks.length ? `the newest ${tasks.length} of ${total} tasks` :
      `${tasks.length} task${tasks.length === 1 ? '' : 's'}`;
  }

  let timer = null;
  const reloadSoon = () => { clearTimeout(timer); timer = setTimeout(load, 250); };
  for (const el of [stateSel, mine, finished]) el.addEventListener('change', load);
  userInput.addEventListener('input', reloadSoon);
  table.addEventListener('click', (ev) => {
    const button = ev.target.closest('button[data-act]');
    if (button) runAction(button, reloadSoon);
  });

  // A state change updates its row at once (the full row follows with the reload); a task not
  // shown yet, or one that leaves the filter, comes with the reload.
  const off = onEvent((type, data) => {
    if (type === 'task' && data && data.task !== undefined) {
      const row = body.querySelector(`tr[data-id="${Number(data.task)}"]`);
      if (row && data.state) {
        row.dataset.state = data.state;
        clear(row.querySelector('.cell-state'), stateBadge(data.state));
        const reason = row.querySelector('.reason');
        if (reason) reason.textContent = data.reason || '';
        clear(row.querySelector('.actions'), actionButtons(session,
          { id: Number(data.task), uid: Number(row.dataset.uid), state: data.state }));
      }
      reloadSoon();
    } else if (type === 'reset' || type === 'attempt_start' || type === 'attempt_end') {
      reloadSoon();
    }
  });
  await load();
  return () => { gone = true; off(); clearTimeout(timer); };
}

// --- the Task page ---
// argv as a shell would read it back: words with spaces or quotes single-quoted.
function shellWords(argv) {
  return (argv || []).map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}

function kv(rows) {
  return h('dl', { class: 'kv' }, rows.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function attemptsTable(task) {
  const list = task.attempt_list || [];
  if (!list.length) return h('p', { class: 'muted' }, 'No attempt yet.');
  return h('div', { class: 'scroll' }, h('table', { class: 'attempts' },
    h('thead', {}, h('tr', {}, ['#', 'started', 'ran', 'GPUs', 'exit', 'outcome', 'peak GPU mem', 'mean util']
      .map((t) => h('th', {}, t)))),
    h('tbody', {}, list.map((a) => h('tr', {},
      h('td', { class: 'num' }, a.attempt),
      h('td', {}, fmtTime(a.start_time)),
      h('td', {}, fmtDuration((a.end_time ?? Date.now()) - a.start_time)),
      h('td', {}, (a.gpus || []).join(',') || '—'),
      h('td', {}, a.signal ? `signal ${a.signal}` : (a.exit_code ?? '—')),
      h('td', {}, a.outcome || (a.end_time ? '' : 'running'), a.reason ? h('div', { class: 'muted' }, a.reason) : null),
      h('td', {}, a.peak_gpu_mem !== null && a.peak_gpu_mem !== undefined ? fmtBytes(a.peak_gpu_mem) : '—'),
      h('td', {}, a.mean_gpu_util !== null && a.mean_gpu_util !== undefined ? `${Math.round(a.mean_gpu_util)}%` : '—'))))));
}

// The log tail: the last 200 lines, then followed while the task runs (fetch streaming).
function logView(task, streamName) {
  const pre = h('pre', { class: 'log', id: `log-${streamName}` });
  const controller = new AbortController();
  const follow = ACTIVE.has(task.state);
  (async () => {
    try {
      const q = new URLSearchParams({ stream: streamName, tail: '200' });
      if (follow) q.set('follow', '1');
      const response = await fetch(`/api/v1/tasks/${task.id}/logs?${q}`, {
        headers: authHeaders('GET'), signal: controller.signal, credentials: 'same-origin', cache: 'no-store' });
      if (!response.ok) {
        let message = `${response.status}`;
        try { message = (await response.json()).error || message; } catch { /* plain */ }
        pre.textContent = `(no ${streamName}: ${message})`;
        return;
      }
      let size = 0;
      await readStream(response, (text) => {
        const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        pre.append(text);
        size += text.length;
        if (size > 1 << 20) { pre.textContent = pre.textContent.slice(-(1 << 19)); size = pre.textContent.length; }
        if (atBottom) pre.scrollTop = pre.scrollHeight;
      });
      if (!pre.textContent) pre.textContent = `(no ${streamName} output)`;
    } catch (e) {
      if (!controller.signal.aborted) pre.append(`\n(log stream ended: ${e.message})`);
    }
  })();
  return { element: pre, stop: () => controller.abort() };
}

// The task's GPUs, from the telemetry series over its run: utilisation and memory. The store
// takes samples in once a minute, so while the task runs its charts also take the live `gpu`
// events: the returned function (null when there are no charts) appends one.
async function taskGpuCharts(container, task, charts) {
  const gpus = new Set((task.attempt_list || []).flatMap((a) => a.gpus || []).concat(task.gpus || []));
  if (!gpus.size || !task.start_time) {
    container.append(h('p', { class: 'muted' }, gpus.size ? 'Not started yet.' : 'This task uses no GPU.'));
    return null;
  }
  const active = ACTIVE.has(task.state);
  const end = task.end_time || Date.now();
  const since = task.start_time - 30000;
  const stepS = Math.max(1, Math.ceil((end + 30000 - since) / 1000 / 500));
  let series;
  try {
    series = await api(`/api/v1/gpus/series?since=${since}&until=${end + 30000}&step=${stepS}s`);
  } catch (e) {
    if (e.status !== 401) container.append(h('p', { class: 'muted' }, `No GPU telemetry: ${e.message}`));
    return null;
  }
  const indexes = [...gpus].sort((a, b) => a - b);
  const byIndex = new Map((series.gpus || []).map((g) => [g.index, g.points || []]));
  if (!active && !indexes.some((i) => (byIndex.get(i) || []).length)) {
    container.append(h('p', { class: 'muted' }, 'No GPU samples over this task\'s run (the store takes them in once a minute).'));
    return null;
  }
  const xs = [...new Set(indexes.flatMap((i) => (byIndex.get(i) || []).map((p) => p[0])))].sort((a, b) => a - b);
  const column = (i, k) => { const m = new Map((byIndex.get(i) || []).map((p) => [p[0], p[k]])); return xs.map((x) => m.get(x) ?? null); };
  const util = indexes.map((i) => column(i, 1));
  const mem = indexes.map((i) => column(i, 2));
  const labels = indexes.map((i) => ({ label: `GPU ${i}` }));
  const utilChart = lineChart(container, { title: 'GPU utilisation (%)', yRange: [0, 100], series: labels, legend: true });
  const memChart = lineChart(container, { title: 'GPU memory used', yFormat: fmtBytes, series: labels, legend: true });
  const draw = () => {
    const t = xs.map((x) => x / 1000);
    utilChart.update([t, ...util]);
    memChart.update([t, ...mem]);
  };
  draw();
  charts.push(utilChart, memChart);
  if (!active) return null;
  const stepMs = stepS * 1000;
  return (event) => {
    if (!event.time || (xs.length && event.time < xs[xs.length - 1] + stepMs)) return;
    xs.push(event.time);
    indexes.forEach((i, n) => {
      const g = event.gpus.find((s) => s.index === i);
      util[n].push(g && typeof g.util === 'number' ? g.util : null);
      mem[n].push(g && typeof g.mem_used === 'number' ? g.mem_used : null);
    });
    draw();
  };
}

export async function taskPage(main, session, id) {
  const charts = [];
  const logs = [];
  let task;
  let livePush = null;   // appends a live `gpu` event to the task's charts while it runs
  async function render() {
    task = await api(`/api/v1/tasks/${id}`);
    livePush = null;
    charts.splice(0).forEach((c) => c.destroy());
    logs.splice(0).forEach((l) => l.stop());
    const req = task.request || {};
    const stdout = logView(task, 'stdout');
    const stderr = logView(task, 'stderr');
    logs.push(stdout, stderr);
    const gpuBox = h('div', { class: 'charts', id: 'task-gpu' });
    clear(main,
      h('div', { class: 'toolbar' }, h('h1', {}, `Task ${task.id}`, task.name ? h('span', { class: 'muted' }, ` ${task.name}`) : null),
        stateBadge(task.state), h('span', { class: 'actions', id: 'task-actions' }, actionButtons(session, task))),
      task.reason ? h('p', { class: 'reason-box' }, ACTIVE.has(task.state) ? 'Why it waits: ' : 'Reason: ', task.reason) : null,
      h('section', { class: 'card' }, kv([
        ['command', h('code', {}, shellWords(task.command))],
        ['user', task.user],
        ['requested', `${req.gpus || 0} GPU${req.gpus === 1 ? '' : 's'}${req.gpu_mem ? ` × ${fmtBytes(req.gpu_mem)}` : ''}` +
          `${req.gpu_type ? ` (${req.gpu_type})` : ''}${req.cpus ? `, ${req.cpus} CPUs` : ''}${req.mem ? `, ${fmtBytes(req.mem)} memory` : ''}`],
        ['GPUs', (task.gpus || []).join(', ') || '—'],
        ['priority', task.priority],
        ['submitted', fmtTime(task.submit_time)],
        ['started', fmtTime(task.start_time)],
        ['ended', fmtTime(task.end_time)],
        ['attempts', `${task.attempts}${task.retries ? ` (retries allowed: ${task.retries})` : ''}`],
        task.exit_code !== null && task.exit_code !== undefined ? ['exit code', task.exit_code] : null,
        task.after && task.after.length ? ['after', task.after.map((a) => h('a', { href: `#/task/${a}` }, `${a} `))] : null,
        ['workdir', h('code', {}, task.workdir || '')],
      ])),
      h('h2', {}, 'Attempts'), attemptsTable(task),
      h('h2', {}, 'GPU use'), gpuBox,
      h('h2', {}, 'stdout'), stdout.element,
      h('h2', {}, 'stderr'), stderr.element);
    livePush = await taskGpuCharts(gpuBox, task, charts);
  }
  main.addEventListener('click', onClick);
  function onClick(ev) {
    const button = ev.target.closest('button[data-act]');
    if (button) runAction(button, () => render().catch(() => {}));
  }
  let timer = null;
  const off = onEvent((type, data) => {
    if (type === 'gpu' && livePush && data && Array.isArray(data.gpus)) { livePush(data); return; }
    const mineEvent = data && (Number(data.task) === Number(id) || Number(data.id) === Number(id));
    if ((type === 'task' || type === 'attempt_start' || type === 'attempt_end') && mineEvent) {
      clearTimeout(timer);
      timer = setTimeout(() => render().catch((e) => showMessage(e.message)), 300);
    }
  });
  await render();
  return () => {
    off();
    clearTimeout(timer);
    main.removeEventListener('click', onClick);
    charts.forEach((c) => c.destroy());
    logs.forEach((l) => l.stop());
  };
}
