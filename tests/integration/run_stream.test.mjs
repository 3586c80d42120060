// GET /v1/runs/{run_id}/stream: the resumable run stream (AS-74) with its SSE ids (AS-73) and
// heartbeats (AS-75), for background runs and for chat runs (AS-91).
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import {
  scenario, check_event_stream, event_keys, get_run, open_sse, timestamp_re, until, user, wait_run,
} from './harness.mjs';

const terminal = new Set(['completed', 'failed', 'cancelled']);

// Several slow tool steps, so a run's events arrive over a couple of seconds.
const ticking_script = [
  ...Array.from({ length: 6 }, (_, i) => ({
    content: `Step ${i + 1}.`, delay_ms: 150, tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }],
  })),
  { content: 'Ticked six times.', delay_ms: 150 },
];

function open_run_stream(troupe, run_id, { query = '', headers = {} } = {}) {
  return open_sse(`${troupe.url}/v1/runs/${encodeURIComponent(run_id)}/stream${query}`, { method: 'GET', headers });
}

// The frame rules of a (possibly resumed) run stream: every event frame has `id:` equal to its payload
// sequence (AS-73) and `event:` equal to its type, sequences are contiguous from `from`, the stream
// ends with one `done` frame without id, and nothing follows it. Returns the payloads.
function check_run_frames(frames, { from = 0, run_id } = {}) {
  const events = frames.filter((f) => f.event !== undefined);
  const raw = () => frames.map((f) => f.raw).join('\n\n');
  assert.ok(events.length >= 1, `the stream carries at least done: ${raw()}`);
  const last = events[events.length - 1];
  assert.equal(last.event, 'done', `the stream ends with event: done: ${raw()}`);
  assert.equal(last.data, '[DONE]');
  assert.equal(last.id, undefined, 'the done frame carries no id (AS-73)');
  assert.equal(frames[frames.length - 1], last, 'nothing follows the done frame');
  const payloads = events.slice(0, -1).map((f, i) => {
    assert.ok(f.json, `frame ${i} carries one JSON payload: ${f.raw}`);
    const e = f.json;
    for (const k of event_keys) assert.ok(k in e, `event ${e.sequence} has key ${k}`);
    assert.equal(f.id, String(e.sequence), `id: equals the payload sequence (AS-73): ${f.raw}`);
    assert.equal(f.event, e.type, 'event: names the payload type');
    assert.equal(e.sequence, from + i, `sequences continue from ${from} without gap or repeat: ${events.map((x) => x.id)}`);
    assert.match(e.timestamp, timestamp_re);
    if (run_id !== undefined) assert.equal(e.run_id, run_id);
    return e;
  });
  for (const f of frames.filter((x) => x.event === undefined))
    assert.equal(f.id, undefined, `a heartbeat carries no id: ${f.raw}`);
  return payloads;
}

async function post_run(troupe, body) {
  const res = await troupe.request('POST', '/v1/runs', { body });
  assert.equal(res.status, 200, `POST /v1/runs: ${res.text}`);
  return res.json;
}

const wait_terminal = (troupe, run_id) => wait_run(troupe, run_id, (r) => terminal.has(r.status), { message: 'a terminal status' });

async function all_events(troupe, run_id) {
  const res = await troupe.request('GET', `/v1/runs/${encodeURIComponent(run_id)}/events?limit=0`);
  assert.equal(res.status, 200, res.text);
  return res.json.events;
}

// Resolves with the stream's end, or rejects if it has not ended within ms.
function ended_within(stream, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: the stream did not end within ${ms} ms; frames:\n` +
      stream.frames.map((f) => f.raw).join('\n\n'))), ms);
  });
  return Promise.race([stream.finished, late]).finally(() => clearTimeout(timer));
}

scenario('a run stream cut after event 5 resumes with Last-Event-ID: 5 at event 6 with nothing missing or repeated (AS-74, AS-73)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: ticking_script } } });
  const { run_id, session_id } = await post_run(troupe, { messages: [user('tick')] });

  const first = await open_run_stream(troupe, run_id);
  assert.equal(first.status, 200, first.body);
  assert.match(first.headers['content-type'], /^text\/event-stream/);
  assert.equal(first.headers['x-fastreact-run-id'], run_id);
  assert.equal(first.headers['x-fastreact-session-id'], session_id);
  assert.equal(first.headers['x-fastreact-event-schema'], 'fastreact.agent_event.v1');
  await first.wait_for((f) => f.id === '5', 20_000);
  first.abort();
  const before = first.frames.filter((f) => f.event !== undefined && Number(f.id) <= 5);
  before.forEach((f, i) => {
    assert.equal(f.id, String(i), `the first stream delivered 0..5 in order: ${before.map((x) => x.id)}`);
    assert.equal(f.json.sequence, i, 'id: equals the payload sequence (AS-73)');
    assert.equal(f.event, f.json.type);
  });
  assert.equal(before.length, 6);

  const snap = await get_run(troupe, run_id);
  s.t.diagnostic(`at reconnect the run is ${snap.status} with ${snap.event_count} events stored`);

  // Last-Event-ID wins over ?after_sequence (browsers resend the original URL).
  const second = await open_run_stream(troupe, run_id, { query: '?after_sequence=1', headers: { 'last-event-id': '5' } });
  assert.equal(second.status, 200, second.body);
  const { frames } = await second.finished;
  const after = check_run_frames(frames, { from: 6, run_id });
  assert.ok(after.length > 0, 'events follow the cursor');
  const last = after[after.length - 1];
  assert.equal(last.type, 'session_end', 'the stream ends with the terminal event, then done');
  assert.equal(last.content, 'Ticked six times.');

  const stored = await all_events(troupe, run_id);
  assert.deepEqual([...before.map((f) => f.json), ...after], stored,
    'the two streams together are exactly the stored log');
  assert.equal((await get_run(troupe, run_id)).status, 'completed');
});

scenario('a run stream tails live events after the replay and sends heartbeats while the run is quiet (AS-74, AS-75)', async (s) => {
  const troupe = await s.troupe({
    config: {
      service: { sse_heartbeat_seconds: 0.2 },
      model: {
        script: [
          { content: 'Looking first.', tool_calls: [{ name: 'list_dir', arguments: {} }] },
          { content: 'after a long pause', delay_ms: 2500 },
        ],
      },
    },
  });
  const { run_id } = await post_run(troupe, { messages: [user('pause')] });
  // Wait until the first step's tool_result is stored: the run is then inside the 2.5 s pause.
  await until(async () => (await all_events(troupe, run_id)).some((e) => e.type === 'tool_result'),
    { timeout_ms: 20_000, interval_ms: 20, message: 'the first step to be stored' });
  const stored = await all_events(troupe, run_id);

  const stream = await open_run_stream(troupe, run_id, { query: '?after_sequence=0' });
  assert.equal(stream.status, 200, stream.body);
  const replay_last = stored[stored.length - 1].sequence;
  await stream.wait_for((f) => f.id === String(replay_last), 5000);
  const mid = await get_run(troupe, run_id);
  assert.equal(mid.status, 'running', 'the replay arrived while the run was still running');

  const { frames } = await stream.finished;
  const events = check_run_frames(frames, { from: 1, run_id });
  assert.ok(events.length > stored.length - 1, 'events written after the stream opened arrived live');
  assert.equal(events[events.length - 1].type, 'session_end');
  assert.equal(events[events.length - 1].content, 'after a long pause');
  assert.deepEqual(events, (await all_events(troupe, run_id)).slice(1), 'the stream equals the stored log after the cursor');
  const beats = frames.filter((f) => f.event === undefined && f.comment !== undefined);
  assert.ok(beats.length >= 2, `at least two heartbeats in a 2.5 s pause: ${frames.map((f) => f.raw).join(' | ')}`);
  for (const b of beats) {
    assert.equal(b.raw, ': keepalive');
    assert.equal(b.id, undefined, 'heartbeats carry no id');
  }
});

scenario('the stream of an ended run replays from ?after_sequence or from the start and sends done at once (AS-74)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: ticking_script.map((t) => ({ ...t, delay_ms: 0 })) } } });
  const session_id = 'C0FFEE00-1234-4ABC-8DEF-0123456789AB';
  const { run_id } = await post_run(troupe, { messages: [user('quick ticks')], session_id });
  assert.equal((await wait_terminal(troupe, run_id)).status, 'completed');
  const stored = await all_events(troupe, run_id);
  const n = stored.length;
  assert.ok(n > 8, `a long enough log: ${n}`);

  const t0 = performance.now();
  const whole = await open_run_stream(troupe, run_id);
  assert.equal(whole.status, 200, whole.body);
  assert.match(whole.headers['content-type'], /^text\/event-stream/);
  assert.equal(whole.headers['cache-control'], 'no-cache');
  assert.equal(whole.headers['x-fastreact-run-id'], run_id);
  assert.equal(whole.headers['x-fastreact-session-id'], session_id);
  assert.equal(whole.headers['x-fastreact-event-schema'], 'fastreact.agent_event.v1');
  const { frames } = await ended_within(whole, 5000, 'an ended run');
  s.t.diagnostic(`replay of an ended run finished in ${(performance.now() - t0).toFixed(1)} ms`);
  const events = check_event_stream(frames, { run_id, session_id });
  assert.deepEqual(events, stored, 'the replay is the stored log');

  const from3 = await open_run_stream(troupe, run_id, { query: '?after_sequence=3' });
  assert.equal(from3.status, 200, from3.body);
  const tail = check_run_frames((await ended_within(from3, 5000, '?after_sequence=3')).frames, { from: 4, run_id });
  assert.deepEqual(tail, stored.slice(4), '?after_sequence is exclusive');

  const header = await open_run_stream(troupe, run_id, { headers: { 'last-event-id': String(n - 3) } });
  const last_two = check_run_frames((await ended_within(header, 5000, 'Last-Event-ID')).frames, { from: n - 2, run_id });
  assert.deepEqual(last_two.map((e) => e.sequence), [n - 2, n - 1]);

  const at_end = await open_run_stream(troupe, run_id, { headers: { 'last-event-id': String(n - 1) } });
  const nothing = check_run_frames((await ended_within(at_end, 5000, 'a cursor at the end')).frames, { from: n });
  assert.deepEqual(nothing, [], 'a cursor at the last event gets only done');
});

scenario('a run stream answers 400 for a non-integer Last-Event-ID and 404 for an unknown run (AS-74)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'short' }] } } });
  const { run_id } = await post_run(troupe, { messages: [user('short')] });
  await wait_terminal(troupe, run_id);

  for (const bad of ['abc', '1.5', '5x']) {
    const res = await troupe.request('GET', `/v1/runs/${run_id}/stream`, { headers: { 'last-event-id': bad, accept: 'text/event-stream' } });
    assert.equal(res.status, 400, `Last-Event-ID ${bad}: ${res.text}`);
    assert.deepEqual(res.json, { detail: 'Last-Event-ID must be an integer' }, `Last-Event-ID ${bad}`);
  }
  const unknown = await troupe.request('GET', '/v1/runs/no-such-run/stream', { headers: { accept: 'text/event-stream' } });
  assert.equal(unknown.status, 404, unknown.text);
  assert.deepEqual(unknown.json, { detail: 'Run not found' });
  // The header is checked as a cursor even with a valid query cursor.
  const both = await troupe.request('GET', `/v1/runs/${run_id}/stream?after_sequence=0`, { headers: { 'last-event-id': 'abc' } });
  assert.equal(both.status, 400, both.text);
  // AS-2: a non-integer integer query parameter is 422.
  const query = await troupe.request('GET', `/v1/runs/${run_id}/stream?after_sequence=abc`);
  assert.equal(query.status, 422, query.text);
});

scenario('a client following a run stream sees the cancel error event and then done (AS-74, AS-52, AS-90)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'never seen', delay_ms: 60_000 }] } } });
  const { run_id } = await post_run(troupe, { messages: [user('wait forever')] });
  const stream = await open_run_stream(troupe, run_id);
  assert.equal(stream.status, 200, stream.body);
  await stream.wait_for((f) => f.event === 'session_start', 20_000);
  const cancel = await troupe.request('POST', `/v1/runs/${run_id}/cancel`);
  assert.equal(cancel.status, 200, cancel.text);
  const { frames } = await ended_within(stream, 5000, 'a cancelled run');
  const events = check_event_stream(frames, { run_id });
  const last = events[events.length - 1];
  assert.equal(last.type, 'error');
  assert.equal(last.content, 'Run cancelled');
  assert.equal(last.metadata.error_type, 'CancelledError');
  assert.deepEqual(events, await all_events(troupe, run_id), 'the live copy equals the stored log');
});

scenario('a chat run can be replayed through the run stream (AS-91, AS-74)', async (s) => {
  const troupe = await s.troupe();
  const chat = await troupe.chat({ messages: [user('What is in my workspace?')] });
  assert.equal(chat.status, 200, chat.text);
  const { run_id, session_id } = chat.json;
  const stream = await open_run_stream(troupe, run_id);
  assert.equal(stream.status, 200, stream.body);
  assert.equal(stream.headers['x-fastreact-run-id'], run_id);
  const { frames } = await ended_within(stream, 5000, 'an ended chat run');
  const events = check_event_stream(frames, { run_id, session_id });
  assert.deepEqual(events, chat.json.events, 'the replay equals the events the chat client received');

  // A streamed chat that the client leaves with on_disconnect continue can be resumed (AS-11, AS-74).
  const troupe2 = await s.troupe({
    config: {
      model: {
        script: [
          { content: 'One.', delay_ms: 300, tool_calls: [{ name: 'list_dir', arguments: {} }] },
          { content: 'Two.', delay_ms: 300, tool_calls: [{ name: 'list_dir', arguments: {} }] },
          { content: 'Finished without you.', delay_ms: 300 },
        ],
      },
    },
  });
  const live = await troupe2.stream({ messages: [user('keep going')], on_disconnect: 'continue' });
  assert.equal(live.status, 200);
  const chat_run = live.headers['x-fastreact-run-id'];
  await live.wait_for((f) => f.id === '1', 20_000);
  live.abort();
  const seen = live.frames.filter((f) => f.event !== undefined && Number(f.id) <= 1);
  assert.deepEqual(seen.map((f) => f.id), ['0', '1']);
  const resumed = await open_run_stream(troupe2, chat_run, { headers: { 'last-event-id': '1' } });
  assert.equal(resumed.status, 200, resumed.body);
  const rest = check_run_frames((await resumed.finished).frames, { from: 2, run_id: chat_run });
  assert.equal(rest[rest.length - 1].type, 'session_end');
  assert.equal(rest[rest.length - 1].content, 'Finished without you.');
  assert.deepEqual([...seen.map((f) => f.json), ...rest], await all_events(troupe2, chat_run));
  assert.equal((await get_run(troupe2, chat_run)).run_kind, 'chat');
});
