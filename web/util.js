// util.js — the dashboard's small helpers: DOM building (never innerHTML with data: task names
// and commands are user input), formatting, and the API client (bearer token or session cookie
// with its CSRF header).

// h('td', {class: 'x', onclick: f}, child, …): an element. Children are nodes, strings (text) or
// arrays of them; null/undefined/false are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// --- formatting ---
export function fmtTime(ms) {
  if (ms === null || ms === undefined) return '—';
  const d = new Date(ms);
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  return sameDay ? d.toLocaleTimeString() : d.toLocaleString();
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined || !isFinite(ms)) return '—';
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor(s % 3600 / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor(s % 86400 / 3600)}h`;
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'K', 'M', 'G', 'T'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)}${units[i]}`;
}

export function fmtNumber(x, digits = 4) {
  if (x === null || x === undefined || typeof x !== 'number' || !isFinite(x)) return '—';
  if (Number.isInteger(x)) return String(x);
  return Number(x.toPrecision(digits)).toString();
}

export function stateBadge(state) {
  return h('span', { class: `state state-${state}` }, (state || '?').replace('_', ' '));
}

// --- the API ---
const TOKEN_KEY = 'drover-token';
export const auth = {
  csrf: null,         // the session's CSRF token (cookie login)
  onUnauthorized: null,
  get token() { return sessionStorage.getItem(TOKEN_KEY); },
  set token(t) { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); },
};

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

// The request's headers: the bearer token when logged in with one, else the session cookie goes
// by itself and writes carry the session's CSRF token.
export function authHeaders(method = 'GET', extra = {}) {
  const headers = { ...extra };
  if (auth.token) headers.Authorization = `Bearer ${auth.token}`;
  else if (method !== 'GET' && method !== 'HEAD' && auth.csrf) headers['X-CSRF-Token'] = auth.csrf;
  return headers;
}

async function errorOf(response) {
  let message = `${response.status} ${response.statusText}`;
  let field;
  try {
    const body = await response.json();
    if (body && body.error) { message = body.error; field = body.field; }
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(response.status, message, field);
}

// api(path, {method, body, signal, raw}) → the parsed JSON (or the Response when raw). A 401
// calls auth.onUnauthorized (the login form); errors throw ApiError with the server's message.
export async function api(path, options = {}) {
  const method = options.method || 'GET';
  const headers = authHeaders(method, options.headers);
  let body = options.body;
  if (body !== undefined && typeof body !== 'string') {
    body = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  const response = await fetch(path, {
    method, headers, body, signal: options.signal, credentials: 'same-origin', cache: 'no-store',
  });
  if (response.status === 401) {
    const error = await errorOf(response);
    if (auth.onUnauthorized && !options.noLogin) auth.onUnauthorized(error.message);
    throw error;
  }
  if (!response.ok) throw await errorOf(response);
  if (options.raw) return response;
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

// Reads a streamed text body, calling onText(chunk) per piece, until it ends or signal aborts.
export async function readStream(response, onText) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    onText(decoder.decode(value, { stream: true }));
  }
  const rest = decoder.decode();
  if (rest) onText(rest);
}

// --- the message bar ---
let messageTimer = null;
export function showMessage(text, kind = 'error') {
  const el = document.getElementById('message');
  el.textContent = text;
  el.className = `message message-${kind}`;
  el.hidden = false;
  clearTimeout(messageTimer);
  if (kind !== 'error') messageTimer = setTimeout(() => { el.hidden = true; }, 4000);
}

export function hideMessage() {
  document.getElementById('message').hidden = true;
}
