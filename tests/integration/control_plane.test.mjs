// The control plane as a FastReAct front-end uses it on the real binary: jwt and trusted_headers
// callers confined to their tenant (AS-84), list limits (AS-50, AS-55), the trace's policy hash
// (AS-55, AS-93) and the store report of GET /v1/metrics (AS-56, AS-59).
import assert from 'node:assert/strict';
import { hs256_jwt, scenario, timestamp_re, until, user } from './harness.mjs';

const service_token = 'control-plane-it-service-token';
const op = { authorization: `Bearer ${service_token}` };
const secret = 'control-plane-it-jwt-secret';
const quick = { model: { script: [{ content: 'control ok' }] } };
const now_s = () => Math.floor(Date.now() / 1000);
const as_jwt = (sub) => ({ authorization: `Bearer ${hs256_jwt({ sub, exp: now_s() + 600 }, secret)}` });
const as_trusted = (user_key) => ({ 'X-FastReAct-User-Key': user_key });

// A finished chat run of `caller` named `run_id`.
async function chat_run(troupe, caller, run_id) {
  const r = await troupe.chat({ messages: [user(`hello from ${run_id}`)], metadata: { run_id } }, caller);
  assert.equal(r.status, 200, `chat ${run_id}: ${r.text}`);
  assert.equal(r.json.run_id, run_id);
  return r.json;
}

// GET `route` as `headers`, expecting `status`.
async function get(troupe, route, headers, status = 200) {
  const r = await troupe.request('GET', route, { headers });
  assert.equal(r.status, status, `GET ${route} as ${JSON.stringify(headers)}: ${r.text}`);
  return r;
}

// The trace a run writes when it ends, once it is there.
async function trace_of(troupe, run_id, headers = op) {
  return until(async () => {
    const r = await troupe.request('GET', `/v1/traces/${run_id}`, { headers });
    return r.status === 200 && r.json.trace.trace_type && r.json.trace;
  }, { timeout_ms: 10_000, message: `the trace of ${run_id}` });
}

// What one caller confined to its tenant may and may not do: `own` is its run, `foreign` another
// tenant's; `others` the number of runs it must not see.
async function check_confined(troupe, caller, own, foreign, what) {
  const runs = (await get(troupe, '/v1/runs', caller)).json;
  assert.deepEqual(runs.runs.map((r) => r.run_id), [own], `${what}: the list holds its own run only`);
  assert.equal(runs.total_count, 1, `${what}: the count is its tenant's`);
  assert.equal(runs.has_more, false);
  assert.equal((await get(troupe, `/v1/runs/${own}`, caller)).json.run_id, own);
  const events = (await get(troupe, `/v1/runs/${own}/events?limit=0`, caller)).json;
  assert.ok(events.events.length > 0, `${what}: its events`);
  assert.equal(events.events.at(-1).type, 'session_end');
  assert.match((await get(troupe, `/v1/runs/${own}/stream`, caller)).headers.get('content-type'), /^text\/event-stream/);
  assert.equal((await trace_of(troupe, own, caller)).run_id, own, `${what}: its trace`);
  assert.ok((await get(troupe, `/v1/traces/${own}/events`, caller)).json.events.length > 0);
  const traces = (await get(troupe, '/v1/traces?limit=0', caller)).json;
  assert.deepEqual(traces.traces.map((t) => t.run_id), [own], `${what}: the trace list holds its own trace only`);
  assert.equal(traces.total_count, 1);
  assert.equal((await get(troupe, '/v1/approvals', caller)).json.total_count, 0);

  // Another tenant's run answers exactly as a missing one.
  for (const [route, detail] of [
    ['/v1/runs/%s', 'Run not found'],
    ['/v1/runs/%s/events', 'Run not found'],
    ['/v1/runs/%s/stream', 'Run not found'],
    ['/v1/traces/%s', 'Trace not found'],
    ['/v1/traces/%s/events', 'Trace events not found'],
  ]) {
    const theirs = await get(troupe, route.replace('%s', foreign), caller, 404);
    const missing = await get(troupe, route.replace('%s', 'no-such-run'), caller, 404);
    assert.deepEqual(theirs.json, { detail }, `${what}: ${route} of another tenant`);
    assert.deepEqual(theirs.json, missing.json);
  }
  const cancel = await troupe.request('POST', `/v1/runs/${foreign}/cancel`, { headers: caller });
  assert.equal(cancel.status, 404, cancel.text);
  assert.deepEqual(cancel.json, { detail: 'Run not found' });
  await get(troupe, '/v1/approvals/approval-0123456789', caller, 404);
  for (const verb of ['approve', 'deny']) {
    const r = await troupe.request('POST', `/v1/approvals/approval-0123456789/${verb}`, { headers: caller });
    assert.equal(r.status, 404, r.text);
  }

  // Its metrics are its tenant's, without the store and its paths.
  const m = await get(troupe, '/v1/metrics', caller);
  assert.equal(m.json.schema, 'fastreact.metrics.v1');
  assert.equal(m.json.runs.durable.total_count, 1, `${what}: metrics of its tenant: ${m.text}`);
  assert.equal(m.json.runs.trace_count, 1);
  assert.ok(!('store' in m.json), `${what}: no store section`);
  assert.ok(!m.text.includes(troupe.data_dir) && !m.text.includes('troupe.db'), `${what}: no path: ${m.text}`);

  // The operator endpoints stay the service token's.
  for (const [method, route, body] of [
    ['GET', '/ready'], ['GET', '/metrics'], ['GET', '/v1/policy'],
    ['POST', '/v1/policy/check', { tool_name: 'list_dir', tool_args: {} }],
  ]) {
    const r = await troupe.request(method, route, { body, headers: caller });
    assert.equal(r.status, 401, `${what}: ${method} ${route}: ${r.text}`);
  }
}

for (const mode of ['jwt', 'trusted_headers']) {
  scenario(`AS-84 a ${mode} caller uses the control plane within its tenant only; the service token sees every tenant`, async (s) => {
    const troupe = await s.troupe({
      config: { ...quick, service: { service_token }, auth: { mode, jwt_secret: secret } },
    });
    const as = mode === 'jwt' ? as_jwt : as_trusted;
    const acme = as('acme:alice');
    const beta = as('beta:bob');
    await chat_run(troupe, acme, 'acme-run');
    await chat_run(troupe, beta, 'beta-run');
    await check_confined(troupe, acme, 'acme-run', 'beta-run', `${mode} acme`);
    await check_confined(troupe, beta, 'beta-run', 'acme-run', `${mode} beta`);

    // The caller's own run can be cancelled (a finished run comes back unchanged, AS-52).
    const cancel = await troupe.request('POST', '/v1/runs/acme-run/cancel', { headers: acme });
    assert.equal(cancel.status, 200, cancel.text);
    assert.equal(cancel.json.status, 'completed');
    // No credential at all is still refused.
    assert.equal((await troupe.request('GET', '/v1/runs')).status, 401);

    const all = (await get(troupe, '/v1/runs', op)).json;
    assert.deepEqual(all.runs.map((r) => r.run_id).sort(), ['acme-run', 'beta-run']);
    const m = (await get(troupe, '/v1/metrics', op)).json;
    assert.equal(m.runs.durable.total_count, 2);
    assert.ok(m.store.root, 'the operator sees the store');
  });
}

scenario('AS-84 a trusted_headers caller without a tenant prefix is the "" tenant, which is a tenant too', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token }, auth: { mode: 'trusted_headers' } } });
  const nobody = as_trusted('carol');
  await chat_run(troupe, nobody, 'plain-run');
  await chat_run(troupe, as_trusted('acme:alice'), 'acme-run');
  await check_confined(troupe, nobody, 'plain-run', 'acme-run', 'the "" tenant');
});

scenario('AS-50 AS-55 run and trace lists return 200 by default, at most 1000, and every record for limit=0', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token } } });
  const n = 205;
  for (let i = 0; i < n; i += 25) {
    await Promise.all(Array.from({ length: Math.min(25, n - i) }, (_, k) =>
      troupe.request('POST', '/v1/runs', { body: { messages: [user(`run ${i + k}`)] }, headers: op })
        .then((r) => assert.equal(r.status, 200, r.text))));
  }
  await until(async () => (await get(troupe, '/v1/traces?limit=1', op)).json.total_count === n,
    { timeout_ms: 60_000, interval_ms: 100, message: `${n} traces` });
  for (const list of ['runs', 'traces']) {
    const byDefault = (await get(troupe, `/v1/${list}`, op)).json;
    assert.equal(byDefault[list].length, 200, `${list}: 200 by default`);
    assert.equal(byDefault.limit, 200);
    assert.equal(byDefault.total_count, n);
    assert.equal(byDefault.has_more, true);
    const all = (await get(troupe, `/v1/${list}?limit=0`, op)).json;
    assert.equal(all[list].length, n, `${list}: limit=0 is every record`);
    assert.equal(all.count, n);
    assert.equal(all.limit, 0);
    assert.equal(all.has_more, false);
    const clamped = (await get(troupe, `/v1/${list}?limit=5000`, op)).json;
    assert.equal(clamped.limit, 1000, `${list}: clamped to 1000`);
    assert.equal(clamped[list].length, n);
    assert.equal((await get(troupe, `/v1/${list}?limit=1`, op)).json[list].length, 1);
    const negative = await get(troupe, `/v1/${list}?limit=-1`, op, 400);
    assert.deepEqual(negative.json, { detail: 'limit must be >= 0' });
  }
});

scenario('AS-55 AS-93 a trace records the policy_snapshot_hash GET /v1/policy reports for the policy its run started under', async (s) => {
  const troupe = await s.troupe({
    config: { ...quick, service: { service_token }, policy: { default_action: 'allow', tool_rules: { exec: 'deny' } } },
  });
  const policy = (await get(troupe, '/v1/policy', op)).json;
  assert.match(policy.policy_snapshot_hash, /^[0-9a-f]{16}$/);
  await chat_run(troupe, op, 'hashed-chat');
  const run = await troupe.request('POST', '/v1/runs', { body: { messages: [user('bg')], metadata: { run_id: 'hashed-bg' } }, headers: op });
  assert.equal(run.status, 200, run.text);
  for (const id of ['hashed-chat', 'hashed-bg'])
    assert.equal((await trace_of(troupe, id)).policy_snapshot_hash, policy.policy_snapshot_hash, id);
  const listed = (await get(troupe, '/v1/traces?limit=0', op)).json.traces;
  for (const t of listed) assert.equal(t.policy_snapshot_hash, policy.policy_snapshot_hash);
});

scenario('AS-56 AS-59 the metrics store report has every AS-56 stream with records, bytes and last_created_at, and tasks', async (s) => {
  const troupe = await s.troupe({ config: { ...quick, service: { service_token, rate_limit_per_hour: 100 } } });
  const chat = await chat_run(troupe, op, 'report-chat');
  const bg = await troupe.request('POST', '/v1/runs', { body: { messages: [user('bg')], metadata: { run_id: 'report-bg' } }, headers: op });
  assert.equal(bg.status, 200, bg.text);
  await trace_of(troupe, 'report-bg');
  const bg_events = (await get(troupe, '/v1/runs/report-bg/events?limit=0', op)).json.events;

  const m = (await get(troupe, '/v1/metrics', op)).json;
  assert.deepEqual(m.tasks, { count: 0 }, 'troupe keeps no task records');
  const streams = m.store.streams;
  assert.deepEqual(Object.keys(streams).sort(),
    ['approvals', 'audit', 'events', 'rate_limits', 'run_events', 'runs', 'runtime_spans', 'sessions', 'traces']);
  for (const [name, st] of Object.entries(streams)) {
    assert.deepEqual(Object.keys(st).sort(), ['bytes', 'last_created_at', 'records'], name);
    if (st.records > 0) assert.match(st.last_created_at, timestamp_re, `${name}.last_created_at`);
    else assert.equal(st.last_created_at, null, `${name} is empty`);
  }
  assert.equal(streams.runs.records, 2);
  assert.equal(streams.events.records, chat.events.length, 'a chat run\'s events (AS-91)');
  assert.equal(streams.run_events.records, bg_events.length, 'a background run\'s events (AS-51)');
  assert.ok(streams.events.bytes > 0 && streams.run_events.bytes > 0);
  assert.equal(streams.traces.records, 2);
  assert.equal(streams.runtime_spans.records, 0, 'troupe records no runtime spans');
  assert.equal(streams.rate_limits.records, 1, 'the service-token caller\'s window');
  assert.equal(m.store.total_records, Object.values(streams).reduce((n, st) => n + st.records, 0));
});
