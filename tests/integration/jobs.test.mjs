// The jobs API (cluster-and-jobs.md §5, CJ-30 to CJ-40) against the real binary, driven as a worker in
// any language would: plain HTTP, long polls, lost answers, vanished clients, a kill -9.
import assert from 'node:assert/strict';
import http from 'node:http';
import { scenario, timestamp_re, until, wait_run } from './harness.mjs';
import { kill9 } from './run_checks.mjs';

// CJ-30: a job object's members, in order.
const job_keys = [
  'object', 'id', 'type', 'tenant_key', 'status', 'priority', 'payload', 'result', 'idempotency_key', 'attempt',
  'max_attempts', 'timeout_seconds', 'run_after', 'created_at', 'updated_at', 'started_at', 'completed_at',
  'cancelled_at', 'dead_at', 'worker_id', 'lease_epoch', 'lease_expires_at', 'last_error', 'errors', 'progress',
  'on_complete', 'on_complete_run_id', 'on_complete_error',
];

function check_job(job, what = 'job') {
  assert.deepEqual(Object.keys(job), job_keys, `${what} has CJ-30's members in order: ${JSON.stringify(job)}`);
  assert.equal(job.object, 'job');
  assert.match(job.id, /^job_[0-9a-f]{32}$/);
  for (const k of ['run_after', 'created_at', 'updated_at']) assert.match(job[k], timestamp_re, `${what}.${k}`);
  return job;
}

const service_token = 'jobs-it-service-token';
const op = { authorization: `Bearer ${service_token}` };
const quick = { jobs: { poll_seconds: 0.2, sweep_interval_seconds: 0.2, retry_base_seconds: 0 } };

async function enqueue(troupe, body, headers = op) {
  return troupe.request('POST', '/v1/jobs', { body, headers });
}

async function lease(troupe, body, headers = op) {
  return troupe.request('POST', '/v1/jobs/lease', { body: { worker_id: 'w-1', ...body }, headers });
}

scenario('a job goes from enqueue through lease, heartbeat and complete, and the reads show it (CJ-30 to CJ-35, CJ-39)', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token } } });
  const created = await enqueue(troupe, { type: 'email.send', payload: { to: 'a@example.com', n: 1.5 }, tenant_key: 'acme' });
  assert.equal(created.status, 201, created.text);
  check_job(created.json, 'the enqueued job');
  assert.equal(created.json.status, 'queued');
  assert.equal(created.json.attempt, 0);
  assert.deepEqual(created.json.payload, { to: 'a@example.com', n: 1.5 });

  const leased = await lease(troupe, { types: ['email.send'], lease_seconds: 30 });
  assert.equal(leased.status, 200, leased.text);
  assert.equal(leased.json.jobs.length, 1);
  const job = leased.json.jobs[0];
  assert.equal(job.id, created.json.id);
  assert.match(job.lease_token, /^lt_1_[0-9a-f]{32}$/);
  assert.equal(job.status, 'leased');
  assert.equal(job.attempt, 1);
  assert.equal(job.worker_id, 'w-1');

  const beat = await troupe.request('POST', `/v1/jobs/${job.id}/heartbeat`,
    { body: { lease_token: job.lease_token, progress: { done: 3, of: 10 } }, headers: op });
  assert.equal(beat.status, 200, beat.text);
  assert.deepEqual(Object.keys(beat.json), ['id', 'status', 'lease_epoch', 'lease_expires_at']);

  const done = await troupe.request('POST', `/v1/jobs/${job.id}/complete`,
    { body: { lease_token: job.lease_token, result: { message_id: 'm-1' } }, headers: op });
  assert.equal(done.status, 200, done.text);
  check_job(done.json, 'the completed job');
  assert.equal(done.json.status, 'completed');
  assert.deepEqual(done.json.result, { message_id: 'm-1' });
  assert.deepEqual(done.json.progress, { done: 3, of: 10 });
  // The worker lost that answer and completes again with the same token: the same job, unchanged.
  const again = await troupe.request('POST', `/v1/jobs/${job.id}/complete`,
    { body: { lease_token: job.lease_token, result: { message_id: 'm-2' } }, headers: op });
  assert.equal(again.status, 200, again.text);
  assert.deepEqual(again.json.result, { message_id: 'm-1' });

  const got = await troupe.request('GET', `/v1/jobs/${job.id}`, { headers: op });
  assert.equal(got.json.status, 'completed');
  const listed = await troupe.request('GET', '/v1/jobs?status=completed&limit=10', { headers: op });
  assert.equal(listed.status, 200, listed.text);
  assert.deepEqual(Object.keys(listed.json), ['object', 'jobs', 'count', 'limit', 'has_more', 'next_after']);
  assert.equal(listed.json.count, 1);
  const stats = await troupe.request('GET', '/v1/jobs/stats', { headers: op });
  assert.equal(stats.status, 200, stats.text);
  assert.equal(stats.json.types['email.send'].completed, 1);
  assert.equal((await troupe.request('GET', '/v1/jobs/job_00000000000000000000000000000000', { headers: op })).status, 404);
});

scenario('an idempotency key replays its job with Idempotent-Replayed, and another job under it is a 409 (CJ-31)', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token } } });
  const body = { type: 'email.send', payload: { a: 1, b: 2 }, idempotency_key: 'signup-42' };
  const first = await enqueue(troupe, body);
  assert.equal(first.status, 201, first.text);
  const replay = await enqueue(troupe, { ...body, payload: { b: 2, a: 1 } });
  assert.equal(replay.status, 200, replay.text);
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal(replay.json.id, first.json.id);
  const other = await enqueue(troupe, { ...body, payload: { a: 2 } });
  assert.equal(other.status, 409, other.text);
  assert.equal(other.json.detail, 'Idempotency key already used by a different job');
  const batch = await enqueue(troupe, { jobs: [body, { type: 'email.send', payload: 2 }] });
  assert.equal(batch.status, 200, batch.text);
  assert.equal(batch.json.created, 1);
  assert.equal(batch.json.duplicates, 1);
});

scenario('a long poll answers as soon as a job is enqueued, and a full node answers 429 (CJ-33)', async (s) => {
  const troupe = await s.troupe({ config: { jobs: { max_waiters: 1, poll_seconds: 30 }, service: { service_token } } });
  const started = Date.now();
  const waiting = lease(troupe, { wait_seconds: 20 });
  // A round trip after the long poll was sent; then the one waiter this node holds is queued once a
  // second long poll is refused.
  await troupe.request('GET', '/v1/jobs/stats', { headers: op });
  await until(async () => (await lease(troupe, { wait_seconds: 1 })).status === 429,
    { timeout_ms: 15_000, message: 'a 429 for the second waiter' });
  const refused = await lease(troupe, { wait_seconds: 5 });
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('retry-after'), '1');
  const created = await enqueue(troupe, { type: 'report.build', payload: {} });
  const got = await waiting;
  assert.equal(got.status, 200, got.text);
  assert.equal(got.json.jobs[0]?.id, created.json.id);
  assert.ok(Date.now() - started < 15_000, 'the enqueue woke the poll long before its deadline or a tick');
  // A poll that finds nothing answers an empty list at its deadline.
  const empty = await lease(troupe, { wait_seconds: 1 });
  assert.deepEqual(empty.json, { jobs: [] });
});

scenario('jobs claimed for a client that went away go back to the queue uncharged (CJ-33)', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token } } });
  // The client sends its lease and closes its socket before any answer.
  const u = new URL(troupe.url);
  const gone = http.request({ method: 'POST', hostname: u.hostname, port: u.port, path: '/v1/jobs/lease', agent: false,
    headers: { ...op, 'content-type': 'application/json' } });
  gone.on('error', () => {});
  gone.end(JSON.stringify({ worker_id: 'w-gone', wait_seconds: 20 }));
  await new Promise((r) => setTimeout(r, 300));
  gone.destroy();
  const created = await enqueue(troupe, { type: 'email.send', payload: {} });
  const next = await lease(troupe, { worker_id: 'w-2', wait_seconds: 5 });
  assert.equal(next.json.jobs.length, 1, next.text);
  assert.equal(next.json.jobs[0].id, created.json.id);
  assert.equal(next.json.jobs[0].attempt, 1, 'the vanished client was not charged an attempt');
  assert.equal(next.json.jobs[0].worker_id, 'w-2');
});

scenario('stale, cancelled and unleased tokens are refused with their reason; failures retry, then die (CJ-36, CJ-38, CJ-39)', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token } } });
  const created = await enqueue(troupe, { type: 'email.send', payload: {}, max_attempts: 2 });
  const first = (await lease(troupe, {})).json.jobs[0];
  const failed = await troupe.request('POST', `/v1/jobs/${first.id}/fail`,
    { body: { lease_token: first.lease_token, error: 'smtp down' }, headers: op });
  assert.equal(failed.status, 200, failed.text);
  assert.equal(failed.json.status, 'queued');
  const late = await troupe.request('POST', `/v1/jobs/${first.id}/complete`, { body: { lease_token: first.lease_token }, headers: op });
  assert.equal(late.status, 409);
  assert.deepEqual(late.json, { detail: 'Job lease is no longer held', reason: 'not_leased' });
  const second = (await lease(troupe, { wait_seconds: 5 })).json.jobs[0];
  assert.equal(second.attempt, 2);
  const stale = await troupe.request('POST', `/v1/jobs/${first.id}/heartbeat`, { body: { lease_token: first.lease_token }, headers: op });
  assert.deepEqual(stale.json, { detail: 'Job lease is no longer held', reason: 'stale_lease' });
  const dead = await troupe.request('POST', `/v1/jobs/${second.id}/fail`,
    { body: { lease_token: second.lease_token, error: 'smtp still down' }, headers: op });
  assert.equal(dead.json.status, 'dead');
  assert.equal(dead.json.errors.length, 2);
  const letters = await troupe.request('GET', '/v1/jobs?status=dead', { headers: op });
  assert.deepEqual(letters.json.jobs.map((j) => j.id), [created.json.id]);
  const retried = await troupe.request('POST', `/v1/jobs/${created.json.id}/retry`, { headers: op });
  assert.equal(retried.json.status, 'queued');
  assert.equal(retried.json.attempt, 0);
  const third = (await lease(troupe, { wait_seconds: 5 })).json.jobs[0];
  const cancelled = await troupe.request('POST', `/v1/jobs/${third.id}/cancel`, { headers: op });
  assert.equal(cancelled.json.status, 'cancelled');
  const told = await troupe.request('POST', `/v1/jobs/${third.id}/heartbeat`, { body: { lease_token: third.lease_token }, headers: op });
  assert.equal(told.status, 409);
  assert.equal(told.json.reason, 'cancelled', 'a heartbeat delivers the cancellation');
  const not_retryable = await troupe.request('POST', `/v1/jobs/${created.json.id}/cancel`, { headers: op });
  assert.equal(not_retryable.json.status, 'cancelled', 'cancelling a cancelled job changes nothing');
});

scenario('a caller identified by trusted headers sees its own tenant only; the service token spans tenants (CJ-30, AS-84)', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token }, auth: { mode: 'trusted_headers' } } });
  const acme = { 'X-FastReAct-User-Key': 'acme:ann', 'X-FastReAct-Tenant-Key': 'acme' };
  const globex = { 'X-FastReAct-User-Key': 'globex:gil', 'X-FastReAct-Tenant-Key': 'globex' };
  const mine = await enqueue(troupe, { type: 'email.send', payload: {} }, acme);
  assert.equal(mine.status, 201, mine.text);
  assert.equal(mine.json.tenant_key, 'acme');
  const named = await enqueue(troupe, { type: 'email.send', payload: {}, tenant_key: 'globex' }, acme);
  assert.equal(named.status, 403);
  assert.equal(named.json.detail, "Job tenant must be the caller's tenant");
  assert.equal((await troupe.request('GET', `/v1/jobs/${mine.json.id}`, { headers: globex })).status, 404);
  assert.equal((await lease(troupe, {}, globex)).json.jobs.length, 0, "another tenant's worker leases nothing");
  assert.equal((await troupe.request('GET', '/v1/jobs', { headers: globex })).json.count, 0);
  assert.equal((await troupe.request('GET', '/v1/jobs', {})).status, 401);
  const spanning = await enqueue(troupe, { type: 'email.send', payload: {}, tenant_key: 'globex' }, op);
  assert.equal(spanning.status, 201, spanning.text);
  assert.equal((await troupe.request('GET', '/v1/jobs', { headers: op })).json.count, 2);
});

scenario('a completed job starts its follow-up run job-<id> exactly once, also when troupe is killed with -9 right after the completion (CJ-40)', async (s) => {
  const config = { ...quick, service: { service_token } };
  const first = await s.troupe({ config });
  const on_complete = { start_run: { messages: [{ role: 'user', content: 'Tell the user {{job.id}} was sent' }], metadata: { result: '{{job.result}}' } } };
  const created = await enqueue(first, { type: 'email.send', payload: { to: 'a@example.com' }, on_complete });
  assert.equal(created.status, 201, created.text);
  const job = (await lease(first, {})).json.jobs[0];
  const done = await first.request('POST', `/v1/jobs/${job.id}/complete`,
    { body: { lease_token: job.lease_token, result: { ok: true } }, headers: op });
  assert.equal(done.json.on_complete_run_id, `job-${job.id}`, done.text);
  await kill9(first);
  const second = await s.troupe({ config, data_dir: first.data_dir });
  const read = async (t, id) => (await t.request('GET', `/v1/runs/${id}`, { headers: op })).json;
  const run = await wait_run(second, `job-${job.id}`, (r) => r?.status === 'completed', { message: 'the follow-up run', read });
  assert.deepEqual(run.metadata.result, { ok: true });
  const runs = (await second.request('GET', '/v1/runs?limit=100', { headers: op })).json;
  assert.equal(runs.runs.filter((r) => r.run_id === `job-${job.id}`).length, 1);
  assert.equal(runs.runs.length, 1, 'one run for the one completed job');
  // The same token completing again changes nothing and starts nothing.
  const again = await second.request('POST', `/v1/jobs/${job.id}/complete`, { body: { lease_token: job.lease_token }, headers: op });
  assert.equal(again.status, 200);
  assert.equal((await second.request('GET', '/v1/runs?limit=100', { headers: op })).json.runs.length, 1);
});

scenario('a lease held by a troupe killed with -9 expires, and the job is leased again after restart (CJ-37)', async (s) => {
  const config = { ...quick, service: { service_token } };
  const first = await s.troupe({ config });
  const created = await enqueue(first, { type: 'email.send', payload: { n: 1 } });
  const held = (await lease(first, { lease_seconds: 5 })).json.jobs[0];
  assert.equal(held.id, created.json.id);
  await kill9(first);
  const second = await s.troupe({ config, data_dir: first.data_dir });
  const again = await lease(second, { worker_id: 'w-2', wait_seconds: 20 });
  assert.equal(again.json.jobs.length, 1, again.text);
  assert.equal(again.json.jobs[0].attempt, 2);
  assert.equal(again.json.jobs[0].errors[0].error, 'Job lease expired');
  const stale = await second.request('POST', `/v1/jobs/${held.id}/complete`, { body: { lease_token: held.lease_token }, headers: op });
  assert.equal(stale.json.reason, 'stale_lease');
});

scenario('hostile job bodies are refused before any work: deep, oversized, wrong types (CJ-31, CJ-32)', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token }, jobs: { max_payload_bytes: 1024 } } });
  const deep = '['.repeat(100_000) + ']'.repeat(100_000);
  const r1 = await troupe.request('POST', '/v1/jobs', { raw: `{"type":"a.b","payload":${deep}}`, headers: { ...op, 'content-type': 'application/json' } });
  assert.ok([400, 422].includes(r1.status), r1.text);
  const big = await enqueue(troupe, { type: 'a.b', payload: 'x'.repeat(2000) });
  assert.equal(big.status, 413, big.text);
  const bad_type = await enqueue(troupe, { type: 'Bad Type', payload: {} });
  assert.equal(bad_type.status, 422);
  assert.deepEqual(bad_type.json.detail[0].loc, ['body', 'type']);
  const bad_lease = await lease(troupe, { max_jobs: 1000, wait_seconds: 'soon' });
  assert.equal(bad_lease.status, 422);
  const nul = await troupe.request('POST', '/v1/jobs/lease', { raw: '{"worker_id":"w\\u0000x"}', headers: { ...op, 'content-type': 'application/json' } });
  assert.equal(nul.status, 422, nul.text);
  const repeated = await troupe.request('POST', '/v1/jobs/job_x/complete', { raw: '{"lease_token":"a","lease_token":"b"}', headers: { ...op, 'content-type': 'application/json' } });
  assert.ok([400, 422].includes(repeated.status), repeated.text);
});

scenario('a stale worker is fenced: its complete and heartbeat get 409 stale_lease, the new holder completes once (CJ-51)', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token } } });
  const created = await enqueue(troupe, { type: 'email.send', payload: { n: 1 } });
  const w1 = (await lease(troupe, { worker_id: 'w-1', lease_seconds: 5 })).json.jobs[0];
  // W1 goes silent; once its lease ends the sweep bumps the epoch (CJ-37) and W2 leases the job at
  // the next one (CJ-51 counts 2, leaving the sweep's bump out).
  const w2 = (await lease(troupe, { worker_id: 'w-2', wait_seconds: 20 })).json.jobs[0];
  assert.equal(w2.id, created.json.id);
  assert.ok(w2.lease_epoch > w1.lease_epoch);
  for (const [path, body] of [['complete', { lease_token: w1.lease_token, result: 'w1' }], ['heartbeat', { lease_token: w1.lease_token }]]) {
    const r = await troupe.request('POST', `/v1/jobs/${w1.id}/${path}`, { body, headers: op });
    assert.equal(r.status, 409, `${path}: ${r.text}`);
    assert.equal(r.json.reason, 'stale_lease');
  }
  const done = await troupe.request('POST', `/v1/jobs/${w2.id}/complete`, { body: { lease_token: w2.lease_token, result: 'w2' }, headers: op });
  assert.equal(done.status, 200);
  const again = await troupe.request('POST', `/v1/jobs/${w2.id}/complete`, { body: { lease_token: w2.lease_token, result: 'w2 again' }, headers: op });
  assert.equal(again.status, 200);
  const job = (await troupe.request('GET', `/v1/jobs/${w2.id}`, { headers: op })).json;
  assert.equal(job.result, 'w2');
  assert.equal(job.status, 'completed');
  assert.equal(job.completed_at, done.json.completed_at, 'one completion');
});
