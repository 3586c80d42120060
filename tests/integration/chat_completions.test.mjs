// POST /v1/chat/completions end to end against the scripted demo model: the SSE stream (AS-11,
// AS-12, AS-13, AS-14, AS-73, AS-78) and the non-streaming summary (AS-15, AS-79, AS-10).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  scenario, check_event_stream, check_attempt_order, event_keys, timestamp_re, user,
} from './harness.mjs';

const uuid4_re = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

scenario('a streamed chat completion of the scripted demo emits a well-formed event stream ending in done', async (s) => {
  const troupe = await s.troupe();
  const stream = await troupe.stream({ messages: [user('What is in my workspace?')] });
  const { frames } = await stream.finished;

  // AS-11: status and headers.
  assert.equal(stream.status, 200);
  assert.match(stream.headers['content-type'], /^text\/event-stream/);
  assert.equal(stream.headers['cache-control'], 'no-cache');
  assert.equal(stream.headers.connection, 'keep-alive');
  assert.equal(stream.headers['x-fastreact-event-schema'], 'fastreact.agent_event.v1');
  const run_id = stream.headers['x-fastreact-run-id'];
  const session_id = stream.headers['x-fastreact-session-id'];
  assert.ok(run_id, 'X-FastReAct-Run-ID is set');
  assert.ok(session_id, 'X-FastReAct-Session-ID is set');
  assert.match(run_id, uuid4_re, 'without metadata.run_id the run id is a UUIDv4 (AS-10)');
  assert.match(session_id, uuid4_re, 'without a session_id one is generated (AS-9)');

  // AS-11, AS-12, AS-73, AS-78: frames, ids, sequences, parents, keys, timestamps; done without id.
  const events = check_event_stream(frames, { run_id, session_id });

  // AS-14: session_start, think, tool_call, step_end, tool_result, …, session_end.
  const steps = check_attempt_order(events);
  const types = events.map((e) => e.type);
  for (const t of ['session_start', 'think', 'tool_call', 'step_end', 'tool_result', 'session_end'])
    assert.ok(types.includes(t), `the demo shows a ${t} event: ${types.join(', ')}`);
  assert.ok(steps[0].calls.length > 0, 'the demo first step calls tools');

  // AS-13: per-type content and metadata.
  const start = events[0];
  assert.equal(start.content, 'What is in my workspace?', 'session_start carries the query');
  for (const k of ['skills', 'missing_skills', 'tool_policy', 'visible_tools', 'attempt', 'model', 'timing'])
    assert.ok(k in start.metadata, `session_start.metadata has ${k}`);
  assert.equal(typeof start.metadata.timing.time_to_first_event_ms, 'number');
  for (const t of ['exec', 'read_file', 'write_file', 'edit_file', 'list_dir'])
    assert.ok(start.metadata.visible_tools.includes(t), `visible_tools lists ${t}`);

  for (const e of events.filter((x) => x.type === 'tool_call')) {
    assert.equal(e.content, `Calling ${e.tool_name}`);
    assert.equal(typeof e.tool_args, 'object');
    assert.ok(e.tool_call_id, 'tool_call has a tool_call_id');
    assert.equal(e.metadata.call_id, e.tool_call_id);
  }
  for (const e of events.filter((x) => x.type === 'tool_result')) {
    assert.equal(typeof e.duration_ms, 'number', 'tool_result has duration_ms');
    assert.ok('duration_ms' in e.metadata && 'decision_level' in e.metadata && 'approved' in e.metadata &&
      'request_id' in e.metadata, `tool_result.metadata has duration_ms, decision_level, approved, request_id: ${JSON.stringify(e.metadata)}`);
    assert.ok(!e.content.startsWith('[ERROR]'), `the demo's tools succeed: ${e.content}`);
  }
  for (const e of events.filter((x) => x.type === 'step_end')) {
    assert.equal(typeof e.metadata.step, 'number');
    assert.equal(typeof e.metadata.has_tool_calls, 'boolean');
    for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens'])
      assert.equal(typeof e.metadata.llm_usage[k], 'number', `step_end.metadata.llm_usage.${k}`);
    assert.ok('model' in e.metadata);
  }
  assert.deepEqual(events.filter((x) => x.type === 'step_end').map((e) => e.metadata.step),
    steps.map((_, i) => i + 1), 'step_end once per step, numbered from 1 (AS-96)');
  const end = events[events.length - 1];
  assert.equal(end.type, 'session_end');
  assert.equal(end.metadata.stop_reason, 'final_answer');
  assert.equal(end.metadata.status, 'completed');
  assert.equal(typeof end.metadata.timing.time_to_final_ms, 'number');
  assert.ok(end.metadata.llm_usage_total, 'session_end.metadata.llm_usage_total');
  assert.ok(end.content.length > 0, 'the demo gives a final answer');

  // The demo's write_file really wrote into the anonymous user's workspace (AS-26, AS-29).
  const ws = troupe.workspace('', 'anonymous');
  for (const call of events.filter((x) => x.type === 'tool_call' && x.tool_name === 'write_file')) {
    const file = path.join(ws, call.tool_args.path);
    assert.equal(fs.readFileSync(file, 'utf8'), call.tool_args.content, `${file} holds what write_file wrote`);
  }
});

scenario('a non-streaming chat completion returns the summary with every AS-15 field', async (s) => {
  const troupe = await s.troupe();
  const res = await troupe.chat({ messages: [user('Summarise my workspace')] });
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  const sum = res.json;
  for (const k of ['type', 'run_id', 'session_id', 'content', 'events', 'tool_calls', 'duration_ms', 'metadata',
    'status', 'cited_source_ids'])
    assert.ok(k in sum, `summary has ${k}: ${res.text}`);
  assert.equal(sum.type, 'chat.completion');
  assert.equal(sum.status, 'completed');
  assert.ok(!('error' in sum) || sum.error === null, 'no error on a completed run');
  assert.equal(typeof sum.duration_ms, 'number');
  assert.deepEqual(sum.metadata, { schema: 'fastreact.agent_event.v1', event_count: sum.events.length });
  assert.ok(Array.isArray(sum.cited_source_ids));

  const events = sum.events;
  events.forEach((e, i) => {
    for (const k of event_keys) assert.ok(k in e, `summary event ${i} has ${k}`);
    assert.equal(e.sequence, i);
    assert.equal(e.run_id, sum.run_id);
    assert.equal(e.session_id, sum.session_id);
    assert.match(e.timestamp, timestamp_re);
  });
  check_attempt_order(events);
  const end = events[events.length - 1];
  assert.equal(end.type, 'session_end');
  assert.equal(sum.content, end.content, 'content is the session_end content');

  const calls = events.filter((e) => e.type === 'tool_call');
  assert.ok(calls.length > 0);
  assert.deepEqual(sum.tool_calls, calls.map((e) => ({
    event_id: e.event_id, tool_call_id: e.tool_call_id, tool_name: e.tool_name, tool_args: e.tool_args,
  })), 'tool_calls lists every tool_call event');
});

scenario('the caller session_id is echoed byte for byte and metadata.run_id becomes the run id', async (s) => {
  const troupe = await s.troupe();
  // Upper-case hex: a valid UUIDv4 that a normalising implementation would rewrite (AS-79).
  const session_id = '3F2504E0-4F89-41D3-9A0C-0305E82C3301';
  const run_id = `it-run-${process.pid}-${Date.now()}`;
  const res = await troupe.chat({
    messages: [user('hello')], session_id, metadata: { run_id, caller: 'integration-test', custom: { a: 1 } },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.session_id, session_id);
  assert.equal(res.json.run_id, run_id);
  for (const e of res.json.events) {
    assert.equal(e.session_id, session_id, `event ${e.sequence} keeps the session_id`);
    assert.equal(e.run_id, run_id);
    assert.equal(e.event_id, `${run_id}:${e.sequence}`);
  }
  for (const c of res.json.tool_calls) assert.ok(c.event_id.startsWith(`${run_id}:`));

  // The same over SSE, headers included.
  const stream_session = '9C1D7E2A-0B3F-4E5D-8A6B-7C8D9E0F1A2B';
  const stream_run = `${run_id}-sse`;
  const stream = await troupe.stream({ messages: [user('hello')], session_id: stream_session, metadata: { run_id: stream_run } });
  const { frames } = await stream.finished;
  assert.equal(stream.status, 200);
  assert.equal(stream.headers['x-fastreact-session-id'], stream_session);
  assert.equal(stream.headers['x-fastreact-run-id'], stream_run);
  check_event_stream(frames, { run_id: stream_run, session_id: stream_session });
});

scenario('a quiet stream carries keepalive comments that have no id and are not events', async (s) => {
  // AS-75: after service.sse_heartbeat_seconds without a frame troupe writes `: keepalive`.
  const troupe = await s.troupe({
    config: { service: { sse_heartbeat_seconds: 0.2 }, model: { script: [{ content: 'after a pause', delay_ms: 1200 }] } },
  });
  const stream = await troupe.stream({ messages: [user('pause')] });
  const { frames } = await stream.finished;
  assert.equal(stream.status, 200);
  const beats = frames.filter((f) => f.comment !== undefined && f.event === undefined);
  assert.ok(beats.length >= 2, `at least two heartbeats in a 1.2 s pause: ${frames.map((f) => f.raw).join(' | ')}`);
  for (const b of beats) {
    assert.equal(b.raw, ': keepalive');
    assert.equal(b.id, undefined);
  }
  const events = check_event_stream(frames.filter((f) => f.comment === undefined));
  assert.deepEqual(events.map((e) => e.sequence), events.map((_, i) => i), 'heartbeats take no sequence');
  assert.equal(events[events.length - 1].content, 'after a pause');
});

scenario('the query is the last non-empty user message and text parts are joined with newlines', async (s) => {
  // AS-9, AS-10.
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'You said: {{query}}' }] } } });
  const res = await troupe.chat({
    messages: [
      user('an earlier question'),
      { role: 'assistant', content: 'an earlier answer' },
      { role: 'user', content: [{ type: 'text', text: 'first part' }, { type: 'text', text: 'second part' }] },
      { role: 'assistant', content: 'dropped: after the query' },
      user(''),
    ],
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.events[0].content, 'first part\nsecond part');
  assert.equal(res.json.content, 'You said: first part\nsecond part');
});

scenario('a metadata.run_id naming a live run is refused 409 Run already exists', async (s) => {
  // AS-10.
  const troupe = await s.troupe({ config: { model: { scripts: { slow: [{ content: 'slow', delay_ms: 3000 }] } } } });
  const run_id = `live-${Date.now()}`;
  const first = await troupe.stream({ messages: [user('one')], model: 'scripted:slow', metadata: { run_id } });
  await first.wait_for((f) => f.event === 'session_start');
  const second = await troupe.chat({ messages: [user('two')], metadata: { run_id } });
  assert.equal(second.status, 409, second.text);
  assert.deepEqual(second.json, { detail: 'Run already exists' });
  const { frames } = await first.finished;
  const events = check_event_stream(frames, { run_id });
  assert.equal(events[events.length - 1].type, 'session_end', 'the live run is unaffected');
});

scenario('a metadata.run_id naming a terminal chat run reopens it as attempt 2 with the sequence continuing', async (s) => {
  // AS-10, AS-12: "If it names a terminal chat run, that run reopens (attempts+1, sequence continues)."
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'answer' }] } } });
  const run_id = `reopen-${Date.now()}`;
  const first = await troupe.chat({ messages: [user('one')], metadata: { run_id } });
  assert.equal(first.status, 200, first.text);
  const n = first.json.events.length;
  assert.equal(first.json.events[0].metadata.attempt, 1);

  const stream = await troupe.stream({ messages: [user('two')], metadata: { run_id } });
  const { frames } = await stream.finished;
  assert.equal(stream.status, 200, stream.body);
  const events = frames.filter((f) => f.event !== undefined && f.event !== 'done').map((f) => f.json);
  const start = events.find((e) => e.type === 'session_start');
  assert.ok(start, frames.map((f) => f.raw).join('\n'));
  assert.equal(start.metadata.attempt, 2, `the reopened run's session_start says attempt 2: ${JSON.stringify(start)}`);
  assert.equal(start.sequence, n, `the sequence continues after the first attempt's ${n} events: ${JSON.stringify(start)}`);
  assert.equal(start.parent_event_id, `${run_id}:${n - 1}`);
  for (const f of frames.filter((x) => x.json)) assert.equal(f.id, String(f.json.sequence));
});

scenario('a metadata.run_id naming another caller\'s finished chat run is refused 409 and leaves that run and its trace untouched', async (s) => {
  // AS-10, AS-84: only the caller's own terminal chat run reopens; tenants never touch each other's runs.
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'answer' }] } } });
  const run_id = `owned-${Date.now()}`;
  const owner = await troupe.chat({ messages: [user('mine')], user_key: 'acme:alice', metadata: { run_id } });
  assert.equal(owner.status, 200, owner.text);
  const run_before = (await troupe.request('GET', `/v1/runs/${run_id}`)).json;
  const trace_before = (await troupe.request('GET', `/v1/traces/${run_id}`)).json;

  for (const user_key of ['evil:mallory', 'acme:bob']) {
    const intruder = await troupe.chat({ messages: [user('overwrite')], user_key, metadata: { run_id } });
    assert.equal(intruder.status, 409, `${user_key}: ${intruder.text}`);
    assert.deepEqual(intruder.json, { detail: 'Run already exists' });
  }
  assert.deepEqual((await troupe.request('GET', `/v1/runs/${run_id}`)).json, run_before);
  assert.deepEqual((await troupe.request('GET', `/v1/traces/${run_id}`)).json, trace_before);

  const again = await troupe.chat({ messages: [user('mine again')], user_key: 'acme:alice', metadata: { run_id } });
  assert.equal(again.status, 200, again.text);
  assert.equal(again.json.events[0].metadata.attempt, 2, 'the owner still reopens it');
});
