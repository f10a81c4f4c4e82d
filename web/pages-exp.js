// pages-exp.js — Experiments (the list; one experiment's leaderboard, learning curves per trial,
// ASHA stops, validation verdict, GPU-hours and ROI) and Users (system mode: GPU-hours per user,
// fair-share standing, limits).
import { api, clear, fmtNumber, fmtTime, h, showMessage, stateBadge } from './util.js';
import { onEvent } from './app.js';
import { color, lineChart } from './charts.js';

// An experiment's name in a path: "NAME", or "OWNER/NAME" on a system daemon (two segments).
function namePath(name) { return name.split('/').map(encodeURIComponent).join('/'); }

export async function experimentsPage(main) {
  const body = h('tbody', {});
  clear(main, h('div', { class: 'toolbar' }, h('h1', {}, 'Experiments')),
    h('div', { class: 'scroll' }, h('table', { class: 'experiments', id: 'experiments' },
      h('thead', {}, h('tr', {}, ['name', 'state', 'trials', 'running', 'waiting', 'done', 'failed', 'stopped early', 'user', 'created']
        .map((t) => h('th', {}, t)))), body)));
  async function load() {
    const reply = await api('/api/v1/experiments');
    const list = Array.isArray(reply) ? reply : (reply && reply.experiments) || [];
    clear(body, list.length ? list.map((e) => h('tr', { dataset: { name: e.name } },
      h('td', {}, h('a', { href: `#/experiment/${namePath(e.name)}` }, e.name)),
      h('td', { title: e.reason || '' }, stateBadge(e.state)),
      h('td', { class: 'num' }, e.tasks), h('td', { class: 'num' }, e.running), h('td', { class: 'num' }, e.waiting),
      h('td', { class: 'num' }, e.succeeded), h('td', { class: 'num' }, e.failed), h('td', { class: 'num' }, e.stopped_early),
      h('td', {}, e.user), h('td', {}, fmtTime(e.created)))) :
      h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'No experiments. Start one with drover exp run FILE.yaml.')));
  }
  let timer = null;
  const off = onEvent((type) => {
    if (type === 'experiment' || type === 'reset' || type === 'task') { clearTimeout(timer); timer = setTimeout(() => load().catch(() => {}), 500); }
  });
  await load();
  return () => { off(); clearTimeout(timer); };
}

// The per-trial metric series, whatever their exact nesting, as Map(trial → Map(metric →
// [[step, value], …])). Accepted: [{trial, metric?, points: [[step, value]|{step, value}]}],
// [{trial, metrics|values: {metric: points}}], {trial: {metric: points}}, {metric: {trial: points}}.
function normalizeSeries(e) {
  const out = new Map();
  const put = (trial, metric, points) => {
    if (!Array.isArray(points)) return;
    const t = Number(trial);
    if (!out.has(t)) out.set(t, new Map());
    out.get(t).set(metric, points.map((p) => (Array.isArray(p) ? [p[0], p[1]] : [p.step ?? p.x, p.value ?? p.y]))
      .filter((p) => typeof p[0] === 'number' && typeof p[1] === 'number'));
  };
  const s = e.series;
  const trialNumbers = new Set((e.trials || []).map((t) => String(t.trial)));
  if (Array.isArray(s)) {
    for (const item of s) {
      if (!item || typeof item !== 'object') continue;
      const trial = item.trial ?? item.index;
      if (Array.isArray(item.points)) put(trial, item.metric || e.metric, item.points);
      const nested = item.metrics || item.values || item.series;
      if (nested && typeof nested === 'object' && !Array.isArray(nested)) {
        for (const [metric, points] of Object.entries(nested)) put(trial, metric, points);
      } else if (Array.isArray(nested)) put(trial, item.metric || e.metric, nested);
    }
  } else if (s && typeof s === 'object') {
    for (const [key, value] of Object.entries(s)) {
      if (Array.isArray(value)) { put(key, e.metric, value); continue; }
      if (!value || typeof value !== 'object') continue;
      for (const [inner, points] of Object.entries(value)) {
        if (trialNumbers.has(key) || !trialNumbers.has(inner)) put(key, inner, points);
        else put(inner, key, points);
      }
    }
  }
  return out;
}

function better(mode) { return mode === 'min' ? (a, b) => a - b : (a, b) => b - a; }

// A trial's state; an early stop says where: rung k is at grace × reduction_factor^k of the
// rung unit (exp/asha.h).
function trialState(t, stopping) {
  if (t.stopped_early) {
    let where = '';
    if (typeof t.rung === 'number' && stopping && stopping.type === 'asha') {
      const step = (stopping.grace ?? 1) * (stopping.reduction_factor ?? 3) ** t.rung;
      where = ` at ${stopping.rung_unit || 'epoch'} ${step}`;
    } else if (typeof t.rung === 'number') {
      where = ` at rung ${t.rung}`;
    }
    const by = !stopping || !stopping.type ? 'early stopping' : stopping.type === 'asha' ? 'ASHA' : `the ${stopping.type} rule`;
    return h('span', { class: 'state state-stopped' }, `stopped by ${by}${where}`);
  }
  return stateBadge(t.state || t.task_state);
}

function paramsText(params) {
  return Object.entries(params || {}).map(([k, v]) => `${k.replace(/^hyperparameters\./, '')}=${fmtNumber(v)}`).join(' ');
}

export async function experimentPage(main, session, name) {
  const charts = [];
  let metric = null;
  async function render() {
    const e = await api(`/api/v1/experiments/${namePath(name)}`);
    charts.splice(0).forEach((c) => c.destroy());
    const mode = e.mode || e.spec?.early_stopping?.mode || e.spec?.validation?.mode || 'max';
    const trials = [...(e.trials || [])];
    const cmp = better(mode);
    trials.sort((a, b) => {
      const x = typeof a.best === 'number'; const y = typeof b.best === 'number';
      if (x && y) return cmp(a.best, b.best);
      return x ? -1 : y ? 1 : a.trial - b.trial;
    });
    const gpuHours = typeof e.gpu_hours === 'number' ? e.gpu_hours :
      trials.reduce((sum, t) => sum + (t.gpu_hours || 0), 0);
    const best = trials.find((t) => typeof t.best === 'number');
    const validation = e.spec?.validation || null;
    const baseline = validation && typeof validation.baseline === 'number' ? validation.baseline : null;
    let roi = '—';
    if (best && baseline !== null) {
      const gain = mode === 'min' ? baseline - best.best : best.best - baseline;
      roi = gpuHours > 0 ? `${fmtNumber(gain / gpuHours)} ${e.metric || ''} per GPU-hour (${gain >= 0 ? '+' : ''}${fmtNumber(gain)} over the baseline ${fmtNumber(baseline)})`
        : `${gain >= 0 ? '+' : ''}${fmtNumber(gain)} over the baseline ${fmtNumber(baseline)}, with no GPU time`;
    } else if (baseline === null) {
      roi = 'no baseline (spec.validation.baseline)';
    }
    const stopped = trials.filter((t) => t.stopped_early).length;
    const verdict = validation ? (e.state === 'passed' ? 'passed' : e.state === 'failed' ? 'failed' : `pending (${e.state})`) : 'no validation';

    const series = normalizeSeries(e);
    const metrics = [...new Set([...series.values()].flatMap((m) => [...m.keys()]))];
    if (!metric || !metrics.includes(metric)) metric = metrics.includes(e.metric) ? e.metric : metrics[0];
    const metricSel = metrics.length > 1 ? h('select', { id: 'curve-metric', 'aria-label': 'metric' },
      metrics.map((m) => h('option', { value: m, selected: m === metric }, m))) : null;
    const curves = h('div', { class: 'charts', id: 'exp-curves' });

    const leaderboard = h('div', { class: 'scroll' }, h('table', { class: 'leaderboard', id: 'leaderboard' },
      h('thead', {}, h('tr', {}, ['#', 'trial', 'task', 'parameters', 'state', `best ${e.metric || ''}`, 'latest', 'GPU-hours', 'attempts']
        .map((t) => h('th', {}, t)))),
      h('tbody', {}, trials.map((t, i) => h('tr', { dataset: { trial: String(t.trial) }, class: t.stopped_early ? 'stopped' : null },
        h('td', { class: 'num' }, typeof t.best === 'number' ? i + 1 : ''),
        h('td', {}, h('span', { class: 'swatch', style: `background:${color(t.trial)}` }), t.name || `t${t.trial}`),
        h('td', { class: 'num' }, t.task ? h('a', { href: `#/task/${t.task}` }, String(t.task)) : '—'),
        h('td', {}, h('code', {}, paramsText(t.params))),
        h('td', { title: t.reason || '' }, trialState(t, e.spec?.early_stopping)),
        h('td', { class: 'num' }, fmtNumber(t.best)),
        h('td', {}, Object.entries(t.latest || {}).map(([k, v]) => `${k}=${fmtNumber(v)}`).join(' ')),
        h('td', { class: 'num' }, fmtNumber(t.gpu_hours ?? 0, 3)),
        h('td', { class: 'num' }, t.attempts ?? ''))))));

    clear(main,
      h('div', { class: 'toolbar' }, h('h1', {}, e.name), stateBadge(e.state),
        h('span', { class: 'muted' }, `${e.kind || 'Experiment'} by ${e.user}, ${fmtTime(e.created)}`)),
      e.reason ? h('p', { class: 'reason-box', id: 'exp-verdict' }, e.reason) : null,
      h('section', { class: 'card stats', id: 'exp-stats' },
        h('div', {}, h('span', { class: 'stat-label' }, 'validation'), h('span', { class: `stat verdict-${verdict.split(' ')[0]}` }, verdict)),
        h('div', {}, h('span', { class: 'stat-label' }, `best ${e.metric || ''} (${mode})`), h('span', { class: 'stat' }, best ? `${fmtNumber(best.best)} (trial ${best.trial})` : '—')),
        h('div', {}, h('span', { class: 'stat-label' }, 'GPU-hours'), h('span', { class: 'stat', id: 'exp-gpu-hours' }, fmtNumber(gpuHours, 3))),
        h('div', {}, h('span', { class: 'stat-label' }, 'ROI'), h('span', { class: 'stat', id: 'exp-roi' }, roi)),
        h('div', {}, h('span', { class: 'stat-label' }, 'trials'), h('span', { class: 'stat' },
          `${trials.length}${e.space ? ` of ${e.space}` : ''}; ${stopped} stopped early`))),
      h('h2', {}, 'Leaderboard'), leaderboard,
      h('div', { class: 'toolbar' }, h('h2', {}, 'Learning curves'), metricSel), curves);

    if (metricSel) metricSel.addEventListener('change', () => { metric = metricSel.value; render().catch((x) => showMessage(x.message)); });
    const withData = [...series.entries()].filter(([, m]) => m.has(metric) && m.get(metric).length);
    if (!withData.length) {
      curves.append(h('p', { class: 'muted' }, 'No metrics reported yet.'));
      return;
    }
    withData.sort((a, b) => a[0] - b[0]);
    const steps = [...new Set(withData.flatMap(([, m]) => m.get(metric).map((p) => p[0])))].sort((a, b) => a - b);
    const cols = withData.map(([, m]) => { const at = new Map(m.get(metric)); return steps.map((s) => at.get(s) ?? null); });
    const byTrial = new Map(trials.map((t) => [t.trial, t]));
    const chart = lineChart(curves, { title: `${metric} by ${e.spec?.early_stopping?.rung_unit || 'step'}`, time: false,
      xLabel: 'step', legend: true, points: true, height: 280, integerX: true,
      series: withData.map(([trial]) => ({ label: `${byTrial.get(trial)?.name || `t${trial}`}${byTrial.get(trial)?.stopped_early ? ' (stopped)' : ''}`, color: color(trial) })) });
    chart.update([steps, ...cols]);
    charts.push(chart);
  }
  let timer = null;
  const off = onEvent((type, data) => {
    if ((type === 'experiment' && data && (data.name === name || name.endsWith(`/${data.name}`))) || type === 'reset' || type === 'attempt_end') {
      clearTimeout(timer);
      timer = setTimeout(() => render().catch(() => {}), 500);
    }
  });
  await render();
  return () => { off(); clearTimeout(timer); charts.forEach((c) => c.destroy()); };
}

export async function usersPage(main, session) {
  let users;
  try {
    const reply = await api('/api/v1/users');
    users = Array.isArray(reply) ? reply : (reply && reply.users) || [];   // `drover users --json`, bare or wrapped
  } catch (e) {
    if (e.status === 401) return null;
    clear(main, h('h1', {}, 'Users'), h('p', { class: 'muted' }, e.message));
    return null;
  }
  const totalShare = users.reduce((s, u) => s + (u.share || 0), 0) || 1;
  const limit = (v) => (v === null || v === undefined ? '—' : String(v));
  clear(main, h('div', { class: 'toolbar' }, h('h1', {}, 'Users')),
    h('div', { class: 'scroll' }, h('table', { class: 'users', id: 'users' },
      h('thead', {}, h('tr', {}, ['user', 'running', 'queued', 'GPUs in use', 'GPU-hours', 'fair share', 'limit: GPUs', 'limit: running', 'limit: queued']
        .map((t) => h('th', {}, t)))),
      h('tbody', {}, users.map((u) => h('tr', { class: u.uid === session.uid ? 'me' : null },
        h('td', {}, u.user), h('td', { class: 'num' }, u.running), h('td', { class: 'num' }, u.queued ?? u.waiting),
        h('td', { class: 'num' }, u.gpus), h('td', { class: 'num' }, fmtNumber((u.usage_gpu_seconds || 0) / 3600, 3)),
        h('td', {}, h('span', { class: 'bar', title: `share ${fmtNumber(u.share)}` },
          h('span', { style: `width:${Math.round(((u.share || 0) / totalShare) * 100)}%` })), ` ${fmtNumber(u.share, 3)}`),
        h('td', { class: 'num' }, limit(u.limits?.gpus)), h('td', { class: 'num' }, limit(u.limits?.running)),
        h('td', { class: 'num' }, limit(u.limits?.queued))))))),
    h('p', { class: 'muted' }, 'GPU-hours: recent GPU use as the fair-share scheduler counts it; fair share: the user\'s share (docs/CLI.md, drover users).'));
  return null;
}
