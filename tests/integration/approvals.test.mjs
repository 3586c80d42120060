// Service-policy decisions on live calls and the approval round trip (§6, §7): forbidden exec is
// blocked (AS-36), danger asks through ask_user and waits (AS-46), the approvals API lists, reads and
// resolves (AS-47, AS-48), approve runs the tool and deny / expiry / cancellation do not (AS-43,
// AS-44, AS-81), pending approvals survive kill -9 (AS-81), and every request and outcome is audited
// with redacted arguments (AS-45, AS-85).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  scenario, check_event_stream, check_attempt_order, event_keys, get_run, timestamp_re, until, user, wait_run,
} from './harness.mjs';

const approval_id_re = /^approval-[0-9a-f]{10}$/;
const terminal = new Set(['completed', 'failed', 'cancelled']);
const types = (events) => events.map((e) => `${e.type}${e.tool_name ? ` ${e.tool_name}` : ''}: ${e.content}`).join('\n');

// AS-42: every approval record carries these keys.
const record_keys = [
  'request_id', 'approval_request_id', 'run_id', 'session_id', 'tenant_key', 'user_key', 'task_id', 'tool_name',
  'tool_args', 'reason', 'decision_level', 'pattern_matched', 'policy_scope', 'policy_action', 'policy_matched',
  'status', 'approved', 'expired', 'timeout_seconds', 'created_at', 'expires_at', 'resolved_at', 'resolution_reason',
];

// AS-78 text → milliseconds since the epoch.
function ts_ms(t) {
  const m = String(t).match(/^(.*T\d{2}:\d{2}:\d{2})\.(\d{6})\+00:00$/);
  assert.ok(m, `${t} follows AS-78`);
  return Date.parse(`${m[1]}Z`) + Number(m[2]) / 1000;
}

function check_record(r, what = 'approval') {
  for (const k of record_keys) assert.ok(k in r, `${what} has key ${k}: ${JSON.stringify(r)}`);
  assert.match(r.request_id, approval_id_re);
  assert.equal(r.approval_request_id, r.request_id);
  assert.match(r.created_at, timestamp_re);
  assert.match(r.expires_at, timestamp_re);
  if (r.resolved_at !== null) assert.match(r.resolved_at, timestamp_re);
  return r;
}

async function get_approval(troupe, id, headers = {}) {
  const res = await troupe.request('GET', `/v1/approvals/${encodeURIComponent(id)}`, { headers });
  assert.equal(res.status, 200, `GET /v1/approvals/${id}: ${res.text}`);
  assert.ok(res.json.approval, res.text);
  return check_record(res.json.approval);
}

async function list_approvals(troupe, query = '') {
  const res = await troupe.request('GET', `/v1/approvals${query}`);
  assert.equal(res.status, 200, `GET /v1/approvals${query}: ${res.text}`);
  assert.equal(res.json.schema, 'fastreact.approvals.v1');
  return res.json;
}

function resolve(troupe, id, verb, body) {
  return troupe.request('POST', `/v1/approvals/${encodeURIComponent(id)}/${verb}`, body === undefined ? {} : { body });
}

async function post_run(troupe, body) {
  const res = await troupe.request('POST', '/v1/runs', { body });
  assert.equal(res.status, 200, `POST /v1/runs: ${res.text}`);
  assert.equal(res.json.status, 'queued', res.text);
  return res.json;
}

async function all_events(troupe, run_id) {
  const res = await troupe.request('GET', `/v1/runs/${encodeURIComponent(run_id)}/events?limit=0`);
  assert.equal(res.status, 200, `GET /v1/runs/${run_id}/events: ${res.text}`);
  return res.json.events;
}

// Polls until the run has exactly `n` pending approvals; returns them (oldest first).
async function pending_of(troupe, run_id, n = 1, timeout_ms = 20_000) {
  const page = await until(async () => {
    const p = await list_approvals(troupe, `?run_id=${encodeURIComponent(run_id)}&status=pending&order=asc`);
    return p.count === n && p;
  }, { timeout_ms, interval_ms: 20, message: `${n} pending approval(s) of ${run_id}` });
  return page.approvals.map((r) => check_record(r));
}

// <data_dir>/audit.jsonl as records (AS-45).
function audit_records(troupe) {
  const file = path.join(troupe.data_dir, 'audit.jsonl');
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

async function kill9(troupe) {
  troupe.signal('SIGKILL');
  const exit = await troupe.wait_exit(10_000);
  assert.ok(exit, 'the killed process exited');
  assert.equal(exit.signal, 'SIGKILL', JSON.stringify(exit));
}

// write_file (caution, runs), then a dangerous exec, then an answer quoting what the model saw.
const rm_script = (file = 'test.txt', command = `rm ${file}`) => [
  { content: 'Making a file.', tool_calls: [{ name: 'write_file', arguments: { path: file, content: 'keep me?\n' } }] },
  { content: 'Removing it.', tool_calls: [{ name: 'exec', arguments: { command } }] },
  { content: 'Model saw: {{last_tool_result}}' },
];

scenario('a forbidden exec command is blocked with [SAFETY_BLOCKED] and never runs, even when a policy rule allows exec (AS-35, AS-36, AS-44)', async (s) => {
  const troupe = await s.troupe({
    config: {
      policy: { tool_rules: { exec: 'allow' } },
      model: {
        script: [
          { tool_calls: [{ name: 'write_file', arguments: { path: 'victim/keep.txt', content: 'precious' } }] },
          { tool_calls: [{ name: 'exec', arguments: { command: 'rm -rf ./victim' } }] },
          { content: 'Model saw: {{last_tool_result}}' },
        ],
      },
    },
  });
  const stream = await troupe.stream({ messages: [user('clean up')], user_key: 'pska:mallory' });
  assert.equal(stream.status, 200, stream.body);
  const { frames } = await stream.finished;
  const events = check_event_stream(frames);
  check_attempt_order(events);
  assert.ok(!events.some((e) => e.type === 'ask_user'), `a forbidden call asks nobody: ${types(events)}`);
  const results = events.filter((e) => e.type === 'tool_result');
  assert.equal(results.length, 2, types(events));
  const blocked = results[1];
  assert.equal(blocked.tool_name, 'exec');
  assert.equal(blocked.content, '[SAFETY_BLOCKED] Command matches forbidden pattern');
  assert.equal(blocked.metadata.decision_level, 'forbidden');
  assert.equal(blocked.metadata.approved, false, 'blocked → approved:false (AS-44)');
  assert.equal(blocked.metadata.request_id, null, 'no approval was involved');
  assert.equal(results[0].metadata.approved, null, 'an unguarded caution call has approved:null (AS-44)');
  assert.equal(results[0].metadata.decision_level, 'caution');
  const ws = troupe.workspace('pska', 'pska:mallory');
  assert.equal(fs.readFileSync(path.join(ws, 'victim', 'keep.txt'), 'utf8'), 'precious', 'the command never ran');
  const end = events[events.length - 1];
  assert.equal(end.content, 'Model saw: [SAFETY_BLOCKED] Command matches forbidden pattern', 'the model sees the same text');
  assert.equal((await list_approvals(troupe)).total_count, 0, 'no approval was created');

  const rec = await until(() => audit_records(troupe).find((r) => r.kind === 'execution' && r.tool_name === 'exec'),
    { message: 'the audit record of the blocked call' });
  assert.equal(rec.decision_level, 'forbidden');
  assert.equal(rec.decision_reason, 'Command matches forbidden pattern');
  assert.equal(rec.pattern_matched, '\\brm\\s+-rf\\s+\\.');
  assert.equal(rec.approved, false);
});

scenario('a dangerous exec emits ask_user and waits; approving it through the API runs the tool and completes the run (AS-43, AS-46, AS-48, AS-76)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: rm_script() } } });
  const session_id = 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d';
  const stream = await troupe.stream({ messages: [user('remove test.txt')], user_key: 'pska:alice', session_id });
  assert.equal(stream.status, 200, stream.body);
  const ask_frame = await stream.wait_for((f) => f.event === 'ask_user', 20_000);
  const ask = ask_frame.json;
  const ws = troupe.workspace('pska', 'pska:alice');
  const file = path.join(ws, 'test.txt');

  for (const k of event_keys) assert.ok(k in ask, `ask_user has key ${k}`);
  assert.equal(ask.content, 'Command matches dangerous pattern', 'content is the reason');
  assert.equal(ask.tool_name, 'exec');
  assert.deepEqual(ask.tool_args, { command: 'rm test.txt' });
  const id = ask.approval_request_id;
  assert.match(id, approval_id_re);
  const call = stream.frames.map((f) => f.json).find((e) => e?.type === 'tool_call' && e.tool_name === 'exec');
  assert.equal(ask.tool_call_id, call.tool_call_id, 'ask_user carries its call id (AS-76)');
  assert.equal(ask.metadata.request_id, id, 'metadata.request_id is the same id');
  assert.equal(ask.metadata.decision_level, 'danger');
  assert.equal(ask.metadata.pattern_matched, '\\brm\\s+');
  assert.equal(ask.metadata.timeout_seconds, 300, 'the default approval timeout');
  assert.match(ask.metadata.expires_at, timestamp_re);
  assert.equal(ask.metadata.policy_scope, null);
  assert.equal(ask.metadata.policy_action, null);
  assert.equal(ask.metadata.policy_matched, false);

  // The run waits: no tool_result for the call, the file is still there, the approval is pending.
  assert.ok(!stream.frames.some((f) => f.json?.type === 'tool_result' && f.json.tool_name === 'exec'));
  assert.ok(fs.existsSync(file), 'nothing ran before the approval');
  const pending = await get_approval(troupe, id);
  assert.equal(pending.status, 'pending');
  assert.equal(pending.approved, null, 'approved is null while pending');
  assert.equal(pending.expired, false);
  assert.equal(pending.resolved_at, null);
  assert.equal(pending.resolution_reason, null);
  assert.equal(pending.run_id, ask.run_id);
  assert.equal(pending.session_id, session_id, 'the session_id is kept byte for byte (AS-79)');
  assert.equal(pending.user_key, 'pska:alice');
  assert.equal(pending.tenant_key, 'pska');
  assert.equal(pending.tool_name, 'exec');
  assert.deepEqual(pending.tool_args, { command: 'rm test.txt' });
  assert.equal(pending.reason, 'Command matches dangerous pattern');
  assert.equal(pending.decision_level, 'danger');
  assert.equal(pending.pattern_matched, '\\brm\\s+');
  assert.equal(pending.timeout_seconds, 300);
  assert.equal(pending.expires_at, ask.metadata.expires_at);
  const window_s = (ts_ms(pending.expires_at) - ts_ms(pending.created_at)) / 1000;
  assert.ok(Math.abs(window_s - 300) < 1, `expires_at is created_at + 300 s: ${window_s}`);
  const run = await get_run(troupe, ask.run_id);
  assert.equal(run.status, 'running', 'the run is still running while it waits');

  const approved = await resolve(troupe, id, 'approve', { reason: 'operator ok' });
  assert.equal(approved.status, 200, approved.text);
  assert.deepEqual(Object.keys(approved.json).sort(), ['approval_request_id', 'approved', 'request_id', 'resolved_at', 'status']);
  assert.equal(approved.json.request_id, id);
  assert.equal(approved.json.approval_request_id, id);
  assert.equal(approved.json.status, 'approved');
  assert.equal(approved.json.approved, true);
  assert.match(approved.json.resolved_at, timestamp_re);

  const { frames } = await stream.finished;
  const events = check_event_stream(frames);
  const steps = check_attempt_order(events);
  assert.equal(steps.length, 3, types(events));
  const [result] = steps[1].results;
  assert.equal(result.tool_name, 'exec');
  assert.equal(result.content, '', 'rm printed nothing');
  assert.equal(result.metadata.decision_level, 'danger');
  assert.equal(result.metadata.approved, true, 'approved danger → approved:true (AS-44)');
  assert.equal(result.metadata.request_id, id, 'request_id is the approval id after an approval (AS-13)');
  assert.ok(!fs.existsSync(file), 'the approved command ran');
  assert.equal(events[events.length - 1].type, 'session_end');

  const after = await get_approval(troupe, id);
  assert.equal(after.status, 'approved');
  assert.equal(after.approved, true);
  assert.equal(after.expired, false);
  assert.equal(after.resolution_reason, 'operator ok', 'the body reason is the resolution_reason');
  assert.equal(after.resolved_at, approved.json.resolved_at);

  for (const verb of ['approve', 'deny']) {
    const again = await resolve(troupe, id, verb);
    assert.equal(again.status, 404, `a second ${verb}: ${again.text}`);
    assert.deepEqual(again.json, { detail: 'Approval request not found or already resolved' });
  }
  assert.equal((await get_approval(troupe, id)).status, 'approved', 'a late deny changes nothing');
});

scenario('a denied approval answers [SAFETY_DENIED] to the run and the model, the tool never runs, and policy fields reach the ask_user and the record (AS-38, AS-43, AS-44)', async (s) => {
  const troupe = await s.troupe({
    config: {
      policy: { tool_rules: { exec: 'require_approval' } },
      model: {
        script: [
          { tool_calls: [{ name: 'exec', arguments: { command: 'touch made.txt' } }] },
          { content: 'Model saw: {{last_tool_result}}' },
        ],
      },
    },
  });
  const stream = await troupe.stream({ messages: [user('make a file')], user_key: 'pska:bob' });
  assert.equal(stream.status, 200, stream.body);
  const ask = (await stream.wait_for((f) => f.event === 'ask_user', 20_000)).json;
  assert.equal(ask.content, 'Policy tool:exec requires approval');
  assert.equal(ask.metadata.policy_scope, 'tool:exec');
  assert.equal(ask.metadata.policy_action, 'require_approval');
  assert.equal(ask.metadata.policy_matched, true);
  assert.equal(ask.metadata.pattern_matched, null);
  const id = ask.approval_request_id;
  const pending = await get_approval(troupe, id);
  assert.equal(pending.policy_scope, 'tool:exec');
  assert.equal(pending.policy_action, 'require_approval');
  assert.equal(pending.policy_matched, true);

  // The same decision as a dry run (AS-38).
  const check = await troupe.request('POST', '/v1/policy/check', {
    body: { tool_name: 'exec', tool_args: { command: 'touch made.txt' }, user_key: 'pska:bob' },
  });
  assert.equal(check.status, 200, check.text);
  assert.equal(check.json.reason, ask.content);
  assert.equal(check.json.policy_scope, ask.metadata.policy_scope);

  const denied = await resolve(troupe, id, 'deny');
  assert.equal(denied.status, 200, denied.text);
  assert.equal(denied.json.status, 'denied');
  assert.equal(denied.json.approved, false);
  assert.equal(denied.json.request_id, id);

  const { frames } = await stream.finished;
  const events = check_event_stream(frames);
  const steps = check_attempt_order(events);
  const [result] = steps[0].results;
  assert.ok(result.content.startsWith('[SAFETY_DENIED] '), `denied → [SAFETY_DENIED]: ${result.content}`);
  assert.equal(result.metadata.approved, false);
  assert.equal(result.metadata.decision_level, 'danger');
  assert.equal(result.metadata.request_id, id);
  assert.equal(events[events.length - 1].content, `Model saw: ${result.content}`, 'the model sees the same text');
  assert.ok(!fs.existsSync(path.join(troupe.workspace('pska', 'pska:bob'), 'made.txt')), 'the denied command never ran');

  const after = await get_approval(troupe, id);
  assert.equal(after.status, 'denied');
  assert.equal(after.approved, false);
  assert.equal(after.expired, false);
  assert.equal(after.resolution_reason, 'denied', 'no body reason → "denied"');
  const again = await resolve(troupe, id, 'approve');
  assert.equal(again.status, 404);
  assert.deepEqual(again.json, { detail: 'Approval request not found or already resolved' });
});

scenario('an approval nobody answers expires after service.approval_timeout_seconds with approval_timeout and the tool is denied (AS-42, AS-43)', async (s) => {
  const troupe = await s.troupe({ config: { service: { approval_timeout_seconds: 1.5 }, model: { script: rm_script() } } });
  const stream = await troupe.stream({ messages: [user('remove test.txt')], user_key: 'pska:carol' });
  assert.equal(stream.status, 200, stream.body);
  const ask = (await stream.wait_for((f) => f.event === 'ask_user', 20_000)).json;
  assert.equal(ask.metadata.timeout_seconds, 1.5);
  const id = ask.approval_request_id;

  const { frames } = await stream.finished;
  const events = check_event_stream(frames);
  const steps = check_attempt_order(events);
  const [result] = steps[1].results;
  assert.ok(result.content.startsWith('[SAFETY_DENIED] '), `expired → [SAFETY_DENIED]: ${result.content}`);
  assert.equal(result.metadata.approved, false);
  assert.equal(result.metadata.request_id, id);
  assert.ok(fs.existsSync(path.join(troupe.workspace('pska', 'pska:carol'), 'test.txt')), 'the expired command never ran');
  assert.equal(events[events.length - 1].type, 'session_end', 'an expiry does not fail the run');

  const r = await get_approval(troupe, id);
  assert.equal(r.status, 'expired');
  assert.equal(r.approved, false);
  assert.equal(r.expired, true);
  assert.equal(r.resolution_reason, 'approval_timeout');
  assert.equal(r.timeout_seconds, 1.5);
  assert.match(r.resolved_at, timestamp_re);
  assert.ok(ts_ms(r.resolved_at) >= ts_ms(r.expires_at) - 1, `resolved at or after expires_at: ${JSON.stringify(r)}`);
  const page = await list_approvals(troupe);
  assert.equal(page.summary.expired_count, 1);
  assert.equal(page.pending_count, 0);
  const late = await resolve(troupe, id, 'approve');
  assert.equal(late.status, 404, 'an expired approval cannot be approved');
  assert.deepEqual(late.json, { detail: 'Approval request not found or already resolved' });
});

scenario('cancelling a background run that waits on an approval denies the approval with run_cancelled and runs nothing (AS-52, AS-81)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: rm_script() } } });
  await post_run(troupe, { messages: [user('remove test.txt')], user_key: 'pska:dan', metadata: { run_id: 'appr-cancel' } });
  const [pending] = await pending_of(troupe, 'appr-cancel');
  const cancel = await troupe.request('POST', '/v1/runs/appr-cancel/cancel');
  assert.equal(cancel.status, 200, cancel.text);
  const run = await wait_run(troupe, 'appr-cancel', (r) => terminal.has(r.status), { message: 'the run to end' });
  assert.equal(run.status, 'cancelled');
  const r = await until(async () => {
    const a = await get_approval(troupe, pending.request_id);
    return a.status !== 'pending' && a;
  }, { timeout_ms: 5000, message: 'the approval to be resolved by the cancellation' });
  assert.equal(r.status, 'denied');
  assert.equal(r.approved, false);
  assert.equal(r.resolution_reason, 'run_cancelled');
  assert.ok(fs.existsSync(path.join(troupe.workspace('pska', 'pska:dan'), 'test.txt')), 'the command never ran');
  const late = await resolve(troupe, pending.request_id, 'approve');
  assert.equal(late.status, 404, late.text);
  const events = await all_events(troupe, 'appr-cancel');
  assert.ok(!events.some((e) => e.type === 'tool_result' && e.tool_name === 'exec' && e.metadata.approved === true),
    `nothing ran after the cancellation: ${types(events)}`);
});

scenario('background runs waiting on an approval hold no concurrency slot: another run starts and completes meanwhile, and the approved run finishes after (AS-46, AS-53)', async (s) => {
  const troupe = await s.troupe({
    config: { service: { run_concurrency: 1 }, model: { script: rm_script(), scripts: { quick: [{ content: 'quick answer' }] } } },
  });
  await post_run(troupe, { messages: [user('remove test.txt')], user_key: 'pska:sam', metadata: { run_id: 'slot-waiting' } });
  const [pending] = await pending_of(troupe, 'slot-waiting');
  await post_run(troupe, { messages: [user('quick one')], model: 'scripted:quick', metadata: { run_id: 'slot-next' } });
  const next = await wait_run(troupe, 'slot-next', (r) => terminal.has(r.status),
    { timeout_ms: 20_000, message: 'the queued run to run while the other waits on its approval' });
  assert.equal(next.status, 'completed', JSON.stringify(next));
  assert.equal((await get_run(troupe, 'slot-waiting')).status, 'running', 'the waiting run still waits');

  assert.equal((await resolve(troupe, pending.request_id, 'approve')).status, 200);
  const run = await wait_run(troupe, 'slot-waiting', (r) => terminal.has(r.status), { message: 'the approved run to end' });
  assert.equal(run.status, 'completed', JSON.stringify(run));
  assert.ok(!fs.existsSync(path.join(troupe.workspace('pska', 'pska_sam'), 'test.txt')), 'the approved command ran');
});

scenario('GET /v1/approvals filters, orders and pages the records and summarizes the filtered set (AS-47), and unknown ids are 404 (AS-48)', async (s) => {
  const troupe = await s.troupe({
    config: {
      policy: { user_rules: { 'pska:ops': { tools: { exec: 'require_approval' } } } },
      model: {
        scripts: {
          ls: [{ tool_calls: [{ name: 'exec', arguments: { command: 'ls' } }] }, { content: 'listed' }],
          rm: rm_script(),
        },
      },
    },
  });
  // Three runs, started one after the other so their approvals have increasing created_at.
  const runs = [
    { run_id: 'list-a', user_key: 'pska:ops', model: 'scripted:ls', session_id: '11111111-1111-4111-8111-111111111111' },
    { run_id: 'list-b', user_key: 'pska:bob', model: 'scripted:rm', session_id: '22222222-2222-4222-8222-222222222222' },
    { run_id: 'list-c', user_key: 'pska:bob', model: 'scripted:rm', session_id: '33333333-3333-4333-8333-333333333333' },
  ];
  const ids = {};
  for (const r of runs) {
    await post_run(troupe, {
      messages: [user(`go ${r.run_id}`)], user_key: r.user_key, model: r.model, session_id: r.session_id,
      metadata: { run_id: r.run_id },
    });
    ids[r.run_id] = (await pending_of(troupe, r.run_id))[0].request_id;
  }
  const a = await get_approval(troupe, ids['list-a']);
  assert.equal(a.policy_scope, 'user:pska:ops', 'a user rule decided it (AS-35)');
  assert.equal(a.policy_action, 'require_approval');
  assert.equal(a.reason, 'Policy user:pska:ops requires approval');

  const ra = await resolve(troupe, ids['list-a'], 'approve');
  assert.equal(ra.status, 200, ra.text);
  const rb = await resolve(troupe, ids['list-b'], 'deny', { reason: 'not today' });
  assert.equal(rb.status, 200, rb.text);
  await wait_run(troupe, 'list-a', (r) => r.status === 'completed', { message: 'list-a to complete' });
  await wait_run(troupe, 'list-b', (r) => r.status === 'completed', { message: 'list-b to complete' });

  const all = await list_approvals(troupe);
  assert.equal(all.count, 3);
  assert.equal(all.total_count, 3);
  assert.equal(all.limit, 200, 'limit defaults to 200');
  assert.equal(all.offset, 0);
  assert.equal(all.order, 'desc');
  assert.equal(all.next_offset, null);
  assert.equal(all.has_more, false);
  assert.equal(all.pending_count, 1);
  assert.deepEqual(all.filters, {});
  assert.deepEqual(all.approvals.map((r) => r.run_id), ['list-c', 'list-b', 'list-a'], 'newest first by default');
  for (const r of all.approvals) check_record(r);
  assert.equal(all.summary.count, 3);
  assert.equal(all.summary.pending_count, 1);
  assert.equal(all.summary.expired_count, 0);
  assert.deepEqual(all.summary.status_counts, { approved: 1, denied: 1, pending: 1 });
  assert.equal(all.summary.policy_action_counts.require_approval, 1, JSON.stringify(all.summary.policy_action_counts));
  assert.equal(typeof all.summary.avg_resolution_ms, 'number', JSON.stringify(all.summary));
  assert.ok(all.summary.avg_resolution_ms > 0);
  assert.equal(all.approvals.find((r) => r.run_id === 'list-b').resolution_reason, 'not today');

  const asc = await list_approvals(troupe, '?order=asc');
  assert.deepEqual(asc.approvals.map((r) => r.run_id), ['list-a', 'list-b', 'list-c']);
  assert.equal(asc.order, 'asc');

  const pending = await list_approvals(troupe, '?status=pending');
  assert.deepEqual(pending.approvals.map((r) => r.run_id), ['list-c']);
  assert.equal(pending.total_count, 1);
  assert.deepEqual(pending.filters, { status: 'pending' });
  assert.equal(pending.summary.count, 1, 'the summary covers the filtered set');
  assert.deepEqual(pending.summary.status_counts, { pending: 1 });

  const p1 = await list_approvals(troupe, '?limit=1&order=asc');
  assert.equal(p1.count, 1);
  assert.equal(p1.total_count, 3);
  assert.equal(p1.next_offset, 1);
  assert.equal(p1.has_more, true);
  assert.equal(p1.approvals[0].run_id, 'list-a');
  const p2 = await list_approvals(troupe, '?limit=1&offset=1&order=asc');
  assert.equal(p2.approvals[0].run_id, 'list-b');
  assert.equal(p2.next_offset, 2);
  const p3 = await list_approvals(troupe, '?limit=1&offset=2&order=asc');
  assert.equal(p3.approvals[0].run_id, 'list-c');
  assert.equal(p3.next_offset, null, 'null on the last page');
  assert.equal(p3.has_more, false);
  assert.equal((await list_approvals(troupe, '?limit=0')).count, 3, 'limit=0 returns all');

  const filters = [
    ['run_id=list-b', ['list-b']],
    ['session_id=33333333-3333-4333-8333-333333333333', ['list-c']],
    ['tool_name=exec', ['list-c', 'list-b', 'list-a']],
    ['tool_name=write_file', []],
    ['policy_action=require_approval', ['list-a']],
    ['policy_scope=user%3Apska%3Aops', ['list-a']],
    ['status=denied', ['list-b']],
    ['status=approved&run_id=list-b', []],
  ];
  for (const [q, want] of filters) {
    const page = await list_approvals(troupe, `?${q}`);
    assert.deepEqual(page.approvals.map((r) => r.run_id), want, `?${q}`);
    assert.equal(page.total_count, want.length, `?${q} total_count`);
  }

  for (const [q, detail] of [['?limit=-1', 'limit must be >= 0'], ['?order=sideways', "order must be 'asc' or 'desc'"]]) {
    const bad = await troupe.request('GET', `/v1/approvals${q}`);
    assert.equal(bad.status, 400, `${q}: ${bad.text}`);
    assert.deepEqual(bad.json, { detail });
  }
  const not_int = await troupe.request('GET', '/v1/approvals?limit=abc');
  assert.equal(not_int.status, 422, not_int.text);
  assert.ok(Array.isArray(not_int.json.detail), 'a 422 detail is a list (AS-2)');

  const missing = await troupe.request('GET', '/v1/approvals/approval-0000000000');
  assert.equal(missing.status, 404, missing.text);
  assert.deepEqual(missing.json, { detail: 'Approval request not found' });
  for (const verb of ['approve', 'deny']) {
    const r = await resolve(troupe, 'approval-0000000000', verb);
    assert.equal(r.status, 404, r.text);
    assert.deepEqual(r.json, { detail: 'Approval request not found or already resolved' });
  }
});

scenario('an approval records the run\'s metadata.task_id and can be filtered by it (AS-42, AS-47)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: rm_script() } } });
  await post_run(troupe, {
    messages: [user('remove')], user_key: 'pska:tia', metadata: { run_id: 'appr-task', task_id: 'task-7' },
  });
  const [pending] = await pending_of(troupe, 'appr-task');
  assert.equal(pending.task_id, 'task-7', `the record carries task_id: ${JSON.stringify(pending)}`);
  const page = await list_approvals(troupe, '?task_id=task-7');
  assert.deepEqual(page.approvals.map((r) => r.request_id), [pending.request_id]);
  assert.equal((await list_approvals(troupe, '?task_id=task-8')).total_count, 0);
});

scenario('the approvals endpoints require the service token when one is configured (AS-1, AS-3)', async (s) => {
  const token = 'approvals-token';
  const auth = { authorization: `Bearer ${token}` };
  const troupe = await s.troupe({ config: { service: { service_token: token }, model: { script: rm_script() } } });
  const posted = await troupe.request('POST', '/v1/runs', {
    body: { messages: [user('remove')], user_key: 'pska:tok', metadata: { run_id: 'appr-auth' } }, headers: auth,
  });
  assert.equal(posted.status, 200, posted.text);
  const page = await until(async () => {
    const r = await troupe.request('GET', '/v1/approvals?run_id=appr-auth', { headers: auth });
    assert.equal(r.status, 200, r.text);
    return r.json.count === 1 && r.json;
  }, { timeout_ms: 20_000, message: 'the approval to be opened' });
  const id = page.approvals[0].request_id;
  const denied = { detail: 'FastReAct service token required' };
  for (const [method, route] of [
    ['GET', '/v1/approvals'], ['GET', `/v1/approvals/${id}`],
    ['POST', `/v1/approvals/${id}/approve`], ['POST', `/v1/approvals/${id}/deny`],
  ]) {
    for (const headers of [{}, { authorization: 'Bearer wrong' }]) {
      const r = await troupe.request(method, route, { headers });
      assert.equal(r.status, 401, `${method} ${route} with ${JSON.stringify(headers)}: ${r.text}`);
      assert.deepEqual(r.json, denied);
    }
  }
  assert.equal((await get_approval(troupe, id, auth)).status, 'pending', 'the refused calls resolved nothing');
  const ok = await troupe.request('POST', `/v1/approvals/${id}/approve`, { headers: { 'x-fastreact-service-token': token } });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.status, 'approved');
});

scenario('a pending approval survives kill -9: the recovered run re-asks with the same approval_request_id, and approving it after the restart runs the tool (AS-81, AS-83)', async (s) => {
  const config = { service: { run_max_attempts: 3 }, model: { script: rm_script() } };
  const first = await s.troupe({ config });
  await post_run(first, { messages: [user('remove test.txt')], user_key: 'pska:rita', metadata: { run_id: 'appr-restart' } });
  const [pending] = await pending_of(first, 'appr-restart');
  const id = pending.request_id;
  const before = await all_events(first, 'appr-restart');
  assert.equal(before.filter((e) => e.type === 'ask_user').length, 1, types(before));
  await kill9(first);

  const second = await s.troupe({ config, data_dir: first.data_dir });
  // The recovered attempt reaches the same call and asks again with the same id.
  const events = await until(async () => {
    const ev = await all_events(second, 'appr-restart');
    return ev.filter((e) => e.type === 'ask_user').length >= 2 && ev;
  }, { timeout_ms: 30_000, interval_ms: 50, message: 'the recovered attempt to re-emit ask_user' });
  const asks = events.filter((e) => e.type === 'ask_user');
  assert.equal(asks.length, 2, types(events));
  assert.equal(asks[1].approval_request_id, id, 'the retried attempt reuses the pending approval');
  assert.equal(asks[1].metadata.request_id, id);
  const starts = events.filter((e) => e.type === 'session_start');
  assert.equal(starts.length, 2, `two attempts: ${types(events)}`);
  assert.equal(starts[1].metadata.attempt, 2);
  const still = await get_approval(second, id);
  assert.equal(still.status, 'pending', 'the approval stays pending across the restart');
  assert.equal(still.expires_at, pending.expires_at, 'its deadline is kept');
  assert.equal((await list_approvals(second, '?run_id=appr-restart')).total_count, 1, 'no second approval was opened');
  const file = path.join(second.workspace('pska', 'pska:rita'), 'test.txt');
  assert.ok(fs.existsSync(file), 'nothing ran yet');

  const approved = await resolve(second, id, 'approve');
  assert.equal(approved.status, 200, approved.text);
  const run = await wait_run(second, 'appr-restart', (r) => terminal.has(r.status), { message: 'the run to end' });
  assert.equal(run.status, 'completed', JSON.stringify(run));
  assert.equal(run.attempts, 2);
  assert.ok(!fs.existsSync(file), 'the approved command ran after the restart');
  const log = await all_events(second, 'appr-restart');
  const exec_results = log.filter((e) => e.type === 'tool_result' && e.tool_name === 'exec');
  assert.equal(exec_results.length, 1, `the exec call has one result, in attempt 2: ${types(log)}`);
  assert.equal(exec_results[0].metadata.approved, true);
  assert.equal(exec_results[0].metadata.request_id, id);
  assert.equal(log[log.length - 1].type, 'session_end');
  assert.equal((await get_approval(second, id)).status, 'approved');
});

scenario('a pending approval whose deadline passed while troupe was down is expired at startup and the recovered run is denied the tool (AS-81)', async (s) => {
  const config = { service: { run_max_attempts: 3, approval_timeout_seconds: 1 }, model: { script: rm_script() } };
  const first = await s.troupe({ config });
  await post_run(first, { messages: [user('remove test.txt')], user_key: 'pska:ola', metadata: { run_id: 'appr-lapsed' } });
  const [pending] = await pending_of(first, 'appr-lapsed');
  await kill9(first);
  const deadline = ts_ms(pending.expires_at);
  await until(() => Date.now() > deadline + 50, { timeout_ms: 5000, interval_ms: 20, message: 'the approval deadline to pass' });

  const second = await s.troupe({ config, data_dir: first.data_dir });
  const r = await until(async () => {
    const a = await get_approval(second, pending.request_id);
    return a.status !== 'pending' && a;
  }, { timeout_ms: 10_000, message: 'the lapsed approval to be expired' });
  assert.equal(r.status, 'expired');
  assert.equal(r.approved, false);
  assert.equal(r.resolution_reason, 'approval_timeout');
  const run = await wait_run(second, 'appr-lapsed', (x) => terminal.has(x.status), { message: 'the run to end' });
  assert.equal(run.status, 'completed', JSON.stringify(run));
  const log = await all_events(second, 'appr-lapsed');
  const exec_results = log.filter((e) => e.type === 'tool_result' && e.tool_name === 'exec');
  assert.equal(exec_results.length, 1, types(log));
  assert.ok(exec_results[0].content.startsWith('[SAFETY_DENIED] '), exec_results[0].content);
  assert.equal(exec_results[0].metadata.approved, false);
  assert.equal(exec_results[0].metadata.request_id, pending.request_id, 'the retried call reuses the expired approval');
  assert.ok(fs.existsSync(path.join(second.workspace('pska', 'pska:ola'), 'test.txt')), 'the command never ran');
  assert.equal((await list_approvals(second, '?run_id=appr-lapsed')).total_count, 1, 'no second approval was opened');
});

scenario('audit.jsonl gets one approval_request and one execution record per gated call, with redacted tool_args and a 500-char result_summary (AS-45, AS-85)', async (s) => {
  const secret_args = {
    command: 'rm secret.txt', api_key: 'k-123', token: 't-456', password: 'p-789', githubPat: 'nope',
    path: 'keep/this/path', note: 'sk-live-abc', max_tokens: 7,
  };
  const masked = {
    command: 'rm secret.txt', api_key: '***', token: '***', password: '***', githubPat: '***',
    path: 'keep/this/path', note: '***', max_tokens: 7,
  };
  const troupe = await s.troupe({
    config: {
      model: {
        script: [
          { tool_calls: [{ name: 'write_file', arguments: { path: 'secret.txt', content: 'x' } }] },
          { tool_calls: [{ name: 'exec', arguments: secret_args }] },
          { tool_calls: [{ name: 'exec', arguments: { command: "head -c 2000 /dev/zero | tr '\\0' a" } }] },
          { content: 'done' },
        ],
      },
    },
  });
  await post_run(troupe, { messages: [user('audit me')], user_key: 'pska:aud', metadata: { run_id: 'appr-audit' } });
  const [pending] = await pending_of(troupe, 'appr-audit');
  assert.deepEqual(pending.tool_args, masked, 'the approval record is redacted');
  const id = pending.request_id;
  assert.equal((await resolve(troupe, id, 'approve')).status, 200);
  const run = await wait_run(troupe, 'appr-audit', (r) => terminal.has(r.status), { message: 'the run to end' });
  assert.equal(run.status, 'completed');
  assert.ok(!fs.existsSync(path.join(troupe.workspace('pska', 'pska:aud'), 'secret.txt')), 'the approved rm ran');

  const records = await until(() => {
    const rs = audit_records(troupe).filter((r) => r.run_id === 'appr-audit');
    return rs.filter((r) => r.kind === 'execution').length >= 3 && rs;
  }, { timeout_ms: 5000, message: 'three execution records in audit.jsonl' });
  const text = fs.readFileSync(path.join(troupe.data_dir, 'audit.jsonl'), 'utf8');
  for (const secret of ['k-123', 't-456', 'p-789', 'sk-live-abc'])
    assert.ok(!text.includes(secret), `${secret} never reaches the audit log`);
  for (const r of records) {
    for (const k of ['run_id', 'tool_name', 'tool_args', 'decision_level', 'decision_reason', 'approved', 'result_summary', 'created_at'])
      assert.ok(k in r, `audit record has ${k}: ${JSON.stringify(r)}`);
    assert.match(r.created_at, timestamp_re);
  }
  const requests = records.filter((r) => r.kind === 'approval_request');
  assert.equal(requests.length, 1, `one approval_request record: ${JSON.stringify(records)}`);
  assert.equal(requests[0].request_id, id);
  assert.equal(requests[0].tool_name, 'exec');
  assert.deepEqual(requests[0].tool_args, masked);
  assert.equal(requests[0].decision_level, 'danger');
  assert.equal(requests[0].decision_reason, 'Command matches dangerous pattern');
  assert.equal(requests[0].approved, null);

  const executions = records.filter((r) => r.kind === 'execution');
  assert.deepEqual(executions.map((r) => r.tool_name), ['write_file', 'exec', 'exec']);
  const [write, rm, head] = executions;
  assert.equal(write.decision_level, 'caution');
  assert.equal(write.decision_reason, 'Tool modifies files (logged but allowed)');
  assert.equal(write.approved, null);
  assert.deepEqual(write.tool_args, { path: 'secret.txt', content: 'x' }, 'path is never masked');
  assert.deepEqual(rm.tool_args, masked);
  assert.equal(rm.decision_level, 'danger');
  assert.equal(rm.approved, true);
  assert.equal(rm.request_id, id);
  assert.equal(head.decision_level, 'safe');
  assert.equal(head.decision_reason, 'Command matches safe pattern');
  assert.equal(head.approved, null);
  assert.equal(head.result_summary, 'a'.repeat(500), 'result_summary is the first 500 chars of the output');
  assert.equal(typeof head.duration_ms, 'number');
});

scenario('emitted and stored events mask sensitive tool_args of a gated call, live and replayed alike (AS-12, AS-85)', async (s) => {
  const args = { command: 'rm creds.txt', api_key: 'k-123', password: 'p-789', path: 'creds.txt', note: 'Bearer abc' };
  const masked = { command: 'rm creds.txt', api_key: '***', password: '***', path: 'creds.txt', note: '***' };
  const troupe = await s.troupe({
    config: { model: { script: [{ tool_calls: [{ name: 'exec', arguments: args }] }, { content: 'done' }] } },
  });
  const stream = await troupe.stream({ messages: [user('go')], user_key: 'pska:red' });
  assert.equal(stream.status, 200, stream.body);
  const ask = (await stream.wait_for((f) => f.event === 'ask_user', 20_000)).json;
  assert.equal((await resolve(troupe, ask.approval_request_id, 'deny')).status, 200);
  const { frames } = await stream.finished;
  const live = check_event_stream(frames).filter((e) => ['tool_call', 'ask_user', 'tool_result'].includes(e.type));
  assert.deepEqual(live.map((e) => e.type), ['tool_call', 'ask_user', 'tool_result']);
  const stored = (await all_events(troupe, ask.run_id)).filter((e) => ['tool_call', 'ask_user', 'tool_result'].includes(e.type));
  for (const [where, events] of [['live', live], ['stored', stored]])
    for (const e of events)
      assert.deepEqual(e.tool_args, masked, `${where} ${e.type} tool_args are redacted: ${JSON.stringify(e.tool_args)}`);
});
