// Helpers for troupe's integration tier: the real `troupe` binary on a free port, the fake
// OpenAI-compatible upstream over real HTTP, an SSE client that parses frames itself and can abort
// mid-stream, and a poll-until helper with a deadline.
//
// Environment:
//   TROUPE_BIN            path of the built `troupe` binary (required)
//   TROUPE_FAKE_UPSTREAM  path of tests/fake_upstream/fake_upstream.mjs (default: found from here)
//   TROUPE_IT_KEEP        keep each scenario's temp directory (for debugging)
//
// A test is written as `scenario(name, async (s) => { const troupe = await s.troupe({...}); ... })`.
// Every process and temp directory the scenario starts is cleaned up when it ends, and a failing
// assertion carries the stderr of every process the scenario started.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// A key's folder name, encoded as troupe does (protocol/workspace_path.hpp): safe bytes kept, others
// (and a leading dot) as %XX, the empty key as %none, a long encoding cut and ended by its digest.
export function workspace_segment(key) {
  if (key === '') return '%none';
  let out = '';
  for (const [i, b] of [...Buffer.from(key, 'utf8')].entries()) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9._@-]/.test(c) && !(i === 0 && c === '.') ? c : '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  if (out.length <= 128) return out;
  let cut = 128 - 2 - 64;
  while (cut > 0 && (out[cut - 1] === '%' || (cut > 1 && out[cut - 2] === '%'))) cut--;
  return out.slice(0, cut) + '%~' + crypto.createHash('sha256').update(key, 'utf8').digest('hex');
}

const here = path.dirname(fileURLToPath(import.meta.url));
export const source_dir = path.resolve(here, '..', '..');

export const start_timeout_ms = 10_000; // generous: a loaded 2-core CI machine
export const stop_timeout_ms = 20_000;  // > the drain grace troupe is given in these tests

// AS-78.
export const timestamp_re = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/;

// AS-12: every event payload has all of these keys.
export const event_keys = [
  'schema', 'type', 'event_id', 'sequence', 'parent_event_id', 'run_id', 'session_id', 'timestamp',
  'content', 'tool_name', 'tool_args', 'tool_call_id', 'duration_ms', 'cited_source_ids',
  'approval_request_id', 'metadata',
];

export function troupe_bin() {
  const bin = process.env.TROUPE_BIN;
  if (!bin) throw new Error('TROUPE_BIN is not set: point it at the built troupe binary');
  if (!fs.existsSync(bin)) throw new Error(`TROUPE_BIN=${bin} does not exist`);
  return bin;
}

export function fake_upstream_script() {
  const file = process.env.TROUPE_FAKE_UPSTREAM || path.join(source_dir, 'tests', 'fake_upstream', 'fake_upstream.mjs');
  if (!fs.existsSync(file)) throw new Error(`fake upstream not found at ${file} (set TROUPE_FAKE_UPSTREAM)`);
  return file;
}

// The repository's config/troupe.json: the same text troupe embeds as its default.
// The cluster secret of every node a suite starts (CJ-23): 32 bytes and more.
export const cluster_secret = 'troupe-test-cluster-secret-0123456789abcdef';

export function default_config() {
  return JSON.parse(fs.readFileSync(path.join(source_dir, 'config', 'troupe.json'), 'utf8'));
}

function is_plain_object(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// Objects merge key by key; anything else (arrays included) replaces.
export function deep_merge(base, over) {
  if (!is_plain_object(base) || !is_plain_object(over)) return over === undefined ? base : over;
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = deep_merge(base[k], v);
  return out;
}

// troupe's environment: ours without anything that would configure troupe behind the test's back.
function clean_env(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('TROUPE_') || k === 'FASTREACT_SERVICE_TOKEN') continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

// With TROUPE_TEST_STORE=postgres (scripts/pg-throwaway sets TROUPE_POSTGRES_URL), every troupe a test
// starts keeps its stores in a PostgreSQL database of its own, named after its data dir, so a restart
// on the same data dir finds its runs again and no two instances share one (CJ-1).
export const on_postgres = process.env.TROUPE_TEST_STORE === 'postgres';

function postgres_database_for(data_dir) {
  return postgres_database('it_' + crypto.createHash('sha256').update(path.resolve(data_dir)).digest('hex').slice(0, 20));
}

// The URL of database `name` on the throwaway server (TROUPE_POSTGRES_URL), created when missing.
export function postgres_database(name) {
  const server = process.env.TROUPE_POSTGRES_URL;
  if (!server) throw new Error('TROUPE_TEST_STORE=postgres needs TROUPE_POSTGRES_URL (run through scripts/pg-throwaway)');
  const exists = spawnSync('psql', [server, '-tAc', `SELECT 1 FROM pg_database WHERE datname = '${name}'`],
    { encoding: 'utf8' });
  if (exists.status !== 0) throw new Error(`psql failed: ${exists.stderr}`);
  if (exists.stdout.trim() !== '1') {
    const made = spawnSync('psql', [server, '-c', `CREATE DATABASE ${name}`], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`creating ${name} failed: ${made.stderr}`);
  }
  return server.slice(0, server.lastIndexOf('/') + 1) + name;
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// Polls `check` until it returns a truthy value (which is returned) or the deadline passes.
export async function until(check, { timeout_ms = 5000, interval_ms = 10, message = 'condition' } = {}) {
  const deadline = Date.now() + timeout_ms;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      const why = last instanceof Error ? `: last error ${last.message}` : `: last value ${JSON.stringify(last)}`;
      throw new Error(`timed out after ${timeout_ms} ms waiting for ${message}${why}`);
    }
    await sleep(interval_ms);
  }
}

// A port nothing listens on (bound, then released).
export function closed_port() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// A child process whose output is collected; `line(re)` waits for a stdout line matching re.
class child {
  constructor(label, command, args, options) {
    this.label = label;
    this.command = [command, ...args].join(' ');
    this.stdout = '';
    this.stderr = '';
    this.exit = null; // {code, signal} once exited
    this.proc = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stdout.setEncoding('utf8');
    this.proc.stderr.setEncoding('utf8');
    this.proc.stdout.on('data', (d) => { this.stdout += d; });
    this.proc.stderr.on('data', (d) => { this.stderr += d; });
    this.exited = new Promise((resolve) => {
      this.proc.once('error', (err) => {
        this.stderr += `\n[spawn error] ${err.message}`;
        this.exit = { code: null, signal: null, error: err };
        resolve(this.exit);
      });
      this.proc.once('close', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
    });
  }

  get pid() {
    return this.proc.pid;
  }

  // Resolves with the match of the first stdout line matching `re`; rejects if the process exits
  // first or the deadline passes.
  line(re, timeout_ms = start_timeout_ms) {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (const l of this.stdout.split('\n')) {
          const m = l.match(re);
          if (m) return m;
        }
        return null;
      };
      const done = (fn, v) => {
        clearTimeout(timer);
        this.proc.stdout.off('data', on_data);
        fn(v);
      };
      const on_data = () => {
        const m = check();
        if (m) done(resolve, m);
      };
      const timer = setTimeout(() => done(reject, new Error(
        `${this.label} printed no line matching ${re} within ${timeout_ms} ms\n${this.describe()}`)), timeout_ms);
      this.proc.stdout.on('data', on_data);
      const m = check();
      if (m) return done(resolve, m);
      this.exited.then((e) => {
        if (check()) return;
        done(reject, new Error(`${this.label} exited (${JSON.stringify(e)}) before printing ${re}\n${this.describe()}`));
      });
    });
  }

  signal(sig) {
    if (!this.exit) this.proc.kill(sig);
  }

  // Waits for the process to exit on its own: its exit, or null past the deadline.
  async wait_exit(timeout_ms = stop_timeout_ms) {
    let timer;
    const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), timeout_ms); });
    const e = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    return e;
  }

  // Sends `sig` and waits for the exit; SIGKILLs (and reports it) past the deadline.
  async stop(sig = 'SIGTERM', timeout_ms = stop_timeout_ms) {
    if (this.exit) return this.exit;
    this.proc.kill(sig);
    let timer;
    const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), timeout_ms); });
    const e = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (e) return e;
    this.proc.kill('SIGKILL');
    await this.exited;
    this.exit = { ...this.exit, killed_after_timeout: true };
    return this.exit;
  }

  describe() {
    const tail = (s) => (s.length > 8000 ? `…${s.slice(-8000)}` : s);
    return `--- ${this.label}: ${this.command}\n--- exit: ${JSON.stringify(this.exit)}\n` +
      `--- stdout:\n${tail(this.stdout)}\n--- stderr:\n${tail(this.stderr)}`;
  }
}

// A running `troupe serve`.
export class troupe_process extends child {
  constructor(args, options, { data_dir, config_file, config }) {
    super('troupe', troupe_bin(), args, options);
    this.data_dir = data_dir;
    this.config_file = config_file;
    this.config = config;
    this.url = null;
  }

  async ready() {
    const m = await this.line(/^troupe listening on (http:\/\/\S+)$/);
    this.url = m[1];
    this.port = Number(new URL(this.url).port);
    return this;
  }

  // A user's workspace directory (AS-26), from the tenant and user keys ('' for no tenant).
  workspace(tenant_key, user_key) {
    return path.join(this.data_dir, 'workspaces', 'tenants', workspace_segment(tenant_key), 'users',
      workspace_segment(user_key));
  }

  // fetch against the service; `body` objects are sent as JSON.
  async request(method, route, { body, headers = {}, raw } = {}) {
    const init = { method, headers: { ...headers } };
    if (raw !== undefined) init.body = raw;
    else if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(this.url + route, init);
    const text = await res.text();
    let json;
    try { json = JSON.parse(text); } catch { json = undefined; }
    return { status: res.status, headers: res.headers, text, json };
  }

  // POST /v1/chat/completions with stream:false (AS-15).
  async chat(body, headers = {}) {
    return this.request('POST', '/v1/chat/completions', { body: { stream: false, ...body }, headers });
  }

  // POST /v1/chat/completions as SSE (AS-11).
  stream(body, headers = {}) {
    return open_sse(this.url + '/v1/chat/completions', { body: { stream: true, ...body }, headers });
  }
}

// A running fake upstream (tests/fake_upstream/fake_upstream.mjs).
export class fake_upstream extends child {
  constructor(options) {
    super('fake upstream', process.execPath, [fake_upstream_script(), '--port', '0'], options);
    this.url = null;
  }

  async ready() {
    const m = await this.line(/^fake upstream listening on (http:\/\/\S+)$/);
    this.url = m[1];
    return this;
  }

  get base_url() {
    return `${this.url}/v1`;
  }

  async control(method, route, body) {
    const res = await fetch(this.url + route, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await res.json();
    if (res.status !== 200) throw new Error(`fake upstream ${method} ${route} → ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  script(replies, fallback) {
    return this.control('POST', '/__script', fallback === undefined ? { replies } : { replies, default: fallback });
  }

  requests() {
    return this.control('GET', '/__requests');
  }

  reset() {
    return this.control('POST', '/__reset', {});
  }

  async active() {
    return (await this.control('GET', '/__active')).active;
  }
}

// tests/pg_stall_proxy.mjs in front of `target` (host:port): a partition from PostgreSQL on command.
export class pg_stall_proxy extends child {
  constructor(target, options) {
    super('pg stall proxy', process.execPath, [path.join(source_dir, 'tests', 'pg_stall_proxy.mjs'), '--target', target],
      options);
  }

  async ready() {
    const m = await this.line(/^stall proxy on (\d+), control on (\d+)$/);
    this.port = Number(m[1]);
    this.control_url = `http://127.0.0.1:${m[2]}`;
    return this;
  }

  async set(command) {
    const res = await fetch(`${this.control_url}/${command}`, { method: 'POST' });
    if (res.status !== 200) throw new Error(`pg stall proxy /${command} → ${res.status}`);
    return res.json();
  }

  stall() { return this.set('stall'); }
  resume() { return this.set('resume'); }
}

// Parses SSE text into frames {id, event, data, json, comment}; returns [frames, rest].
export function parse_sse(text) {
  const frames = [];
  const normalized = text.replace(/\r\n?/g, '\n');
  const blocks = normalized.split('\n\n');
  const rest = blocks.pop();
  for (const block of blocks) {
    if (block === '') continue;
    const frame = { id: undefined, event: undefined, data: undefined, comment: undefined };
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        frame.comment = (frame.comment ?? '') + line.slice(1).trimStart();
        continue;
      }
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'id') frame.id = value;
      else if (field === 'event') frame.event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length) {
      frame.data = data.join('\n');
      try { frame.json = JSON.parse(frame.data); } catch { frame.json = undefined; }
    }
    frame.raw = block;
    frames.push(frame);
  }
  return [frames, rest];
}

// Opens an SSE request with node:http. Resolves once the response head arrives with
//   {status, headers, body (non-SSE responses, when finished), frames (live array), events()
//    (frames that carry an event, heartbeats excluded), wait_for(pred, ms), finished (a promise of
//    {frames, ended, aborted}), abort()}.
export function open_sse(url, { method = 'POST', body, headers = {}, timeout_ms = start_timeout_ms } = {}) {
  const u = new URL(url);
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({
      method,
      hostname: u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      agent: false,
      headers: {
        accept: 'text/event-stream',
        ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        ...headers,
      },
    });
    const head_timer = setTimeout(() => {
      req.destroy(new Error(`no response head from ${method} ${url} within ${timeout_ms} ms`));
    }, timeout_ms);
    req.once('error', (err) => {
      clearTimeout(head_timer);
      reject(err);
    });
    req.once('response', (res) => {
      clearTimeout(head_timer);
      const frames = [];
      const waiters = new Set();
      let buffer = '';
      let aborted = false;
      let settle;
      const finished = new Promise((r) => { settle = r; });
      const stream = {
        status: res.statusCode,
        headers: res.headers,
        body: '',
        frames,
        finished,
        ended: false,
        events: () => frames.filter((f) => f.event !== undefined),
        abort() {
          aborted = true;
          req.destroy();
          res.destroy();
        },
        // Stops reading the socket (the server's writes back up), and reads on.
        pause() { res.pause(); },
        resume() { res.resume(); },
        // Resolves with the first frame satisfying pred (already received or future).
        wait_for(pred, ms = start_timeout_ms) {
          const hit = frames.find(pred);
          if (hit) return Promise.resolve(hit);
          return new Promise((res_, rej) => {
            const w = { pred, resolve: res_, reject: rej };
            w.timer = setTimeout(() => {
              waiters.delete(w);
              rej(new Error(`no SSE frame matched within ${ms} ms; frames so far:\n${frames.map((f) => f.raw).join('\n\n')}`));
            }, ms);
            waiters.add(w);
          });
        },
      };
      const wake = () => {
        for (const w of waiters) {
          const hit = frames.find(w.pred);
          if (hit) {
            clearTimeout(w.timer);
            waiters.delete(w);
            w.resolve(hit);
          }
        }
      };
      const done = () => {
        if (stream.ended) return;
        stream.ended = true;
        if (buffer.trim() !== '' && !String(res.headers['content-type'] ?? '').startsWith('text/event-stream'))
          stream.body = buffer;
        for (const w of waiters) {
          clearTimeout(w.timer);
          w.reject(new Error(`stream ended before a frame matched; frames:\n${frames.map((f) => f.raw).join('\n\n')}`));
        }
        waiters.clear();
        settle({ frames, aborted, complete: res.complete });
      };
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        buffer += chunk;
        if (!String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) return;
        const [parsed, rest] = parse_sse(buffer);
        buffer = rest;
        frames.push(...parsed);
        if (parsed.length) wake();
      });
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
      resolve(stream);
    });
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

// Checks the frame-level rules every agent event stream follows: AS-11, AS-12, AS-73, AS-78.
// Returns the payloads of the event frames.
export function check_event_stream(frames, { run_id, session_id } = {}) {
  const events = frames.filter((f) => f.event !== undefined);
  assert.ok(events.length >= 2, `expected events and done, got ${JSON.stringify(frames.map((f) => f.raw))}`);
  const last = events[events.length - 1];
  assert.equal(last.event, 'done', 'the stream ends with event: done');
  assert.equal(last.data, '[DONE]');
  assert.equal(last.id, undefined, 'the done frame carries no id');
  assert.equal(frames[frames.length - 1], last, 'nothing follows the done frame');
  const payloads = [];
  events.slice(0, -1).forEach((f, i) => {
    assert.ok(f.json, `frame ${i} carries one JSON payload: ${f.raw}`);
    const e = f.json;
    assert.ok(!f.data.includes('\n'), 'data is one line');
    for (const k of event_keys) assert.ok(k in e, `event ${i} (${e.type}) has key ${k}: ${f.data}`);
    assert.equal(e.schema, 'fastreact.agent_event.v1');
    assert.equal(f.event, e.type, 'event: names the payload type');
    assert.equal(f.id, String(e.sequence), 'id: equals the payload sequence (AS-73)');
    assert.equal(e.sequence, i, 'sequences run 0..n-1');
    assert.equal(e.parent_event_id, i === 0 ? null : `${e.run_id}:${i - 1}`, 'parent_event_id chains');
    assert.equal(e.event_id, `${e.run_id}:${e.sequence}`);
    assert.match(e.timestamp, timestamp_re, 'timestamps follow AS-78');
    assert.ok(Array.isArray(e.cited_source_ids));
    assert.ok(is_plain_object(e.metadata));
    if (run_id !== undefined) assert.equal(e.run_id, run_id);
    if (session_id !== undefined) assert.equal(e.session_id, session_id);
    payloads.push(e);
  });
  return payloads;
}

// One test's world: the processes and temp directories it starts, cleaned up when it ends.
export class scenario_context {
  constructor(t) {
    this.t = t;
    this.children = [];
    this.dirs = [];
  }

  tmpdir(prefix = 'troupe-it-') {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    this.dirs.push(d);
    return d;
  }

  // Writes a config (config/troupe.json deep-merged with `config`, listener on 127.0.0.1:0, a short
  // drain grace) into a fresh temp dir and starts `troupe serve` on a fresh data dir.
  //   options: config, env (extra environment), args (extra CLI args), data_dir (reuse one),
  //            raw_config (use exactly this object as the file), wait (default true: await the
  //            listening line).
  async troupe({ config = {}, env = {}, args = [], data_dir, raw_config, wait = true } = {}) {
    const dir = this.tmpdir();
    data_dir ??= path.join(dir, 'data');
    // A node on PostgreSQL publishes its node actor on a free port and proves itself with the
    // suite's cluster secret (CJ-22, CJ-23).
    const base = deep_merge(default_config(), {
      service: { host: '127.0.0.1', port: 0, shutdown_grace_seconds: 5 },
      cluster: { port: 0, secret: cluster_secret },
      data_dir,
    });
    // A node on PostgreSQL declares a silent one dead after CJ-47's short expiry, not the default 10 s.
    if (on_postgres) {
      base.store = { postgres_url: postgres_database_for(data_dir) };
      Object.assign(base.cluster,
        { heartbeat_seconds: 0.25, node_expiry_seconds: 2, fence_margin_seconds: 0.5, drain_grace_seconds: 5 });
    }
    const cfg = raw_config ?? deep_merge(base, config);
    const config_file = path.join(dir, 'troupe.json');
    fs.writeFileSync(config_file, JSON.stringify(cfg, null, 2));
    const p = new troupe_process(
      ['serve', '--config', config_file, '--port', '0', '--data-dir', data_dir, ...args],
      { env: clean_env(env), cwd: dir },
      { data_dir, config_file, config: cfg });
    this.children.push(p);
    return wait ? p.ready() : p;
  }

  // Runs `troupe <args>` to completion: {code, signal, stdout, stderr}.
  async run_troupe(args, { env = {}, timeout_ms = start_timeout_ms } = {}) {
    const dir = this.tmpdir();
    const p = new child('troupe', troupe_bin(), args, { env: clean_env(env), cwd: dir });
    this.children.push(p);
    let timer;
    const late = new Promise((r) => { timer = setTimeout(() => r(null), timeout_ms); });
    const e = await Promise.race([p.exited, late]);
    clearTimeout(timer);
    if (!e) {
      await p.stop('SIGKILL');
      throw new Error(`troupe ${args.join(' ')} did not exit within ${timeout_ms} ms\n${p.describe()}`);
    }
    return { ...e, stdout: p.stdout, stderr: p.stderr };
  }

  // A stall proxy in front of the PostgreSQL server at `url`; answers it and the URL through it.
  async stall_proxy(url) {
    const u = new URL(url);
    const p = new pg_stall_proxy(`${u.hostname}:${u.port}`, { env: process.env });
    this.children.push(p);
    await p.ready();
    u.port = String(p.port);
    return { proxy: p, url: u.toString() };
  }

  async upstream() {
    const u = new fake_upstream({ env: process.env });
    this.children.push(u);
    return u.ready();
  }

  logs() {
    return this.children.map((c) => c.describe()).join('\n');
  }

  async cleanup() {
    await Promise.all(this.children.map((c) => c.stop('SIGTERM').catch(() => {})));
    if (!process.env.TROUPE_IT_KEEP)
      for (const d of this.dirs) fs.rmSync(d, { recursive: true, force: true });
  }
}

// A test with a scenario context; a failure carries every started process's output.
export function scenario(name, fn, options = {}) {
  return test(name, { timeout: 120_000, ...options }, async (t) => {
    const s = new scenario_context(t);
    try {
      await fn(s, t);
    } catch (err) {
      const logs = s.logs();
      if (logs && err && typeof err === 'object') {
        try {
          err.message = `${err.message}\n${logs}`;
        } catch {
          /* read-only message */
        }
      }
      throw err;
    } finally {
      await s.cleanup();
    }
  });
}

// The openai-provider config pointing at a fake upstream.
export function upstream_config(upstream_or_url, model = {}) {
  const base_url = typeof upstream_or_url === 'string' ? upstream_or_url : upstream_or_url.base_url;
  return { model: { provider: 'openai', base_url, name: 'fake-model', api_key: 'sk-test', ...model } };
}

export const user = (content) => ({ role: 'user', content });

// An HS256 JWT (RFC 7519) over `claims`, signed with `key` (AS-6); `header` overrides the JOSE header.
export function hs256_jwt(claims, key, header = {}) {
  const part = (obj) => Buffer.from(JSON.stringify(obj)).toString('base64url');
  const signing_input = `${part({ alg: 'HS256', typ: 'JWT', ...header })}.${part(claims)}`;
  return `${signing_input}.${crypto.createHmac('sha256', key).update(signing_input).digest('base64url')}`;
}

// Checks one attempt's event order (AS-14, AS-76): session_start; per step: thinks, then tool_calls
// (or budget-denied thinks), then step_end, then per tool_call an optional ask_user and exactly one
// tool_result with its id, in order; the attempt ends with session_end or error and nothing follows.
// An attempt ending in error may stop anywhere. Returns the steps [{calls, results}].
export function check_attempt_order(payloads) {
  const types = payloads.map((e) => e.type).join(', ');
  assert.equal(payloads[0]?.type, 'session_start', `an attempt starts with session_start: ${types}`);
  const last = payloads[payloads.length - 1];
  assert.ok(last.type === 'session_end' || last.type === 'error', `an attempt ends with session_end or error: ${types}`);
  for (const e of payloads.slice(1, -1))
    assert.ok(e.type !== 'session_end' && e.type !== 'error' && e.type !== 'session_start',
      `session_start/session_end/error appear only at the ends: ${types}`);
  const failed = last.type === 'error';
  const body = payloads.slice(1, -1);
  const steps = [];
  let i = 0;
  while (i < body.length) {
    while (i < body.length && body[i].type === 'think') i++;
    const calls = [];
    while (i < body.length && (body[i].type === 'tool_call' ||
           (body[i].type === 'think' && String(body[i].content).startsWith('[TOOL_BUDGET_DENIED]')))) {
      if (body[i].type === 'tool_call') calls.push(body[i]);
      i++;
    }
    if (i >= body.length) {
      assert.ok(failed, `a step ends with step_end: ${types}`);
      break;
    }
    assert.equal(body[i].type, 'step_end', `after the step's thinks and tool_calls comes step_end: ${types}`);
    i++;
    const results = [];
    for (const call of calls) {
      if (i < body.length && body[i].type === 'ask_user') {
        assert.equal(body[i].tool_call_id, call.tool_call_id);
        i++;
      }
      if (i >= body.length) {
        assert.ok(failed, `every tool_call has a tool_result: ${types}`);
        break;
      }
      assert.equal(body[i].type, 'tool_result', `a tool_call is answered by a tool_result: ${types}`);
      assert.equal(body[i].tool_call_id, call.tool_call_id, 'tool_result pairs with its tool_call by id (AS-76)');
      assert.equal(body[i].tool_name, call.tool_name);
      results.push(body[i]);
      i++;
    }
    steps.push({ calls, results });
  }
  return steps;
}

// GET /ready (with `headers`) until mcp.ready and every named MCP server is alive; returns the body.
export async function wait_mcp_ready(troupe, names, timeout_ms, headers = {}) {
  let last;
  try {
    return await until(async () => {
      const res = await troupe.request('GET', '/ready', { headers });
      last = res.text;
      const mcp = res.json?.mcp;
      if (res.status !== 200 || !mcp?.ready) return false;
      return names.every((n) => mcp.servers.find((v) => v.name === n)?.alive === true) && res.json;
    }, { timeout_ms, interval_ms: 50, message: `mcp.ready with servers ${names.join(', ')} alive` });
  } catch (err) {
    err.message += `\nlast GET /ready: ${last}`;
    throw err;
  }
}

// GET /v1/runs/{run_id}, which must answer 200; returns the snapshot.
export async function get_run(troupe, run_id) {
  const res = await troupe.request('GET', `/v1/runs/${encodeURIComponent(run_id)}`);
  assert.equal(res.status, 200, `GET /v1/runs/${run_id}: ${res.text}`);
  return res.json;
}

// Polls a run's snapshot (read with `read`) until `pred` holds; returns it. A timeout names the last
// snapshot seen.
export async function wait_run(troupe, run_id, pred, { timeout_ms = 30_000, message = 'the run', read = get_run } = {}) {
  let last;
  try {
    return await until(async () => {
      last = await read(troupe, run_id);
      return pred(last) && last;
    }, { timeout_ms, interval_ms: 20, message: `${message} (${run_id})` });
  } catch (err) {
    err.message += `\nlast snapshot: ${JSON.stringify(last)}`;
    throw err;
  }
}

// Preloaded (node --import) before tests/fake_mcp/fake_mcp_server.mjs: appends each request the server
// reads on stdin to $FAKE_MCP_LOG as `request <method> <tool name|-> <id json>`.
export const fake_mcp_spy_source = `import fs from 'node:fs';
const log_file = process.env.FAKE_MCP_LOG;
let buffered = '';
const emit = process.stdin.emit;
process.stdin.emit = function (event, ...args) {
  if (event === 'data' && log_file) {
    buffered += String(args[0]);
    let nl;
    while ((nl = buffered.indexOf('\\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      try {
        const msg = JSON.parse(line);
        if (msg && msg.method !== undefined && msg.id !== undefined)
          fs.appendFileSync(log_file, 'request ' + msg.method + ' ' + (msg.params?.name ?? '-') + ' ' + JSON.stringify(msg.id) + '\\n');
      } catch { /* the server answers it */ }
    }
  }
  return emit.call(this, event, ...args);
};
`;

// Host pids of living (not zombie) processes whose command line contains `marker`, from /proc: how
// a test finds a sandboxed command's processes, whose own pids are those of their namespace.
export function processes_with(marker) {
  const found = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (!cmdline.includes(marker)) continue;
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z') found.push(Number(name));
    } catch {
      // gone while we looked
    }
  }
  return found;
}
