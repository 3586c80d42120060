// Secrets at rest (AS-85): the values of sensitive metadata keys, and `sk-…` keys and `Bearer …`
// credentials inside messages, tool arguments, tool output and answers, never reach the event stream,
// the store (troupe.db and its WAL) or audit.jsonl. The tools themselves still run with the real text.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { check_event_stream, scenario, until, user, wait_run } from './harness.mjs';

const sk_key = 'sk-proj-A1b2C3d4E5f6G7h8I9j0';
const user_key_secret = 'sk-user-Q9w8E7r6T5y4U3i2O1p0';
const bearer = 'eyJhbGciOi.Zy9Xw8Vu7Ts6Rq5';
const meta_secret = 'meta-secret-value-4711';
const nested_secret = 'nested-client-secret-0815';
const background_secret = 'background-api-key-2342';
const background_bearer = 'bg.message.credential.1234';
const secrets = [sk_key, user_key_secret, bearer, meta_secret, nested_secret, background_secret, background_bearer];

// Every byte troupe keeps in its data dir's store and audit log, as text.
function stored_bytes(data_dir) {
  return fs.readdirSync(data_dir)
    .filter((f) => f.startsWith('troupe.db') || f === 'audit.jsonl')
    .map((f) => fs.readFileSync(path.join(data_dir, f)).toString('latin1'))
    .join('\n');
}

scenario('secrets in metadata, messages, tool arguments, tool output and answers are masked in events, troupe.db and audit.jsonl, while the tools run with the real text (AS-45, AS-85)', async (s) => {
  const troupe = await s.troupe({
    config: {
      model: {
        script: [
          { tool_calls: [{ name: 'write_file', arguments: { path: 'creds.txt', content: `api: ${sk_key}\nauth: Bearer ${bearer}\n` } }] },
          { tool_calls: [{ name: 'read_file', arguments: { path: 'creds.txt' } }] },
          { tool_calls: [{ name: 'exec', arguments: { command: `rm -f old.txt; echo Authorization: Bearer ${bearer}` } }] },
          { content: 'Model saw: {{last_tool_result}}' },
        ],
        scripts: { plain: [{ content: 'Model saw: {{query}}' }] },
      },
    },
  });
  const chat = await troupe.stream({
    messages: [user(`use ${user_key_secret} please`)],
    user_key: 'pska:keeper',
    metadata: { run_id: 'sec-chat', api_key: meta_secret, client: { client_secret: nested_secret }, caller: 'it' },
  });
  assert.equal(chat.status, 200, chat.body);
  const ask = (await chat.wait_for((f) => f.event === 'ask_user', 20_000)).json;
  const approved = await troupe.request('POST', `/v1/approvals/${ask.approval_request_id}/approve`, { body: {} });
  assert.equal(approved.status, 200, approved.text);
  const { frames } = await chat.finished;
  const events = check_event_stream(frames, { run_id: 'sec-chat' });
  assert.equal(events[events.length - 1].type, 'session_end', events.map((e) => e.type).join(', '));

  // the tools ran with the real arguments
  const written = fs.readFileSync(path.join(troupe.workspace('pska', 'pska:keeper'), 'creds.txt'), 'utf8');
  assert.equal(written, `api: ${sk_key}\nauth: Bearer ${bearer}\n`);

  // what clients see is masked
  const live = frames.map((f) => f.raw).join('\n');
  for (const secret of secrets) assert.ok(!live.includes(secret), `the live stream leaks ${secret}`);
  const read = events.find((e) => e.type === 'tool_result' && e.tool_name === 'read_file');
  assert.equal(read.content, 'api: ***\nauth: Bearer ***\n');
  assert.equal(events[0].content, 'use *** please', 'the query in session_start');
  assert.equal(events[events.length - 1].content, 'Model saw: Authorization: Bearer ***\n');
  const run = (await troupe.request('GET', '/v1/runs/sec-chat')).json;
  assert.equal(run.metadata.api_key, '***', JSON.stringify(run.metadata));
  assert.equal(run.metadata.client.client_secret, '***');
  assert.equal(run.metadata.caller, 'it', 'other metadata is kept');
  const trace = (await troupe.request('GET', '/v1/traces/sec-chat')).json.trace;
  assert.equal(trace.metadata.api_key, '***', JSON.stringify(trace.metadata));

  // a background run's record is masked too, its messages included: every attempt starts from the
  // stored request, so the model gets them masked as well
  const bg = await troupe.request('POST', '/v1/runs', {
    body: { messages: [user(`call with Bearer ${background_bearer} later`)], model: 'scripted:plain',
      metadata: { run_id: 'sec-bg', apiKey: background_secret } },
  });
  assert.equal(bg.status, 200, bg.text);
  assert.equal(bg.json.metadata.apiKey, '***', JSON.stringify(bg.json.metadata));
  const bg_run = await wait_run(troupe, 'sec-bg', (r) => r.status !== 'queued' && r.status !== 'running', { message: 'sec-bg to end' });
  assert.equal(bg_run.status, 'completed', JSON.stringify(bg_run));
  const bg_events = (await troupe.request('GET', '/v1/runs/sec-bg/events')).json.events;
  assert.equal(bg_events[bg_events.length - 1].content, 'Model saw: call with Bearer *** later', JSON.stringify(bg_events));

  await until(() => fs.existsSync(path.join(troupe.data_dir, 'audit.jsonl')), { message: 'audit.jsonl' });
  const audit = fs.readFileSync(path.join(troupe.data_dir, 'audit.jsonl'), 'utf8');
  assert.ok(audit.includes('Bearer ***'), 'the audit records are there, masked');
  const at_rest = stored_bytes(troupe.data_dir);
  for (const secret of secrets) assert.ok(!at_rest.includes(secret), `troupe.db or audit.jsonl holds ${secret}`);
});
