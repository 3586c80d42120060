// Smoke test of the fake PSKA and its MCP server: `node --test tests/fake_pska/`.
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const token = 'pska-secret';
const identity = {
  'X-PSKA-Caller': 'agent_service',
  'X-PSKA-Tenant-Id': 'tenant_default',
  'X-PSKA-User-Id': 'user_primary',
  'X-PSKA-Represented-User-Id': 'user_primary',
  'X-PSKA-Service-Token': token,
};

let pska;
let base;

// Starts a node script and resolves once a stdout line matches `re`.
function start(script, args, env, re) {
  const proc = spawn(process.execPath, [path.join(here, script), ...args], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.setEncoding('utf8');
  const ready = new Promise((resolve, reject) => {
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(re);
      if (m) resolve(m);
    });
    proc.once('exit', (code) => reject(new Error(`${script} exited with ${code} before ready`)));
  });
  return { proc, ready };
}

async function call(method, route, { body, headers = identity, raw } = {}) {
  const init = { method, headers: { ...headers } };
  if (raw !== undefined || body !== undefined) {
    init.body = raw ?? JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json; charset=utf-8';
  }
  const res = await fetch(base + route, init);
  return { status: res.status, headers: res.headers, json: await res.json() };
}
const control = async (method, route, body) => {
  const r = await call(method, route, { body, headers: {} });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json;
};
const lease_body = (worker_id) => ({ worker_id, lease_seconds: 30 });

before(async () => {
  pska = start('fake_pska.mjs', ['--port', '0', '--service-token', token], {}, /^fake pska listening on (http:\/\/\S+)$/m);
  base = (await pska.ready)[1];
});
after(() => pska.proc.kill('SIGTERM'));
beforeEach(() => control('POST', '/_control/reset', {}));

test('headers: missing identity is 400 naming it, a missing or wrong token 401', async () => {
  const { 'X-PSKA-Tenant-Id': _, 'X-PSKA-Represented-User-Id': __, ...partial } = identity;
  let r = await call('GET', '/jobs', { headers: partial });
  assert.equal(r.status, 400);
  assert.match(r.json.detail, /X-PSKA-Tenant-Id, X-PSKA-Represented-User-Id/);
  const { 'X-PSKA-Service-Token': ___, ...no_token } = identity;
  r = await call('GET', '/jobs', { headers: no_token });
  assert.equal(r.status, 401);
  assert.match(r.json.detail, /missing header X-PSKA-Service-Token/);
  r = await call('GET', '/jobs', { headers: { ...identity, 'X-PSKA-Service-Token': 'wrong' } });
  assert.equal(r.status, 401);
  await control('POST', '/_control/config', { service_token: null });
  assert.equal((await call('GET', '/jobs', { headers: no_token })).status, 200);
  const recorded = (await control('GET', '/_control/requests?route=jobs')).requests;
  assert.equal(recorded.length, 4);
  assert.equal(recorded[0].headers['x-pska-caller'], 'agent_service');
  assert.deepEqual(recorded.map((q) => q.status), [400, 401, 401, 200]);
});

test('a 3-batch job: list, lease, renew, heartbeat, page, complete', async () => {
  await control('POST', '/_control/jobs', {
    jobs: [
      { id: 'j1', batch_count: 3, priority: 5 },
      { id: 'later', run_after_seconds: 3600 },
      { id: 'elsewhere', tenant_id: 'tenant_other' },
      { id: 'other_type', job_type: 'extract_all', omit: ['run_after'] },
    ],
  });
  const { jobs } = (await call('GET', '/jobs')).json;
  assert.deepEqual(jobs.map((j) => j.id), ['j1', 'later', 'other_type']);
  assert.equal(jobs[0].job_type, 'digest_via_fastreact');
  assert.equal(jobs[0].status, 'queued');
  assert.match(jobs[0].created_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/);
  assert.ok(!('run_after' in jobs[2]));
  assert.equal((await call('POST', '/jobs/later/lease', { body: lease_body('w1') })).status, 409);
  assert.equal((await call('POST', '/jobs/elsewhere/lease', { body: lease_body('w1') })).status, 404);

  let r = await call('POST', '/jobs/j1/lease', { body: lease_body('w1') });
  assert.equal(r.status, 200);
  assert.equal(r.json.job.status, 'leased');
  assert.equal(r.json.job.worker_id, 'w1');
  assert.equal(r.json.job.attempt, 1);
  assert.equal((await call('POST', '/jobs/j1/lease', { body: lease_body('w2') })).status, 409);
  r = await call('POST', '/jobs/j1/lease', { body: lease_body('w1') });
  assert.equal(r.status, 200, 'the holder re-leasing renews');
  assert.equal(r.json.job.attempt, 1);
  assert.equal((await call('POST', '/jobs/j1/heartbeat', { body: lease_body('w1') })).status, 200);
  assert.equal((await call('POST', '/jobs/j1/heartbeat', { body: lease_body('w2') })).status, 409);

  const pages = [];
  for (let cursor = '0'; cursor !== null;) {
    r = await call('GET', `/digest/batches/j1?cursor=${cursor}&limit=1`);
    assert.equal(r.status, 200);
    pages.push(r.json);
    cursor = r.json.next_cursor;
  }
  assert.deepEqual(pages.map((p) => [p.cursor, p.next_cursor, p.has_more]), [['0', '1', true], ['1', '2', true], ['2', null, false]]);
  for (const p of pages) {
    for (const k of ['source_items', 'documents', 'passage_windows', 'chunks']) assert.equal(p[k].length, 1, k);
    assert.equal(p.job.id, 'j1');
  }
  assert.equal((await call('GET', '/digest/batches/j1?cursor=x&limit=1')).status, 400);

  r = await call('POST', '/jobs/j1/complete', { body: { result: { ok: true, batch_count: 3 } } });
  assert.equal(r.status, 200);
  assert.equal(r.json.job.status, 'completed');
  assert.equal((await call('POST', '/jobs/j1/complete', { body: { result: {} } })).status, 409);
  const { job } = await control('GET', '/_control/jobs/j1');
  assert.deepEqual(job.result, { ok: true, batch_count: 3 });
  const lease = (await control('GET', '/_control/requests?route=lease')).requests.find((q) => q.path === '/jobs/j1/lease');
  assert.deepEqual(lease.body, { worker_id: 'w1', lease_seconds: 30 });
  assert.equal(lease.headers['content-type'], 'application/json; charset=utf-8');
});

test('fail records error and retryable', async () => {
  await control('POST', '/_control/jobs', { id: 'j2' });
  await call('POST', '/jobs/j2/lease', { body: lease_body('w1') });
  assert.equal((await call('POST', '/jobs/j2/fail', { body: { error: 'x' } })).status, 400);
  const r = await call('POST', '/jobs/j2/fail', { body: { error: 'RunFailed: boom', retryable: true } });
  assert.equal(r.status, 200);
  assert.deepEqual([r.json.job.status, r.json.job.error, r.json.job.retryable], ['failed', 'RunFailed: boom', true]);
});

test('a lost lease: heartbeat and lease answer 409, the job is someone else\'s', async () => {
  await control('POST', '/_control/jobs', { id: 'j3' });
  await call('POST', '/jobs/j3/lease', { body: lease_body('w1') });
  const { job } = await control('POST', '/_control/lose_lease', { job_id: 'j3' });
  assert.equal(job.worker_id, 'rival-worker');
  assert.equal(job.attempt, 2);
  assert.equal((await call('POST', '/jobs/j3/heartbeat', { body: lease_body('w1') })).status, 409);
  assert.equal((await call('POST', '/jobs/j3/lease', { body: lease_body('w1') })).status, 409);
});

test('heartbeat switched to 404; lease still renews', async () => {
  await control('POST', '/_control/jobs', { id: 'j4' });
  await call('POST', '/jobs/j4/lease', { body: lease_body('w1') });
  await control('POST', '/_control/config', { heartbeat_status: 404 });
  assert.equal((await call('POST', '/jobs/j4/heartbeat', { body: lease_body('w1') })).status, 404);
  assert.equal((await call('POST', '/jobs/j4/lease', { body: lease_body('w1') })).status, 200);
  await control('POST', '/_control/config', { heartbeat_status: null });
  assert.equal((await call('POST', '/jobs/j4/heartbeat', { body: lease_body('w1') })).status, 200);
});

test('injected failures: N answers with status and Retry-After, then normal', async () => {
  await control('POST', '/_control/failures', { route: 'jobs', count: 2, status: 429, retry_after: 3 });
  let r = await call('GET', '/jobs');
  assert.equal(r.status, 429);
  assert.equal(r.headers.get('retry-after'), '3');
  assert.equal((await call('GET', '/jobs')).status, 429);
  assert.equal((await call('GET', '/jobs')).status, 200);
  await control('POST', '/_control/failures', { route: 'lease', status: 500 });
  await control('POST', '/_control/jobs', { id: 'j5' });
  assert.equal((await call('POST', '/jobs/j5/lease', { body: lease_body('w1') })).status, 500);
  r = await call('POST', '/jobs/j5/lease', { body: lease_body('w1') });
  assert.equal(r.status, 200);
  assert.equal(r.json.job.attempt, 1, 'an injected failure has no effect');
});

// A stdio JSON-RPC client: request(obj) resolves with the answer carrying obj.id.
function mcp_client() {
  const server = spawn(process.execPath, [path.join(here, 'fake_pska_mcp.mjs')], { env: { ...process.env, FAKE_PSKA_URL: base }, stdio: ['pipe', 'pipe', 'pipe'] });
  const answers = [];
  const waiters = [];
  let buffered = '';
  server.stdout.setEncoding('utf8');
  server.stdout.on('data', (d) => {
    buffered += d;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      answers.push(JSON.parse(buffered.slice(0, nl)));
      buffered = buffered.slice(nl + 1);
      for (const w of waiters.splice(0)) w();
    }
  });
  const next = (match) => new Promise((resolve) => {
    const look = () => {
      const i = answers.findIndex(match);
      if (i >= 0) resolve(answers.splice(i, 1)[0]);
      else waiters.push(look);
    };
    look();
  });
  return {
    server,
    write: (line) => server.stdin.write(line + '\n'),
    request: (msg) => {
      server.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...msg }) + '\n');
      return next((a) => a.id === msg.id);
    },
    next_error: () => next((a) => a.id === null),
  };
}

test('MCP: tools/list, tools/call recorded in the control API, malformed input survived', async () => {
  await control('POST', '/_control/jobs', { id: 'j6', batch_count: 2 });
  const mcp = mcp_client();
  try {
    const init = await mcp.request({ id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {} } });
    assert.equal(init.result.serverInfo.name, 'fake-pska');
    mcp.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    const list = await mcp.request({ id: 2, method: 'tools/list' });
    assert.deepEqual(list.result.tools.map((t) => t.name), ['pska_job_context', 'pska_write_candidates']);

    const ctx = await mcp.request({ id: 3, method: 'tools/call', params: { name: 'pska_job_context', arguments: { job_id: 'j6' } } });
    const context = JSON.parse(ctx.result.content[0].text);
    assert.equal(context.batch_count, 2);
    assert.deepEqual(context.source_refs.map((s) => s.source_item_id), ['src_j6_0', 'src_j6_1']);

    const write = {
      job_id: 'j6', schema_version: 'pska.candidates.v1', producer: 'fastreact',
      knowledge_claims: [{ claim: 'fact 0 holds', source_refs: ['src_j6_0'], confidence: 0.9 }],
      digest_notes: [{ note: 'n' }],
    };
    const wrote = await mcp.request({ id: 4, method: 'tools/call', params: { name: 'pska_write_candidates', arguments: write } });
    assert.ok(!wrote.result.isError);
    assert.equal(JSON.parse(wrote.result.content[0].text).candidate_count, 2);
    const empty = await mcp.request({ id: 5, method: 'tools/call', params: { name: 'pska_write_candidates', arguments: { job_id: 'j6' } } });
    assert.equal(empty.result.isError, true);

    mcp.write('this is not json');
    assert.equal((await mcp.next_error()).error.code, -32700);
    mcp.write('x'.repeat(1024 * 1024 + 10));
    assert.match((await mcp.next_error()).error.message, /longer than/);
    assert.deepEqual((await mcp.request({ id: 6, method: 'ping' })).result, {});

    const { calls } = await control('GET', '/_control/mcp_calls');
    assert.deepEqual(calls.map((c) => [c.tool, c.is_error]), [['pska_job_context', false], ['pska_write_candidates', false], ['pska_write_candidates', true]]);
    assert.deepEqual(calls[1].arguments, write);
    const { candidates } = await control('GET', '/_control/jobs/j6');
    assert.equal(candidates.length, 1);
    assert.equal(candidates[0].arguments.schema_version, 'pska.candidates.v1');
  } finally {
    mcp.server.stdin.end();
  }
});
