// app.js — the dashboard: login (a token kept in sessionStorage, or the session cookie that
// `drover dashboard`'s one-time link sets), hash routing (#/queue, #/task/12, #/gpus,
// #/experiments, #/experiment/NAME, #/users), and the live event stream that pages subscribe to.
import { api, auth, clear, h, hideMessage, readStream, authHeaders, showMessage } from './util.js';
import { queuePage, taskPage } from './pages-tasks.js';
import { gpusPage } from './pages-gpus.js';
import { experimentsPage, experimentPage, usersPage } from './pages-exp.js';

const main = document.getElementById('main');
export const session = { user: null, uid: null, admin: false, read_only: false, system: false };

// --- live events: /api/v1/events read with fetch (EventSource cannot send the bearer header) ---
const listeners = new Set();
let eventAbort = null;
let lastEventId = null;

// onEvent(fn): fn(type, data) for every event until the returned function is called.
export function onEvent(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function dispatch(type, dataText) {
  let data = dataText;
  try { data = JSON.parse(dataText); } catch { /* a plain text event */ }
  for (const fn of [...listeners]) {
    try { fn(type, data); } catch (e) { console.warn('event handler failed', e); }
  }
}

// Parses server-sent events from text pieces: blocks separated by a blank line, fields
// "event:", "data:" (joined by newlines), "id:"; lines starting with ':' are comments.
function sseParser() {
  let buffer = '';
  return (text) => {
    buffer += text.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (!line || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'event') type = value;
        else if (field === 'data') data.push(value);
        else if (field === 'id') lastEventId = value;
      }
      if (data.length) dispatch(type, data.join('\n'));
    }
  };
}

function setLive(on) {
  const el = document.getElementById('live');
  el.className = on ? 'live live-on' : 'live';
  el.title = on ? 'live updates on' : 'live updates reconnecting';
}

async function eventsLoop() {
  let delay = 1000;
  while (eventAbort && !eventAbort.signal.aborted) {
    const signal = eventAbort.signal;
    try {
      const headers = authHeaders('GET', { Accept: 'text/event-stream' });
      if (lastEventId) headers['Last-Event-ID'] = lastEventId;
      const response = await fetch('/api/v1/events', { headers, signal, credentials: 'same-origin', cache: 'no-store' });
      if (response.status === 401) { auth.onUnauthorized('the session has expired'); return; }
      if (!response.ok) throw new Error(`events: ${response.status}`);
      setLive(true);
      delay = 1000;
      await readStream(response, sseParser());
    } catch (e) {
      if (signal.aborted) return;
    }
    setLive(false);
    // Missed events may have been dropped from the backlog: the pages reload what they show.
    dispatch('reset', '{}');
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 15000);
  }
}

function startEvents() {
  stopEvents();
  eventAbort = new AbortController();
  eventsLoop();
}

function stopEvents() {
  if (eventAbort) eventAbort.abort();
  eventAbort = null;
}

// --- routing ---
const routes = [
  [/^#\/queue$/, () => queuePage],
  [/^#\/task\/(\d+)$/, () => taskPage],
  [/^#\/gpus$/, () => gpusPage],
  [/^#\/experiments$/, () => experimentsPage],
  [/^#\/experiment\/(.+)$/, () => experimentPage],
  [/^#\/users$/, () => usersPage],
];
let cleanup = null;
let renderToken = 0;

function decodePart(part) {
  try { return decodeURIComponent(part); } catch { return part; }
}

async function route() {
  const hash = location.hash || '#/queue';
  if (cleanup) { try { cleanup(); } catch (e) { console.warn(e); } cleanup = null; }
  hideMessage();
  let page = null;
  let args = [];
  for (const [pattern, get] of routes) {
    const m = hash.match(pattern);
    if (m) { page = get(); args = m.slice(1).map(decodePart); break; }
  }
  const name = hash.split('/')[1] || 'queue';
  for (const a of document.querySelectorAll('#nav a')) {
    const current = a.dataset.page === name || (name === 'task' && a.dataset.page === 'queue') || (name === 'experiment' && a.dataset.page === 'experiments');
    a.classList.toggle('current', current);
  }
  // Each page draws into a box of its own: a page still loading when the user moves on draws
  // into a box no longer in the document.
  const mine = ++renderToken;
  const box = h('div', { class: 'page' });
  clear(main, box);
  if (!page) {
    box.append(h('p', {}, 'No such page. ', h('a', { href: '#/queue' }, 'Go to the queue.')));
    return;
  }
  try {
    const c = await page(box, session, ...args);
    if (mine === renderToken) cleanup = c || null;
    else if (c) c();
  } catch (e) {
    if (mine !== renderToken || e.status === 401) return;
    clear(box, h('p', { class: 'error' }, e.message));
  }
}

// --- login ---
function showLogin(reason) {
  stopEvents();
  session.user = null;
  if (cleanup) { try { cleanup(); } catch { /* gone */ } cleanup = null; }
  renderToken++;
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('live').hidden = true;
  document.getElementById('who').textContent = '';
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off',
    placeholder: 'drv_…', required: true, spellcheck: 'false' });
  const form = h('form', { class: 'login', id: 'login' },
    h('h1', {}, 'Log in to drover'),
    reason ? h('p', { class: 'error' }, reason) : null,
    h('label', { for: 'token' }, 'API token'),
    input,
    h('button', { type: 'submit' }, 'Log in'),
    h('p', { class: 'muted' }, 'Make one with ', h('code', {}, 'drover token create'),
      ', or open the link that ', h('code', {}, 'drover dashboard'), ' prints. ',
      'The token is kept in this tab only (sessionStorage).'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    auth.token = input.value.trim();
    start();
  });
  clear(main, form);
  input.focus();
}

auth.onUnauthorized = (message) => {
  const hadToken = !!auth.token;
  auth.token = null;
  showLogin(hadToken ? `The token was refused: ${message}` : null);
};

async function logout() {
  const hadToken = !!auth.token;
  auth.token = null;
  if (!hadToken) {
    // The session's cookie ends at the daemon (the request carries its CSRF token).
    try {
      await api('/api/v1/logout', { method: 'POST', noLogin: true });
    } catch (e) {
      if (e.status !== 401) showMessage(`Log out failed: ${e.message}`);
    }
  }
  auth.csrf = null;
  showLogin(null);
}

async function start() {
  let who;
  try {
    who = await api('/api/v1/session', { noLogin: true });
  } catch (e) {
    if (e.status === 401) {
      const hadToken = !!auth.token;
      auth.token = null;
      showLogin(hadToken ? `The token was refused: ${e.message}` : null);
    } else {
      clear(main, h('p', { class: 'error' }, `Cannot reach the daemon: ${e.message}`));
    }
    return;
  }
  Object.assign(session, who);
  auth.csrf = who.csrf || null;
  document.getElementById('nav').hidden = false;
  document.getElementById('nav-users').hidden = !who.system;
  document.getElementById('logout').hidden = false;
  document.getElementById('live').hidden = false;
  document.getElementById('who').textContent =
    `${who.user}${who.admin ? ' (admin)' : ''}${who.read_only ? ' (read-only)' : ''}`;
  startEvents();
  route();
}

document.getElementById('logout').addEventListener('click', logout);
window.addEventListener('hashchange', () => { if (session.user) route(); });
window.addEventListener('error', (e) => showMessage(`Dashboard error: ${e.message}`));
start();
