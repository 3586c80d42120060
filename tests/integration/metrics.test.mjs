// GET /v1/metrics (AS-59) and GET /metrics (Prometheus text): durable counts come from the store and
// survive a restart; the Prometheus counters follow what the node did.
import assert from 'node:assert/strict';
import { scenario, timestamp_re, until, user } from './harness.mjs';

const fails_once = { model: { script: [{ content: 'done' }] } };

async function finished(troupe, n) {
  return until(async () => {
    const res = await troupe.request('GET', '/v1/runs?status=completed&limit=1');
    return res.json?.total_count === n;
  }, { timeout_ms: 20_000, message: `${n} completed runs` });
}

scenario('the metrics document has every AS-59 section and counts the stored runs and events', async (s) => {
  const troupe = await s.troupe({ config: fails_once });
  for (let i = 0; i < 3; i++) {
    const res = await troupe.request('POST', '/v1/runs', { body: { messages: [user(`run ${i}`)] } });
    assert.equal(res.status, 200, res.text);
  }
  const chat = await troupe.chat({ messages: [user('a chat run')] });
  assert.equal(chat.status, 200, chat.text);
  await finished(troupe, 4);

  const res = await troupe.request('GET', '/v1/metrics');
  assert.equal(res.status, 200, res.text);
  const m = res.json;
  assert.equal(m.schema, 'fastreact.metrics.v1');
  assert.equal(m.service_contract, 'fastreact.agent_event.v1');
  assert.match(m.timestamp, timestamp_re);
  for (const key of ['runs', 'events', 'tools', 'llm', 'integrations', 'approvals', 'tasks', 'errors', 'store'])
    assert.ok(key in m, `section ${key}: ${res.text}`);
  assert.equal(m.runs.durable.total_count, 4);
  assert.deepEqual(m.runs.durable.status_counts, { completed: 4 });
  assert.equal(m.runs.durable.running_count, 0);
  assert.equal(m.runs.durable.queued_count, 0);
  assert.equal(m.runs.trace_count, 4);
  assert.equal(typeof m.runs.avg_duration_ms, 'number');
  // The one-turn script emits session_start, think, step_end, session_end per run.
  assert.equal(m.events.total_count, 16);
  assert.equal(m.runs.durable.replay_event_count, 16);
  assert.equal(m.events.error_count, 0);
  assert.equal(m.tools.avg_duration_ms, null, 'no tool ran: the average of an empty set is null');
  assert.ok(m.llm.usage_total.total_tokens > 0);
  assert.equal(m.store.streams.runs.records, 4);
  assert.equal(m.store.streams.run_events.records, 12, 'the background runs\' events (AS-51)');
  assert.equal(m.store.streams.events.records, 4, 'the chat run\'s events (AS-91)');
  assert.ok(m.store.root.endsWith('troupe.db'), m.store.root);
  assert.equal(m.store.total_records,
    Object.values(m.store.streams).reduce((n, st) => n + st.records, 0));
});

scenario('durable metrics survive a restart while the Prometheus counters start over', async (s) => {
  const first = await s.troupe({ config: fails_once });
  const res = await first.request('POST', '/v1/runs', { body: { messages: [user('remember me')] } });
  assert.equal(res.status, 200, res.text);
  await finished(first, 1);
  const text = (await first.request('GET', '/metrics')).text;
  assert.match(text, /^troupe_run_attempts_total\{outcome="completed"\} 1$/m);
  assert.match(text, /^troupe_run_events_total\{type="session_end"\} 1$/m);
  assert.match(text, /^troupe_runs\{status="completed"\} 1$/m);
  assert.match(text, /^troupe_latency_seconds_count\{of="queued_to_running"\} 1$/m);
  assert.match(text, /^troupe_approvals\{status="pending"\} 0$/m);
  await first.stop('SIGTERM');

  const second = await s.troupe({ config: fails_once, data_dir: first.data_dir });
  const m = (await second.request('GET', '/v1/metrics')).json;
  assert.equal(m.runs.durable.total_count, 1);
  assert.equal(m.runs.live_count, 0);
  const again = (await second.request('GET', '/metrics')).text;
  assert.match(again, /^troupe_runs\{status="completed"\} 1$/m, 'the gauge reads the store');
  assert.doesNotMatch(again, /troupe_run_attempts_total\{outcome="completed"\} 1/, 'counters are per process');
});

scenario('the metrics endpoints require the service token when one is configured (AS-3)', async (s) => {
  const troupe = await s.troupe({ config: { service: { service_token: 'secret-token' } } });
  for (const route of ['/v1/metrics', '/metrics']) {
    assert.equal((await troupe.request('GET', route)).status, 401, route);
    const ok = await troupe.request('GET', route, { headers: { authorization: 'Bearer secret-token' } });
    assert.equal(ok.status, 200, `${route}: ${ok.text}`);
  }
});

scenario('a pending approval is counted by both metrics endpoints (AS-59)', async (s) => {
  const troupe = await s.troupe({
    config: { model: { script: [{ tool_calls: [{ name: 'exec', arguments: { command: 'rm nothing.txt' } }] }, { content: 'done' }] } },
  });
  const res = await troupe.request('POST', '/v1/runs', { body: { messages: [user('remove it')] } });
  assert.equal(res.status, 200, res.text);
  await until(async () => (await troupe.request('GET', '/v1/approvals?status=pending')).json?.total_count === 1,
    { timeout_ms: 10_000, message: 'the approval to be pending' });
  const m = (await troupe.request('GET', '/v1/metrics')).json;
  assert.equal(m.approvals.count, 1);
  assert.equal(m.approvals.pending_count, 1);
  assert.deepEqual(m.approvals.status_counts, { pending: 1 });
  assert.equal(m.tools.audit_count, 1, 'the approval request is audited');
  const text = (await troupe.request('GET', '/metrics')).text;
  assert.match(text, /^troupe_approvals\{status="pending"\} 1$/m);
});
