// Workspaces over REST (docs: workspace-stream.md, WS-n): publishing single events and batches,
// causal chains, the WS-9 name messages, reading the log, commands and their per-participant
// deduplication (also across a kill -9), credentials, tenants and feedback. Every body is checked
// as the spec quotes it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { default_config, scenario } from './harness.mjs';

// WS-2, WS-14, WS-17.
const ts_re = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const evt_id_re = /^evt_[0-9a-f]{16}$/;
const envelope_keys = ['seq', 'id', 'ts', 'workspace_id', 'actor', 'causation', 'correlation_id', 'traceparent', 'event'];

const deploy = (service = 'auth') => ({ type: 'ops:deploy.finished', service });
const error = (service = 'auth', severity = 5) => ({ type: 'ops:service.error', service, severity });

const sha256 = (text) => crypto.createHash('sha256').update(text).digest('hex');
const bearer = (token) => ({ authorization: `Bearer ${token}` });

// A workspaces.credentials entry for `token`.
function credential(token, tenant, actor_id, workspaces) {
  return { token_sha256: sha256(token), tenant, actor: { kind: 'user', id: actor_id }, workspaces };
}

const ws_path = (ws) => `/v1/workspaces/${encodeURIComponent(ws)}`;

function publish(troupe, ws, body, headers = {}) {
  return troupe.request('POST', `${ws_path(ws)}/events`, { body, headers });
}

function command(troupe, ws, command_id, cmd, headers = {}) {
  return troupe.request('POST', `${ws_path(ws)}/commands`, {
    body: { type: 'command', command_id, command: cmd }, headers,
  });
}

function read(troupe, ws, query = '', headers = {}) {
  return troupe.request('GET', `${ws_path(ws)}/events${query ? `?${query}` : ''}`, { headers });
}

// GET …/events that must answer 200; returns the envelopes.
async function log_of(troupe, ws, query = '', headers = {}) {
  const r = await read(troupe, ws, query, headers);
  assert.equal(r.status, 200, `GET events?${query}: ${r.text}`);
  assert.ok(Array.isArray(r.json), `GET events?${query} answers an array: ${r.text}`);
  return r.json;
}

// The seq of the newest envelope, 0 for an empty log.
async function head_of(troupe, ws, headers = {}) {
  const last = await log_of(troupe, ws, 'last=1', headers);
  return last.length ? last[0].seq : 0;
}

// A published outcome (WS-24) for the 200 answer of a single publish.
function published_one(r) {
  assert.equal(r.status, 200, `publish: ${r.text}`);
  assert.ok(Array.isArray(r.json) && r.json.length === 1, `a single publish answers one outcome: ${r.text}`);
  return r.json[0];
}

// A rejection answered as {"detail": <rejection>} (WS-61) with its WS-27 status.
function assert_rejected(r, status, rejection, what) {
  assert.equal(r.status, status, `${what}: ${r.text}`);
  assert.deepEqual(r.json, { detail: rejection }, `${what}: ${r.text}`);
}

const validation_failed = (message) => ({ type: 'validation_failed', message, errors: [] });
const not_found = (entity, id) => ({ type: 'not_found', message: `${entity} ${id} does not exist`, entity, id });

// A 422 detail list of a body that does not parse (WS-37).
function assert_detail_list(r, what) {
  assert.equal(r.status, 422, `${what}: ${r.text}`);
  assert.ok(Array.isArray(r.json?.detail) && r.json.detail.length > 0, `${what} answers a detail list: ${r.text}`);
  for (const d of r.json.detail) {
    assert.equal(typeof d.type, 'string', `${what}: each problem has a type: ${r.text}`);
    assert.ok(Array.isArray(d.loc), `${what}: each problem has a loc list: ${r.text}`);
    assert.equal(typeof d.msg, 'string', `${what}: each problem has a msg: ${r.text}`);
  }
  return r.json.detail;
}

// A command_result (WS-24, WS-26, WS-62).
function assert_result(r, status, command_id, { outcome = null, rejection = null }, what) {
  assert.equal(r.status, status, `${what}: ${r.text}`);
  assert.deepEqual(r.json, { type: 'command_result', command_id, ok: rejection === null, outcome, rejection },
    `${what}: ${r.text}`);
}

// Checks the envelope shape of WS-14..WS-20 and WS-64 (no `type` member).
function check_envelope(e, ws) {
  assert.deepEqual(Object.keys(e).sort(), [...envelope_keys].sort(), `envelope keys: ${JSON.stringify(e)}`);
  assert.equal(e.workspace_id, ws);
  assert.ok(Number.isInteger(e.seq) && e.seq >= 1, `seq: ${JSON.stringify(e)}`);
  assert.equal(typeof e.id, 'string');
  assert.match(e.ts, ts_re, `ts follows WS-2: ${e.ts}`);
  assert.equal(e.causation, null, 'a client event has no causation (WS-19)');
  assert.equal(e.traceparent, null, 'no tracing is configured (WS-20)');
  assert.equal(typeof e.correlation_id, 'string');
}

// Checks a whole log: seqs 1..n gap-free, ts never decreasing, every envelope well formed.
function check_log(envelopes, ws) {
  envelopes.forEach((e, i) => {
    check_envelope(e, ws);
    assert.equal(e.seq, i + 1, `seqs run 1..n without gaps (WS-15): ${envelopes.map((x) => x.seq)}`);
    if (i > 0) assert.ok(e.ts >= envelopes[i - 1].ts, `ts never decreases (WS-16): ${envelopes[i - 1].ts} then ${e.ts}`);
  });
}

function assert_local_actor(actor) {
  assert.equal(actor.kind, 'user', JSON.stringify(actor));
  assert.equal(actor.id, 'local', 'an open troupe acts as user local (WS-59)');
  assert.equal(actor.name ?? null, null, JSON.stringify(actor));
}

// ---------------------------------------------------------------------------------------------
// Publishing

// WS-1, WS-14..WS-18, WS-29, WS-63.
scenario('a single publish appends an envelope that starts its own chain, and an id given again appends nothing', async (s) => {
  const troupe = await s.troupe();
  assert.deepEqual(await log_of(troupe, 'prod'), [], 'a workspace reads as empty before its first append (WS-1)');

  const first = published_one(await publish(troupe, 'prod', { event: deploy() }));
  assert.equal(first.type, 'published');
  assert.equal(first.seq, 1, 'seq starts at 1 (WS-15)');
  assert.match(first.id, evt_id_re, 'a default id is evt_ + 16 hex (WS-17)');
  assert.equal(first.duplicate, false);
  assert.deepEqual(Object.keys(first).sort(), ['duplicate', 'id', 'seq', 'type']);

  const given = published_one(await publish(troupe, 'prod', { event: error(), id: 'd-17' }));
  assert.deepEqual(given, { type: 'published', seq: 2, id: 'd-17', duplicate: false });

  // WS-29: the same id with another event is that envelope, and nothing is appended.
  const again = published_one(await publish(troupe, 'prod', { event: deploy('billing'), id: 'd-17' }));
  assert.deepEqual(again, { type: 'published', seq: 2, id: 'd-17', duplicate: true });
  // WS-17: an empty id is absent, so a fresh one is drawn.
  const empty = published_one(await publish(troupe, 'prod', { event: deploy('empty'), id: '' }));
  assert.equal(empty.seq, 3);
  assert.match(empty.id, evt_id_re);

  const log = await log_of(troupe, 'prod');
  check_log(log, 'prod');
  assert.equal(log.length, 3, JSON.stringify(log));
  assert.deepEqual(log.map((e) => e.id), [first.id, 'd-17', empty.id]);
  assert.deepEqual(log.map((e) => e.event), [deploy(), error(), deploy('empty')], 'the first event under an id is kept');
  for (const e of log) {
    assert.equal(e.correlation_id, e.id, 'a client event without correlation_id starts its chain (WS-18, WS-30)');
    assert_local_actor(e.actor);
  }

  // The same through POST …/commands (WS-23, WS-62).
  const r = await command(troupe, 'prod', 'c1', { type: 'publish', event: deploy('cmd'), id: 'from-command' });
  assert_result(r, 200, 'c1', { outcome: { type: 'published', seq: 4, id: 'from-command', duplicate: false } }, 'publish command');
  const dup = await command(troupe, 'prod', 'c2', { type: 'publish', event: deploy('other'), id: 'd-17' });
  assert_result(dup, 200, 'c2', { outcome: { type: 'published', seq: 2, id: 'd-17', duplicate: true } }, 'duplicate publish command');
  const tail = await log_of(troupe, 'prod', 'after_seq=3');
  assert.equal(tail.length, 1, JSON.stringify(tail));
  assert.deepEqual(tail[0].event, deploy('cmd'));
  assert.equal(tail[0].correlation_id, 'from-command');
});

// WS-31, WS-63.
scenario('a batch appends in order with a duplicate flag per item, an id repeated in the batch being a duplicate of its first use', async (s) => {
  const troupe = await s.troupe();
  assert.equal(published_one(await publish(troupe, 'prod', { event: deploy('a'), id: 'a' })).seq, 1);

  const r = await publish(troupe, 'prod', {
    events: [
      { event: deploy('b'), id: 'b' },
      { event: deploy('a again'), id: 'a' },
      { event: error('fresh', 2) },
      { event: deploy('b again'), id: 'b' },
      { event: deploy('c'), id: 'c' },
    ],
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.length, 5, r.text);
  assert.deepEqual(r.json[0], { type: 'published', seq: 2, id: 'b', duplicate: false });
  assert.deepEqual(r.json[1], { type: 'published', seq: 1, id: 'a', duplicate: true });
  assert.equal(r.json[2].seq, 3);
  assert.match(r.json[2].id, evt_id_re);
  assert.equal(r.json[2].duplicate, false);
  assert.deepEqual(r.json[3], { type: 'published', seq: 2, id: 'b', duplicate: true });
  assert.deepEqual(r.json[4], { type: 'published', seq: 4, id: 'c', duplicate: false });

  const log = await log_of(troupe, 'prod');
  check_log(log, 'prod');
  assert.deepEqual(log.map((e) => e.event), [deploy('a'), deploy('b'), error('fresh', 2), deploy('c')]);
  for (const e of log) assert.equal(e.correlation_id, e.id, 'each batch item without correlation_id starts a chain');

  // WS-31: atomic. One item the log refuses (an undeclared type, WS-28(2)) and nothing is appended.
  const refused = await publish(troupe, 'prod', {
    events: [{ event: deploy('never'), id: 'never' }, { event: { type: 'nope:thing' } }],
  });
  assert_rejected(refused, 404, not_found('event type', 'nope:thing'), 'a batch with an undeclared type');
  assert.equal(await head_of(troupe, 'prod'), 4, 'a refused batch appends nothing');
  const never = published_one(await publish(troupe, 'prod', { event: deploy('now'), id: 'never' }));
  assert.deepEqual(never, { type: 'published', seq: 5, id: 'never', duplicate: false }, 'the refused batch left no id behind');
});

// WS-18, WS-30, WS-63.
scenario('correlation_id joins the chain of its first event; an unknown chain is 404 and a later event of a chain is 422', async (s) => {
  const troupe = await s.troupe();
  published_one(await publish(troupe, 'prod', { event: error(), id: 'root' }));
  const joined = await publish(troupe, 'prod', {
    events: [{ event: deploy('x'), id: 'child-1' }, { event: deploy('y'), id: 'child-2' }],
    correlation_id: 'root',
  });
  assert.equal(joined.status, 200, joined.text);
  assert.deepEqual(joined.json.map((o) => o.seq), [2, 3]);
  const by_cmd = await command(troupe, 'prod', 'join', {
    type: 'publish', event: deploy('z'), id: 'child-3', correlation_id: 'root',
  });
  assert_result(by_cmd, 200, 'join', { outcome: { type: 'published', seq: 4, id: 'child-3', duplicate: false } }, 'publish joining a chain');

  const log = await log_of(troupe, 'prod');
  check_log(log, 'prod');
  assert.deepEqual(log.map((e) => [e.id, e.correlation_id]),
    [['root', 'root'], ['child-1', 'root'], ['child-2', 'root'], ['child-3', 'root']]);

  assert_rejected(await publish(troupe, 'prod', { events: [{ event: deploy() }], correlation_id: 'ghost' }),
    404, not_found('chain', 'ghost'), 'an unknown chain');
  assert_rejected(await publish(troupe, 'prod', { events: [{ event: deploy() }], correlation_id: 'child-1' }),
    422, validation_failed('event child-1 did not start a causal chain: it belongs to chain root'), 'a later event of a chain');
  assert_result(await command(troupe, 'prod', 'ghost', { type: 'publish', event: deploy(), correlation_id: 'ghost' }),
    404, 'ghost', { rejection: not_found('chain', 'ghost') }, 'a publish command naming an unknown chain');
  assert_result(await command(troupe, 'prod', 'late', { type: 'publish', event: deploy(), correlation_id: 'child-2' }),
    422, 'late', { rejection: validation_failed('event child-2 did not start a causal chain: it belongs to chain root') },
    'a publish command naming a later event');
  assert.equal(await head_of(troupe, 'prod'), 4, 'refused chains append nothing');
});

// WS-9, WS-10, WS-28.
scenario('a type name without a namespace is refused 422 with a hint, and every WS-9 and WS-28 case answers its message', async (s) => {
  const ops = default_config().workspaces.event_types;
  const troupe = await s.troupe({
    config: {
      workspaces: {
        event_types: [
          ...ops,
          { name: 'ci:deploy.finished', schema: { type: 'object', properties: { service: { type: 'string' } } } },
          { name: 'ops:summary.written', schema: { type: 'object', properties: { text: { type: 'string' } } }, published_by: 'runs' },
        ],
      },
    },
  });
  const refused = async (event, status, rejection, what) => {
    assert_rejected(await publish(troupe, 'prod', { event }), status, rejection, what);
    const r = await command(troupe, 'prod', `cmd-${what}`, { type: 'publish', event });
    assert_result(r, status, `cmd-${what}`, { rejection }, `${what} as a command`);
  };

  await refused({ type: 'service.error', service: 'auth', severity: 3 }, 422,
    validation_failed("event type 'service.error' has no namespace; did you mean 'ops:service.error'?"), 'one known local name');
  await refused({ type: 'deploy.finished', service: 'auth' }, 422,
    validation_failed("event type 'deploy.finished' has no namespace; did you mean one of 'ci:deploy.finished', 'ops:deploy.finished'?"),
    'several known local names');
  // The hint searches the facts too (WS-9).
  await refused({ type: 'feedback_given' }, 422,
    validation_failed("event type 'feedback_given' has no namespace; did you mean 'reflexr:feedback_given'?"), 'a fact local name');
  await refused({ type: 'alert.fired' }, 422,
    validation_failed("event type 'alert.fired' has no namespace; a name is a namespace, a ':' and a local name, such as 'oncall:alert.fired'"),
    'an unknown local name');
  await refused({ type: 'Ops:Service.Error' }, 422,
    validation_failed("'Ops:Service.Error' is not an event type name: a namespace, a ':' and a local name, in lowercase, such as 'oncall:alert.fired'"),
    'uppercase');
  await refused({ type: 'ops:*' }, 422,
    validation_failed("'ops:*' is not an event type name: a namespace, a ':' and a local name, in lowercase, such as 'oncall:alert.fired'"),
    'a star');
  // WS-28 (2)-(4).
  await refused({ type: 'nope:thing' }, 404, not_found('event type', 'nope:thing'), 'an undeclared type');
  await refused({ type: 'reflexr:tick', schedule: 'nightly', at: '2025-03-01T09:00:00.000000Z' }, 403,
    { type: 'forbidden', message: 'reflexr:tick events are recorded by reflexr, not published' }, 'a fact');
  await refused({ type: 'ops:summary.written', text: 'hi' }, 403,
    { type: 'forbidden', message: 'ops:summary.written events are published by runs, not clients' }, 'a runs-only type');

  // WS-10: the same messages answer a read's type filter.
  assert_rejected(await read(troupe, 'prod', 'type=service.error'), 422,
    validation_failed("event type 'service.error' has no namespace; did you mean 'ops:service.error'?"), 'GET type=service.error');
  assert_rejected(await read(troupe, 'prod', 'type=ops:deploy.finished&type=Bad:x'), 422,
    validation_failed("'Bad:x' is not an event type name: a namespace, a ':' and a local name, in lowercase, such as 'oncall:alert.fired'"),
    'GET with one bad type among good ones');
  assert.equal(await head_of(troupe, 'prod'), 0, 'no refused publish appended anything');

  // The declared ci: type is publishable: the hint was not about a type that cannot be used.
  assert.equal(published_one(await publish(troupe, 'prod', { event: { type: 'ci:deploy.finished', service: 'x' } })).seq, 1);
});

// WS-12, WS-13, WS-37, WS-42.
scenario('an unknown field, bad JSON or an event failing its schema is a 422 detail list, no command, and appends nothing', async (s) => {
  const troupe = await s.troupe();
  const events = `${ws_path('prod')}/events`;
  const commands = `${ws_path('prod')}/commands`;

  // The spec's own example message (WS-37).
  const missing = assert_detail_list(await publish(troupe, 'prod', { event: { type: 'ops:service.error', severity: 3 } }),
    'an event missing a required field');
  assert.ok(missing.some((d) => d.msg === 'Value error, invalid ops:service.error event: service: Field required'),
    `WS-37's msg: ${JSON.stringify(missing)}`);
  const cases = [
    ['an extra event field', { event: { ...error(), colour: 'red' } }, 'Extra inputs are not permitted'],
    ['a string severity', { event: { type: 'ops:service.error', service: 'auth', severity: 'high' } }, 'Input should be a valid integer'],
    ['a number service', { event: { type: 'ops:service.error', service: 7, severity: 1 } }, 'Input should be a valid string'],
    ['an event without type', { event: { service: 'auth' } }, "an event needs a string 'type'"],
    ['an event that is no object', { event: 'ops:service.error' }, "an event must be an object with a 'type'"],
    ['an extra body field', { event: deploy(), colour: 'red' }, null],
    ['correlation_id on the single form', { event: deploy(), correlation_id: 'x' }, null],
    ['an extra batch item field', { events: [{ event: deploy(), colour: 'red' }] }, null],
    ['an empty body', {}, null],
  ];
  for (const [what, body, fragment] of cases) {
    const detail = assert_detail_list(await publish(troupe, 'prod', body), what);
    if (fragment) assert.ok(detail.some((d) => d.msg.includes(fragment)), `${what} names "${fragment}": ${JSON.stringify(detail)}`);
  }
  assert_detail_list(await troupe.request('POST', events, { raw: '{"event": ', headers: { 'content-type': 'application/json' } }), 'bad JSON');

  const frames = [
    ['an unknown command type', { type: 'command', command_id: 'k1', command: { type: 'explode' } }],
    ['an empty command_id', { type: 'command', command_id: '', command: { type: 'publish', event: deploy() } }],
    ['an extra frame field', { type: 'command', command_id: 'k1', command: { type: 'publish', event: deploy() }, colour: 'red' }],
    ['an extra command field', { type: 'command', command_id: 'k1', command: { type: 'publish', event: deploy(), colour: 'red' } }],
    ['an invalid event', { type: 'command', command_id: 'k1', command: { type: 'publish', event: { type: 'ops:service.error' } } }],
    ['a frame that is not a command', { type: 'hello', protocol: 'reflexr.v1' }],
    ['a negative from_seq', { type: 'command', command_id: 'k1', command: { type: 'replay_rule', rule: 'ops:x', from_seq: -1 } }],
  ];
  for (const [what, body] of frames) assert_detail_list(await troupe.request('POST', commands, { body }), what);
  assert_detail_list(await troupe.request('POST', commands, { raw: 'not json', headers: { 'content-type': 'application/json' } }),
    'a command body that is not JSON');
  assert.equal(await head_of(troupe, 'prod'), 0, 'nothing was appended');

  // WS-42: an invalid frame is not remembered, so its command_id still runs.
  const r = await command(troupe, 'prod', 'k1', { type: 'publish', event: deploy() });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.outcome.seq, 1, r.text);
});

// ---------------------------------------------------------------------------------------------
// Reading

// WS-64.
scenario('reading refuses limit with last, negative numbers and non-integers with 422', async (s) => {
  const troupe = await s.troupe();
  published_one(await publish(troupe, 'prod', { event: deploy() }));
  assert_rejected(await read(troupe, 'prod', 'limit=1&last=1'), 422, validation_failed('give limit or last, not both'), 'limit and last');
  assert_rejected(await read(troupe, 'prod', 'limit=1&last=1&after_seq=-1'), 422, validation_failed('give limit or last, not both'),
    'limit and last are checked before signs');
  for (const name of ['after_seq', 'before_seq', 'limit', 'last'])
    assert_rejected(await read(troupe, 'prod', `${name}=-1`), 422, validation_failed(`${name} cannot be negative`), `${name}=-1`);
  assert_rejected(await read(troupe, 'prod', 'after_seq=-1&type=bad'), 422, validation_failed('after_seq cannot be negative'),
    'signs are checked before type names');
  for (const q of ['after_seq=abc', 'before_seq=1.5', 'limit=ten', 'last='])
    assert_detail_list(await read(troupe, 'prod', q), `GET events?${q}`);
  // Zero is a number like any other.
  assert.deepEqual(await log_of(troupe, 'prod', 'limit=0'), []);
  assert.deepEqual(await log_of(troupe, 'prod', 'last=0'), []);
});

// WS-64.
scenario('a reader pages back with last and before_seq, narrows by seq bounds and filters by type', async (s) => {
  const troupe = await s.troupe();
  // seq n is a deploy when n is odd, an error when even.
  const r = await publish(troupe, 'prod', {
    events: Array.from({ length: 10 }, (_, i) => ({ event: i % 2 === 0 ? deploy(`s${i + 1}`) : error(`s${i + 1}`, i) })),
  });
  assert.equal(r.status, 200, r.text);
  const seqs = (list) => list.map((e) => e.seq);

  const all = await log_of(troupe, 'prod');
  check_log(all, 'prod');
  assert.equal(all.length, 10);

  const pages = [];
  let page = await log_of(troupe, 'prod', 'last=3');
  while (page.length) {
    pages.push(seqs(page));
    page = await log_of(troupe, 'prod', `last=3&before_seq=${page[0].seq}`);
  }
  assert.deepEqual(pages, [[8, 9, 10], [5, 6, 7], [2, 3, 4], [1]], 'paging back, each page oldest first');

  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'after_seq=2&before_seq=6')), [3, 4, 5], 'bounds are exclusive');
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'after_seq=4&limit=2')), [5, 6], 'limit takes the first');
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'after_seq=10')), []);
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'after_seq=99')), []);
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'before_seq=1')), []);
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'last=99')), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);

  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'type=ops:deploy.finished')), [1, 3, 5, 7, 9]);
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'type=ops:service.error&after_seq=3&limit=2')), [4, 6]);
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'type=ops:deploy.finished&last=1')), [9], 'WS-64 example: the last of a type');
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'type=ops:service.error&type=ops:deploy.finished&before_seq=4')), [1, 2, 3]);
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'type=reflexr:tick')), [], 'a known type nothing has');
  const typed = await log_of(troupe, 'prod', 'type=ops:service.error&last=1');
  assert.deepEqual(typed, [all[9]], 'the same envelope whichever way it is read');

  // The default limit is 1000.
  const more = await publish(troupe, 'prod', { events: Array.from({ length: 995 }, (_, i) => ({ event: deploy(`m${i}`) })) });
  assert.equal(more.status, 200, more.text.slice(0, 500));
  assert.equal(more.json.at(-1).seq, 1005);
  const first_page = await log_of(troupe, 'prod');
  assert.equal(first_page.length, 1000, 'GET without limit answers at most 1000');
  assert.equal(first_page[0].seq, 1);
  assert.equal(first_page.at(-1).seq, 1000);
  assert.deepEqual(seqs(await log_of(troupe, 'prod', 'after_seq=1000')), [1001, 1002, 1003, 1004, 1005]);
});

// ---------------------------------------------------------------------------------------------
// Commands and deduplication

const alice = 'alice-token-3c1f';
const bob = 'bob-token-9e2a';
const carol = 'carol-token-77d0';
const acme_credentials = [
  credential(alice, 'acme', 'alice', ['prod']),
  credential(bob, 'acme', 'bob', ['prod', 'staging']),
  credential(carol, 'globex', 'carol', '*'),
];

// WS-38, WS-39.
scenario('a command_id is one command per participant: a credential gets its first answer byte for byte, another credential runs its own', async (s) => {
  const troupe = await s.troupe({ config: { workspaces: { credentials: acme_credentials } } });
  const first = await command(troupe, 'prod', 'c1', { type: 'publish', event: deploy('alice') }, bearer(alice));
  assert.equal(first.status, 200, first.text);
  assert.equal(first.json.outcome.seq, 1, first.text);

  const cases = [
    ['the same command', { type: 'publish', event: deploy('alice') }],
    ['another event', { type: 'publish', event: error('other', 9), id: 'other' }],
    ['another command altogether', { type: 'skip_run', run_id: 'fir_0000000000000000' }],
  ];
  for (const [what, cmd] of cases) {
    const again = await command(troupe, 'prod', 'c1', cmd, bearer(alice));
    assert.equal(again.status, first.status, `${what}: ${again.text}`);
    assert.equal(again.text, first.text, `${what}: the first body, byte for byte (WS-39)`);
  }
  assert.equal(await head_of(troupe, 'prod', bearer(alice)), 1, 'repeats append nothing');

  // Another participant's c1 is another command (WS-38).
  const other = await command(troupe, 'prod', 'c1', { type: 'publish', event: deploy('bob') }, bearer(bob));
  assert.equal(other.status, 200, other.text);
  assert.equal(other.json.outcome.seq, 2, other.text);
  assert.equal(other.json.outcome.duplicate, false);
  // ... and the key includes the workspace: bob's c1 in staging runs too.
  const staging = await command(troupe, 'staging', 'c1', { type: 'publish', event: deploy('bob') }, bearer(bob));
  assert.equal(staging.status, 200, staging.text);
  assert.equal(staging.json.outcome.seq, 1, staging.text);

  const log = await log_of(troupe, 'prod', '', bearer(bob));
  check_log(log, 'prod');
  assert.deepEqual(log.map((e) => [e.actor.kind, e.actor.id, e.event.service]),
    [['user', 'alice', 'alice'], ['user', 'bob', 'bob']], 'each command is attributed to its credential (WS-22)');

  // bob's own c1 is now remembered for bob.
  const twice = await command(troupe, 'prod', 'c1', { type: 'publish', event: deploy('bob again') }, bearer(bob));
  assert.equal(twice.text, other.text);
  assert.equal(await head_of(troupe, 'prod', bearer(bob)), 2);

  // Event ids are not per participant: bob reusing the id of alice's event is a duplicate (WS-29).
  const [alices] = await log_of(troupe, 'prod', 'limit=1', bearer(bob));
  const reuse = await command(troupe, 'prod', 'c2', { type: 'publish', event: deploy('bob'), id: alices.id }, bearer(bob));
  assert_result(reuse, 200, 'c2', { outcome: { type: 'published', seq: 1, id: alices.id, duplicate: true } }, 'another sender\'s id');
});

// WS-15, WS-39, WS-41.
scenario('one command_id sent many times at once runs once and every arrival gets the same answer, while distinct ones get gap-free seqs', async (s) => {
  const troupe = await s.troupe();
  const n = 20;
  const same = await Promise.all(Array.from({ length: n }, (_, i) =>
    command(troupe, 'prod', 'racing', { type: 'publish', event: deploy(`racer-${i}`) })));
  for (const r of same) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.text, same[0].text, 'every arrival answers the first result, byte for byte');
  }
  assert.equal(same[0].json.outcome.seq, 1);
  assert.equal(await head_of(troupe, 'prod'), 1, 'the key ran once');

  const distinct = await Promise.all(Array.from({ length: n }, (_, i) =>
    command(troupe, 'prod', `distinct-${i}`, { type: 'publish', event: deploy(`d-${i}`) })));
  for (const r of distinct) assert.equal(r.status, 200, r.text);
  assert.deepEqual(distinct.map((r) => r.json.outcome.seq).sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i + 2));
  const log = await log_of(troupe, 'prod');
  check_log(log, 'prod');
  assert.equal(log.length, n + 1);
});

// WS-24, WS-26, WS-33..WS-35, WS-39, WS-129.
scenario('run, rule and stored-rule commands are refused with their rejections, and a remembered rejection stays the same', async (s) => {
  const troupe = await s.troupe();
  const rule = {
    name: 'chat:x',
    when: { filter: { kind: 'on', types: ['ops:service.error'] }, pattern: { kind: 'count', at_least: 3, within: 'PT1M' } },
    scope: { fields: ['service'] },
    then: { action: 'agent', params: { agent: 'triage' } },
  };
  const stored_off = { type: 'forbidden', message: 'stored rules are off in these workspaces' };
  const cases = [
    ['r1', { type: 'retry_run', run_id: 'fir_0b6a3c9e1f2d4a58' }, 404, not_found('run', 'fir_0b6a3c9e1f2d4a58')],
    ['r2', { type: 'skip_run', run_id: 'fir_1111111111111111', reason: 'noise' }, 404, not_found('run', 'fir_1111111111111111')],
    ['r3', { type: 'cancel_run', run_id: 'fir_2222222222222222' }, 404, not_found('run', 'fir_2222222222222222')],
    ['r4', { type: 'replay_rule', rule: 'ops:error-spike' }, 404, not_found('rule', 'ops:error-spike')],
    ['r5', { type: 'install_rule', rule }, 403, stored_off],
    ['r6', { type: 'update_rule', rule, expected_version: 1 }, 403, stored_off],
    ['r7', { type: 'archive_rule', rule: 'chat:x' }, 403, stored_off],
  ];
  const first = {};
  for (const [id, cmd, status, rejection] of cases) {
    const r = await command(troupe, 'prod', id, cmd);
    assert_result(r, status, id, { rejection }, cmd.type);
    first[id] = r;
  }
  // WS-39, WS-129: the rejection is the answer for good, even to a command that would succeed now.
  for (const [id] of cases) {
    const r = await command(troupe, 'prod', id, { type: 'publish', event: deploy() });
    assert.equal(r.status, first[id].status, `${id} again: ${r.text}`);
    assert.equal(r.text, first[id].text, `${id} again: the first body byte for byte`);
  }
  assert.equal(await head_of(troupe, 'prod'), 0, 'no rejection appended anything');
});

// WS-24, WS-32.
scenario('feedback on a chain appends reflexr:feedback_given in that chain, and its checks answer in order', async (s) => {
  const troupe = await s.troupe({
    config: {
      workspaces: {
        feedback_types: [{
          name: 'triage',
          targets: ['chain', 'run'],
          schema: { type: 'object', properties: { verdict: { type: 'string' } }, required: ['verdict'] },
        }],
      },
    },
  });
  published_one(await publish(troupe, 'prod', { event: error(), id: 'root' }));
  published_one(await publish(troupe, 'prod', { events: [{ event: deploy(), id: 'later' }], correlation_id: 'root' }));

  const target = { kind: 'chain', correlation_id: 'root' };
  const r = await command(troupe, 'prod', 'f1', { type: 'give_feedback', feedback_type: 'triage', target, value: { verdict: 'real' } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.ok, true, r.text);
  assert.equal(r.json.rejection, null);
  assert.equal(r.json.outcome.type, 'recorded', r.text);
  assert.equal(r.json.outcome.seq, 3, r.text);
  assert.match(r.json.outcome.id, evt_id_re);
  assert.deepEqual(Object.keys(r.json.outcome).sort(), ['id', 'seq', 'type']);

  const [fact] = await log_of(troupe, 'prod', 'after_seq=2');
  check_envelope(fact, 'prod');
  assert.equal(fact.seq, 3);
  assert.equal(fact.id, r.json.outcome.id);
  assert.equal(fact.correlation_id, 'root', 'the fact joins the target chain (WS-32)');
  assert.deepEqual(fact.event, { type: 'reflexr:feedback_given', feedback_type: 'triage', target, value: { verdict: 'real' } });
  assert_local_actor(fact.actor);
  assert.deepEqual(await log_of(troupe, 'prod', 'type=reflexr:feedback_given'), [fact]);

  const refused = [
    ['f2', { feedback_type: 'nope', target, value: { verdict: 'x' } }, 404, not_found('feedback type', 'nope')],
    ['f3', { feedback_type: 'triage', target: { kind: 'firing', firing_id: 'fir_0b6a3c9e1f2d4a58' }, value: { verdict: 'x' } }, 422,
      validation_failed('triage feedback is given on chain, run, not on a firing')],
    ['f4', { feedback_type: 'triage', target: { kind: 'chain', correlation_id: 'ghost' }, value: { verdict: 'x' } }, 404,
      not_found('chain', 'ghost')],
    ['f5', { feedback_type: 'triage', target: { kind: 'chain', correlation_id: 'later' }, value: { verdict: 'x' } }, 422,
      validation_failed('event later did not start a causal chain: it belongs to chain root')],
    ['f6', { feedback_type: 'triage', target: { kind: 'run', run_id: 'fir_0b6a3c9e1f2d4a58' }, value: { verdict: 'x' } }, 404,
      not_found('run', 'fir_0b6a3c9e1f2d4a58')],
  ];
  for (const [id, fields, status, rejection] of refused)
    assert_result(await command(troupe, 'prod', id, { type: 'give_feedback', ...fields }), status, id, { rejection }, id);

  // A bad value: validation_failed with the WS-13 errors.
  const bad = await command(troupe, 'prod', 'f7', { type: 'give_feedback', feedback_type: 'triage', target, value: { verdict: 3 } });
  assert.equal(bad.status, 422, bad.text);
  assert.equal(bad.json.ok, false);
  assert.equal(bad.json.outcome, null);
  assert.equal(bad.json.rejection.type, 'validation_failed', bad.text);
  assert.equal(bad.json.rejection.message, 'invalid triage feedback', bad.text);
  assert.ok(bad.json.rejection.errors.some((e) => e.msg === 'Input should be a valid string' && e.type === 'string_type'),
    `errors as WS-13: ${bad.text}`);
  assert.equal(await head_of(troupe, 'prod'), 3, 'refused feedback appends nothing');
});

// ---------------------------------------------------------------------------------------------
// Identity, access and tenants

// WS-59, WS-60.
scenario('a missing or unknown token is 401 and a workspace outside the credential is 403, before anything is read or written', async (s) => {
  const troupe = await s.troupe({ config: { workspaces: { credentials: acme_credentials } } });
  const unauthorized = { detail: 'unauthorized' };
  const forbidden = { detail: { type: 'forbidden', message: 'this workspace is not yours to use' } };
  const calls = [
    ['POST events', (h, ws) => publish(troupe, ws, { event: deploy() }, h)],
    ['POST commands', (h, ws) => command(troupe, ws, 'x1', { type: 'publish', event: deploy() }, h)],
    ['GET events', (h, ws) => read(troupe, ws, '', h)],
  ];
  for (const [what, call] of calls) {
    for (const headers of [{}, bearer('wrong-token'), { authorization: alice }, bearer(''), bearer(`${alice}x`)]) {
      const r = await call(headers, 'prod');
      assert.equal(r.status, 401, `${what} with ${JSON.stringify(headers)}: ${r.text}`);
      assert.deepEqual(r.json, unauthorized, `${what} with ${JSON.stringify(headers)}`);
    }
    const r = await call(bearer(alice), 'staging');
    assert.equal(r.status, 403, `${what} by alice in staging: ${r.text}`);
    assert.deepEqual(r.json, forbidden, what);
  }
  // The refused calls wrote nothing: bob (staging and prod) sees both empty, and alice's x1 is unspent.
  assert.deepEqual(await log_of(troupe, 'staging', '', bearer(bob)), []);
  assert.deepEqual(await log_of(troupe, 'prod', '', bearer(bob)), []);
  const ok = await command(troupe, 'prod', 'x1', { type: 'publish', event: deploy() }, bearer(alice));
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.outcome.seq, 1);
  // "*" admits any workspace.
  const any = await publish(troupe, 'anything-at-all', { event: deploy() }, bearer(carol));
  assert.equal(published_one(any).seq, 1);
});

// WS-59.
scenario('the service token acts as user service in tenant default, beside the credentials', async (s) => {
  const troupe = await s.troupe({
    config: { service: { service_token: 'svc-file-token' }, workspaces: { credentials: acme_credentials } },
    env: { FASTREACT_SERVICE_TOKEN: 'svc-env-token' },
  });
  for (const token of ['svc-file-token', 'svc-env-token']) {
    const r = await publish(troupe, 'prod', { event: deploy(token) }, bearer(token));
    assert.equal(r.status, 200, `${token}: ${r.text}`);
  }
  const log = await log_of(troupe, 'prod', '', bearer('svc-env-token'));
  check_log(log, 'prod');
  assert.deepEqual(log.map((e) => e.event.service), ['svc-file-token', 'svc-env-token']);
  for (const e of log) {
    assert.equal(e.actor.kind, 'user', JSON.stringify(e.actor));
    assert.equal(e.actor.id, 'service', JSON.stringify(e.actor));
  }
  assert.deepEqual(await log_of(troupe, 'prod', '', bearer(alice)), [], 'tenant default is not acme');
  assert.deepEqual(await log_of(troupe, 'prod', '', bearer(carol)), [], 'nor globex');
  const none = await read(troupe, 'prod');
  assert.equal(none.status, 401, none.text);
  assert.deepEqual(none.json, { detail: 'unauthorized' });
});

// WS-59: a service token alone closes the open mode too.
scenario('with only a service token configured, workspace calls need it', async (s) => {
  const troupe = await s.troupe({ config: { service: { service_token: 'only-token' } } });
  const none = await publish(troupe, 'prod', { event: deploy() });
  assert.equal(none.status, 401, none.text);
  assert.deepEqual(none.json, { detail: 'unauthorized' });
  const ok = await publish(troupe, 'prod', { event: deploy() }, bearer('only-token'));
  assert.equal(published_one(ok).seq, 1);
  const [e] = await log_of(troupe, 'prod', '', bearer('only-token'));
  assert.equal(e.actor.id, 'service', JSON.stringify(e.actor));
});

// WS-1, WS-38.
scenario('the same workspace id in two tenants is two separate logs with their own seqs, ids and command ids', async (s) => {
  const troupe = await s.troupe({ config: { workspaces: { credentials: acme_credentials } } });
  assert.deepEqual(published_one(await publish(troupe, 'prod', { event: deploy('acme-1'), id: 'same' }, bearer(alice))),
    { type: 'published', seq: 1, id: 'same', duplicate: false });
  published_one(await publish(troupe, 'prod', { event: deploy('acme-2') }, bearer(alice)));
  assert.deepEqual(published_one(await publish(troupe, 'prod', { event: deploy('globex-1'), id: 'same' }, bearer(carol))),
    { type: 'published', seq: 1, id: 'same', duplicate: false }, 'an id in another tenant is not a duplicate');

  const a = await command(troupe, 'prod', 'k', { type: 'publish', event: deploy('acme-3') }, bearer(alice));
  const g = await command(troupe, 'prod', 'k', { type: 'publish', event: deploy('globex-2') }, bearer(carol));
  assert.equal(a.json?.outcome?.seq, 3, a.text);
  assert.equal(g.json?.outcome?.seq, 2, g.text);

  const acme = await log_of(troupe, 'prod', '', bearer(bob));
  const globex = await log_of(troupe, 'prod', '', bearer(carol));
  check_log(acme, 'prod');
  check_log(globex, 'prod');
  assert.deepEqual(acme.map((e) => e.event.service), ['acme-1', 'acme-2', 'acme-3']);
  assert.deepEqual(globex.map((e) => e.event.service), ['globex-1', 'globex-2']);
  // A chain of one tenant is unknown in the other.
  assert_rejected(await publish(troupe, 'prod', { events: [{ event: deploy() }], correlation_id: acme[1].id }, bearer(carol)),
    404, not_found('chain', acme[1].id), 'another tenant\'s chain');
});

// ---------------------------------------------------------------------------------------------
// Durability

// WS-15, WS-40, WS-129.
scenario('a command answers the same after kill -9 and a restart on the same data dir, and seqs go on without a gap', async (s) => {
  const first_troupe = await s.troupe();
  const data_dir = first_troupe.data_dir;
  const published = await command(first_troupe, 'prod', 'c1', { type: 'publish', event: deploy('before') });
  assert.equal(published.status, 200, published.text);
  assert.equal(published.json.outcome.seq, 1);
  const rejected = await command(first_troupe, 'prod', 'c2', { type: 'skip_run', run_id: 'fir_0b6a3c9e1f2d4a58' });
  assert.equal(rejected.status, 404, rejected.text);
  const before = await log_of(first_troupe, 'prod');
  await first_troupe.stop('SIGKILL');

  const troupe = await s.troupe({ data_dir });
  const again = await command(troupe, 'prod', 'c1', { type: 'publish', event: deploy('after') });
  assert.equal(again.status, 200, again.text);
  assert.equal(again.text, published.text, 'the first result, byte for byte, after the restart');
  const rejected_again = await command(troupe, 'prod', 'c2', { type: 'publish', event: deploy('after') });
  assert.equal(rejected_again.status, 404, rejected_again.text);
  assert.equal(rejected_again.text, rejected.text, 'the remembered rejection survives too');
  assert.deepEqual(await log_of(troupe, 'prod'), before, 'the log is unchanged: one event');

  const next = published_one(await publish(troupe, 'prod', { event: deploy('next') }));
  assert.equal(next.seq, 2, 'seqs continue without gap or reuse (WS-15)');
  const log = await log_of(troupe, 'prod');
  check_log(log, 'prod');
});
