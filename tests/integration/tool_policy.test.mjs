// Per-run tool_policy (§5, AS-30..AS-33): mode normalization, what is offered upstream (AS-31), the
// execution-time re-check of every call (AS-32) and scope injection into pska_* tools (AS-33), against
// the real binary with the fake OpenAI upstream (to see exactly what troupe sends the model) or the
// scripted model.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  scenario, check_event_stream, check_attempt_order, source_dir, until, upstream_config, user, wait_mcp_ready,
} from './harness.mjs';

const builtin_tools = ['edit_file', 'exec', 'list_dir', 'read_file', 'write_file'];
const sorted = (xs) => [...xs].sort();
const types = (events) => events.map((e) => `${e.type}${e.tool_name ? ` ${e.tool_name}` : ''}: ${e.content}`).join('\n');

// The names of the tools one upstream request offered (undefined when it sent no `tools`).
function offered(request) {
  if (!('tools' in request)) return undefined;
  return request.tools.map((t) => {
    assert.equal(t.type, 'function', `a tool is offered as a function: ${JSON.stringify(t)}`);
    return t.function.name;
  });
}

// A fake-upstream reply calling tools; arguments go out as JSON text, as a real model sends them.
const calls = (...list) => ({
  tool_calls: list.map(([id, name, args]) => ({ id, name, arguments: JSON.stringify(args) })),
});

// <data_dir>/audit.jsonl as records (AS-45); [] before the file exists.
function audit_records(troupe) {
  const file = path.join(troupe.data_dir, 'audit.jsonl');
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

// Waits until the audit log holds a record matching pred; returns it.
async function audited(troupe, pred, message) {
  return until(() => audit_records(troupe).find(pred), { timeout_ms: 5000, interval_ms: 20, message });
}

scenario('every spelling of tool_policy mode none sends no tools upstream and reports visible_tools [] with the normalized policy (AS-30, AS-31)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });

  // A control: without a policy the built-in tools are offered.
  await up.script([{ content: 'tools offered' }]);
  const control = await troupe.chat({ messages: [user('hi')], user_key: 'pska:ann' });
  assert.equal(control.status, 200, control.text);
  assert.deepEqual(sorted(offered((await up.requests())[0]) ?? []), builtin_tools, 'without a policy every built-in tool is offered');

  const cases = [
    { tool_policy: { mode: 'none' } },
    { tool_policy: { mode: 'OFF' } },
    { tool_policy: { mode: 'Disabled' } },
    { tool_policy: { mode: 'no_tools', allowed_tools: ['read_file'] } },
    { metadata: { tool_policy: { mode: 'None' } } }, // the metadata fallback (AS-9)
  ];
  for (const c of cases) {
    const what = JSON.stringify(c);
    await up.reset();
    await up.script([{ content: 'answered without tools' }]);
    const res = await troupe.chat({ messages: [user('hi')], user_key: 'pska:ann', ...c });
    assert.equal(res.status, 200, `${what}: ${res.text}`);
    assert.equal(res.json.content, 'answered without tools');
    const sent = await up.requests();
    assert.equal(sent.length, 1, `${what}: one upstream call`);
    assert.ok(!('tools' in sent[0]), `${what}: no tools are sent upstream: ${JSON.stringify(sent[0].tools)}`);
    assert.ok(!('tool_choice' in sent[0]), `${what}: no tool_choice without tools`);
    const start = res.json.events[0];
    assert.equal(start.type, 'session_start');
    assert.deepEqual(start.metadata.visible_tools, [], `${what}: visible_tools is []`);
    assert.deepEqual(start.metadata.tool_policy, { mode: 'none', allowed_tools: [] },
      `${what}: session_start records the normalized policy`);
  }
});

scenario('under an allowlist only the registered allowed tools are offered upstream and allowed_tools is trimmed and de-duplicated (AS-30, AS-31)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  for (const mode of ['allowlist', 'Allowed_Tools', 'ALLOW']) {
    await up.reset();
    await up.script([{ content: 'fine' }]);
    const tool_policy = { mode, allowed_tools: [' read_file ', 'list_dir', 'read_file', 'list_dir ', 'no_such_tool'] };
    const res = await troupe.chat({ messages: [user('hi')], user_key: 'pska:ann', tool_policy });
    assert.equal(res.status, 200, `${mode}: ${res.text}`);
    const sent = await up.requests();
    assert.equal(sent.length, 1);
    assert.deepEqual(sorted(offered(sent[0]) ?? []), ['list_dir', 'read_file'],
      `${mode}: only the allowed registered tools are offered upstream`);
    assert.equal(sent[0].tool_choice, 'auto');
    const start = res.json.events[0];
    assert.deepEqual(sorted(start.metadata.visible_tools), ['list_dir', 'read_file'], `${mode}: visible_tools`);
    assert.equal(start.metadata.tool_policy.mode, 'allowlist', `${mode} normalizes to allowlist`);
    assert.deepEqual(sorted(start.metadata.tool_policy.allowed_tools), ['list_dir', 'no_such_tool', 'read_file'],
      `${mode}: allowed_tools trimmed and de-duplicated: ${JSON.stringify(start.metadata.tool_policy)}`);
    assert.equal(start.metadata.tool_policy.allowed_tools.length, 3, 'no duplicates');
  }
});

scenario('a policy with an unknown mode or one that is not an object filters nothing (AS-30)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  const cases = [
    { mode: 'whatever', allowed_tools: ['read_file'] },
    'none', // a string, not an object
    ['none'],
  ];
  for (const tool_policy of cases) {
    const what = JSON.stringify(tool_policy);
    await up.reset();
    await up.script([calls(['call_ls', 'list_dir', { path: '.' }]), { content: 'listed' }]);
    const res = await troupe.chat({ messages: [user('hi')], user_key: 'pska:ann', tool_policy });
    assert.equal(res.status, 200, `${what}: ${res.text}`);
    const sent = await up.requests();
    assert.deepEqual(sorted(offered(sent[0]) ?? []), builtin_tools, `${what}: every tool is offered`);
    assert.deepEqual(sorted(res.json.events[0].metadata.visible_tools), builtin_tools);
    const call = res.json.events.find((e) => e.type === 'tool_call');
    assert.ok(!call.metadata.tool_policy_denied, `${what}: the call is not denied: ${JSON.stringify(call.metadata)}`);
    const result = res.json.events.find((e) => e.type === 'tool_result');
    assert.ok(!result.content.startsWith('[TOOL_POLICY_DENIED]'), `${what}: ${result.content}`);
    assert.equal(res.json.content, 'listed');
  }
});

scenario('the top-level tool_policy wins over metadata.tool_policy (AS-9)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  await up.script([{ content: 'fine' }]);
  const res = await troupe.chat({
    messages: [user('hi')], user_key: 'pska:ann',
    tool_policy: { mode: 'allowlist', allowed_tools: ['read_file'] },
    metadata: { tool_policy: { mode: 'none' } },
  });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(offered((await up.requests())[0]), ['read_file']);
  assert.deepEqual(res.json.events[0].metadata.tool_policy, { mode: 'allowlist', allowed_tools: ['read_file'] });
});

scenario('a call of a tool the allowlist hides is recorded with tool_policy_denied, answered [TOOL_POLICY_DENIED] to the model, never runs, and is audited as forbidden (AS-32)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  await up.script([
    { content: 'Writing anyway.', ...calls(['call_hidden1', 'write_file', { path: 'sneaky.txt', content: 'should not exist' }]) },
    { content: 'gave up' },
  ]);
  const tool_policy = { mode: 'allowlist', allowed_tools: ['read_file'] };
  const stream = await troupe.stream({ messages: [user('write a file')], user_key: 'pska:eve', tool_policy });
  assert.equal(stream.status, 200, stream.body);
  const { frames } = await stream.finished;
  const events = check_event_stream(frames);
  const steps = check_attempt_order(events);
  assert.equal(steps.length, 2, types(events));
  const reason = "tool 'write_file' is not in run tool_policy allowed_tools";
  const normalized = { mode: 'allowlist', allowed_tools: ['read_file'] };

  const [call] = steps[0].calls;
  assert.equal(call.tool_name, 'write_file', 'the denied call is still recorded as a tool_call');
  assert.equal(call.tool_call_id, 'call_hidden1');
  assert.deepEqual(call.tool_args, { path: 'sneaky.txt', content: 'should not exist' });
  assert.equal(call.metadata.tool_policy_denied, true, JSON.stringify(call.metadata));
  assert.equal(call.metadata.denial_reason, reason);
  assert.deepEqual(call.metadata.tool_policy, normalized);

  const [result] = steps[0].results;
  assert.equal(result.content, `[TOOL_POLICY_DENIED] ${reason}`);
  assert.equal(result.metadata.approved, false, 'a denied call is not approved (AS-44)');
  assert.ok(!events.some((e) => e.type === 'ask_user'), 'a policy denial never asks for approval');
  assert.ok(!fs.existsSync(path.join(troupe.workspace('pska', 'pska:eve'), 'sneaky.txt')), 'the tool never ran');

  // The model's tool message carries the same text (AS-32).
  const sent = await up.requests();
  assert.equal(sent.length, 2);
  const tool_msg = sent[1].messages.find((m) => m.role === 'tool' && m.tool_call_id === 'call_hidden1');
  assert.ok(tool_msg, `the second request answers the call: ${JSON.stringify(sent[1].messages)}`);
  assert.equal(tool_msg.content, `[TOOL_POLICY_DENIED] ${reason}`);
  const assistant = sent[1].messages.find((m) => m.role === 'assistant' && m.tool_calls?.length);
  assert.equal(assistant.tool_calls[0].id, 'call_hidden1', 'the denied call stays in the transcript, answered');

  const rec = await audited(troupe, (r) => r.run_id === events[0].run_id && r.tool_name === 'write_file',
    'an audit record of the denied call');
  assert.equal(rec.decision_level, 'forbidden', JSON.stringify(rec));
  assert.equal(rec.policy_scope, 'run_tool_policy');
  assert.equal(rec.approved, false);
  assert.equal(rec.tool_call_id, 'call_hidden1');
});

scenario('under mode none a tool the model calls anyway is denied with "run tool_policy mode=none disables all tools" and never runs (AS-32)', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  await up.script([
    calls(['call_x1', 'exec', { command: 'echo ran > ran.txt' }], ['call_x2', 'list_dir', {}]),
    { content: 'ok then' },
  ]);
  const res = await troupe.chat({ messages: [user('go')], user_key: 'pska:eve', tool_policy: { mode: 'off' } });
  assert.equal(res.status, 200, res.text);
  const events = res.json.events;
  const steps = check_attempt_order(events);
  const reason = 'run tool_policy mode=none disables all tools';
  assert.deepEqual(steps[0].calls.map((c) => c.tool_name), ['exec', 'list_dir']);
  for (const c of steps[0].calls) {
    assert.equal(c.metadata.tool_policy_denied, true, `${c.tool_name}: ${JSON.stringify(c.metadata)}`);
    assert.equal(c.metadata.denial_reason, reason);
    assert.deepEqual(c.metadata.tool_policy, { mode: 'none', allowed_tools: [] });
  }
  assert.deepEqual(steps[0].results.map((r) => r.content), [`[TOOL_POLICY_DENIED] ${reason}`, `[TOOL_POLICY_DENIED] ${reason}`]);
  assert.ok(!events.some((e) => e.type === 'ask_user'), 'denied before the service policy could ask');
  assert.ok(!fs.existsSync(path.join(troupe.workspace('pska', 'pska:eve'), 'ran.txt')), 'exec never ran');
  const sent = await up.requests();
  const tool_msgs = sent[1].messages.filter((m) => m.role === 'tool');
  assert.deepEqual(tool_msgs.map((m) => [m.tool_call_id, m.content]),
    [['call_x1', `[TOOL_POLICY_DENIED] ${reason}`], ['call_x2', `[TOOL_POLICY_DENIED] ${reason}`]]);
  assert.ok(!('tools' in sent[1]), 'the follow-up request offers no tools either');
  assert.equal(res.json.content, 'ok then');
});

scenario('a [TOOL_POLICY_DENIED] tool_result carries tool_policy_denied, denial_reason and request_id = its tool_call_id (AS-13)', async (s) => {
  const troupe = await s.troupe({
    config: {
      model: { script: [{ tool_calls: [{ name: 'exec', arguments: { command: 'pwd' } }] }, { content: 'done' }] },
    },
  });
  const res = await troupe.chat({
    messages: [user('go')], user_key: 'pska:eve', tool_policy: { mode: 'allowlist', allowed_tools: ['list_dir'] },
  });
  assert.equal(res.status, 200, res.text);
  const result = res.json.events.find((e) => e.type === 'tool_result');
  const reason = "tool 'exec' is not in run tool_policy allowed_tools";
  assert.equal(result.content, `[TOOL_POLICY_DENIED] ${reason}`);
  assert.equal(result.metadata.tool_policy_denied, true, `tool_result metadata: ${JSON.stringify(result.metadata)}`);
  assert.equal(result.metadata.denial_reason, reason, `tool_result metadata: ${JSON.stringify(result.metadata)}`);
  assert.equal(result.metadata.request_id, result.tool_call_id,
    `request_id is the tool_call_id on [TOOL_POLICY_DENIED] results: ${JSON.stringify(result.metadata)}`);
});

scenario('the normalized tool_policy is recorded in the run metadata of chat and background runs (AS-30, AS-7)', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'done' }] } } });
  const tool_policy = { mode: 'ALLOWLIST', allowed_tools: [' list_dir ', 'list_dir'] };
  const normalized = { mode: 'allowlist', allowed_tools: ['list_dir'] };

  const chat = await troupe.chat({ messages: [user('go')], user_key: 'pska:eve', tool_policy });
  assert.equal(chat.status, 200, chat.text);
  assert.deepEqual(chat.json.events[0].metadata.tool_policy, normalized);
  const chat_run = await troupe.request('GET', `/v1/runs/${encodeURIComponent(chat.json.run_id)}`);
  assert.equal(chat_run.status, 200, chat_run.text);

  const posted = await troupe.request('POST', '/v1/runs', {
    body: { messages: [user('go')], user_key: 'pska:eve', tool_policy, metadata: { run_id: 'tp-bg' } },
  });
  assert.equal(posted.status, 200, posted.text);
  const done = await until(async () => {
    const r = await troupe.request('GET', '/v1/runs/tp-bg');
    return r.json?.status === 'completed' && r.json;
  }, { timeout_ms: 20_000, interval_ms: 20, message: 'the background run to complete' });
  const seen = `chat run metadata ${JSON.stringify(chat_run.json.metadata)}; background run metadata ${JSON.stringify(done.metadata)}`;
  assert.deepEqual(chat_run.json.metadata.tool_policy, normalized, `the chat run's metadata records the normalized policy: ${seen}`);
  assert.deepEqual(done.metadata.tool_policy, normalized, `the background run's metadata records the normalized policy: ${seen}`);
});

scenario('tool_policy.scope is injected into pska_* tool arguments, intersecting source_item_ids, and exactly those arguments are executed, audited and sent upstream (AS-33)', async (s) => {
  const dir = s.tmpdir('troupe-scope-');
  const log_file = path.join(dir, 'fake_mcp.log');
  const up = await s.upstream();
  const troupe = await s.troupe({
    config: {
      ...upstream_config(up),
      mcp: {
        servers: [{
          name: 'pska',
          command: process.execPath,
          args: [path.join(source_dir, 'tests', 'fake_mcp', 'fake_mcp_server.mjs')],
          env: { FAKE_MCP_LOG: log_file },
          transport: 'stdio',
          isolation: 'shared',
          timeout_seconds: 30,
        }],
      },
    },
  });
  await wait_mcp_ready(troupe, ['pska'], 30_000);
  const tools = await troupe.request('GET', '/v1/tools');
  assert.ok(tools.json.tools.includes('pska_touch') || tools.json.mcp_tools?.some((t) => (t.name ?? t) === 'pska_touch'),
    `the MCP tool is registered as pska_touch: ${tools.text.slice(0, 600)}`);

  const tool_policy = {
    mode: 'allowlist',
    allowed_tools: ['pska_touch', 'list_dir'],
    scope: { scope_mode: 'Selected', knowledge_base_ids: ['kb1', 'kb1', 'kb2'], source_item_ids: ['s1', 's2', 's1'] },
  };
  const normalized = {
    mode: 'allowlist',
    allowed_tools: ['pska_touch', 'list_dir'],
    scope: { mode: 'selected', scope_mode: 'selected', knowledge_base_ids: ['kb1', 'kb2'], source_item_ids: ['s1', 's2'] },
  };
  const scoped = (ids, extra) => ({
    ...extra,
    knowledge_base_ids: ['kb1', 'kb2'],
    source_item_ids: ids,
    scope_mode: 'selected',
    scope: { knowledge_base_ids: ['kb1', 'kb2'], source_item_ids: ids, scope_mode: 'selected', mode: 'selected' },
  });
  // model arguments → the arguments troupe must execute
  const cases = [
    [{ query: 'q', knowledge_base_ids: ['evil'], source_item_ids: ['s2', 's9'] }, scoped(['s2'], { query: 'q' })],
    [{ scope: { source_item_ids: ['s9'] } }, scoped([], {})],
    [{ query: 'x' }, scoped(['s1', 's2'], { query: 'x' })],
  ];
  await up.script([
    calls(...cases.map(([args], i) => [`call_scope${i}`, 'pska_touch', args]), ['call_ls', 'list_dir', { path: '.' }]),
    { content: 'scoped' },
  ]);
  const res = await troupe.chat({ messages: [user('search my sources')], user_key: 'pska:sam', tool_policy });
  assert.equal(res.status, 200, res.text);
  const events = res.json.events;
  const steps = check_attempt_order(events);
  assert.deepEqual(events[0].metadata.tool_policy, normalized, 'session_start records the normalized scope');

  const touch_calls = steps[0].calls.filter((c) => c.tool_name === 'pska_touch');
  assert.equal(touch_calls.length, 3, types(events));
  touch_calls.forEach((c, i) => {
    assert.deepEqual(c.tool_args, cases[i][1], `call ${i}: the tool_call shows the injected arguments`);
    assert.equal(c.metadata.tool_policy_scope_applied, true, JSON.stringify(c.metadata));
    assert.deepEqual(c.metadata.tool_policy, normalized);
  });
  const ls = steps[0].calls.find((c) => c.tool_name === 'list_dir');
  assert.deepEqual(ls.tool_args, { path: '.' }, 'a tool not named pska_* is left alone');
  assert.ok(!ls.metadata.tool_policy_scope_applied, JSON.stringify(ls.metadata));

  // Executed: what the MCP server received.
  const touched = await until(() => {
    const lines = fs.existsSync(log_file) ? fs.readFileSync(log_file, 'utf8').split('\n').filter((l) => l.startsWith('touch ')) : [];
    return lines.length >= 3 && lines;
  }, { timeout_ms: 5000, message: 'three touch calls at the MCP server' });
  assert.equal(touched.length, 3);
  touched.forEach((l, i) => assert.deepEqual(JSON.parse(l.slice('touch '.length)), cases[i][1], `call ${i} executed with the injected args`));

  // Sent upstream: the assistant message carries the executed arguments (AS-19).
  const sent = await up.requests();
  const assistant = sent[1].messages.find((m) => m.role === 'assistant' && m.tool_calls?.length);
  const upstream_args = assistant.tool_calls.filter((c) => c.function.name === 'pska_touch').map((c) => JSON.parse(c.function.arguments));
  assert.deepEqual(upstream_args, cases.map(([, want]) => want), 'the upstream transcript carries the injected args');

  // Audited.
  for (let i = 0; i < cases.length; i++) {
    const rec = await audited(troupe, (r) => r.kind === 'execution' && r.tool_call_id === `call_scope${i}`,
      `the audit record of call_scope${i}`);
    assert.deepEqual(rec.tool_args, cases[i][1], `call ${i} audited with the injected args`);
  }
});
