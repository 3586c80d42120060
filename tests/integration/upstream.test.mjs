// The agent loop against a real OpenAI-compatible upstream over HTTP (the fake upstream): the
// request troupe sends (AS-17, AS-19), streamed tool-call arguments (AS-18), retries (AS-17) and
// upstream failure failing the run (AS-80).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {
  scenario, check_event_stream, check_attempt_order, upstream_config, closed_port, user,
} from './harness.mjs';

const builtins = ['exec', 'read_file', 'write_file', 'edit_file', 'list_dir'];

scenario('tool-call arguments streamed in 3-character pieces reach the tool intact and the transcript goes back upstream', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  const args = { path: 'up/streamed.txt', content: 'streamed "quoted" text, with {braces} and ünïcödé ✓\n' };
  await up.script([
    { content: 'I will write the file.', tool_calls: [{ id: 'call_fake_1', name: 'write_file', arguments: JSON.stringify(args) }], chunk_size: 3 },
    { content: 'The file is written.', chunk_size: 3 },
  ]);

  const stream = await troupe.stream({
    messages: [user('Write the file please')],
    user_key: 'pska:carol', temperature: 0.3, max_tokens: 77,
  });
  const { frames } = await stream.finished;
  assert.equal(stream.status, 200, stream.body);
  const events = check_event_stream(frames);
  check_attempt_order(events);

  const call = events.find((e) => e.type === 'tool_call');
  assert.ok(call, events.map((e) => e.type).join(', '));
  assert.equal(call.tool_name, 'write_file');
  assert.equal(call.tool_call_id, 'call_fake_1');
  assert.deepEqual(call.tool_args, args, 'the reassembled arguments equal the object the model sent');
  const result = events.find((e) => e.type === 'tool_result');
  assert.equal(result.tool_call_id, 'call_fake_1');
  assert.equal(result.content, `Successfully wrote ${Buffer.byteLength(args.content)} bytes to up/streamed.txt`);
  assert.equal(fs.readFileSync(path.join(troupe.workspace('pska', 'pska:carol'), 'up', 'streamed.txt'), 'utf8'), args.content);
  const think = events.find((e) => e.type === 'think');
  assert.equal(think.content, 'I will write the file.', 'streamed content is reassembled');
  const end = events[events.length - 1];
  assert.equal(end.type, 'session_end');
  assert.equal(end.content, 'The file is written.');

  // AS-17, AS-19: what the upstream received.
  const reqs = await up.requests();
  assert.equal(reqs.length, 2, JSON.stringify(reqs));
  const [first, second] = reqs;
  for (const r of reqs) {
    assert.equal(r.model, 'fake-model', 'model.name is sent');
    assert.equal(r.temperature, 0.3, 'request temperature overrides the config');
    assert.equal(r.max_tokens, 77, 'request max_tokens overrides the config');
    assert.equal(r.stream, true, 'model.stream defaults to true');
    assert.equal(r.tool_choice, 'auto');
    assert.ok(Array.isArray(r.tools));
    for (const b of builtins) {
      const t = r.tools.find((x) => x.function?.name === b);
      assert.ok(t, `tools offers ${b}`);
      assert.equal(t.type, 'function');
      assert.equal(typeof t.function.description, 'string');
      assert.equal(typeof t.function.parameters, 'object');
    }
    assert.equal(r.messages[0].role, 'system', 'one troupe system message comes first');
    assert.equal(r.messages.filter((m) => m.role === 'system').length, 1, 'only one system message');
  }
  assert.deepEqual(first.messages[first.messages.length - 1], { role: 'user', content: 'Write the file please' });

  const n = second.messages.length;
  const assistant = second.messages[n - 2];
  const tool = second.messages[n - 1];
  assert.equal(assistant.role, 'assistant');
  assert.equal(assistant.tool_calls.length, 1);
  assert.equal(assistant.tool_calls[0].id, 'call_fake_1');
  assert.equal(assistant.tool_calls[0].type, 'function');
  assert.equal(assistant.tool_calls[0].function.name, 'write_file');
  assert.deepEqual(JSON.parse(assistant.tool_calls[0].function.arguments), args, 'the executed arguments go back');
  assert.equal(tool.role, 'tool');
  assert.equal(tool.tool_call_id, 'call_fake_1');
  assert.equal(tool.content, result.content, 'the model sees the same text as the event (AS-22)');
  assert.deepEqual(second.messages.slice(0, n - 2), first.messages, 'step two extends step one');
});

scenario('a tool call without an id gets a call_<12hex> id', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  await up.script([
    { tool_calls: [{ name: 'list_dir', arguments: '{"path": "."}' }] },
    { content: 'done' },
  ]);
  const res = await troupe.chat({ messages: [user('list')] });
  assert.equal(res.status, 200, res.text);
  const call = res.json.events.find((e) => e.type === 'tool_call');
  assert.match(call.tool_call_id, /^call_[0-9a-f]{12}$/);
  const reqs = await up.requests();
  const tool = reqs[1].messages[reqs[1].messages.length - 1];
  assert.equal(tool.tool_call_id, call.tool_call_id);
});

scenario('an upstream 500 followed by success is retried and the run completes', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up, { max_retries: 2 }) });
  await up.script([{ status: 500 }, { content: 'recovered after a retry' }]);
  const res = await troupe.chat({ messages: [user('try again')] });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.type, 'chat.completion');
  assert.equal(res.json.status, 'completed');
  assert.equal(res.json.content, 'recovered after a retry');
  assert.ok(!res.json.events.some((e) => e.type === 'error'));
  assert.equal((await up.requests()).length, 2, 'one failed call and one retry');
});

function assert_upstream_failure(res) {
  assert.equal(res.status, 200, res.text);
  const sum = res.json;
  assert.equal(sum.type, 'error', res.text);
  assert.equal(sum.status, 'failed', res.text);
  assert.ok(sum.error.startsWith('LLM call failed:'), sum.error);
  assert.equal(sum.content, '');
  const types = sum.events.map((e) => e.type);
  assert.ok(!types.includes('session_end'), `no session_end: ${types}`);
  const err = sum.events[sum.events.length - 1];
  assert.equal(err.type, 'error', `the attempt ends with error: ${types}`);
  assert.ok(err.content.startsWith('LLM call failed:'), err.content);
  assert.equal(err.metadata.error_type, 'upstream_model_error');
  assert.equal(typeof err.duration_ms, 'number', 'error.duration_ms is the time since run start');
  assert.equal(sum.error, err.content);
  check_attempt_order(sum.events);
}

scenario('an upstream that always answers 500 fails the run with an upstream_model_error event and no session_end', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up, { max_retries: 0 }) });
  await up.script([], { status: 500 });
  assert_upstream_failure(await troupe.chat({ messages: [user('this will fail')] }));
  assert.equal((await up.requests()).length, 1, 'max_retries 0: one call');

  // Streamed: the error event is the last event, then done (AS-11).
  const stream = await troupe.stream({ messages: [user('this will fail too')] });
  const { frames } = await stream.finished;
  assert.equal(stream.status, 200);
  const events = check_event_stream(frames);
  const last = events[events.length - 1];
  assert.equal(last.type, 'error');
  assert.ok(last.content.startsWith('LLM call failed:'), last.content);
  assert.equal(last.metadata.error_type, 'upstream_model_error');
  assert.ok(!events.some((e) => e.type === 'session_end'));
});

scenario('an upstream that is down fails the run the same way', async (s) => {
  const port = await closed_port();
  const troupe = await s.troupe({ config: upstream_config(`http://127.0.0.1:${port}/v1`, { max_retries: 0 }) });
  assert_upstream_failure(await troupe.chat({ messages: [user('anyone there?')] }));
});

scenario('the upstream conversation is the troupe system message, the cleaned history and the query', async (s) => {
  // AS-19: orphan tool messages and unanswered tool calls are removed; later messages are dropped.
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  await up.script([{ content: 'answer' }]);
  const call = (id) => ({ id, type: 'function', function: { name: 'list_dir', arguments: '{}' } });
  const res = await troupe.chat({
    messages: [
      user('q1'),
      { role: 'assistant', content: 'thinking', tool_calls: [call('unanswered')] },
      { role: 'tool', tool_call_id: 'orphan', name: 'list_dir', content: 'orphan output' },
      { role: 'assistant', content: null, tool_calls: [call('answered')] },
      { role: 'tool', tool_call_id: 'answered', name: 'list_dir', content: 'a.txt' },
      { role: 'assistant', content: 'a1' },
      user('q2'),
      { role: 'assistant', content: 'after the query' },
    ],
  });
  assert.equal(res.status, 200, res.text);
  const [req] = await up.requests();
  const msgs = req.messages;
  assert.equal(msgs[0].role, 'system');
  const rest = msgs.slice(1).map((m) => ({
    role: m.role, content: m.content ?? null,
    ...(m.tool_calls?.length ? { calls: m.tool_calls.map((c) => c.id) } : {}),
    ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
  }));
  assert.deepEqual(rest, [
    { role: 'user', content: 'q1' },
    { role: 'assistant', content: 'thinking' },
    { role: 'assistant', content: null, calls: ['answered'] },
    { role: 'tool', content: 'a.txt', tool_call_id: 'answered' },
    { role: 'assistant', content: 'a1' },
    { role: 'user', content: 'q2' },
  ]);
});

scenario('a minimal openai-provider config file that defines no scripted-model script is valid and serves', async (s) => {
  // DESIGN.md, Shared configuration: every key has a default; model.script only matters to the
  // scripted provider.
  const up = await s.upstream();
  await up.script([], { content: 'from the upstream' });
  const config = { model: { provider: 'openai', base_url: up.base_url, name: 'fake-model' } };
  const dir = s.tmpdir();
  const file = path.join(dir, 'minimal.json');
  fs.writeFileSync(file, JSON.stringify(config));
  const check = await s.run_troupe(['check-config', '--config', file]);
  assert.equal(check.code, 0, `check-config of ${JSON.stringify(config)}: ${JSON.stringify(check)}`);

  const troupe = await s.troupe({ raw_config: config });
  const res = await troupe.chat({ messages: [user('hi')] });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.content, 'from the upstream');
});
