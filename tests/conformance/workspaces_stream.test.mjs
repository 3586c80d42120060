// Conformance: the reflexr.v1 WebSocket (docs: workspace-stream.md §4, WS-44..WS-58, WS-132,
// WS-133) driven by the `ws` client, pinned in package.json. Every frame troupe sends is validated
// against `#/$defs/ServerFrame` of schemas/reflexr.v1.json and every frame a test sends on purpose
// against `ClientFrame` (WS-125..WS-127), with ajv; a missing schema fails every test that saw a
// frame, once its behaviour has been checked.
//
// Needs `npm ci` in tests/conformance and TROUPE_BIN (see the integration harness, which this file
// reuses).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import WebSocket from 'ws';
import Ajv2020 from 'ajv/dist/2020.js';
import { scenario, sleep, source_dir, until } from '../integration/harness.mjs';

const protocol = 'reflexr.v1';
const wait_ms = 10_000; // a frame that is due; generous for a loaded 2-core machine
const ts_re = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const deploy = (service = 'auth') => ({ type: 'ops:deploy.finished', service });
const error = (service = 'auth', severity = 5) => ({ type: 'ops:service.error', service, severity });
const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');
const bearer = (token) => ({ authorization: `Bearer ${token}` });

// ---------------------------------------------------------------------------------------------
// The protocol's JSON Schema (WS-125)

const schema_file = path.join(source_dir, 'schemas', 'reflexr.v1.json');

let schema_state;
// {server, client, defs} validators, or {problem} saying why there are none.
function schema() {
  if (schema_state) return schema_state;
  if (!fs.existsSync(schema_file)) {
    schema_state = { problem: `schemas/reflexr.v1.json does not exist, so no frame could be checked against it (WS-125)` };
    return schema_state;
  }
  try {
    const doc = JSON.parse(fs.readFileSync(schema_file, 'utf8'));
    const ajv = new Ajv2020({ discriminator: true, strict: false, allErrors: true, validateFormats: false });
    const id = doc.$id ?? 'reflexr.v1.json';
    if (doc.$id) ajv.addSchema(doc);
    else ajv.addSchema(doc, id);
    const def = (name) => {
      const v = ajv.getSchema(`${id}#/$defs/${name}`);
      if (!v) throw new Error(`schemas/reflexr.v1.json has no $defs/${name}`);
      return v;
    };
    schema_state = { doc, def, server: def('ServerFrame'), client: def('ClientFrame') };
  } catch (err) {
    schema_state = { problem: `schemas/reflexr.v1.json does not compile: ${err.message}` };
  }
  return schema_state;
}

// Problems of `value` against a validator, as one line each.
function violations(validate, value) {
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`);
}

// ---------------------------------------------------------------------------------------------
// A WebSocket client that keeps every frame, validates it, and waits on conditions.

class stream_client {
  constructor(url, { protocols = [protocol], headers = {} } = {}) {
    this.url = url;
    this.frames = [];   // parsed frames, in arrival order
    this.texts = [];    // their text, as sent
    this.problems = []; // schema violations and unparseable frames
    this.close_info = null;
    this.error = null;
    this.waiters = new Set();
    this.ws = protocols === null ? new WebSocket(url, { headers }) : new WebSocket(url, protocols, { headers });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('close', () => reject(new Error(`closed before opening: ${JSON.stringify(this.close_info)} ${this.error?.message ?? ''}`)));
    });
    this.opened.catch(() => {});
    this.ws.on('error', (err) => { this.error = err; });
    this.closed = new Promise((resolve) => {
      this.ws.once('close', (code, reason) => {
        this.close_info = { code, reason: reason.toString('utf8') };
        resolve(this.close_info);
        this.wake();
      });
    });
    this.ws.on('message', (data, is_binary) => {
      const text = data.toString('utf8');
      let frame;
      try {
        frame = JSON.parse(text);
      } catch {
        this.problems.push(`a frame that is not JSON: ${text.slice(0, 200)}`);
        frame = { unparseable: text };
      }
      if (is_binary) this.problems.push(`a binary frame (WS-44 says text frames): ${text.slice(0, 200)}`);
      const sc = schema();
      if (sc.server && !frame.unparseable) {
        const v = violations(sc.server, frame);
        if (v.length) this.problems.push(`ServerFrame violation by ${text.slice(0, 300)}: ${v.slice(0, 5).join('; ')}`);
      }
      this.frames.push(frame);
      this.texts.push(text);
      this.wake();
    });
  }

  wake() {
    for (const w of this.waiters) w.check();
  }

  describe() {
    const shown = this.texts.length > 40 ? [...this.texts.slice(0, 20), '…', ...this.texts.slice(-20)] : this.texts;
    return `frames (${this.texts.length}):\n  ${shown.join('\n  ')}\nclose: ${JSON.stringify(this.close_info)}` +
      `${this.error ? `\nerror: ${this.error.message}` : ''}`;
  }

  // Sends a frame the test means to be valid: it must satisfy ClientFrame.
  send(frame) {
    const sc = schema();
    if (sc.client) {
      const v = violations(sc.client, frame);
      if (v.length) this.problems.push(`the test's own frame fails ClientFrame: ${JSON.stringify(frame)}: ${v.join('; ')}`);
    }
    this.ws.send(JSON.stringify(frame));
  }

  // Sends anything as is (deliberately invalid frames).
  send_raw(data, options = {}) {
    this.ws.send(data, options);
  }

  hello(fields = {}) {
    this.send({ type: 'hello', protocol, ...fields });
  }

  command(command_id, cmd) {
    this.send({ type: 'command', command_id, command: cmd });
  }

  // Resolves with the index of the first frame (from index `from`) satisfying pred; rejects if the
  // socket closes first or the deadline passes.
  wait_index(pred, { from = 0, ms = wait_ms, what = 'a frame' } = {}) {
    return new Promise((resolve, reject) => {
      const w = {
        check: () => {
          for (let i = from; i < this.frames.length; i++) {
            if (pred(this.frames[i])) return done(resolve, i);
          }
          if (this.close_info) done(reject, new Error(`the socket closed before ${what} arrived\n${this.describe()}`));
          return undefined;
        },
      };
      const timer = setTimeout(() => done(reject, new Error(`${what} did not arrive within ${ms} ms\n${this.describe()}`)), ms);
      const done = (fn, v) => {
        clearTimeout(timer);
        this.waiters.delete(w);
        fn(v);
      };
      this.waiters.add(w);
      w.check();
    });
  }

  async wait_for(pred, options = {}) {
    return this.frames[await this.wait_index(pred, options)];
  }

  // The close {code, reason}, within the deadline.
  async wait_close(ms = wait_ms) {
    let timer;
    const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), ms); });
    const info = await Promise.race([this.closed, late]);
    clearTimeout(timer);
    if (!info) throw new Error(`the socket was not closed within ${ms} ms\n${this.describe()}`);
    return info;
  }

  // hello, then welcome and replay_complete: {welcome, replayed (event frames), complete}.
  async start(fields = {}) {
    await this.opened;
    this.hello(fields);
    const complete_at = await this.wait_index((f) => f.type === 'replay_complete', { what: 'replay_complete' });
    const welcome = this.frames[0];
    assert.equal(welcome.type, 'welcome', `the first frame is welcome (WS-50)\n${this.describe()}`);
    const replayed = this.frames.slice(1, complete_at);
    for (const f of replayed) assert.equal(f.type, 'event', `only event frames come between welcome and replay_complete\n${this.describe()}`);
    return { welcome, replayed, complete: this.frames[complete_at], complete_at };
  }

  events(from = 0) {
    return this.frames.slice(from).filter((f) => f.type === 'event');
  }

  close() {
    if (!this.close_info) this.ws.close(1000);
  }

  terminate() {
    if (!this.close_info) this.ws.terminate();
  }

  // Every frame satisfied the schema (and the schema exists, if any frame was seen).
  assert_schema() {
    if (this.texts.length && schema().problem) assert.fail(schema().problem);
    assert.deepEqual(this.problems, [], `frames that break the protocol's schema\n${this.describe()}`);
  }
}

// A scenario whose stream clients are closed at the end and whose frames must all fit the schema.
function stream_scenario(name, fn, options) {
  scenario(name, async (s, t) => {
    const clients = [];
    s.client = (troupe, ws, options_ = {}) => {
      const url = `${troupe.url.replace(/^http/, 'ws')}/v1/workspaces/${encodeURIComponent(ws)}/stream`;
      const c = new stream_client(url, options_);
      clients.push(c);
      return c;
    };
    try {
      await fn(s, t);
      for (const c of clients) c.assert_schema();
    } finally {
      for (const c of clients) c.terminate();
    }
  }, options);
}

// ---------------------------------------------------------------------------------------------
// REST helpers

async function publish(troupe, ws, body, headers = {}) {
  const r = await troupe.request('POST', `/v1/workspaces/${ws}/events`, { body, headers });
  assert.equal(r.status, 200, `publish: ${r.text}`);
  return r.json;
}

async function publish_many(troupe, ws, events, headers = {}) {
  return publish(troupe, ws, { events: events.map((event) => ({ event })) }, headers);
}

async function log_of(troupe, ws, query = '', headers = {}) {
  const r = await troupe.request('GET', `/v1/workspaces/${ws}/events${query ? `?${query}` : ''}`, { headers });
  assert.equal(r.status, 200, `GET events?${query}: ${r.text}`);
  return r.json;
}

const as_frame = (envelope) => ({ ...envelope, type: 'event' });
const seqs = (frames) => frames.map((f) => f.seq);
const range = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

function assert_welcome(welcome, { ws = 'prod', head, reset = false }) {
  assert.deepEqual(welcome, { type: 'welcome', protocol, workspace_id: ws, head_seq: head, reset }, 'welcome (WS-50)');
}

// Connects, expects a close with `code` and `reason` and no frame before it.
async function assert_closed_at_once(c, code, reason, what) {
  const info = await c.wait_close();
  assert.deepEqual(info, { code, reason }, `${what}\n${c.describe()}`);
  assert.deepEqual(c.frames, [], `${what}: no frame before the close\n${c.describe()}`);
}

const alice = 'alice-stream-token';
const carol = 'carol-stream-token';
const credentials = [
  { token_sha256: sha256(alice), tenant: 'acme', actor: { kind: 'user', id: 'alice' }, workspaces: ['prod'] },
  { token_sha256: sha256(carol), tenant: 'globex', actor: { kind: 'user', id: 'carol' }, workspaces: '*' },
];

// ---------------------------------------------------------------------------------------------
// The schema itself

// WS-125..WS-127: the examples of the spec validate, and the defs the spec names exist.
test('the protocol schema exists, names the defs of WS-126 and accepts the examples of the spec', () => {
  const sc = schema();
  if (sc.problem) assert.fail(sc.problem);
  assert.equal(sc.doc.title, 'reflexr.v1');
  assert.equal(sc.doc.$schema, 'https://json-schema.org/draft/2020-12/schema');
  for (const name of ['ClientFrame', 'ServerFrame', 'Hello', 'CommandFrame', 'Welcome', 'EventFrame', 'ReplayComplete',
    'CommandResult', 'ErrorFrame', 'Command', 'Publish', 'GiveFeedback', 'Outcome', 'PublishedOutcome', 'RecordedOutcome',
    'Rejection', 'NotFoundRejection', 'ValidationFailedRejection', 'ForbiddenRejection', 'DepthExceededRejection',
    'UnsupportedProtocolRejection', 'InvalidStateRejection', 'ValidationError', 'Causation', 'Actor', 'UserActor',
    'FeedbackTarget', 'ChainTarget', 'Event', 'FeedbackGiven', 'Tick', 'EventName', 'EventId', 'WorkspaceId'])
    assert.ok(sc.doc.$defs?.[name], `$defs/${name} exists (WS-126)`);

  const client = [
    { type: 'hello', protocol, resume_after_seq: 41, types: ['reflexr:rule_fired'] },
    { type: 'command', command_id: 'cmd_7', command: { type: 'publish', event: error('auth', 8) } },
    { type: 'command', command_id: 'c1', command: { type: 'retry_run', run_id: 'fir_0b6a3c9e1f2d4a58' } },
  ];
  for (const f of client) assert.deepEqual(violations(sc.client, f), [], `ClientFrame accepts ${JSON.stringify(f)}`);
  const envelope = {
    seq: 42, id: 'evt_3f9c2a1b7d4e5f60', ts: '2025-03-01T09:00:00.000000Z', workspace_id: 'prod',
    actor: { kind: 'source', name: 'pagerduty' }, causation: null, correlation_id: 'evt_3f9c2a1b7d4e5f60',
    traceparent: null, event: error('auth', 8),
  };
  const server = [
    { type: 'welcome', protocol, workspace_id: 'prod', head_seq: 57, reset: false },
    { ...envelope, type: 'event' },
    { type: 'replay_complete', up_to_seq: 57 },
    {
      type: 'command_result', command_id: 'cmd_8', ok: false, outcome: null,
      rejection: { type: 'not_found', message: 'run fir_0b6a3c9e1f2d4a58 does not exist', entity: 'run', id: 'fir_0b6a3c9e1f2d4a58' },
    },
    { type: 'command_result', command_id: 'c1', ok: true, outcome: { type: 'published', seq: 58, id: 'd-17', duplicate: false }, rejection: null },
    { type: 'error', message: 'not a command frame: x' },
  ];
  for (const f of server) assert.deepEqual(violations(sc.server, f), [], `ServerFrame accepts ${JSON.stringify(f)}`);

  // WS-127, WS-131: strict frames and typed rejections.
  assert.notDeepEqual(violations(sc.client, { type: 'hello', protocol, colour: 'red' }), [], 'Hello refuses unknown fields');
  assert.notDeepEqual(violations(sc.client, { type: 'hello', protocol, types: ['service.error'] }), [], 'Hello.types items are EventNames');
  assert.notDeepEqual(violations(sc.server, {
    type: 'command_result', command_id: 'x', ok: false, outcome: null, rejection: { type: 'not_found', message: 'm' },
  }), [], 'a not_found rejection requires entity and id');
});

// ---------------------------------------------------------------------------------------------
// Handshake

// WS-44.
stream_scenario('reflexr.v1 is selected when the client offers it, and a client offering nothing still gets the stream', async (s) => {
  const troupe = await s.troupe();
  const offered = s.client(troupe, 'prod');
  await offered.opened;
  assert.equal(offered.ws.protocol, protocol);
  const among = s.client(troupe, 'prod', { protocols: ['something.else', protocol] });
  await among.opened;
  assert.equal(among.ws.protocol, protocol);
  const none = s.client(troupe, 'prod', { protocols: null });
  await none.opened;
  assert.equal(none.ws.protocol, '', 'nothing is selected when nothing is offered');

  for (const c of [offered, among, none]) {
    const { welcome, replayed, complete } = await c.start();
    assert_welcome(welcome, { head: 0 });
    assert.deepEqual(replayed, []);
    assert.deepEqual(complete, { type: 'replay_complete', up_to_seq: 0 });
  }
});

// WS-50..WS-53.
stream_scenario('hello replays the log as event frames, then one replay_complete, then live events in seq order', async (s) => {
  const troupe = await s.troupe();
  await publish_many(troupe, 'prod', [deploy('a'), error('b'), deploy('c')]);
  const c = s.client(troupe, 'prod');
  const { welcome, replayed, complete, complete_at } = await c.start();
  assert_welcome(welcome, { head: 3 });
  const log = await log_of(troupe, 'prod');
  assert.deepEqual(replayed, log.map(as_frame), 'replayed frames are the envelopes plus "type":"event" (WS-51)');
  assert.deepEqual(complete, { type: 'replay_complete', up_to_seq: 3 });

  await publish_many(troupe, 'prod', [deploy('d'), deploy('e')]);
  await publish(troupe, 'prod', { event: error('f'), id: 'f' });
  await c.wait_for((f) => f.seq === 6, { what: 'live seq 6' });
  const live = c.frames.slice(complete_at + 1);
  assert.deepEqual(live, (await log_of(troupe, 'prod', 'after_seq=3')).map(as_frame), 'live events, each once, in order (WS-53)');
  for (const f of live) assert.match(f.ts, ts_re);
  assert.equal(c.frames.filter((f) => f.type === 'replay_complete').length, 1, 'exactly one replay_complete');
});

// WS-51, WS-52.
stream_scenario('a types filter skips other events, and replay_complete still arrives when the head is filtered out', async (s) => {
  const troupe = await s.troupe();
  await publish_many(troupe, 'prod', [deploy('a'), error('b'), deploy('c')]); // the head, seq 3, is a deploy
  const c = s.client(troupe, 'prod');
  const { welcome, replayed, complete, complete_at } = await c.start({ types: ['ops:service.error'] });
  assert_welcome(welcome, { head: 3 });
  assert.deepEqual(seqs(replayed), [2]);
  assert.deepEqual(complete, { type: 'replay_complete', up_to_seq: 3 }, 'decided on the unfiltered log');

  await publish_many(troupe, 'prod', [deploy('d'), error('e'), deploy('f'), error('g')]);
  await c.wait_for((f) => f.seq === 7, { what: 'live seq 7' });
  const live = c.frames.slice(complete_at + 1);
  assert.deepEqual(seqs(live), [5, 7], 'only the admitted type, in order');
  for (const f of live) assert.equal(f.event.type, 'ops:service.error');

  // A filter naming a fact and nothing that exists yet replays nothing, but still completes.
  const facts = s.client(troupe, 'prod');
  const started = await facts.start({ types: ['reflexr:rule_fired'] });
  assert.deepEqual(started.replayed, []);
  assert.deepEqual(started.complete, { type: 'replay_complete', up_to_seq: 7 });
  assert.equal(started.complete_at, 1, 'replay_complete right after welcome');
});

// WS-49, WS-52, WS-53.
stream_scenario('a client resuming at the head gets welcome and replay_complete at once, then live events; one resuming mid-log gets the rest', async (s) => {
  const troupe = await s.troupe();
  await publish_many(troupe, 'prod', [deploy('1'), deploy('2'), deploy('3'), deploy('4'), deploy('5')]);

  const current = s.client(troupe, 'prod');
  const up = await current.start({ resume_after_seq: 5 });
  assert_welcome(up.welcome, { head: 5 });
  assert.equal(up.complete_at, 1, 'nothing replays');
  assert.deepEqual(up.complete, { type: 'replay_complete', up_to_seq: 5 });

  const behind = s.client(troupe, 'prod');
  const mid = await behind.start({ resume_after_seq: 3 });
  assert_welcome(mid.welcome, { head: 5 });
  assert.deepEqual(seqs(mid.replayed), [4, 5], '(3, head 5) replays after 3');

  await publish_many(troupe, 'prod', [deploy('6')]);
  for (const c of [current, behind]) {
    await c.wait_for((f) => f.seq === 6, { what: 'live seq 6' });
    assert.deepEqual(seqs(c.events()), c === current ? [6] : [4, 5, 6]);
  }
});

// WS-49.
stream_scenario('from_head replays nothing and follows live events, on an empty log as on a full one', async (s) => {
  const troupe = await s.troupe();
  const empty = s.client(troupe, 'prod');
  const at_zero = await empty.start({ from_head: true });
  assert_welcome(at_zero.welcome, { head: 0 });
  assert.equal(at_zero.complete_at, 1);
  assert.deepEqual(at_zero.complete, { type: 'replay_complete', up_to_seq: 0 });

  await publish_many(troupe, 'prod', [deploy('1'), deploy('2')]);
  const full = s.client(troupe, 'prod');
  const at_two = await full.start({ from_head: true, resume_after_seq: 0 });
  assert_welcome(at_two.welcome, { head: 2 });
  assert.equal(at_two.complete_at, 1, 'nothing replays');
  assert.deepEqual(at_two.complete, { type: 'replay_complete', up_to_seq: 2 });

  await publish_many(troupe, 'prod', [deploy('3')]);
  await full.wait_for((f) => f.seq === 3, { what: 'live seq 3' });
  await empty.wait_for((f) => f.seq === 3, { what: 'live seq 3 on the first client' });
  assert.deepEqual(seqs(full.events()), [3]);
  assert.deepEqual(seqs(empty.events()), [1, 2, 3]);
});

// WS-49.
stream_scenario('a client ahead of the head gets reset and the whole log from seq 1', async (s) => {
  const troupe = await s.troupe();
  await publish_many(troupe, 'prod', [deploy('1'), deploy('2'), deploy('3'), deploy('4'), deploy('5')]);
  const c = s.client(troupe, 'prod');
  const { welcome, replayed, complete } = await c.start({ resume_after_seq: 9 });
  assert_welcome(welcome, { head: 5, reset: true });
  assert.deepEqual(replayed, (await log_of(troupe, 'prod')).map(as_frame));
  assert.deepEqual(complete, { type: 'replay_complete', up_to_seq: 5 });
});

// WS-48.
stream_scenario('a first frame that is not a valid hello closes 4400 with the reason WS-48 gives', async (s) => {
  const troupe = await s.troupe();
  const first_must_be_hello = 'the first frame must be hello';
  const cases = [
    ['a command', (c) => c.command('c1', { type: 'publish', event: deploy() }), first_must_be_hello],
    ['not JSON', (c) => c.send_raw('hello?'), first_must_be_hello],
    ['a binary frame', (c) => c.send_raw(Buffer.from(JSON.stringify({ type: 'hello', protocol })), { binary: true }), first_must_be_hello],
    ['an extra field', (c) => c.send_raw(JSON.stringify({ type: 'hello', protocol, colour: 'red' })), first_must_be_hello],
    ['an unqualified type', (c) => c.send_raw(JSON.stringify({ type: 'hello', protocol, types: ['service.error'] })), first_must_be_hello],
    ['no protocol', (c) => c.send_raw(JSON.stringify({ type: 'hello' })), first_must_be_hello],
    ['a negative resume_after_seq', (c) => c.send_raw(JSON.stringify({ type: 'hello', protocol, resume_after_seq: -1 })), first_must_be_hello],
    ['another protocol', (c) => c.hello({ protocol: 'reflexr.v0' }), 'this server speaks reflexr.v1; the client asked for reflexr.v0'],
    ['from_head with resume_after_seq', (c) => c.hello({ from_head: true, resume_after_seq: 3 }),
      'from_head replays nothing, so resume_after_seq must be 0'],
  ];
  for (const [what, send, reason] of cases) {
    const c = s.client(troupe, 'prod');
    await c.opened;
    send(c);
    await assert_closed_at_once(c, 4400, reason, what);
  }
  // WS-45: reasons are cut to 123 bytes.
  const long = s.client(troupe, 'prod');
  await long.opened;
  const asked = 'x'.repeat(200);
  long.hello({ protocol: asked });
  await assert_closed_at_once(long, 4400,
    `this server speaks reflexr.v1; the client asked for ${asked}`.slice(0, 123), 'a long protocol name');
  // The protocol check comes before the from_head check.
  const both = s.client(troupe, 'prod');
  await both.opened;
  both.hello({ protocol: 'other', from_head: true, resume_after_seq: 3 });
  await assert_closed_at_once(both, 4400, 'this server speaks reflexr.v1; the client asked for other', 'wrong protocol and from_head');
});

// WS-45, WS-59, WS-60.
stream_scenario('an upgrade without a known token closes 4401 and one to a foreign workspace 4403, before any frame', async (s) => {
  const troupe = await s.troupe({ config: { workspaces: { credentials } } });
  for (const headers of [{}, bearer('wrong'), { authorization: alice }]) {
    const c = s.client(troupe, 'prod', { headers });
    await c.opened; // WS-44: the upgrade always completes
    c.hello();
    await assert_closed_at_once(c, 4401, 'unauthorized', `headers ${JSON.stringify(headers)}`);
  }
  const foreign = s.client(troupe, 'staging', { headers: bearer(alice) });
  await foreign.opened;
  foreign.hello();
  await assert_closed_at_once(foreign, 4403, 'this workspace is not yours to use', 'alice in staging');

  // The closes wrote nothing and the credentials work: alice's prod stream and carol's globex prod
  // are separate logs (WS-1).
  await publish_many(troupe, 'prod', [deploy('acme')], bearer(alice));
  const mine = s.client(troupe, 'prod', { headers: bearer(alice) });
  const a = await mine.start();
  assert.deepEqual(a.replayed.map((f) => [f.seq, f.event.service, f.actor.id]), [[1, 'acme', 'alice']]);
  const theirs = s.client(troupe, 'prod', { headers: bearer(carol) });
  const g = await theirs.start();
  assert_welcome(g.welcome, { head: 0 });
});

// WS-47.
stream_scenario('a client that sends no hello within hello_timeout is closed 4408', async (s) => {
  const troupe = await s.troupe({ config: { workspaces: { stream: { hello_timeout: 0.5 } } } });
  const c = s.client(troupe, 'prod');
  await c.opened;
  const opened_at = Date.now();
  await assert_closed_at_once(c, 4408, 'hello was not received in time', 'no hello');
  const waited = Date.now() - opened_at;
  assert.ok(waited >= 400, `the close waited for the timeout (${waited} ms)`);

  // A hello in time is not cut off later.
  const prompt = s.client(troupe, 'prod');
  await prompt.start();
  // By the time a fresh client has run into its own timeout, `prompt` has long passed its own.
  const idle = s.client(troupe, 'prod');
  await idle.opened;
  assert.equal((await idle.wait_close()).code, 4408);
  await publish_many(troupe, 'prod', [deploy()]);
  await prompt.wait_for((f) => f.seq === 1, { what: 'a live event after the hello timeout passed' });
  assert.equal(prompt.close_info, null);
});

// WS-54, WS-55.
stream_scenario('an invalid frame after hello answers an error frame and the socket stays open for valid commands', async (s) => {
  const troupe = await s.troupe();
  const c = s.client(troupe, 'prod');
  await c.start();
  const invalid = [
    ['a second hello', JSON.stringify({ type: 'hello', protocol })],
    ['not JSON', '{"type":'],
    ['an unknown command', JSON.stringify({ type: 'command', command_id: 'k1', command: { type: 'explode' } })],
    ['an empty command_id', JSON.stringify({ type: 'command', command_id: '', command: { type: 'publish', event: deploy() } })],
    ['an invalid event', JSON.stringify({ type: 'command', command_id: 'k1', command: { type: 'publish', event: { type: 'ops:service.error' } } })],
    ['an extra field', JSON.stringify({ type: 'command', command_id: 'k1', command: { type: 'publish', event: deploy() }, colour: 'red' })],
  ];
  for (const [what, text] of invalid) {
    const from = c.frames.length;
    c.send_raw(text);
    const f = await c.wait_for(() => true, { from, what: `the answer to ${what}` });
    assert.equal(f.type, 'error', `${what}\n${c.describe()}`);
    assert.deepEqual(Object.keys(f).sort(), ['message', 'type'], what);
    assert.ok(f.message.startsWith('not a command frame: ') && f.message.length > 'not a command frame: '.length,
      `${what}: ${f.message}`);
  }
  assert.equal(c.close_info, null, 'the socket stays open');

  // k1 was never a command (WS-42), so it runs now; the event comes before its result (WS-132).
  const from = c.frames.length;
  c.command('k1', { type: 'publish', event: deploy('valid') });
  const at = await c.wait_index((f) => f.type === 'command_result', { from, what: 'the command_result of k1' });
  const result = c.frames[at];
  assert.deepEqual(result, {
    type: 'command_result', command_id: 'k1', ok: true,
    outcome: { type: 'published', seq: 1, id: result.outcome?.id, duplicate: false }, rejection: null,
  });
  const event_at = c.frames.findIndex((f) => f.type === 'event' && f.seq === 1);
  assert.ok(event_at >= 0 && event_at < at, `the event before its result\n${c.describe()}`);
  assert.equal(c.frames[event_at].id, result.outcome.id);

  // A rejection over the socket is a command_result with ok false (WS-26).
  const r_from = c.frames.length;
  c.command('k2', { type: 'skip_run', run_id: 'fir_0b6a3c9e1f2d4a58' });
  const rejected = await c.wait_for((f) => f.type === 'command_result', { from: r_from, what: 'the command_result of k2' });
  assert.deepEqual(rejected, {
    type: 'command_result', command_id: 'k2', ok: false, outcome: null,
    rejection: { type: 'not_found', message: 'run fir_0b6a3c9e1f2d4a58 does not exist', entity: 'run', id: 'fir_0b6a3c9e1f2d4a58' },
  });
});

// WS-39, WS-41: the key is shared by REST and the socket.
stream_scenario('a command_id answered over REST answers the same text over the socket, and appends nothing', async (s) => {
  const troupe = await s.troupe();
  const rest = await troupe.request('POST', '/v1/workspaces/prod/commands', {
    body: { type: 'command', command_id: 'shared', command: { type: 'publish', event: deploy('rest') } },
  });
  assert.equal(rest.status, 200, rest.text);
  const c = s.client(troupe, 'prod');
  const { complete_at } = await c.start();
  c.command('shared', { type: 'publish', event: deploy('socket') });
  const at = await c.wait_index((f) => f.type === 'command_result', { from: complete_at, what: 'the command_result' });
  assert.equal(c.texts[at], rest.text, 'the first result, byte for byte');
  const log = await log_of(troupe, 'prod');
  assert.equal(log.length, 1, JSON.stringify(log));
  assert.deepEqual(c.events().map((f) => f.event.service), ['rest'], 'nothing new was streamed');
});

// WS-56, WS-133; issue 15 finding 15: a batch larger than the outbox goes at the client's pace.
stream_scenario('with an outbox of one frame, a live client that reads gets a 30-event batch whole', async (s) => {
  const troupe = await s.troupe({ config: { workspaces: { stream: { outbox_frames: 1 } } } });
  const c = s.client(troupe, 'prod');
  await c.start();
  const filtered = s.client(troupe, 'prod');
  await filtered.start({ types: ['ops:service.error'] });
  await publish_many(troupe, 'prod', Array.from({ length: 30 }, (_, i) => deploy(`s${i}`)));
  await c.wait_for((f) => f.type === 'event' && f.seq === 30, { what: 'seq 30' });
  assert.deepEqual(seqs(c.events()), range(1, 30), 'every seq once, in order');
  assert.equal(c.close_info, null, c.describe());

  await publish_many(troupe, 'prod', [error('after')]);
  const after = await filtered.wait_for((f) => f.type === 'event', { what: 'the admitted event after the batch' });
  assert.equal(after.seq, 31, filtered.describe());
  assert.equal(filtered.close_info, null);
});

// WS-54, WS-132.
stream_scenario('250 publishes pipelined over one socket each get their event frame before their command_result', async (s) => {
  const troupe = await s.troupe();
  const c = s.client(troupe, 'prod');
  await c.opened;
  c.hello();
  // Commands may follow hello at once, before replay_complete (WS-54).
  const n = 250;
  for (let i = 0; i < n; i++) {
    if (i === 100) c.command('dup', { type: 'publish', event: deploy('dup'), id: 'p-0' }); // a duplicate: its seq is 1
    if (i === 200) c.command('rej', { type: 'publish', event: { type: 'nope:thing' } });  // a rejection goes at once
    c.command(`p${i}`, { type: 'publish', event: deploy(`p${i}`), id: `p-${i}` });
  }
  await c.wait_index((f) => f.type === 'command_result' && f.command_id === `p${n - 1}`, { what: 'the last command_result', ms: 30_000 });
  await c.wait_index((f) => f.type === 'command_result' && f.command_id === 'dup', { what: 'the duplicate\'s command_result' });
  await c.wait_index((f) => f.type === 'command_result' && f.command_id === 'rej', { what: 'the rejection\'s command_result' });

  assert.equal(c.frames[0].type, 'welcome', c.describe());
  const event_index = new Map();
  c.frames.forEach((f, i) => { if (f.type === 'event') event_index.set(f.seq, i); });
  const results = c.frames.map((f, i) => [f, i]).filter(([f]) => f.type === 'command_result');
  assert.equal(results.length, n + 2, 'one result per command');
  const seen = new Set();
  for (const [r, i] of results) {
    assert.ok(!seen.has(r.command_id), `one result for ${r.command_id}`);
    seen.add(r.command_id);
    if (r.command_id === 'rej') {
      assert.deepEqual(r.rejection, { type: 'not_found', message: 'event type nope:thing does not exist', entity: 'event type', id: 'nope:thing' });
      continue;
    }
    assert.equal(r.ok, true, JSON.stringify(r));
    const at = event_index.get(r.outcome.seq);
    assert.ok(at !== undefined && at < i,
      `the event seq ${r.outcome.seq} comes before the result of ${r.command_id} (frame ${at} vs ${i})`);
    if (r.command_id === 'dup') assert.deepEqual(r.outcome, { type: 'published', seq: 1, id: 'p-0', duplicate: true });
    else assert.equal(c.frames[at].id, `p-${r.command_id.slice(1)}`);
  }
  assert.deepEqual(seqs(c.events()), range(1, n), 'every event once, in order');
  const complete = c.frames.filter((f) => f.type === 'replay_complete');
  assert.equal(complete.length, 1);
});

// WS-58.
stream_scenario('tail then follow: GET last=N, then hello resuming after its highest seq delivers every later seq exactly once', async (s) => {
  const troupe = await s.troupe();
  await publish_many(troupe, 'prod', Array.from({ length: 20 }, (_, i) => deploy(`t${i}`)));

  // A writer appends one event at a time for the whole handshake.
  let writing = true;
  let written = 20;
  const writer = (async () => {
    while (writing) {
      const [o] = await publish_many(troupe, 'prod', [error(`w${written}`, 1)]);
      written = o.seq;
    }
  })();
  try {
    // Let some appends land between the read and the hello.
    const tail = await log_of(troupe, 'prod', 'last=5');
    assert.equal(tail.length, 5);
    const highest = tail.at(-1).seq;
    assert.ok(highest >= 20);
    const c = s.client(troupe, 'prod');
    await c.opened;
    const target = highest + 30;
    // Wait on the writer having gone past the read before the hello, so something lands between.
    await until(() => written > highest + 3, { message: 'appends after the read' });
    c.hello({ resume_after_seq: highest });
    await c.wait_for((f) => f.type === 'event' && f.seq >= target, { what: `seq ${target}`, ms: 30_000 });
    writing = false;
    await writer;
    await c.wait_for((f) => f.type === 'event' && f.seq === written, { what: `the last seq ${written}` });
    assert.deepEqual(seqs(c.events()), range(highest + 1, written), 'every later seq exactly once, in order');
    const log = await log_of(troupe, 'prod', `after_seq=${highest}`);
    assert.deepEqual(c.events(), log.map(as_frame));
  } finally {
    writing = false;
    await writer.catch(() => {});
  }
});

// WS-44.
stream_scenario('a frame over 1 MiB closes 1009, while a large one under it is carried out', async (s) => {
  const troupe = await s.troupe();
  const c = s.client(troupe, 'prod');
  await c.start();
  const big = (service) => ({ type: 'command', command_id: `big-${service.length}`, command: { type: 'publish', event: deploy(service) } });
  const under = big('u'.repeat(512 * 1024));
  c.send(under);
  const result = await c.wait_for((f) => f.type === 'command_result', { what: 'the result of a 512 KiB frame' });
  assert.equal(result.ok, true, JSON.stringify(result).slice(0, 300));

  const frame = big('o'.repeat(1024 * 1024));
  assert.ok(Buffer.byteLength(JSON.stringify(frame)) > 1024 * 1024);
  c.send(frame);
  const info = await c.wait_close();
  assert.equal(info.code, 1009, c.describe());
  assert.equal((await log_of(troupe, 'prod')).length, 1, 'the oversized frame was not carried out');
});

// WS-132: the result waits for the delivery position, not for a frame the filter would send.
stream_scenario('a command whose event the types filter leaves out still gets its command_result', async (s) => {
  const troupe = await s.troupe();
  const c = s.client(troupe, 'prod');
  const { complete_at } = await c.start({ types: ['ops:service.error'] });
  c.command('hidden', { type: 'publish', event: deploy('hidden') });
  const hidden = await c.wait_for((f) => f.type === 'command_result' && f.command_id === 'hidden', { what: 'the result of a filtered-out publish' });
  assert.deepEqual(hidden.outcome, { type: 'published', seq: 1, id: hidden.outcome?.id, duplicate: false });
  c.command('shown', { type: 'publish', event: error('shown') });
  const at = await c.wait_index((f) => f.type === 'command_result' && f.command_id === 'shown', { what: 'the result of an admitted publish' });
  const frames = c.frames.slice(complete_at + 1, at + 1);
  assert.deepEqual(frames.map((f) => f.type), ['command_result', 'event', 'command_result'], c.describe());
  assert.equal(frames[1].seq, 2);
  assert.equal(frames[2].outcome.seq, 2);
});

// WS-54, WS-132, WS-53.
stream_scenario('a command sent during a long replay gets its result after replay_complete and after its own event', async (s) => {
  // A small outbox pages the replay, so the command's event is in the log before the last page.
  const troupe = await s.troupe({ config: { workspaces: { stream: { outbox_frames: 64 } } } });
  const n = 600;
  await publish_many(troupe, 'prod', Array.from({ length: n }, (_, i) => deploy(`r${i}`)));
  const c = s.client(troupe, 'prod');
  await c.opened;
  c.hello();
  c.command('during', { type: 'publish', event: error('during') });
  const at = await c.wait_index((f) => f.type === 'command_result', { what: 'the command_result', ms: 30_000 });
  assert_welcome(c.frames[0], { head: n });
  const complete_at = c.frames.findIndex((f) => f.type === 'replay_complete');
  assert.deepEqual(c.frames[complete_at], { type: 'replay_complete', up_to_seq: n });
  assert.equal(c.frames[complete_at - 1].seq, n, 'replay_complete right after seq head');
  assert.deepEqual(seqs(c.events()), range(1, n + 1), 'every seq once, in order, across the boundary');
  const event_at = c.frames.findIndex((f) => f.type === 'event' && f.seq === n + 1);
  assert.ok(complete_at < event_at && event_at < at, `replay_complete ${complete_at} < event ${event_at} < result ${at}`);
  assert.equal(c.frames[at].outcome.seq, n + 1);
});

// WS-41, WS-130 (without a hook holding the first): REST and the socket share a key.
stream_scenario('one command_id sent over REST and over the socket at the same moment has one effect and two identical results', async (s) => {
  const troupe = await s.troupe();
  const c = s.client(troupe, 'prod');
  await c.start();
  const rounds = 20;
  for (let i = 0; i < rounds; i++) {
    const id = `both-${i}`;
    const cmd = { type: 'publish', event: deploy(id) };
    const socket_result = c.wait_index((f) => f.type === 'command_result' && f.command_id === id, { what: `the socket's result of ${id}` });
    c.command(id, cmd);
    const rest = await troupe.request('POST', '/v1/workspaces/prod/commands', { body: { type: 'command', command_id: id, command: cmd } });
    const at = await socket_result;
    assert.equal(rest.status, 200, rest.text);
    assert.equal(c.texts[at], rest.text, `${id}: the same result, byte for byte`);
  }
  const log = await log_of(troupe, 'prod');
  assert.equal(log.length, rounds, 'each key ran once');
  await c.wait_for((f) => f.type === 'event' && f.seq === rounds, { what: `seq ${rounds}` });
  assert.deepEqual(seqs(c.events()), range(1, rounds));
});

// WS-133: the outbox bounds each connection alone.
stream_scenario('a client that stops reading is closed 4429 alone, while the clients that read get every seq in order', async (s) => {
  const stall_ms = 300;
  const troupe = await s.troupe({ config: { workspaces: { stream: { outbox_frames: 64, client_stall_timeout: stall_ms / 1000 } } } });
  const readers = [];
  for (let i = 0; i < 5; i++) {
    const c = s.client(troupe, 'prod');
    await c.start();
    readers.push(c);
  }
  const stalled = s.client(troupe, 'prod');
  await stalled.start();
  stalled.ws._socket.pause(); // reads nothing more: the kernel buffers, then its outbox, fill up

  // 20 KiB events in batches that fit an outbox, each batch read by every reader before the next.
  const fat = 'f'.repeat(20 * 1024);
  const batches = 12;
  const per_batch = 40;
  for (let b = 0; b < batches; b++) {
    const outcomes = await publish_many(troupe, 'prod',
      Array.from({ length: per_batch }, (_, i) => ({ ...error(`b${b}`, i), message: fat })));
    const last = outcomes.at(-1).seq;
    for (const c of readers) await c.wait_for((f) => f.type === 'event' && f.seq === last, { what: `seq ${last}`, ms: 20_000 });
  }
  const total = batches * per_batch;
  for (const c of readers) {
    assert.equal(c.close_info, null, `a reading client stays open\n${c.describe()}`);
    assert.deepEqual(seqs(c.events()), range(1, total));
  }
  // Its outbox has been full since its kernel buffers filled; it stays unread past the stall timeout.
  await sleep(stall_ms * 5);
  // Reading again, the stalled client finds what was sent before it was given up on, then the close.
  stalled.ws._socket.resume();
  const info = await stalled.wait_close(20_000);
  assert.deepEqual(info, { code: 4429, reason: 'the client is not keeping up' }, `${stalled.frames.length} frames`);
  const got = seqs(stalled.events());
  assert.ok(got.length < total, `the stalled client did not get all ${total} events: ${got.length}`);
  assert.deepEqual(got, range(1, got.length), 'what it got is in order without gaps');
});

// WS-50, WS-53: head_seq is read atomically with subscribing.
stream_scenario('clients joining while events are appended each get every seq exactly once across the replay boundary', async (s) => {
  const troupe = await s.troupe();
  let writing = true;
  let head = 0;
  const writer = (async () => {
    let n = 0;
    while (writing) {
      const outcomes = await publish_many(troupe, 'prod', Array.from({ length: 3 }, () => deploy(`w${n++}`)));
      head = outcomes.at(-1).seq;
    }
  })();
  const joined = [];
  try {
    for (let i = 0; i < 12; i++) {
      // Each client joins once more events have landed since the previous one.
      const before = head;
      await until(() => head > before, { message: 'appends between joins' });
      const c = s.client(troupe, 'prod');
      const hello = i % 3 === 0 ? { from_head: true } : i % 3 === 1 ? {} : { resume_after_seq: Math.floor(head / 2) };
      const started = await c.start(hello);
      joined.push({ c, hello, welcome: started.welcome });
    }
  } finally {
    writing = false;
    await writer;
  }
  for (const { c, hello, welcome } of joined) {
    await c.wait_for((f) => f.type === 'event' && f.seq === head, { what: `seq ${head} (hello ${JSON.stringify(hello)})` });
    const first = hello.from_head ? welcome.head_seq + 1 : (hello.resume_after_seq ?? 0) + 1;
    assert.deepEqual(seqs(c.events()), range(first, head), `hello ${JSON.stringify(hello)}, welcome ${JSON.stringify(welcome)}`);
  }
});
