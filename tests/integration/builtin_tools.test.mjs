// Built-in tools run in the caller's workspace (AS-26, AS-27, AS-29) and the iteration limit
// (AS-20), driven by scripted models.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, check_event_stream, check_attempt_order, user } from './harness.mjs';

const files_script = [
  { content: 'Writing a note.', tool_calls: [{ name: 'write_file', arguments: { path: 'notes/hello.txt', content: 'hello alice\n' } }] },
  { tool_calls: [{ name: 'read_file', arguments: { path: 'notes/hello.txt' } }] },
  { tool_calls: [{ name: 'read_file', arguments: { path: '../../../../etc/passwd' } }] },
  { tool_calls: [{ name: 'write_file', arguments: { path: '../escaped.txt', content: 'must not exist' } }] },
  { tool_calls: [{ name: 'list_dir', arguments: { path: 'notes' } }] },
  { content: 'All done: {{last_tool_result}}' },
];

scenario('write_file and read_file work inside the user workspace and a path outside it is refused', async (s) => {
  const troupe = await s.troupe({ config: { model: { scripts: { files: files_script } } } });
  const stream = await troupe.stream({ messages: [user('Keep a note')], model: 'scripted:files', user_key: 'pska:alice' });
  const { frames } = await stream.finished;
  assert.equal(stream.status, 200, stream.body);
  const events = check_event_stream(frames);
  check_attempt_order(events);
  const results = events.filter((e) => e.type === 'tool_result');
  assert.equal(results.length, 5, events.map((e) => `${e.type}: ${e.content}`).join('\n'));

  // AS-26: tenant "pska" (the user key's prefix), user dir "pska%3Aalice" (':' is encoded).
  const ws = troupe.workspace('pska', 'pska:alice');
  assert.equal(results[0].tool_name, 'write_file');
  assert.equal(results[0].content, 'Successfully wrote 12 bytes to notes/hello.txt');
  assert.equal(fs.readFileSync(path.join(ws, 'notes', 'hello.txt'), 'utf8'), 'hello alice\n');

  assert.equal(results[1].tool_name, 'read_file');
  assert.equal(results[1].content, 'hello alice\n', 'read_file reads back what write_file wrote');

  // AS-27: outside the workspace → [ERROR] Path outside user workspace: <path>, no side effect.
  assert.equal(results[2].tool_name, 'read_file');
  assert.ok(results[2].content.startsWith('[ERROR] Path outside user workspace: '), results[2].content);
  assert.ok(results[2].content.includes('../../../../etc/passwd'), results[2].content);
  assert.ok(!results[2].content.includes('root:'), 'no byte of /etc/passwd leaks');

  assert.equal(results[3].tool_name, 'write_file');
  assert.ok(results[3].content.startsWith('[ERROR] Path outside user workspace: '), results[3].content);
  assert.ok(!fs.existsSync(path.join(ws, '..', 'escaped.txt')), 'the refused write left no file');

  // AS-29: list_dir → sorted entries, one per line.
  assert.equal(results[4].content, 'hello.txt');

  const end = events[events.length - 1];
  assert.equal(end.type, 'session_end');
  assert.equal(end.content, 'All done: hello.txt');
});

scenario('the same user in two tenants gets two workspaces', async (s) => {
  const script = [
    { tool_calls: [{ name: 'write_file', arguments: { path: 'who.txt', content: 'me' } }] },
    { content: 'ok' },
  ];
  const troupe = await s.troupe({ config: { model: { script } } });
  const a = await troupe.chat({ messages: [user('a')], user_key: 'pska:alice' });
  assert.equal(a.status, 200, a.text);
  const b = await troupe.chat({ messages: [user('b')], user_key: 'pska:alice', metadata: { tenant_key: 'acme corp' } });
  assert.equal(b.status, 200, b.text);
  assert.ok(fs.existsSync(path.join(troupe.workspace('pska', 'pska:alice'), 'who.txt')));
  assert.ok(fs.existsSync(path.join(troupe.workspace('acme corp', 'pska:alice'), 'who.txt')),
    'an explicit tenant wins; characters outside [A-Za-z0-9._@-] are percent-encoded');
});

scenario('a run that keeps calling tools stops after react.max_iterations with a STOPPED session_end', async (s) => {
  const troupe = await s.troupe({
    config: {
      react: { max_iterations: 3 },
      model: { script: [{ content: 'Looking again.', tool_calls: [{ name: 'list_dir', arguments: {} }] }] },
    },
  });
  const res = await troupe.chat({ messages: [user('loop forever')] });
  assert.equal(res.status, 200, res.text);
  const events = res.json.events;
  const steps = check_attempt_order(events);
  assert.equal(steps.length, 3, 'exactly three model calls');
  assert.equal(events.filter((e) => e.type === 'tool_call').length, 3);
  assert.equal(events.filter((e) => e.type === 'tool_result').length, 3, 'the last permitted step still executes its calls');
  const end = events[events.length - 1];
  assert.equal(end.type, 'session_end');
  assert.equal(end.content, '[STOPPED] Task stopped due to maximum iteration limit (3).');
  assert.equal(end.metadata.stop_reason, 'max_iterations');
  assert.equal(end.metadata.status, 'completed');
  assert.equal(res.json.status, 'completed');
  assert.equal(res.json.type, 'chat.completion');
  assert.equal(res.json.content, '[STOPPED] Task stopped due to maximum iteration limit (3).');
});

scenario('tool output over react.max_tool_output_chars is cut with a truncation suffix', async (s) => {
  // AS-22: the model and the event see the same text.
  const troupe = await s.troupe({
    config: {
      react: { max_tool_output_chars: 10 },
      model: {
        script: [
          { tool_calls: [{ name: 'write_file', arguments: { path: 'long.txt', content: 'abcdefghijklmnopqrstuvwxyz0123' } }] },
          { tool_calls: [{ name: 'read_file', arguments: { path: 'long.txt' } }] },
          { content: 'Model saw: {{last_tool_result}}' },
        ],
      },
    },
  });
  const res = await troupe.chat({ messages: [user('read it')] });
  assert.equal(res.status, 200, res.text);
  const results = res.json.events.filter((e) => e.type === 'tool_result');
  assert.equal(results[1].content, 'abcdefghij\n... [truncated 20 chars]');
  assert.equal(res.json.content, 'Model saw: abcdefghij\n... [truncated 20 chars]');
});

scenario('exec and edit_file run in the user workspace', async (s) => {
  // AS-28, AS-29. The redirections would need approval (AS-37); the policy allows exec outright.
  const troupe = await s.troupe({
    config: {
      policy: { tool_rules: { exec: 'allow' } },
      model: {
        script: [
          { tool_calls: [{ name: 'exec', arguments: { command: 'pwd; echo "home=$HOME"; echo draft > doc.txt' } }] },
          { tool_calls: [{ name: 'edit_file', arguments: { path: 'doc.txt', old_text: 'draft', new_text: 'final' } }] },
          { tool_calls: [{ name: 'edit_file', arguments: { path: 'doc.txt', old_text: 'missing', new_text: 'x' } }] },
          { tool_calls: [{ name: 'exec', arguments: { command: 'echo oops >&2; exit 3' } }] },
          { tool_calls: [{ name: 'read_file', arguments: { path: 'nope.txt' } }] },
          { content: 'done' },
        ],
      },
    },
  });
  const res = await troupe.chat({ messages: [user('work')], user_key: 'pska:dave' });
  assert.equal(res.status, 200, res.text);
  const out = res.json.events.filter((e) => e.type === 'tool_result').map((e) => e.content);
  const ws = fs.realpathSync(troupe.workspace('pska', 'pska:dave'));
  assert.equal(out[0], `${ws}\nhome=${ws}\n`);
  assert.equal(out[1], 'Successfully edited doc.txt');
  assert.equal(out[2], '[ERROR] old_text not found in doc.txt');
  assert.equal(out[3], '\nSTDERR:\noops\n\nExit code: 3');
  assert.equal(out[4], '[ERROR] File not found: nope.txt');
  assert.equal(fs.readFileSync(path.join(ws, 'doc.txt'), 'utf8'), 'final\n');
  assert.equal(res.json.status, 'completed', 'tool failures never fail the run');
});
