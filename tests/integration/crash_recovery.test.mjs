// Crash recovery (AS-83, AS-54, AS-51, AS-56): runs left `running` by a process killed with SIGKILL
// are recovered at once by the next `troupe serve` on the same data dir; the retried attempt continues
// the same event log. (Two live processes on one data dir are refused: lifecycle.test.mjs.)
import assert from 'node:assert/strict';
import { check_event_stream, get_run, open_sse, scenario, until, user, wait_run } from './harness.mjs';
import {
  all_events, check_recovered_log, kill9, post_run, recovered_error, terminal, types, wait_all,
} from './run_checks.mjs';

scenario('50 background runs interrupted by kill -9 are recovered at once by the next process and each completes with one contiguous log (AS-83, AS-51)', async (s) => {
  const config = {
    service: { run_concurrency: 0, run_max_attempts: 3 },
    model: {
      script: [
        { content: 'Looking first.', delay_ms: 100, tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }] },
        { content: 'Finished after a long think.', delay_ms: 8000 },
      ],
    },
  };
  const first = await s.troupe({ config });
  const ids = [];
  for (let i = 0; i < 50; i++) {
    const id = `crash-${String(i).padStart(2, '0')}`;
    await post_run(first, { messages: [user(`run ${i}`)], metadata: { run_id: id } });
    ids.push(id);
  }

  // run_concurrency 0 is unlimited: all 50 run at once, each inside its 8 s second step.
  await wait_all(first, ids, (r) => r.status === 'running' && r.event_count >= 4,
    { timeout_ms: 30_000, message: 'all 50 runs to be running past their first tool step' });
  const before = new Map();
  for (const id of ids) before.set(id, await all_events(first, id));
  await kill9(first);
  for (const [id, ev] of before) {
    assert.ok(ev.length >= 4, `${id} had events before the crash`);
    assert.ok(!ev.some((e) => e.type === 'session_end' || e.type === 'error'), `${id} was mid-run: ${types(ev)}`);
  }

  const second = await s.troupe({ config, data_dir: first.data_dir });
  // The startup sweep requeues every run the dead process left running (attempt 2 takes 8 s).
  const swept = await wait_all(second, ids, (r) => r.last_error === recovered_error || terminal.has(r.status),
    { timeout_ms: 10_000, message: 'every interrupted run to be recovered with last_error' });
  for (const id of ids) {
    const r = swept.get(id);
    assert.equal(r.last_error, recovered_error, `${id} was recovered: ${JSON.stringify(r)}`);
    assert.ok(r.status === 'queued' || r.status === 'running', `${id} is queued or on its next attempt: ${r.status}`);
  }

  const done = await wait_all(second, ids, (r) => terminal.has(r.status),
    { timeout_ms: 60_000, message: 'every run to be terminal' });
  for (const id of ids) {
    const run = done.get(id);
    assert.equal(run.status, 'completed', `${id}: ${JSON.stringify(run)}`);
    assert.equal(run.attempts, 2, `${id} ran twice: ${JSON.stringify(run)}`);
    // AS-54 + AS-83: attempt 1 start, the recovery sweep, attempt 2 start.
    assert.equal(run.lease_epoch, 3, `${id}: lease_epoch ${run.lease_epoch}`);
    const events = await all_events(second, id);
    assert.equal(run.event_count, events.length, `${id}: event_count is the log length`);
    const parts = check_recovered_log(run, events);
    assert.equal(parts.length, 2, `${id}: two attempts in one log: ${types(events)}`);
    assert.deepEqual(events.slice(0, before.get(id).length), before.get(id),
      `${id}: the log written before the crash is kept as it was`);
    const end = events[events.length - 1];
    assert.equal(end.type, 'session_end', `${id}: the log ends with session_end: ${types(events)}`);
    assert.equal(end.content, 'Finished after a long think.');
    assert.equal(parts[1][0].content, events[0].content, `${id}: the retry re-executes the same request`);
  }
});

scenario('a run still queued at the crash runs once after restart while the running one is recovered (AS-83, AS-53)', async (s) => {
  const config = {
    service: { run_concurrency: 1, run_max_attempts: 3 },
    model: { script: [{ content: 'quick' }], scripts: { slow: [{ content: 'slow but sure', delay_ms: 4000 }] } },
  };
  const first = await s.troupe({ config });
  await post_run(first, { messages: [user('slow')], model: 'scripted:slow', metadata: { run_id: 'cq-running' } });
  await until(async () => {
    const r = await get_run(first, 'cq-running');
    return r.status === 'running' && r.event_count >= 1;
  }, { timeout_ms: 20_000, interval_ms: 20, message: 'cq-running to start' });
  await post_run(first, { messages: [user('queued')], metadata: { run_id: 'cq-queued' } });
  assert.equal((await get_run(first, 'cq-queued')).status, 'queued');
  await kill9(first);

  const second = await s.troupe({ config, data_dir: first.data_dir });
  // The startup sweep requeues the interrupted run (its attempt 2 then takes 4 s).
  const swept = await until(async () => {
    const r = await get_run(second, 'cq-running');
    return (r.last_error === recovered_error || terminal.has(r.status)) && r;
  }, { timeout_ms: 10_000, interval_ms: 20, message: 'cq-running to be recovered' });
  assert.equal(swept.last_error, recovered_error, JSON.stringify(swept));
  const done = await wait_all(second, ['cq-running', 'cq-queued'], (r) => terminal.has(r.status),
    { timeout_ms: 60_000, message: 'both runs to finish' });

  const running = done.get('cq-running');
  assert.equal(running.status, 'completed', JSON.stringify(running));
  assert.equal(running.attempts, 2);
  const r_parts = check_recovered_log(running, await all_events(second, 'cq-running'));
  assert.equal(r_parts.length, 2);
  // AS-14: the interrupted first attempt ends with the error recovery stored for it
  const first_end = r_parts[0][r_parts[0].length - 1];
  assert.equal(first_end.type, 'error', types(r_parts[0]));
  assert.equal(first_end.content, recovered_error);
  assert.equal(first_end.metadata.error_type, 'lease_expired');

  const queued = done.get('cq-queued');
  assert.equal(queued.status, 'completed', JSON.stringify(queued));
  assert.equal(queued.attempts, 1, 'a queued run was never running: nothing to recover');
  assert.equal(queued.last_error, null);
  const q_events = await all_events(second, 'cq-queued');
  const q_parts = check_recovered_log(queued, q_events);
  assert.equal(q_parts.length, 1, types(q_events));
  assert.equal(q_events[q_events.length - 1].content, 'quick');
});

scenario('a run interrupted on its last allowed attempt is failed by recovery with Run lease expired and no attempts remain (AS-83)', async (s) => {
  const config = {
    service: { run_concurrency: 0, run_max_attempts: 1 },
    model: { script: [{ content: 'never finished', delay_ms: 60_000 }] },
  };
  const first = await s.troupe({ config });
  await post_run(first, { messages: [user('one shot')], metadata: { run_id: 'last-chance' } });
  await until(async () => {
    const r = await get_run(first, 'last-chance');
    return r.status === 'running' && r.event_count >= 1;
  }, { timeout_ms: 20_000, interval_ms: 20, message: 'the run to start' });
  await kill9(first);

  const second = await s.troupe({ config, data_dir: first.data_dir });
  const run = await until(async () => {
    const r = await get_run(second, 'last-chance');
    return terminal.has(r.status) && r;
  }, { timeout_ms: 10_000, interval_ms: 20, message: 'the startup sweep to fail the run' });
  assert.equal(run.status, 'failed', JSON.stringify(run));
  assert.equal(run.error, 'Run lease expired and no attempts remain');
  assert.equal(run.attempts, 1, 'no second attempt');
  assert.equal(run.lease_epoch, 2, 'the sweep bumped the epoch (AS-83)');
  const events = await all_events(second, 'last-chance');
  const parts = check_recovered_log(run, events);
  assert.equal(parts.length, 1, `no new attempt was started: ${types(events)}`);
  assert.ok(!events.some((e) => e.type === 'session_end'));
  const last = events[events.length - 1];
  assert.equal(last.type, 'error', `the failed run's log ends with its error (AS-14): ${types(events)}`);
  assert.equal(last.content, 'Run lease expired and no attempts remain');
  assert.equal(run.event_count, events.length);
});

async function replay_stream(troupe, run_id) {
  const stream = await open_sse(`${troupe.url}/v1/runs/${encodeURIComponent(run_id)}/stream`, { method: 'GET' });
  assert.equal(stream.status, 200, stream.body);
  const { frames } = await stream.finished;
  return check_event_stream(frames, { run_id });
}

scenario('a chat run killed while it waits on an approval is failed by recovery: its stream replays a terminal error and ends, and its approval can no longer be approved (AS-14, AS-48, AS-81, AS-83, AS-90)', async (s) => {
  const config = {
    model: { script: [{ content: 'Removing it.', tool_calls: [{ name: 'exec', arguments: { command: 'rm keep.txt' } }] }, { content: 'done' }] },
  };
  const first = await s.troupe({ config });
  const chat = await first.stream({ messages: [user('remove keep.txt')], user_key: 'pska:gone', metadata: { run_id: 'chat-gone' } });
  assert.equal(chat.status, 200, chat.body);
  const ask = (await chat.wait_for((f) => f.event === 'ask_user', 20_000)).json;
  const id = ask.approval_request_id;
  await kill9(first);

  const second = await s.troupe({ config, data_dir: first.data_dir });
  // On SQLite the next process recovers at start; on PostgreSQL once the dead node is declared so.
  const run = await wait_run(second, 'chat-gone', (r) => r.status !== 'running',
    { timeout_ms: 10_000, message: 'chat-gone to be recovered' });
  assert.equal(run.status, 'failed', JSON.stringify(run));
  const events = await replay_stream(second, 'chat-gone');
  const last = events[events.length - 1];
  assert.equal(last.type, 'error', `the replay ends with the run's error: ${types(events)}`);
  assert.equal(last.content, 'Run lease expired and no attempts remain');
  assert.equal(last.sequence, ask.sequence + 1);
  assert.equal(run.event_count, events.length);

  const approve = await second.request('POST', `/v1/approvals/${id}/approve`, { body: {} });
  assert.equal(approve.status, 404, approve.text);
  assert.equal(approve.json.detail, 'Approval request not found or already resolved');
  const record = (await second.request('GET', `/v1/approvals/${id}`)).json.approval;
  assert.equal(record.status, 'denied', JSON.stringify(record));
  assert.equal(record.resolution_reason, 'run_terminated');
  assert.equal(record.approved, false);
});
