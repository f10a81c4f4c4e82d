// pages-gpus.js — the GPUs page: each GPU now (from /api/v1/gpus), its utilisation, memory,
// temperature and power over 1 h / 24 h / 7 d (the telemetry store's series, then live `gpu`
// events while the last hour is shown), and which tasks held each GPU when.
import { api, clear, fmtBytes, fmtNumber, fmtTime, h, showMessage } from './util.js';
import { onEvent } from './app.js';
import { lineChart } from './charts.js';

const RANGES = { '1h': ['-1h', '10s'], '24h': ['-24h', '60s'], '7d': ['-7d', '600s'] };
const METRICS = [
  // [title, index in a point, y options]
  ['Utilisation (%)', 1, { yRange: [0, 100] }],
  ['Memory used', 2, { yFormat: fmtBytes }],
  ['Temperature (°C)', 3, {}],
  ['Power (W)', 4, {}],
];

function nowTable(snapshot) {
  return h('div', { class: 'scroll' }, h('table', { class: 'gpus', id: 'gpu-now' },
    h('thead', {}, h('tr', {}, ['GPU', 'name', 'util', 'memory used / total', 'claimed', 'temp', 'power', 'tasks', '']
      .map((t) => h('th', {}, t)))),
    h('tbody', {}, (snapshot.gpus || []).map((g) => h('tr', {},
      h('td', { class: 'num' }, g.index),
      h('td', {}, g.name),
      h('td', {}, g.util === null || g.util === undefined ? '—' : `${g.util}%`),
      h('td', {}, `${fmtBytes(g.mem_used)} / ${fmtBytes(g.mem_total)}`),
      h('td', {}, fmtBytes(g.mem_claimed), g.exclusive ? ' (exclusive)' : ''),
      h('td', {}, g.temp_c === null || g.temp_c === undefined ? '—' : `${g.temp_c}°C`),
      h('td', {}, g.power_w === null || g.power_w === undefined ? '—' : `${fmtNumber(g.power_w, 3)} W`),
      h('td', {}, (g.tasks || []).map((t) => h('a', { href: `#/task/${t}` }, `${t} `))),
      h('td', {}, g.offline ? h('span', { class: 'state state-failed' }, `offline: ${g.offline_reason || ''}`) : null))))));
}

// Which tasks held each GPU when: one bar per task on a line per GPU across the range.
function holdersView(series) {
  const since = series.since;
  const until = series.until;
  const span = Math.max(1, until - since);
  const lines = (series.gpus || []).map((g) => {
    const held = (series.tasks || []).filter((t) => (t.gpus || []).includes(g.index));
    return h('div', { class: 'holder-line' },
      h('span', { class: 'holder-gpu' }, `GPU ${g.index}`),
      h('div', { class: 'holder-track' }, held.map((t, i) => {
        const start = Math.max(since, t.start ?? since);
        const end = Math.min(until, t.end ?? until);
        const left = ((start - since) / span) * 100;
        const width = Math.max(0.5, ((end - start) / span) * 100);
        return h('a', { class: `holder-bar holder-${i % 6}`, href: `#/task/${t.id}`,
          style: `left:${left.toFixed(2)}%;width:${width.toFixed(2)}%`,
          title: `task ${t.id} ${t.name || ''} (${t.user}): ${fmtTime(t.start)} – ${t.end ? fmtTime(t.end) : 'now'}` },
        String(t.id));
      })));
  });
  return h('div', { class: 'holders', id: 'gpu-holders' }, lines,
    h('div', { class: 'holder-axis muted' }, h('span', {}, fmtTime(since)), h('span', {}, fmtTime(until))),
    (series.tasks || []).length ? h('ul', { class: 'holder-list' }, series.tasks.map((t) => h('li', {},
      h('a', { href: `#/task/${t.id}` }, `task ${t.id}`), ` ${t.name || ''} — ${t.user}, GPU ${(t.gpus || []).join(',')}, `,
      `${fmtTime(t.start)} – ${t.end ? fmtTime(t.end) : 'running'}`))) : h('p', { class: 'muted' }, 'No task held a GPU in this range.'));
}

export async function gpusPage(main, session) {
  let range = sessionStorage.getItem('drover-gpu-range') || '1h';
  if (!RANGES[range]) range = '1h';
  const charts = [];
  const nowBox = h('div', {});
  const chartBox = h('div', { class: 'charts', id: 'gpu-charts' });
  const holdersBox = h('div', {});
  const buttons = Object.keys(RANGES).map((r) => h('button', {
    type: 'button', class: r === range ? 'range current' : 'range', dataset: { range: r } }, r));
  clear(main,
    h('div', { class: 'toolbar' }, h('h1', {}, 'GPUs'), h('span', { class: 'ranges' }, buttons)),
    nowBox, chartBox, h('h2', {}, 'Who held each GPU'), holdersBox);

  // Columns for uPlot: shared x (seconds), one y column per GPU.
  let xs = [];
  let columns = [];   // [metric][gpu] → values
  let gpuIndexes = [];

  function draw() {
    charts.forEach((c, m) => c.update([xs.map((x) => x / 1000), ...columns[m]]));
  }

  async function loadSeries() {
    const [since, step] = RANGES[range];
    const series = await api(`/api/v1/gpus/series?since=${since}&step=${step}`);
    charts.splice(0).forEach((c) => c.destroy());
    const gpus = series.gpus || [];
    gpuIndexes = gpus.map((g) => g.index);
    xs = [...new Set(gpus.flatMap((g) => (g.points || []).map((p) => p[0])))].sort((a, b) => a - b);
    const at = new Map(xs.map((x, i) => [x, i]));
    columns = METRICS.map(([, i]) => gpus.map((g) => {
      const col = new Array(xs.length).fill(null);
      for (const p of g.points || []) col[at.get(p[0])] = p[i];
      return col;
    }));
    for (const [title, , opts] of METRICS) {
      charts.push(lineChart(chartBox, { title, ...opts, legend: true,
        series: gpus.map((g) => ({ label: `GPU ${g.index}` })) }));
    }
    draw();
    clear(holdersBox, holdersView(series));
  }

  async function loadNow() {
    const snapshot = await api('/api/v1/gpus');
    clear(nowBox, nowTable(snapshot),
      h('p', { class: 'muted' }, `source: ${snapshot.source}; sampled ${fmtTime(snapshot.sampled_at)}`));
  }

  for (const b of buttons) {
    b.addEventListener('click', () => {
      range = b.dataset.range;
      sessionStorage.setItem('drover-gpu-range', range);
      buttons.forEach((x) => x.classList.toggle('current', x === b));
      loadSeries().catch((e) => { if (e.status !== 401) showMessage(e.message); });
    });
  }

  // Live samples extend the last hour's charts (the longer ranges' steps are coarser than a
  // sample; they reload with the range buttons).
  let nowTimer = null;
  const off = onEvent((type, data) => {
    if (type === 'gpu' && data && Array.isArray(data.gpus)) {
      if (range === '1h' && charts.length) {
        const last = xs.length ? xs[xs.length - 1] : 0;
        const t = data.time;
        const step = 10000;
        if (t && t >= last + step) {
          xs.push(t);
          columns.forEach((cols, m) => cols.forEach((col, gi) => {
            const g = data.gpus.find((s) => s.index === gpuIndexes[gi]);
            const key = ['util', 'mem_used', 'temp', 'power_w'][m];
            col.push(g && g[key] !== undefined ? g[key] : null);
          }));
          const cutoff = t - 3600 * 1000;
          while (xs.length && xs[0] < cutoff) { xs.shift(); columns.forEach((cols) => cols.forEach((col) => col.shift())); }
          draw();
        }
      }
      if (!nowTimer) nowTimer = setTimeout(() => { nowTimer = null; loadNow().catch(() => {}); }, 2000);
    } else if (type === 'reset' || type === 'attempt_start' || type === 'attempt_end') {
      loadNow().catch(() => {});
    }
  });
  await Promise.all([loadNow(), loadSeries()]);
  return () => { off(); clearTimeout(nowTimer); charts.forEach((c) => c.destroy()); };
}
