// The runtime guards of a PSKA digest run (AS-70, AS-71, AS-95) against the real binary: a run posted
// as the digest worker posts it (AS-69), the fake upstream calling the PSKA tools of the fake MCP
// server, and what the events, the MCP server, the model, the trace (AS-55) and the metrics (AS-59) see.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, check_attempt_order, source_dir, upstream_config, user, wait_mcp_ready, wait_run } from './harness.mjs';

const write_tool = 'pska_pska_write_candidates';
const context_tool = 'pska_pska_job_context';
const denied = (tool) => `[TOOL_BUDGET_DENIED] ${tool} exceeded per-run budget`;

// A fake-upstream reply calling tools; arguments go out as JSON text, as a real model sends them.
const calls = (...list) => ({
  tool_calls: list.map(([id, name, args]) => ({ id, name, arguments: JSON.stringify(args) })),
});

// The body of POST /v1/runs as the digest worker sends it (AS-69), with `metadata` over its metadata.
const digest_run = (run_id, metadata = {}) => ({
  messages: [{ role: 'system', content: 'digest rules' }, user('job j1, cursor 0, batch {}')],
  stream: false,
  user_key: 'pska:user_primary',
  tool_policy: { mode: 'allowlist', allowed_tools: [context_tool, write_tool] },
  metadata: {
    run_id, caller: 'pska_digest_worker', purpose: 'digest', tenant_key: 'tenant_default',
    pska_tenant_id: 'tenant_default', pska_user_id: 'user_primary', pska_job_id: 'j1',
    scope: { job_id: 'j1', cursor: '0' },
    tool_budget: { [write_tool]: 1, [context_tool]: 1 },
    ...metadata,
  },
});

// troupe with the fake upstream and the fake MCP server as `pska`, offering PSKA's digest tools.
async function start(s) {
  const log_file = path.join(s.tmpdir('troupe-digest-'), 'fake_mcp.log');
  const up = await s.upstream();
  const troupe = await s.troupe({
    config: {
      ...upstream_config(up),
      mcp: {
        servers: [{
          name: 'pska',
          command: process.execPath,
          args: [path.join(source_dir, 'tests', 'fake_mcp', 'fake_mcp_server.mjs'), '--pska-tools'],
          env: { FAKE_MCP_LOG: log_file },
          transport: 'stdio',
          isolation: 'shared',
          timeout_seconds: 30,
        }],
      },
    },
  });
  await wait_mcp_ready(troupe, ['pska'], 30_000);
  return { up, troupe, log_file };
}

// The writes the fake MCP server executed, as their arguments.
const writes = (log_file) => (fs.existsSync(log_file) ? fs.readFileSync(log_file, 'utf8') : '')
  .split('\n').filter((l) => l.startsWith('write ')).map((l) => JSON.parse(l.slice('write '.length)));

async function completed_events(troupe, run_id) {
  await wait_run(troupe, run_id, (r) => ['completed', 'failed', 'cancelled'].includes(r.status));
  const run = await troupe.request('GET', `/v1/runs/${run_id}`);
  assert.equal(run.json.status, 'completed', run.text);
  const res = await troupe.request('GET', `/v1/runs/${run_id}/events?limit=0`);
  assert.equal(res.status, 200, res.text);
  return res.json.events;
}

scenario('a digest run runs one valid write and one job context read; a rejected write is answered and not run, '
  + 'calls over budget become notices, the model sees every call answered, and the trace and metrics count them '
  + '(AS-70, AS-71, AS-95, AS-55, AS-59)', async (s) => {
  const { up, troupe, log_file } = await start(s);
  const claims = { knowledge_claims: [{ claim: 'kept' }], digest_notes: [{ note: 'n' }] };
  await up.script([
    calls(['c1', context_tool, { job_id: 'j1' }], ['c2', write_tool, { digest_notes: [{ note: 'n' }] }]),
    calls(['c3', write_tool, claims], ['c4', context_tool, { job_id: 'j1' }]),
    calls(['c5', write_tool, { knowledge_claims: [{ claim: 'one too many' }] }]),
    { content: 'digested' },
  ]);
  const posted = await troupe.request('POST', '/v1/runs', { body: digest_run('dg-1') });
  assert.equal(posted.status, 200, posted.text);
  const events = await completed_events(troupe, 'dg-1');
  const steps = check_attempt_order(events);
  const shown = (e) => `${e.type} ${e.tool_call_id ?? ''}: ${e.content}`;
  const log = events.map(shown).join('\n');

  // AS-70: only c1, c2 and c3 are shown as calls; c4 and c5 are notices with no result.
  assert.deepEqual(steps.map((st) => st.calls.map((c) => c.tool_call_id)), [['c1', 'c2'], ['c3'], [], []], log);
  const notices = events.filter((e) => e.type === 'think' && e.metadata?.tool_budget_denied === true);
  assert.deepEqual(notices.map((e) => e.content), [denied(context_tool), denied(write_tool)], log);
  assert.deepEqual(notices.map((e) => e.metadata.call_id), ['c4', 'c5']);
  for (const id of ['c4', 'c5'])
    assert.ok(!events.some((e) => e.tool_call_id === id), `no tool_call or tool_result for ${id}:\n${log}`);

  // AS-71: the write without claims is shown, answered with its error under its own id, and not run.
  const rejected = steps[0].results[1];
  assert.match(rejected.content, /^\[PSKA_DIGEST_VALIDATION_ERROR\] digest_notes need non-empty knowledge_claims/);
  assert.equal(rejected.metadata.digest_validation_error, true, JSON.stringify(rejected.metadata));
  assert.equal(rejected.metadata.request_id, 'c2');
  assert.ok(!('digest_validation_error' in steps[1].results[0].metadata), 'a write that ran carries no flag');
  assert.deepEqual(writes(log_file), [claims], 'the MCP server ran exactly the valid write');

  // AS-95: every call the model made is answered in what troupe sends it next.
  const sent = await up.requests();
  assert.equal(sent.length, 4);
  const last = sent[3].messages;
  const answers = new Map(last.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content]));
  const asked = last.filter((m) => m.role === 'assistant').flatMap((m) => (m.tool_calls ?? []).map((c) => c.id));
  assert.deepEqual(asked, ['c1', 'c2', 'c3', 'c4', 'c5'], 'denied calls stay in the assistant messages');
  for (const id of asked) assert.ok(answers.has(id), `call ${id} is answered upstream: ${JSON.stringify(last)}`);
  assert.equal(answers.get('c4'), denied(context_tool));
  assert.equal(answers.get('c5'), denied(write_tool));
  assert.equal(answers.get('c2'), rejected.content);

  // AS-55: the trace; AS-59: the metrics read the traces back.
  const trace = await troupe.request('GET', '/v1/traces/dg-1');
  assert.equal(trace.status, 200, trace.text);
  assert.deepEqual(trace.json.trace.pska_digest_tool_budget, {
    tool_budget: { [context_tool]: 1, [write_tool]: 1 },
    write_call_count: 1, job_context_call_count: 1, tool_budget_exceeded: true,
  });
  assert.equal(trace.json.trace.tool_call_count, 3, 'denied calls are not counted as tool calls');

  await up.script([{ content: 'no digest here' }]);
  const plain = await troupe.request('POST', '/v1/runs', { body: { messages: [user('hello')], metadata: { run_id: 'plain' } } });
  assert.equal(plain.status, 200, plain.text);
  await completed_events(troupe, 'plain');
  const plain_trace = await troupe.request('GET', '/v1/traces/plain');
  assert.equal(plain_trace.json.trace.pska_digest_tool_budget, null, 'a run that is not a digest run has no budget');

  const metrics = await troupe.request('GET', '/v1/metrics');
  assert.equal(metrics.status, 200, metrics.text);
  const d = metrics.json.integrations.pska_digest;
  assert.equal(d.run_count, 1, JSON.stringify(d));
  assert.equal(d.write_call_count, 1);
  assert.equal(d.job_context_call_count, 1);
  assert.equal(d.tool_budget_exceeded_count, 1);
  assert.deepEqual(d.recent_budget_exceeded.map((r) => r.run_id), ['dg-1']);
  assert.deepEqual(d.recent_budget_exceeded[0].tool_budget, { [context_tool]: 1, [write_tool]: 1 });
});

scenario('metadata.tool_budget raises a digest run\'s budget, and a budget that is not tool names to '
  + 'non-negative integers is a 422 naming it (AS-70, AS-9)', async (s) => {
  const { up, troupe, log_file } = await start(s);
  const write = (claim) => ({ knowledge_claims: [{ claim }] });
  await up.script([
    calls(['w1', write_tool, write('a')], ['w2', write_tool, write('b')], ['w3', write_tool, write('c')]),
    { content: 'digested' },
  ]);
  const posted = await troupe.request('POST', '/v1/runs', { body: digest_run('dg-2', { tool_budget: { [write_tool]: 2 } }) });
  assert.equal(posted.status, 200, posted.text);
  const events = await completed_events(troupe, 'dg-2');
  const steps = check_attempt_order(events);
  assert.deepEqual(steps[0].calls.map((c) => c.tool_call_id), ['w1', 'w2']);
  assert.deepEqual(writes(log_file), [write('a'), write('b')]);
  const trace = (await troupe.request('GET', '/v1/traces/dg-2')).json.trace;
  assert.deepEqual(trace.pska_digest_tool_budget.tool_budget, { [context_tool]: 1, [write_tool]: 2 });
  assert.equal(trace.pska_digest_tool_budget.write_call_count, 2);

  const refused = await troupe.request('POST', '/v1/runs', { body: digest_run('dg-3', { tool_budget: { [write_tool]: -1 } }) });
  assert.equal(refused.status, 422, refused.text);
  assert.deepEqual(refused.json.detail[0].loc, ['body', 'metadata', 'tool_budget', write_tool], refused.text);
  const missing = await troupe.request('GET', '/v1/runs/dg-3');
  assert.equal(missing.status, 404, 'a refused request starts no run');
});
