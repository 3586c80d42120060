// The PSKA digest worker end to end (AS-66 to AS-72, AS-86, AS-87, CJ-42, CJ-45): the fake PSKA's
// HTTP API and MCP tools, troupe serving the batch runs with the scripted model, and the worker as
// `troupe pska-digest --once` and inside `troupe serve`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { scenario, source_dir, until, wait_mcp_ready } from './harness.mjs';

const service_token = 'pska-worker-it-token';
const write_tool = 'pska_pska_write_candidates';
const context_tool = 'pska_pska_job_context';

const claims = (job_id) => ({
  job_id, schema_version: 'pska.candidates.v1', producer: 'fastreact',
  knowledge_claims: [{ claim: 'The sky is blue', source_refs: ['s1'], confidence: 0.9 }],
});

// The fake PSKA in a process of its own; its control API is `control(method, path, body)`.
async function fake_pska(s) {
  const proc = spawn(process.execPath, [path.join(source_dir, 'tests', 'fake_pska', 'fake_pska.mjs'), '--port', '0'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise((r) => proc.on('exit', r));
  s.children.push({ stop: async () => { proc.kill('SIGKILL'); await exited; }, describe: () => `--- fake pska:\n${out}` });
  const url = await new Promise((resolve, reject) => {
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/fake pska listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    proc.on('exit', () => reject(new Error(`the fake PSKA exited\n${out}`)));
  });
  const control = async (method, route, body) => {
    const res = await fetch(url + route, {
      method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    return res.json();
  };
  return { url, control };
}

// troupe serving the batch runs: the scripted model plays `script` in every run, PSKA's MCP tools
// are server `pska`; `worker` is merged into pska_digest_worker.
async function start(s, script, { worker = {}, extra = {} } = {}) {
  const pska = await fake_pska(s);
  const troupe = await s.troupe({
    config: {
      service: { service_token },
      model: { provider: 'scripted', name: 'scripted', script },
      mcp: {
        servers: [{
          name: 'pska', command: process.execPath, transport: 'stdio', isolation: 'shared', timeout_seconds: 30,
          args: [path.join(source_dir, 'tests', 'fake_pska', 'fake_pska_mcp.mjs')], env: { FAKE_PSKA_URL: pska.url },
        }],
      },
      pska_digest_worker: { pska_url: pska.url, run_poll_seconds: 0.05, worker_id: 'w-test', ...worker },
      ...extra,
    },
  });
  await wait_mcp_ready(troupe, ['pska'], 30_000, { authorization: `Bearer ${service_token}` });
  return { pska, troupe };
}

// `troupe pska-digest --once` with troupe's own config file: {code, output (parsed JSON)}.
async function digest_once(s, troupe, args = []) {
  const r = await s.run_troupe(['pska-digest', '--once', '--config', troupe.config_file,
    '--set', `pska_digest_worker.troupe_url=${troupe.url}`, ...args], { timeout_ms: 60_000 });
  let output;
  try { output = JSON.parse(r.stdout.trim().split('\n').pop()); } catch { output = r.stdout; }
  return { code: r.code, output, stderr: r.stderr };
}

const good_script = (job_id) => [
  { content: 'Reading the job.', tool_calls: [{ name: context_tool, arguments: { job_id } }] },
  { content: 'Writing.', tool_calls: [{ name: write_tool, arguments: claims(job_id) }] },
  { content: 'Wrote one claim for this batch.' },
];

scenario('a 3-batch PSKA job is digested by one run per batch and completed with batch_count 3 (AS-67, AS-69, AS-72)', async (s) => {
  const { pska, troupe } = await start(s, good_script('j1'));
  await pska.control('POST', '/_control/jobs', { id: 'j1', batch_count: 3 });
  const r = await digest_once(s, troupe);
  assert.equal(r.code, 0, JSON.stringify(r));
  assert.equal(r.output.ok, true);
  const completes = (await pska.control('GET', '/_control/requests?route=complete')).requests;
  assert.equal(completes.length, 1);
  const result = completes[0].body.result;
  assert.equal(result.ok, true);
  assert.equal(result.batch_count, 3);
  assert.equal(result.worker_id, 'w-test');
  assert.deepEqual(result.fastreact_runs.map((x) => x.batch_cursor), ['0', '1', '2']);
  for (const run of result.fastreact_runs) {
    assert.match(run.run_id, /^pskad_[0-9a-f]{24}$/);
    assert.equal(run.status, 'completed');
    assert.equal(run.write_call_count, 1);
    assert.equal(run.content, 'Wrote one claim for this batch.');
  }
  // AS-68: every request to PSKA says who calls.
  for (const req of (await pska.control('GET', '/_control/requests')).requests)
    assert.equal(req.headers['x-pska-caller'], 'agent_service', JSON.stringify(req));
  assert.equal((await pska.control('GET', `/_control/mcp_calls?tool=pska_write_candidates`)).calls.length, 3);
  // Nothing is ready any more.
  const again = await digest_once(s, troupe);
  assert.equal(again.code, 0);
  assert.deepEqual(again.output, { ok: true, processed: 0, reason: 'no_ready_digest_job' });
});

scenario('an over-budget write is denied and a notes-without-claims write rejected, and the batch still passes on its one good write (AS-70, AS-71, AS-72)', async (s) => {
  const { pska, troupe } = await start(s, [
    { content: 'Notes first.', tool_calls: [{ name: write_tool, arguments: { job_id: 'j1', digest_notes: [{ note: 'n' }] } }] },
    { content: 'Now properly.', tool_calls: [{ name: write_tool, arguments: claims('j1') }] },
    { content: 'Once more.', tool_calls: [{ name: write_tool, arguments: claims('j1') }] },
    { content: 'Done.' },
  ]);
  await pska.control('POST', '/_control/jobs', { id: 'j1', batch_count: 1 });
  const r = await digest_once(s, troupe);
  assert.equal(r.code, 0, JSON.stringify(r));
  const run = (await pska.control('GET', '/_control/requests?route=complete')).requests[0].body.result.fastreact_runs[0];
  assert.equal(run.write_call_count, 1);
  assert.equal(run.tool_budget_exceeded, true);
  assert.equal((await pska.control('GET', `/_control/mcp_calls?tool=pska_write_candidates`)).calls.length, 1);
  const events = (await troupe.request('GET', `/v1/runs/${run.run_id}/events?limit=1000`,
    { headers: { authorization: `Bearer ${service_token}` } })).json.events;
  assert.ok(events.some((e) => e.type === 'tool_result' && e.metadata.digest_validation_error), 'the rejection is an event');
  assert.ok(events.some((e) => e.type === 'think' && e.metadata.tool_budget_denied), 'the denial is an event');
});

scenario('a batch run that calls a forbidden tool fails the PSKA job retryably (AS-72)', async (s) => {
  const { pska, troupe } = await start(s, [
    { content: 'Looking around.', tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }] },
    { content: 'Done.' },
  ]);
  await pska.control('POST', '/_control/jobs', { id: 'j1', batch_count: 2 });
  const r = await digest_once(s, troupe);
  assert.equal(r.code, 1, JSON.stringify(r));
  const fails = (await pska.control('GET', '/_control/requests?route=fail')).requests;
  assert.equal(fails.length, 1);
  assert.match(fails[0].body.error, /^ForbiddenTool: the run called list_dir/);
  assert.equal(fails[0].body.retryable, true);
  assert.equal((await pska.control('GET', '/_control/requests?route=complete')).requests.length, 0);
});

scenario('a lost PSKA lease sends neither complete nor fail (AS-86)', async (s) => {
  const { pska, troupe } = await start(s, [
    { content: 'Thinking slowly.', delay_ms: 4000, tool_calls: [{ name: write_tool, arguments: claims('j1') }] },
    { content: 'Done.' },
  ], { worker: { lease_seconds: 6 } });
  await pska.control('POST', '/_control/jobs', { id: 'j1', batch_count: 1 });
  const running = digest_once(s, troupe);
  await until(async () => (await pska.control('GET', '/_control/requests?route=batches')).requests.length > 0,
    { timeout_ms: 20_000, message: 'the worker paging its job' });
  await pska.control('POST', '/_control/lose_lease', { job_id: 'j1' });
  const r = await running;
  assert.equal(r.code, 1, JSON.stringify(r));
  assert.match(r.output.error, /PSKA lease lost/);
  for (const route of ['complete', 'fail'])
    assert.equal((await pska.control('GET', `/_control/requests?route=${route}`)).requests.length, 0, route);
});

scenario('a worker restarted mid-job reuses the batch runs that already passed: no candidate is written twice (CJ-45)', async (s) => {
  const { pska, troupe } = await start(s, [
    { content: 'Writing.', tool_calls: [{ name: write_tool, arguments: claims('j1') }] },
    { content: 'Done after a pause.', delay_ms: 1500 },
  ]);
  await pska.control('POST', '/_control/jobs', { id: 'j1', batch_count: 3 });
  // The first worker dies once the second batch is asked for: batch 0's run has passed.
  const first = digest_once(s, troupe);
  await until(async () => (await pska.control('GET', '/_control/requests?route=batches')).requests.length >= 2,
    { timeout_ms: 30_000, message: 'the second page' });
  const proc = s.children.at(-1);
  await proc.stop('SIGKILL');
  await first.catch(() => {});
  // The restarted worker names the job it held: PSKA lets its holder lease it again.
  const second = await digest_once(s, troupe, ['--job-id', 'j1']);
  assert.equal(second.code, 0, JSON.stringify(second));
  const result = (await pska.control('GET', '/_control/requests?route=complete')).requests[0].body.result;
  assert.equal(result.batch_count, 3);
  assert.equal((await pska.control('GET', `/_control/mcp_calls?tool=pska_write_candidates`)).calls.length, 3,
    'each batch wrote once, across both workers');
});

scenario('troupe serve with pska_digest_worker.enabled digests ready jobs on its own (CJ-42)', async (s) => {
  const { pska, troupe } = await start(s, good_script('j2'), { worker: { enabled: true, poll_seconds: 0.2 } });
  await pska.control('POST', '/_control/jobs', { id: 'j2', batch_count: 2 });
  await until(async () => (await pska.control('GET', '/_control/jobs/j2')).job.status === 'completed',
    { timeout_ms: 30_000, interval_ms: 100, message: 'the job completed by the worker inside serve' });
  const result = (await pska.control('GET', '/_control/requests?route=complete')).requests[0].body.result;
  assert.equal(result.batch_count, 2);
  assert.ok(troupe.url);
});

scenario('troupe worker pska drains on SIGTERM: a job still running after the grace fails retryably as WorkerShutdown (CJ-46)', async (s) => {
  const { pska, troupe } = await start(s, [
    { content: 'Thinking for a long time.', delay_ms: 20_000 },
    { content: 'Done.' },
  ], { worker: { drain_grace_seconds: 1, poll_seconds: 0.2 } });
  await pska.control('POST', '/_control/jobs', { id: 'j1', batch_count: 1 });
  const worker = spawn(process.env.TROUPE_BIN, ['worker', 'pska', '--config', troupe.config_file,
    '--set', `pska_digest_worker.troupe_url=${troupe.url}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  worker.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((r) => worker.on('exit', (code, signal) => r({ code, signal })));
  s.children.push({ stop: async () => { worker.kill('SIGKILL'); await exited; }, describe: () => `--- worker pska:\n${err}` });
  await until(async () => (await pska.control('GET', '/_control/requests?route=batches')).requests.length > 0,
    { timeout_ms: 20_000, message: 'the worker paging its job' });
  worker.kill('SIGTERM');
  assert.deepEqual(await exited, { code: 0, signal: null });
  const fails = (await pska.control('GET', '/_control/requests?route=fail')).requests;
  assert.equal(fails.length, 1);
  assert.deepEqual(fails[0].body, { error: 'WorkerShutdown: draining', retryable: true });
});

scenario('with source "troupe" the worker takes pska.digest jobs from the jobs API and settles each as its PSKA job (CJ-41, CJ-43)', async (s) => {
  const { pska, troupe } = await start(s, good_script('j3'), { worker: { enabled: true, source: 'troupe' } });
  await pska.control('POST', '/_control/jobs', { id: 'j3', batch_count: 2 });
  const headers = { authorization: `Bearer ${service_token}` };
  const created = await troupe.request('POST', '/v1/jobs',
    { body: { type: 'pska.digest', payload: { pska_job_id: 'j3', tenant_id: 'tenant_default' } }, headers });
  assert.equal(created.status, 201, created.text);
  const job = await until(async () => {
    const j = (await troupe.request('GET', `/v1/jobs/${created.json.id}`, { headers })).json;
    return j.status === 'completed' && j;
  }, { timeout_ms: 30_000, interval_ms: 100, message: 'the troupe job completed' });
  assert.equal(job.result.ok, true);
  assert.equal(job.result.batch_count, 2);
  assert.equal((await pska.control('GET', '/_control/jobs/j3')).job.status, 'completed');
  // A pska.digest job naming a PSKA job that cannot be leased fails retryably.
  const missing = await troupe.request('POST', '/v1/jobs',
    { body: { type: 'pska.digest', payload: { pska_job_id: 'nope' }, max_attempts: 1 }, headers });
  const dead = await until(async () => {
    const j = (await troupe.request('GET', `/v1/jobs/${missing.json.id}`, { headers })).json;
    return j.status === 'dead' && j;
  }, { timeout_ms: 30_000, interval_ms: 100, message: 'the unleasable job failed' });
  assert.match(dead.last_error, /lease/);
});

scenario('the worker\'s PSKA breaker opens after 5 failures and probes a second later, and a Retry-After pauses it (CJ-46)', async (s) => {
  const { pska } = await start(s, good_script('j4'), { worker: { enabled: true, poll_seconds: 0.1 } });
  // One snapshot of the worker's GET /jobs requests, in arrival order (a request still in flight has
  // no status yet).
  const jobs_requests = async () => (await pska.control('GET', '/_control/requests?route=jobs')).requests ?? [];
  const settled = (reqs) => reqs.length > 0 && reqs.at(-1).status !== null;
  await until(async () => (await jobs_requests()).length >= 2, { timeout_ms: 20_000, message: 'the worker polling' });
  // Five 503s in a row open the breaker: the next poll waits for the probe, 1 s on.
  await pska.control('POST', '/_control/failures', { route: 'jobs', count: 5, status: 503 });
  let reqs = await until(async () => {
    const r = await jobs_requests();
    return r.filter((x) => x.status === 503).length === 5 && settled(r) && r.at(-1).status === 200 && r;
  }, { timeout_ms: 20_000, message: 'five failures and a probe' });
  const fifth = reqs.findLastIndex((r) => r.status === 503);
  const gap = Date.parse(reqs[fifth + 1].at) - Date.parse(reqs[fifth].at);
  assert.ok(gap >= 900, `the probe came ${gap} ms after the fifth failure`);
  // A 429 with Retry-After: 2 pauses admission for 2 s.
  await pska.control('POST', '/_control/failures', { route: 'jobs', count: 1, status: 429, retry_after: 2 });
  reqs = await until(async () => {
    const r = await jobs_requests();
    return r.some((x) => x.status === 429) && settled(r) && r.at(-1).status === 200 && r;
  }, { timeout_ms: 20_000, message: 'a 429 and the poll after it' });
  const paused = reqs.findIndex((r) => r.status === 429);
  const wait = Date.parse(reqs[paused + 1].at) - Date.parse(reqs[paused].at);
  assert.ok(wait >= 1900, `the poll after the 429 came ${wait} ms later`);
  // Closed again, the worker takes a job.
  await pska.control('POST', '/_control/jobs', { id: 'j4', batch_count: 1 });
  await until(async () => (await pska.control('GET', '/_control/jobs/j4')).job.status === 'completed',
    { timeout_ms: 30_000, interval_ms: 100, message: 'the job completed once the breaker closed' });
});

scenario('with source "troupe", cancelling the troupe job stops its PSKA job, which fails retryably (CJ-34, CJ-43)', async (s) => {
  const { pska, troupe } = await start(s, [
    { content: 'Thinking for a long time.', delay_ms: 20_000 },
    { content: 'Done.' },
  ], { worker: { enabled: true, source: 'troupe', lease_seconds: 6 } });
  await pska.control('POST', '/_control/jobs', { id: 'j5', batch_count: 1 });
  const headers = { authorization: `Bearer ${service_token}` };
  const created = await troupe.request('POST', '/v1/jobs', { body: { type: 'pska.digest', payload: { pska_job_id: 'j5' } }, headers });
  await until(async () => (await pska.control('GET', '/_control/requests?route=batches')).requests.length > 0,
    { timeout_ms: 20_000, message: 'the worker paging its job' });
  const cancelled = await troupe.request('POST', `/v1/jobs/${created.json.id}/cancel`, { headers });
  assert.equal(cancelled.json.status, 'cancelled');
  const fail = await until(async () => (await pska.control('GET', '/_control/requests?route=fail')).requests[0],
    { timeout_ms: 20_000, message: 'the PSKA job failed' });
  assert.match(fail.body.error, /^TroupeJobLost: /);
  assert.equal(fail.body.retryable, true);
  assert.equal((await troupe.request('GET', `/v1/jobs/${created.json.id}`, { headers })).json.status, 'cancelled');
});
