// What the upstream is sent, FastReAct-compatibly: the one system message with its layers (AS-19),
// the context budget and its notice (AS-23, AS-24), and skills (AS-25), on the real binary against the
// fake upstream, which records every request.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, upstream_config, user, deep_merge } from './harness.mjs';

const token = 'prompt-context-token';
const auth = { authorization: `Bearer ${token}` };
const compression_notice = '[CONTEXT_COMPRESSION] Sliding-window context compression applied';

function write(file, text) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

function chat_requests(reqs) {
  return reqs.filter((r) => r.path === '/v1/chat/completions');
}

scenario('AS-19 the workspace AGENTS.md and the persona SOUL.md reach the one system message after the safety layer, and a symlink out of the workspace is not followed', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  const carol = troupe.workspace('pska', 'pska:carol');
  write(path.join(carol, 'AGENTS.md'), 'Workspace rule: answer in French.\n');
  write(path.join(carol, 'SOUL.md'), 'Persona: you are Ada, terse and kind.\n');
  const outside = s.tmpdir();
  write(path.join(outside, 'secret.md'), 'OUTSIDE SECRET TEXT');
  const dave = troupe.workspace('pska', 'pska:dave');
  fs.mkdirSync(dave, { recursive: true });
  fs.symlinkSync(path.join(outside, 'secret.md'), path.join(dave, 'SOUL.md'));

  await up.script([{ content: 'bonjour' }, { content: 'hi' }]);
  const a = await troupe.chat({ messages: [user('hello')], user_key: 'pska:carol' });
  assert.equal(a.status, 200, a.text);
  const b = await troupe.chat({ messages: [user('hello')], user_key: 'pska:dave' });
  assert.equal(b.status, 200, b.text);

  const [first, second] = chat_requests(await up.requests());
  const systems = first.messages.filter((m) => m.role === 'system');
  assert.equal(systems.length, 1, 'one system message');
  const text = first.messages[0].content;
  assert.equal(first.messages[0].role, 'system');
  assert.ok(text.startsWith('Safety policy'), text);
  const agents = text.indexOf('Workspace rule: answer in French.');
  const soul = text.indexOf('Persona: you are Ada, terse and kind.');
  assert.ok(agents > 0, `AGENTS.md reaches the system message: ${text}`);
  assert.ok(soul > agents, `SOUL.md follows AGENTS.md: ${text}`);
  assert.ok(text.indexOf('Tools available:') > soul, 'the tool layer follows the persona');
  assert.ok(!second.messages[0].content.includes('OUTSIDE SECRET TEXT'), 'a SOUL.md symlinked out of the workspace is not read');
});

scenario('AS-23 AS-24 a long conversation under a 3000-token context keeps the upstream message count bounded and says so with the compression notice', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(up) });
  const steps = 14;
  const replies = [];
  for (let i = 0; i < steps; i++)
    replies.push({ tool_calls: [{ id: `call_w${i}`, name: 'write_file',
      arguments: JSON.stringify({ path: `notes/n${i}.txt`, content: 'x'.repeat(1000) }) }] });
  replies.push({ content: 'all written' });
  await up.script(replies);

  const res = await troupe.chat({
    messages: [user('write the notes')], user_key: 'pska:erin', max_tokens: 500,
    metadata: { run_id: 'ctx-run', max_context_tokens: 3000 },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.status, 'completed', res.text);
  assert.equal(res.json.content, 'all written');

  const reqs = chat_requests(await up.requests());
  assert.equal(reqs.length, steps + 1);
  assert.equal(reqs[0].messages.length, 2, 'the first round: system and query');
  for (const r of reqs) {
    assert.ok(r.messages.length <= 2 + 16, `at most the system, the first user and the widened window: ${r.messages.length}`);
    assert.equal(r.messages[0].role, 'system');
    assert.equal(r.messages[1].content, 'write the notes', 'the first user message is kept');
    const called = new Set();
    for (const m of r.messages) {
      for (const c of m.tool_calls ?? []) called.add(c.id);
      if (m.role === 'tool') assert.ok(called.has(m.tool_call_id), 'AS-95: every tool message keeps its call');
    }
    const answered = new Set(r.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id));
    for (const c of called) assert.ok(answered.has(c), 'AS-95: no unanswered call goes upstream');
  }
  assert.equal(reqs[reqs.length - 1].messages.length, 2 + 16);

  const notices = res.json.events.filter((e) => e.type === 'think' && e.content === compression_notice);
  assert.ok(notices.length > 0, 'the notice is emitted');
  for (const n of notices) {
    assert.equal(n.metadata.compression_event, true);
    const c = n.metadata.compression;
    assert.deepEqual(Object.keys(c), ['original_message_count', 'kept_message_count', 'estimated_tokens_before',
      'estimated_tokens_after', 'budget_tokens']);
    assert.equal(c.budget_tokens, 2500, 'max(1, 3000 - 500)');
    assert.ok(c.estimated_tokens_before > c.budget_tokens);
    assert.ok(c.estimated_tokens_after < c.estimated_tokens_before);
    const round = (c.original_message_count - 2) / 2; // the round that sent it
    assert.equal(reqs[round].messages.length, c.kept_message_count, 'the notice counts what went upstream');
  }
  assert.equal(notices[notices.length - 1].metadata.compression.original_message_count, 2 + 2 * steps);

  const trace = await troupe.request('GET', '/v1/traces/ctx-run');
  assert.equal(trace.status, 200, trace.text);
  assert.equal(trace.json.trace.compression_count, notices.length, 'AS-55: the trace counts the notices');
});

scenario('AS-25 skills are selected by name or from the query, unknown names are missing, and GET /v1/skills lists them', async (s) => {
  const up = await s.upstream();
  const shared = s.tmpdir();
  write(path.join(shared, 'git', 'SKILL.md'),
    '---\nname: git-history\ndescription: Reads a repository history\nversion: "2.0"\ntags: [git, commits]\n---\nGIT SKILL BODY\n');
  write(path.join(shared, 'pdf', 'SKILL.md'), '---\nname: pdf-reports\ndescription: shared copy\n---\nSHARED PDF BODY\n');
  write(path.join(shared, 'bad', 'SKILL.md'), 'no frontmatter here\n');
  const troupe = await s.troupe({
    config: deep_merge(upstream_config(up), { service: { service_token: token }, skills: { dirs: [shared] } }),
  });
  write(path.join(troupe.workspace('pska', 'pska:carol'), 'skills', 'pdf', 'SKILL.md'),
    '---\nname: pdf-reports\ndescription: Writes PDF reports\nversion: 1.1\ntags: [pdf, reports]\n---\nWORKSPACE PDF BODY\n');

  await up.script([], { content: 'ok' });
  const ask = (skills, query) => troupe.chat({ messages: [user(query)], user_key: 'pska:carol', skills }, auth);

  const named = await ask(['git-history', 'nope'], 'show me something');
  assert.equal(named.status, 200, named.text);
  const start = named.json.events[0];
  assert.deepEqual(start.metadata.skills, ['git-history']);
  assert.deepEqual(start.metadata.missing_skills, ['nope']);

  const auto = await ask(null, 'Make the PDF reports for March');
  assert.deepEqual(auto.json.events[0].metadata.skills, ['pdf-reports'], 'null auto-selects from the query');
  assert.deepEqual(auto.json.events[0].metadata.missing_skills, []);

  const none = await ask([], 'Make the PDF reports with git');
  assert.deepEqual(none.json.events[0].metadata.skills, [], '[] selects none');

  const [r1, r2, r3] = chat_requests(await up.requests());
  assert.ok(r1.messages[0].content.includes('GIT SKILL BODY'), 'a selected skill body joins the system message');
  assert.ok(!r1.messages[0].content.includes('PDF BODY'));
  assert.ok(r2.messages[0].content.includes('WORKSPACE PDF BODY'), 'the workspace skill wins over skills.dirs');
  assert.ok(!r2.messages[0].content.includes('SHARED PDF BODY'));
  assert.ok(r2.messages[0].content.indexOf('WORKSPACE PDF BODY') > r2.messages[0].content.indexOf('Safety policy'));
  assert.ok(!r3.messages[0].content.includes('BODY'));

  const bad = await troupe.chat({ messages: [user('x')], skills: 'git' }, auth);
  assert.equal(bad.status, 422, bad.text);
  assert.deepEqual(bad.json.detail[0].loc, ['body', 'skills']);

  // Public: without a credential only the skills.dirs' skills; an identified caller sees its workspace's first.
  const open = await troupe.request('GET', '/v1/skills');
  assert.equal(open.status, 200, open.text);
  assert.deepEqual(open.json.skills.map((k) => [k.name, k.source_path, k.duplicate_count]),
    [['git-history', path.join(shared, 'git', 'SKILL.md'), 0], ['pdf-reports', path.join(shared, 'pdf', 'SKILL.md'), 0]]);
  assert.deepEqual(open.json.skills[0], { name: 'git-history', description: 'Reads a repository history', version: '2.0',
    source_path: path.join(shared, 'git', 'SKILL.md'), duplicate_count: 0 });
  assert.deepEqual(open.json.skipped, [{ source_path: path.join(shared, 'bad', 'SKILL.md'),
    reason: "no frontmatter: the file must begin with a line '---'" }]);

  const mine = await troupe.request('GET', '/v1/skills', { headers: { ...auth, 'X-FastReAct-User-Key': 'pska:carol' } });
  assert.equal(mine.status, 200, mine.text);
  assert.deepEqual(mine.json.skills.map((k) => [k.name, k.source_path, k.duplicate_count, k.version]),
    [['pdf-reports', 'skills/pdf/SKILL.md', 1, '1.1'], ['git-history', path.join(shared, 'git', 'SKILL.md'), 0, '2.0']]);
});
