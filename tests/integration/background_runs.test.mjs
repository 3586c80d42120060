// Background runs and the durable run store (§8): POST /v1/runs and the run snapshot (AS-49, AS-50),
// the event replay page (AS-51), cancellation (AS-52, AS-90), scheduling and retry (AS-53, AS-54,
// AS-97), traces (AS-55) and chat completions stored as runs (AS-91), all against the real binary.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import {
  scenario, check_attempt_order, event_keys, on_postgres, timestamp_re, until, upstream_config, user,
  wait_run as poll_run,
} from './harness.mjs';

// AS-50: every snapshot carries all of these keys.
const snapshot_keys = [
  'run_id', 'session_id', 'status', 'created_at', 'started_at', 'completed_at', 'cancelled_at', 'duration_ms',
  'event_count', 'error', 'metadata', 'generation_options', 'attempts', 'lease_expires_at', 'retry_after',
  'worker_id', 'last_error', 'lease_epoch', 'run_kind',
];
const terminal = new Set(['completed', 'failed', 'cancelled']);
const page_keys = [
  'run_id', 'session_id', 'status', 'events', 'count', 'event_count', 'total_event_count', 'after_sequence',
  'next_after_sequence', 'has_more',
];

// A two-step script: one list_dir call, then a final answer.
const list_script = [
  { content: 'Let me look around.', tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }] },
  { content: 'Your workspace was listed.' },
];

// AS-78 text → milliseconds since the epoch, keeping the microseconds as a fraction.
function ts_ms(t) {
  const m = String(t).match(/^(.*T\d{2}:\d{2}:\d{2})\.(\d{6})\+00:00$/);
  assert.ok(m, `${t} follows AS-78`);
  return Date.parse(`${m[1]}Z`) + Number(m[2]) / 1000;
}

// AS-50, AS-78: a snapshot's shape and timestamp format.
function check_snapshot(snap, what = 'snapshot') {
  assert.ok(snap && typeof snap === 'object', `${what} is an object: ${JSON.stringify(snap)}`);
  assert.equal(snap.type, 'run', `${what} has type run: ${JSON.stringify(snap)}`);
  for (const k of snapshot_keys) assert.ok(k in snap, `${what} has key ${k}: ${JSON.stringify(snap)}`);
  for (const k of ['created_at', 'started_at', 'completed_at', 'cancelled_at', 'lease_expires_at', 'retry_after'])
    if (snap[k] !== null) assert.match(snap[k], timestamp_re, `${what}.${k} follows AS-78`);
  assert.match(snap.created_at, timestamp_re, `${what}.created_at is always set`);
  assert.equal(typeof snap.attempts, 'number');
  assert.equal(typeof snap.event_count, 'number');
  assert.equal(typeof snap.lease_epoch, 'number');
  return snap;
}

// Every event of a run's log: all AS-12 keys, sequences 0..n-1, chained parents, AS-78 timestamps.
function check_log(events, { run_id, session_id } = {}) {
  assert.ok(Array.isArray(events), `events is a list: ${JSON.stringify(events)}`);
  events.forEach((e, i) => {
    for (const k of event_keys) assert.ok(k in e, `event ${i} (${e.type}) has key ${k}: ${JSON.stringify(e)}`);
    assert.equal(e.schema, 'fastreact.agent_event.v1');
    assert.equal(e.sequence, i, `sequences run 0..n-1 without gap or repeat: ${events.map((x) => x.sequence)}`);
    assert.equal(e.event_id, `${e.run_id}:${e.sequence}`);
    assert.equal(e.parent_event_id, i === 0 ? null : `${e.run_id}:${i - 1}`, 'parent_event_id chains');
    assert.match(e.timestamp, timestamp_re, 'event timestamps follow AS-78');
    if (run_id !== undefined) assert.equal(e.run_id, run_id);
    if (session_id !== undefined) assert.equal(e.session_id, session_id);
  });
  return events;
}

const types = (events) => events.map((e) => e.type).join(', ');

function post_run(troupe, body, headers = {}) {
  return troupe.request('POST', '/v1/runs', { body, headers });
}

async function get_run(troupe, run_id) {
  const res = await troupe.request('GET', `/v1/runs/${encodeURIComponent(run_id)}`);
  assert.equal(res.status, 200, `GET /v1/runs/${run_id}: ${res.text}`);
  return check_snapshot(res.json, `GET /v1/runs/${run_id}`);
}

// Polls the checked snapshot until pred holds; returns it.
function wait_run(troupe, run_id, pred, options = {}) {
  return poll_run(troupe, run_id, pred, { ...options, read: get_run });
}

const wait_terminal = (troupe, run_id, timeout_ms = 30_000) =>
  wait_run(troupe, run_id, (r) => terminal.has(r.status), { timeout_ms, message: 'a terminal status' });

async function events_page(troupe, run_id, query = '') {
  const res = await troupe.request('GET', `/v1/runs/${encodeURIComponent(run_id)}/events${query}`);
  assert.equal(res.status, 200, `GET /v1/runs/${run_id}/events${query}: ${res.text}`);
  for (const k of page_keys) assert.ok(k in res.json, `the events page has ${k}: ${res.text}`);
  return res.json;
}

async function all_events(troupe, run_id) {
  return (await events_page(troupe, run_id, '?limit=0')).events;
}

// Splits a log into attempts at each session_start.
function attempts_of(events) {
  const out = [];
  for (const e of events) {
    if (e.type === 'session_start') out.push([]);
    assert.ok(out.length > 0, `a log starts with session_start: ${types(events)}`);
    out[out.length - 1].push(e);
  }
  return out;
}

scenario('a background run is answered queued, runs to completed and keeps a contiguous event log (AS-49, AS-50, AS-51, AS-78)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: list_script } } });
  const session_id = '6B1E2C3D-4A5F-4B6C-8D7E-9F0A1B2C3D4E'; // upper case: never rewritten (AS-79)
  const run_id = `bg-${process.pid}-${Date.now()}`;
  const res = await post_run(troupe, {
    messages: [user('What is in my workspace?')], session_id,
    metadata: { run_id, caller: 'integration-test', custom: { a: 1 } },
  });
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  const queued = check_snapshot(res.json, 'POST /v1/runs');
  assert.equal(queued.status, 'queued', 'POST /v1/runs answers queued (AS-49)');
  assert.equal(queued.run_id, run_id, 'metadata.run_id becomes the run id');
  assert.equal(queued.session_id, session_id, 'the session_id is kept byte for byte');
  assert.equal(queued.run_kind, 'background');
  assert.equal(queued.started_at, null);
  assert.equal(queued.completed_at, null);
  assert.equal(queued.cancelled_at, null);
  assert.equal(queued.error, null);
  assert.equal(queued.attempts, 0, 'no attempt has started yet');
  assert.equal(queued.event_count, 0);
  assert.equal(queued.metadata.caller, 'integration-test', 'caller metadata is kept');
  assert.deepEqual(queued.metadata.custom, { a: 1 }, 'unknown metadata is kept verbatim');

  const done = await wait_terminal(troupe, run_id);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.equal(done.run_kind, 'background');
  assert.equal(done.session_id, session_id);
  assert.equal(done.created_at, queued.created_at, 'created_at does not move');
  assert.match(done.started_at, timestamp_re);
  assert.match(done.completed_at, timestamp_re);
  assert.equal(done.cancelled_at, null);
  assert.ok(ts_ms(done.created_at) <= ts_ms(done.started_at), `created_at ≤ started_at: ${JSON.stringify(done)}`);
  assert.ok(ts_ms(done.started_at) <= ts_ms(done.completed_at), `started_at ≤ completed_at: ${JSON.stringify(done)}`);
  assert.equal(typeof done.duration_ms, 'number');
  assert.ok(done.duration_ms >= 0);
  assert.equal(done.error, null);
  assert.equal(done.attempts, 1, 'one attempt');
  assert.equal(done.lease_epoch, 1, 'the attempt start bumped lease_epoch once (AS-54)');
  assert.match(String(done.worker_id), /^worker-[0-9a-f]+$/, 'worker_id is worker-<hex> (AS-54)');
  assert.equal(done.retry_after, null);
  assert.equal(done.last_error, null);

  const page = await events_page(troupe, run_id, '?limit=0');
  const events = check_log(page.events, { run_id, session_id });
  assert.equal(page.run_id, run_id);
  assert.equal(page.session_id, session_id);
  assert.equal(page.status, 'completed');
  assert.equal(page.count, events.length);
  assert.equal(page.event_count, events.length);
  assert.equal(page.total_event_count, events.length);
  assert.equal(page.has_more, false);
  assert.equal(done.event_count, events.length, 'the snapshot event_count is the log length');

  const steps = check_attempt_order(events);
  assert.equal(steps.length, 2, `a tool step, then the final step: ${types(events)}`);
  assert.deepEqual(steps[0].calls.map((c) => c.tool_name), ['list_dir']);
  assert.deepEqual(steps[1].calls, []);
  assert.equal(events[0].type, 'session_start');
  assert.equal(events[0].content, 'What is in my workspace?');
  assert.equal(events[0].metadata.attempt, 1, 'the first attempt is attempt 1 (AS-51)');
  const end = events[events.length - 1];
  assert.equal(end.type, 'session_end');
  assert.equal(end.content, 'Your workspace was listed.');
  assert.equal(end.metadata.status, 'completed');
});

scenario('the events page honours limit and the exclusive after_sequence cursor, limit=0 returns all and a negative limit is 400 (AS-51)', async (s) => {
  const script = [
    { content: 'First look.', tool_calls: [{ name: 'list_dir', arguments: {} }] },
    { content: 'Second look.', tool_calls: [{ name: 'list_dir', arguments: {} }] },
    { content: 'Seen it twice.' },
  ];
  const troupe = await s.troupe({ config: { model: { script } } });
  const res = await post_run(troupe, { messages: [user('look twice')] });
  assert.equal(res.status, 200, res.text);
  const { run_id } = res.json;
  assert.equal((await wait_terminal(troupe, run_id)).status, 'completed');

  const all = await events_page(troupe, run_id, '?limit=0');
  const events = check_log(all.events, { run_id });
  const n = events.length;
  assert.ok(n >= 8, `enough events to page through: ${types(events)}`);
  assert.equal(all.count, n);
  assert.equal(all.has_more, false, 'limit=0 returns everything');
  assert.equal(all.total_event_count, n);
  assert.equal(all.next_after_sequence, n - 1, 'next_after_sequence is the last sequence returned');

  // The spec's example: limit=2 → 0,1 with has_more; after_sequence=1 → 2,3.
  const first = await events_page(troupe, run_id, '?limit=2');
  assert.deepEqual(first.events.map((e) => e.sequence), [0, 1]);
  assert.equal(first.count, 2);
  assert.equal(first.has_more, true);
  assert.equal(first.next_after_sequence, 1);
  assert.equal(first.event_count, n, 'event_count is the run total, not the page size');
  assert.equal(first.total_event_count, n);
  assert.deepEqual(first.events, events.slice(0, 2), 'a page holds the same events as the whole log');

  const second = await events_page(troupe, run_id, '?limit=2&after_sequence=1');
  assert.deepEqual(second.events.map((e) => e.sequence), [2, 3], 'after_sequence is exclusive');
  assert.equal(second.after_sequence, 1);
  assert.equal(second.next_after_sequence, 3);
  assert.equal(second.has_more, n > 4);
  assert.equal(second.total_event_count, n);

  // Walking pages of 3 by next_after_sequence visits every event once.
  const walked = [];
  let cursor = -1;
  for (let i = 0; i < 100; i++) {
    const page = await events_page(troupe, run_id, `?limit=3&after_sequence=${cursor}`);
    walked.push(...page.events);
    assert.equal(page.count, page.events.length);
    cursor = page.next_after_sequence;
    if (!page.has_more) break;
  }
  assert.deepEqual(walked, events, 'paging by next_after_sequence yields the whole log exactly once');

  // The last window: ends exactly, then an empty page keeps the cursor.
  const tail = await events_page(troupe, run_id, `?limit=2&after_sequence=${n - 3}`);
  assert.deepEqual(tail.events.map((e) => e.sequence), [n - 2, n - 1]);
  assert.equal(tail.has_more, false);
  const empty = await events_page(troupe, run_id, `?after_sequence=${n - 1}`);
  assert.deepEqual(empty.events, []);
  assert.equal(empty.count, 0);
  assert.equal(empty.has_more, false);
  assert.equal(empty.next_after_sequence, n - 1, 'an empty page answers the cursor as next_after_sequence');
  assert.equal(empty.total_event_count, n);

  // The default limit (200) covers this run.
  const dflt = await events_page(troupe, run_id);
  assert.deepEqual(dflt.events, events);
  assert.equal(dflt.has_more, false);

  const negative = await troupe.request('GET', `/v1/runs/${run_id}/events?limit=-1`);
  assert.equal(negative.status, 400, negative.text);
  assert.deepEqual(negative.json, { detail: 'limit must be >= 0' });

  const unknown = await troupe.request('GET', '/v1/runs/no-such-run/events');
  assert.equal(unknown.status, 404, unknown.text);
  assert.equal(typeof unknown.json?.detail, 'string', unknown.text);

  // AS-2: a non-integer value in an integer query parameter is 422 with a detail list.
  for (const q of ['?limit=abc', '?after_sequence=abc']) {
    const bad = await troupe.request('GET', `/v1/runs/${run_id}/events${q}`);
    assert.equal(bad.status, 422, `${q}: ${bad.text}`);
    assert.ok(Array.isArray(bad.json?.detail), `${q}: a 422 detail is a list: ${bad.text}`);
  }
});

scenario('POST /v1/runs applies the chat request checks (AS-49, AS-10, AS-2)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'fine' }] } } });
  const none = await post_run(troupe, { messages: [] });
  assert.equal(none.status, 400, none.text);
  assert.deepEqual(none.json, { detail: 'No messages provided' });
  const system_only = await post_run(troupe, { messages: [{ role: 'system', content: 'sys' }] });
  assert.equal(system_only.status, 400, system_only.text);
  assert.deepEqual(system_only.json, { detail: 'At least one user message with non-empty content is required' });
  const hot = await post_run(troupe, { messages: [user('hi')], temperature: 5 });
  assert.equal(hot.status, 422, hot.text);
  assert.ok(Array.isArray(hot.json?.detail), hot.text);
  const list = await troupe.request('GET', '/v1/runs?limit=10');
  assert.equal(list.status, 200, list.text);
  assert.equal(list.json.total_count, 0, `refused requests store no run: ${list.text}`);
});

scenario('a metadata.run_id that names an existing run is refused 409 Run already exists (AS-49, AS-10)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'once' }] } } });
  const run_id = `dup-${Date.now()}`;
  const first = await post_run(troupe, { messages: [user('one')], metadata: { run_id } });
  assert.equal(first.status, 200, first.text);

  const again = await post_run(troupe, { messages: [user('two')], metadata: { run_id } });
  assert.equal(again.status, 409, again.text);
  assert.deepEqual(again.json, { detail: 'Run already exists' });

  const done = await wait_terminal(troupe, run_id);
  assert.equal(done.status, 'completed');
  const later = await post_run(troupe, { messages: [user('three')], metadata: { run_id } });
  assert.equal(later.status, 409, `a finished background run still owns its id: ${later.text}`);
  assert.deepEqual(later.json, { detail: 'Run already exists' });
  // AS-10: a chat naming a background run is refused too.
  const chat = await troupe.chat({ messages: [user('four')], metadata: { run_id } });
  assert.equal(chat.status, 409, chat.text);
  assert.deepEqual(chat.json, { detail: 'Run already exists' });

  const after = await get_run(troupe, run_id);
  assert.equal(after.attempts, 1, 'the refused requests did not touch the run');
  assert.equal(after.event_count, done.event_count);
  const events = await all_events(troupe, run_id);
  assert.equal(events[0].content, 'one', 'the log is the first request\'s');
});

scenario('cancelling a finished run returns it unchanged and unknown runs are 404 Run not found (AS-52, AS-50)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: list_script } } });
  const res = await post_run(troupe, { messages: [user('finish first')] });
  assert.equal(res.status, 200, res.text);
  const { run_id } = res.json;
  const done = await wait_terminal(troupe, run_id);
  assert.equal(done.status, 'completed');

  const cancel = await troupe.request('POST', `/v1/runs/${run_id}/cancel`);
  assert.equal(cancel.status, 200, cancel.text);
  check_snapshot(cancel.json, 'cancel answer');
  assert.equal(cancel.json.status, 'completed', 'a terminal run is returned unchanged');
  assert.equal(cancel.json.cancelled_at, null);
  assert.deepEqual(cancel.json, done, 'the cancel answer is the unchanged snapshot');
  assert.deepEqual(await get_run(troupe, run_id), done, 'the stored run is unchanged');
  const events = await all_events(troupe, run_id);
  assert.equal(events.length, done.event_count, 'no event was appended');
  assert.equal(events[events.length - 1].type, 'session_end');

  for (const [method, route] of [
    ['GET', '/v1/runs/no-such-run'], ['POST', '/v1/runs/no-such-run/cancel'],
  ]) {
    const r = await troupe.request(method, route);
    assert.equal(r.status, 404, `${method} ${route}: ${r.text}`);
    assert.deepEqual(r.json, { detail: 'Run not found' }, `${method} ${route}`);
  }
});

scenario('cancelling a running run answers cancelled at once and its log ends with the Run cancelled error event (AS-52, AS-90)', async (s) => {
  const troupe = await s.troupe({
    config: { model: { scripts: { slow: [{ content: 'never seen', delay_ms: 60_000 }] } } },
  });
  const res = await post_run(troupe, { messages: [user('take forever')], model: 'scripted:slow' });
  assert.equal(res.status, 200, res.text);
  const { run_id } = res.json;
  await wait_run(troupe, run_id, (r) => r.status === 'running' && r.event_count >= 1,
    { message: 'the run to be running with its session_start stored' });

  const t0 = performance.now();
  const cancel = await troupe.request('POST', `/v1/runs/${run_id}/cancel`);
  const latency_ms = performance.now() - t0;
  s.t.diagnostic(`cancel of a running run answered in ${latency_ms.toFixed(1)} ms`);
  assert.equal(cancel.status, 200, cancel.text);
  check_snapshot(cancel.json, 'cancel answer');
  assert.equal(cancel.json.run_id, run_id);
  assert.equal(cancel.json.status, 'cancelled', `the answer shows the run cancelled: ${cancel.text}`);
  assert.match(String(cancel.json.cancelled_at), timestamp_re, 'cancelled_at is set');
  // The spec's target is 100 ms; 1 s keeps a loaded 2-core machine from flaking.
  assert.ok(latency_ms < 1000, `the cancel answered after ${latency_ms.toFixed(1)} ms`);

  // The executor appends error "Run cancelled" with the next sequence (AS-52, AS-90).
  const events = await until(async () => {
    const ev = await all_events(troupe, run_id);
    return ev.length && ev[ev.length - 1].type === 'error' && ev;
  }, { timeout_ms: 5000, interval_ms: 20, message: 'the cancel error event in the log' });
  check_log(events, { run_id });
  const last = events[events.length - 1];
  assert.equal(last.content, 'Run cancelled');
  assert.equal(last.metadata.error_type, 'CancelledError');
  assert.equal(typeof last.duration_ms, 'number', 'error.duration_ms is the time since run start');
  assert.equal(events[0].type, 'session_start');
  assert.ok(!events.some((e) => e.type === 'session_end'), `no session_end: ${types(events)}`);
  check_attempt_order(events);

  const after = await get_run(troupe, run_id);
  assert.equal(after.status, 'cancelled', 'the run stays cancelled');
  assert.equal(after.cancelled_at, cancel.json.cancelled_at);
  assert.equal(after.attempts, 1, 'a cancelled run is never retried');
  assert.equal(after.event_count, events.length, 'the snapshot counts the cancel event');
  assert.equal((await all_events(troupe, run_id)).length, events.length, 'nothing follows the error event');

  const again = await troupe.request('POST', `/v1/runs/${run_id}/cancel`);
  assert.equal(again.status, 200, again.text);
  assert.deepEqual(again.json, after, 'a second cancel returns the cancelled run unchanged');
});

scenario('with run_concurrency 1 a second run waits queued and cancelling it means it never starts (AS-53, AS-52)', async (s) => {
  const troupe = await s.troupe({
    config: {
      service: { run_concurrency: 1 },
      model: { script: [{ content: 'quick' }], scripts: { slow: [{ content: 'slow', delay_ms: 60_000 }] } },
    },
  });
  const slow = await post_run(troupe, { messages: [user('hold the only slot')], model: 'scripted:slow' });
  assert.equal(slow.status, 200, slow.text);
  const slow_id = slow.json.run_id;
  await wait_run(troupe, slow_id, (r) => r.status === 'running', { message: 'the slow run to start' });

  const waiting = await post_run(troupe, { messages: [user('wait your turn')] });
  assert.equal(waiting.status, 200, waiting.text);
  const waiting_id = waiting.json.run_id;
  assert.equal(waiting.json.status, 'queued');
  const still = await get_run(troupe, waiting_id);
  assert.equal(still.status, 'queued', 'the only slot is taken: the run stays queued');
  assert.equal(still.attempts, 0);

  const cancel = await troupe.request('POST', `/v1/runs/${waiting_id}/cancel`);
  assert.equal(cancel.status, 200, cancel.text);
  assert.equal(cancel.json.status, 'cancelled', cancel.text);
  assert.match(String(cancel.json.cancelled_at), timestamp_re);
  assert.equal(cancel.json.started_at, null, 'a queued run is cancelled without starting');

  // Free the slot, then prove the scheduler has moved on: a later run completes.
  const freed = await troupe.request('POST', `/v1/runs/${slow_id}/cancel`);
  assert.equal(freed.json?.status, 'cancelled', freed.text);
  const later = await post_run(troupe, { messages: [user('after the slot is free')] });
  assert.equal(later.status, 200, later.text);
  assert.equal((await wait_terminal(troupe, later.json.run_id)).status, 'completed');

  const final = await get_run(troupe, waiting_id);
  assert.equal(final.status, 'cancelled');
  assert.equal(final.started_at, null, 'the cancelled run never started');
  assert.equal(final.attempts, 0);
  assert.equal(final.event_count, 0);
  const page = await events_page(troupe, waiting_id, '?limit=0');
  assert.deepEqual(page.events, [], `no session_start or any other event: ${JSON.stringify(page.events)}`);
  assert.equal(page.total_event_count, 0);
  assert.equal(page.status, 'cancelled');
});

scenario('a tenant\'s queued runs start by metadata.priority, highest first, and a priority outside -100..100 is a 422 naming it (CJ-18)', async (s) => {
  const troupe = await s.troupe({
    config: {
      service: { run_concurrency: 1 },
      model: { script: [{ content: 'quick' }], scripts: { slow: [{ content: 'slow', delay_ms: 60_000 }] } },
    },
  });
  for (const priority of [101, -101, 1.5, 'high']) {
    const bad = await post_run(troupe, { messages: [user('hi')], metadata: { priority } });
    assert.equal(bad.status, 422, bad.text);
    assert.deepEqual(bad.json.detail[0].loc, ['body', 'metadata', 'priority'], bad.text);
    assert.match(bad.json.detail[0].msg, /-100 to 100/, bad.text);
  }
  const slow = await post_run(troupe, { messages: [user('hold the only slot')], model: 'scripted:slow' });
  const slow_id = slow.json.run_id;
  await wait_run(troupe, slow_id, (r) => r.status === 'running', { message: 'the slow run to start' });
  const queued = {};
  for (const [name, metadata] of [['low', { priority: -5 }], ['plain', {}], ['high', { priority: 50 }]]) {
    const res = await post_run(troupe, { messages: [user(name)], metadata });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.status, 'queued');
    queued[name] = res.json.run_id;
  }
  await troupe.request('POST', `/v1/runs/${slow_id}/cancel`);
  const started = {};
  for (const [name, run_id] of Object.entries(queued)) {
    const done = await wait_terminal(troupe, run_id);
    assert.equal(done.status, 'completed');
    started[name] = ts_ms(done.started_at);
  }
  assert.ok(started.high < started.plain && started.plain < started.low, JSON.stringify(started));
});

scenario('GET /v1/runs lists runs newest first, filters by status and pages with limit and has_more (AS-50, AS-53)', async (s) => {
  const troupe = await s.troupe({
    config: {
      service: { run_concurrency: 1 },
      model: { script: [{ content: 'quick' }], scripts: { slow: [{ content: 'slow', delay_ms: 60_000 }] } },
    },
  });
  const r1 = (await post_run(troupe, { messages: [user('r1')], model: 'scripted:slow', metadata: { run_id: 'list-r1' } })).json;
  assert.equal(r1?.run_id, 'list-r1');
  await wait_run(troupe, 'list-r1', (r) => r.status === 'running', { message: 'r1 to start' });
  for (const id of ['list-r2', 'list-r3']) {
    const r = await post_run(troupe, { messages: [user(id)], metadata: { run_id: id } });
    assert.equal(r.status, 200, r.text);
  }

  const list = async (query) => {
    const res = await troupe.request('GET', `/v1/runs${query}`);
    assert.equal(res.status, 200, `GET /v1/runs${query}: ${res.text}`);
    for (const k of ['runs', 'count', 'total_count', 'limit', 'has_more'])
      assert.ok(k in res.json, `the list has ${k}: ${res.text}`);
    res.json.runs.forEach((r, i) => check_snapshot(r, `runs[${i}]`));
    assert.equal(res.json.count, res.json.runs.length);
    return res.json;
  };

  // The spec's example: ?status=queued&limit=1.
  const q1 = await list('?status=queued&limit=1');
  assert.deepEqual(q1.runs.map((r) => r.run_id), ['list-r3'], 'newest first');
  assert.equal(q1.count, 1);
  assert.equal(q1.total_count, 2, 'total_count covers the filtered set');
  assert.equal(q1.limit, 1);
  assert.equal(q1.has_more, true);
  const q = await list('?status=queued&limit=10');
  assert.deepEqual(q.runs.map((r) => r.run_id), ['list-r3', 'list-r2']);
  assert.equal(q.has_more, false);
  for (const r of q.runs) assert.equal(r.status, 'queued');
  const running = await list('?status=running&limit=10');
  assert.deepEqual(running.runs.map((r) => r.run_id), ['list-r1']);
  const everything = await list('?limit=10');
  assert.deepEqual(everything.runs.map((r) => r.run_id), ['list-r3', 'list-r2', 'list-r1']);
  assert.equal(everything.total_count, 3);
  assert.equal(everything.has_more, false);
  const two = await list('?limit=2');
  assert.deepEqual(two.runs.map((r) => r.run_id), ['list-r3', 'list-r2']);
  assert.equal(two.has_more, true);
  assert.equal(two.total_count, 3);

  // Freeing the slot lets the queued runs run, oldest first.
  assert.equal((await troupe.request('POST', '/v1/runs/list-r1/cancel')).json?.status, 'cancelled');
  const r2 = await wait_terminal(troupe, 'list-r2');
  const r3 = await wait_terminal(troupe, 'list-r3');
  assert.equal(r2.status, 'completed');
  assert.equal(r3.status, 'completed');
  assert.ok(ts_ms(r2.started_at) <= ts_ms(r3.started_at), `queued runs start in created_at order: ${r2.started_at} vs ${r3.started_at}`);
  assert.ok(ts_ms(r2.completed_at) <= ts_ms(r3.started_at), 'run_concurrency 1: one at a time');

  const completed = await list('?status=completed&limit=10');
  assert.deepEqual(completed.runs.map((r) => r.run_id), ['list-r3', 'list-r2']);
  const cancelled = await list('?status=cancelled&limit=10');
  assert.deepEqual(cancelled.runs.map((r) => r.run_id), ['list-r1']);
  assert.equal((await list('?status=queued&limit=10')).total_count, 0);
});

scenario('a finished background run and a chat run each have a trace readable by list, get and events (AS-55, AS-91)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: list_script } } });
  const bg_session = '0B4C1F2E-3D5A-4E6B-9C7D-8E9F0A1B2C3D';
  const bg = await post_run(troupe, { messages: [user('background please')], session_id: bg_session, metadata: { run_id: 'trace-bg' } });
  assert.equal(bg.status, 200, bg.text);
  assert.equal((await wait_terminal(troupe, 'trace-bg')).status, 'completed');
  const bg_events = await all_events(troupe, 'trace-bg');

  const chat = await troupe.chat({ messages: [user('chat please')], metadata: { run_id: 'trace-chat' } });
  assert.equal(chat.status, 200, chat.text);
  assert.equal(chat.json.status, 'completed');

  const get_trace = async (id) => {
    const res = await until(async () => {
      const r = await troupe.request('GET', `/v1/traces/${id}`);
      return r.status === 200 && r;
    }, { timeout_ms: 5000, message: `the trace of ${id}` });
    assert.ok(res.json.trace, `{"trace": …}: ${res.text}`);
    return res.json.trace;
  };

  const t_bg = await get_trace('trace-bg');
  assert.equal(t_bg.trace_type, 'background_run');
  assert.equal(t_bg.run_id, 'trace-bg');
  assert.equal(t_bg.session_id, bg_session);
  assert.equal(t_bg.status, 'completed');
  assert.equal(t_bg.event_count, bg_events.length);
  assert.equal(t_bg.tool_call_count, bg_events.filter((e) => e.type === 'tool_call').length);
  assert.deepEqual(t_bg.tool_name_counts, { list_dir: 1 });
  assert.equal(t_bg.final_content, 'Your workspace was listed.');
  assert.equal(t_bg.final_content, bg_events[bg_events.length - 1].content);
  assert.ok(t_bg.llm_usage_total && typeof t_bg.llm_usage_total === 'object', JSON.stringify(t_bg));
  assert.ok(Array.isArray(t_bg.cited_source_ids));
  for (const k of ['created_at', 'completed_at']) assert.match(t_bg[k], timestamp_re, `trace.${k}`);

  const t_chat = await get_trace('trace-chat');
  assert.equal(t_chat.trace_type, 'chat', 'a chat completion writes a chat trace (AS-91)');
  assert.equal(t_chat.run_id, 'trace-chat');
  assert.equal(t_chat.session_id, chat.json.session_id);
  assert.equal(t_chat.status, 'completed');
  assert.equal(t_chat.event_count, chat.json.events.length);
  assert.equal(t_chat.final_content, chat.json.content);
  assert.equal(t_chat.tool_call_count, chat.json.tool_calls.length);

  const list = await troupe.request('GET', '/v1/traces?limit=10');
  assert.equal(list.status, 200, list.text);
  for (const k of ['traces', 'count', 'total_count', 'limit', 'has_more']) assert.ok(k in list.json, `traces list has ${k}`);
  assert.deepEqual(list.json.traces.map((t) => t.run_id), ['trace-chat', 'trace-bg'], 'newest first');
  assert.equal(list.json.total_count, 2);
  assert.equal(list.json.has_more, false);
  const one = await troupe.request('GET', '/v1/traces?limit=1');
  assert.deepEqual(one.json.traces.map((t) => t.run_id), ['trace-chat']);
  assert.equal(one.json.count, 1);
  assert.equal(one.json.total_count, 2);
  assert.equal(one.json.limit, 1);
  assert.equal(one.json.has_more, true);
  const by_session = await troupe.request('GET', `/v1/traces?limit=10&session_id=${bg_session}`);
  assert.deepEqual(by_session.json.traces.map((t) => t.run_id), ['trace-bg'], 'session_id filters');
  assert.equal(by_session.json.total_count, 1);

  const ev = await troupe.request('GET', '/v1/traces/trace-bg/events?limit=0');
  assert.equal(ev.status, 200, ev.text);
  assert.deepEqual(ev.json.events, bg_events, 'trace events are the run log');
  assert.equal(ev.json.total_event_count, bg_events.length);
  assert.equal(ev.json.has_more, false);
  const ev_page = await troupe.request('GET', '/v1/traces/trace-bg/events?limit=2&after_sequence=0');
  assert.deepEqual(ev_page.json.events.map((e) => e.sequence), [1, 2]);
  assert.equal(ev_page.json.next_after_sequence, 2);
  assert.equal(ev_page.json.has_more, true);
  const chat_ev = await troupe.request('GET', '/v1/traces/trace-chat/events?limit=0');
  assert.equal(chat_ev.status, 200, chat_ev.text);
  assert.deepEqual(chat_ev.json.events, chat.json.events);

  const missing = await troupe.request('GET', '/v1/traces/no-such-run');
  assert.equal(missing.status, 404, missing.text);
  assert.deepEqual(missing.json, { detail: 'Trace not found' });
  const missing_ev = await troupe.request('GET', '/v1/traces/no-such-run/events');
  assert.equal(missing_ev.status, 404, missing_ev.text);
  assert.deepEqual(missing_ev.json, { detail: 'Trace events not found' });
});

scenario('a chat completion is stored as a chat run whose snapshot and events read back (AS-91)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: list_script } } });
  const session_id = 'A1B2C3D4-E5F6-4A7B-8C9D-0E1F2A3B4C5D';
  const chat = await troupe.chat({ messages: [user('stored?')], session_id });
  assert.equal(chat.status, 200, chat.text);
  const run_id = chat.json.run_id;
  const snap = await get_run(troupe, run_id);
  assert.equal(snap.run_kind, 'chat');
  assert.equal(snap.status, 'completed');
  assert.equal(snap.session_id, session_id);
  assert.equal(snap.attempts, 1);
  assert.equal(snap.event_count, chat.json.events.length);
  assert.match(snap.completed_at, timestamp_re);
  const page = await events_page(troupe, run_id, '?limit=0');
  assert.deepEqual(page.events, chat.json.events, 'the stored log equals what the client received (AS-12)');
  assert.equal(page.status, 'completed');
  const cancel = await troupe.request('POST', `/v1/runs/${run_id}/cancel`);
  assert.equal(cancel.status, 200, cancel.text);
  assert.equal(cancel.json.status, 'completed', 'a finished chat run is returned unchanged by cancel');
});

scenario('a retryable upstream 503 requeues the run with retry_after and last_error, and attempt 2 continues the sequence (AS-53, AS-51)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({
    config: { ...upstream_config(up, { max_retries: 0 }), service: { run_retry_base_seconds: 1, run_max_attempts: 3 } },
  });
  await up.script([{ status: 503 }], { content: 'the second attempt answers' });
  const res = await post_run(troupe, { messages: [user('flaky upstream')] });
  assert.equal(res.status, 200, res.text);
  const { run_id } = res.json;

  // Between the attempts the run is queued with last_error and retry_after (1 s: base·2^0).
  const requeued = await wait_run(troupe, run_id,
    (r) => (r.status === 'queued' && r.attempts === 1) || terminal.has(r.status) || r.attempts >= 2,
    { message: 'the run to be requeued after attempt 1' });
  assert.equal(requeued.status, 'queued', `the failed attempt requeues the run: ${JSON.stringify(requeued)}`);
  assert.equal(requeued.attempts, 1);
  assert.equal(typeof requeued.last_error, 'string', `last_error is set: ${JSON.stringify(requeued)}`);
  assert.ok(requeued.last_error.length > 0);
  assert.match(String(requeued.retry_after), timestamp_re, 'retry_after is set (AS-78)');

  const done = await wait_terminal(troupe, run_id);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.equal(done.attempts, 2);
  assert.equal(done.error, null);
  assert.equal(done.lease_epoch, 2, 'each attempt start bumps lease_epoch (AS-54)');

  const events = check_log(await all_events(troupe, run_id), { run_id });
  const parts = attempts_of(events);
  assert.equal(parts.length, 2, `two attempts in one log: ${types(events)}`);
  const [a1, a2] = parts;
  assert.equal(a1[0].metadata.attempt, 1);
  assert.equal(a2[0].metadata.attempt, 2, 'the second attempt\'s session_start says attempt 2');
  assert.equal(a2[0].sequence, a1[a1.length - 1].sequence + 1, 'attempt 2 continues the sequence');
  const err = a1[a1.length - 1];
  assert.equal(err.type, 'error', `attempt 1 ends with error: ${types(a1)}`);
  assert.ok(err.content.startsWith('LLM call failed:'), err.content);
  assert.equal(err.metadata.error_type, 'upstream_model_error');
  check_attempt_order(a1);
  check_attempt_order(a2);
  assert.equal(a2[a2.length - 1].type, 'session_end');
  assert.equal(a2[a2.length - 1].content, 'the second attempt answers');
  assert.equal(events.filter((e) => e.type === 'session_end').length, 1);

  // retry_after = failure + 1 s, and the timer honoured it.
  const gap = ts_ms(requeued.retry_after) - ts_ms(err.timestamp);
  assert.ok(gap >= 900 && gap <= 3000, `retry_after is about 1 s after the failure: ${gap.toFixed(0)} ms`);
  assert.ok(ts_ms(a2[0].timestamp) >= ts_ms(requeued.retry_after) - 50,
    `attempt 2 started (${a2[0].timestamp}) no earlier than retry_after (${requeued.retry_after})`);
  assert.equal((await up.requests()).length, 2, 'one upstream call per attempt');
});

scenario('an upstream that always answers 503 fails the run after run_max_attempts attempts with doubling backoff (AS-53, AS-97)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({
    config: { ...upstream_config(up, { max_retries: 0 }), service: { run_retry_base_seconds: 0.2, run_max_attempts: 3 } },
  });
  await up.script([], { status: 503 });
  const res = await post_run(troupe, { messages: [user('never works')] });
  assert.equal(res.status, 200, res.text);
  const { run_id } = res.json;
  const done = await wait_terminal(troupe, run_id);
  assert.equal(done.status, 'failed', JSON.stringify(done));
  assert.equal(done.attempts, 3, 'three attempts, then failed');
  assert.equal(typeof done.error, 'string');
  assert.ok(done.error.length > 0, JSON.stringify(done));
  assert.equal(done.completed_at === null || timestamp_re.test(done.completed_at), true);

  const events = check_log(await all_events(troupe, run_id), { run_id });
  const parts = attempts_of(events);
  assert.deepEqual(parts.map((p) => p[0].metadata.attempt), [1, 2, 3], `attempts numbered 1..3: ${types(events)}`);
  for (const p of parts) {
    const last = p[p.length - 1];
    assert.equal(last.type, 'error', `each attempt ends with error: ${types(p)}`);
    assert.equal(last.metadata.error_type, 'upstream_model_error');
  }
  assert.ok(!events.some((e) => e.type === 'session_end'), 'never completed');
  // Backoff: base·2^(attempts−1) = 0.2 s, then 0.4 s.
  const gap1 = ts_ms(parts[1][0].timestamp) - ts_ms(parts[0][parts[0].length - 1].timestamp);
  const gap2 = ts_ms(parts[2][0].timestamp) - ts_ms(parts[1][parts[1].length - 1].timestamp);
  s.t.diagnostic(`retry gaps: ${gap1.toFixed(0)} ms, ${gap2.toFixed(0)} ms`);
  assert.ok(gap1 >= 150, `the first retry waits about 0.2 s: ${gap1.toFixed(0)} ms`);
  assert.ok(gap2 >= 350, `the second retry waits about 0.4 s: ${gap2.toFixed(0)} ms`);
  assert.equal((await up.requests()).length, 3);
});

scenario('an upstream 401 fails a background run on its first attempt (AS-97)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({
    config: { ...upstream_config(up, { max_retries: 2 }), service: { run_retry_base_seconds: 0.2, run_max_attempts: 3 } },
  });
  await up.script([{ status: 401 }], { content: 'a retry would have succeeded' });
  const res = await post_run(troupe, { messages: [user('bad key')] });
  assert.equal(res.status, 200, res.text);
  const { run_id } = res.json;
  const done = await wait_terminal(troupe, run_id);
  assert.equal(done.status, 'failed', `a 401 is not retryable: ${JSON.stringify(done)}`);
  assert.equal(done.attempts, 1);
  assert.equal(typeof done.error, 'string');
  assert.ok(done.error.startsWith('LLM call failed:'), done.error);

  const events = check_log(await all_events(troupe, run_id), { run_id });
  assert.equal(events.filter((e) => e.type === 'session_start').length, 1, `one attempt: ${types(events)}`);
  const last = events[events.length - 1];
  assert.equal(last.type, 'error');
  assert.equal(last.metadata.error_type, 'upstream_model_error');
  assert.equal((await up.requests()).length, 1, 'neither the model port nor the scheduler retried the 401');
  const t = await troupe.request('GET', `/v1/traces/${run_id}`);
  assert.equal(t.status, 200, t.text);
  assert.equal(t.json.trace.status, 'failed');
});

scenario('cancelling a running background run closes its upstream model request (AS-52)', async (s) => {
  const up = await s.upstream();
  await up.script([], { hang: true });
  const troupe = await s.troupe({ config: upstream_config(up) });
  const created = await troupe.request('POST', '/v1/runs', { body: { messages: [user('wait for ever')] } });
  assert.equal(created.status, 200, created.text);
  const id = created.json.run_id;
  await until(async () => (await up.active()) === 1, { timeout_ms: 10_000, message: 'the upstream request to arrive' });
  const t0 = performance.now();
  const cancelled = await troupe.request('POST', `/v1/runs/${id}/cancel`);
  const elapsed = performance.now() - t0;
  assert.equal(cancelled.status, 200, cancelled.text);
  assert.equal(cancelled.json.status, 'cancelled');
  assert.ok(elapsed < 1000, `cancel answered in ${elapsed.toFixed(1)} ms (target 100 ms)`);
  await until(async () => (await up.active()) === 0, { timeout_ms: 5_000, message: 'the upstream request to be closed' });
  const page = await troupe.request('GET', `/v1/runs/${id}/events?limit=0`);
  const last = page.json.events.at(-1);
  assert.equal(last.type, 'error');
  assert.equal(last.content, 'Run cancelled');
});

scenario('/ready names the store, and on PostgreSQL GET /metrics times its pool (CJ-4, CJ-11)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: list_script } } });
  const ready = (await troupe.request('GET', '/ready')).json;
  assert.equal(ready.store.kind, on_postgres ? 'postgres' : 'sqlite', JSON.stringify(ready));
  assert.equal(ready.store.reachable, true);
  assert.ok(ready.store.schema_version >= 1, JSON.stringify(ready.store));
  const run_id = `pool-${process.pid}-${Date.now()}`;
  const res = await post_run(troupe, { messages: [user('What is in my workspace?')], metadata: { run_id } });
  assert.equal(res.status, 200, res.text);
  assert.equal((await wait_terminal(troupe, run_id)).status, 'completed');
  const text = (await troupe.request('GET', '/metrics')).text;
  const sample = (series) => {
    const line = text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
  };
  const statements = sample('troupe_store_pg_seconds_count{of="statement"}');
  const waits = sample('troupe_store_pg_seconds_count{of="pool_wait"}');
  const transactions = sample('troupe_store_pg_transactions_total');
  const messages = sample('troupe_store_pg_messages_total');
  if (on_postgres) {
    assert.ok(statements > 0 && transactions > 0 && waits > 0, `the pool was measured:\n${text}`);
    assert.ok(messages >= transactions, 'a transaction carries one message or more');
    assert.ok(waits >= messages, 'every message carried out waited for its connection first');
  } else {
    assert.equal(statements + transactions + waits, 0, 'SQLite has no pool to measure');
  }
});
