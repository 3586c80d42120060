// Every `exec` runs in bubblewrap (AS-28, tools.exec.sandbox "bwrap"): driven through the real binary
// by scripted models, a command cannot kill troupe, see its variables, outlive its call or read the
// data directory; "none" is the explicit opt-out, and a bwrap that cannot start is reported by each
// exec call and by /ready.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { scenario, check_event_stream, processes_with, until, user } from './harness.mjs';

const allow_exec = { tool_rules: { exec: 'allow' } }; // redirections and kill would need approval (AS-37)
const exec = (command) => ({ tool_calls: [{ name: 'exec', arguments: { command } }] });

// A command that starts `what` in a session of its own (out of the process group's reach) and
// returns once it has left, then echoes "started".
const detached = (what) =>
  `setsid sh -c 'touch detached; exec ${what}' >/dev/null 2>&1 & until [ -e detached ]; do sleep 0.01; done; echo started`;

async function tool_results(troupe, user_key) {
  const stream = await troupe.stream({ messages: [user('go')], user_key });
  assert.equal(stream.status, 200, stream.body);
  const { frames } = await stream.finished;
  return check_event_stream(frames).filter((e) => e.type === 'tool_result').map((e) => e.content);
}

scenario('a sandboxed exec cannot kill troupe, read its variables or its data directory, nor write outside the workspace', async (s) => {
  const data_dir = path.join(s.tmpdir('troupe-sandbox-'), 'data');
  const troupe = await s.troupe({
    data_dir,
    env: { SANDBOX_CANARY: 'server-secret', FASTREACT_SERVICE_TOKEN: 'tok-secret' },
    config: {
      policy: allow_exec,
      model: {
        script: [
          exec('env; tr "\\000" "\\n" < /proc/$PPID/environ'),
          exec('kill -9 $PPID; echo parent=$?; kill -9 "$(cat troupe.pid)" 2>&1; echo troupe=$?'),
          exec(`cat ${data_dir}/troupe.db ${data_dir}/audit.jsonl 2>&1 | head -c 300; ls -a ${data_dir} 2>&1`),
          exec(`echo x > ${data_dir}/planted; echo x > /usr/planted; echo x > /planted; echo inside > made.txt && echo wrote-inside`),
          { content: 'done' },
        ],
      },
    },
  });
  const auth = { authorization: 'Bearer tok-secret' };
  const ws = troupe.workspace('pska', 'pska:sandbox');
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(ws, 'troupe.pid'), `${troupe.pid}\n`);

  const stream = await troupe.stream({ messages: [user('go')], user_key: 'pska:sandbox' }, auth);
  assert.equal(stream.status, 200, stream.body);
  const { frames } = await stream.finished;
  const results = check_event_stream(frames).filter((e) => e.type === 'tool_result').map((e) => e.content);
  assert.equal(results.length, 4, results.join('\n---\n'));

  const [env, kills, data, writes] = results;
  for (const secret of ['SANDBOX_CANARY', 'server-secret', 'FASTREACT_SERVICE_TOKEN', 'tok-secret'])
    assert.ok(!env.includes(secret), `exec sees no server variable (${secret}):\n${env}`);
  assert.match(env, /^PATH=/m);

  // The shell's parent is the namespace's init, which ignores it; troupe's pid does not exist there.
  assert.match(kills, /parent=0/, kills);
  assert.match(kills, /No such process|no such process/i, kills);
  assert.match(kills, /troupe=1/, kills);
  assert.equal(troupe.exit, null, `troupe still runs after the kills\n${kills}`);
  const health = await troupe.request('GET', '/health');
  assert.equal(health.status, 200);

  assert.ok(!data.includes('SQLite format'), `troupe.db is unreadable:\n${data}`);
  assert.match(data, /No such file or directory/, data);
  assert.ok(fs.existsSync(path.join(data_dir, 'troupe.db')), 'troupe.db is there on the host');

  assert.match(writes, /wrote-inside/, writes);
  assert.equal(fs.readFileSync(path.join(ws, 'made.txt'), 'utf8'), 'inside\n');
  const planted = [path.join(data_dir, 'planted'), '/usr/planted', '/planted'].filter((p) => fs.existsSync(p));
  for (const p of planted) fs.rmSync(p, { force: true }); // leave the host clean, then fail below
  assert.deepEqual(planted, [], 'nothing was written outside the workspace');

  // A second run still works: nothing of the above harmed troupe.
  const again = await troupe.chat({ messages: [user('again')], user_key: 'pska:other' }, auth);
  assert.equal(again.status, 200, again.text);
});

scenario('a setsid child of a sandboxed exec is gone within 1 s of the call\'s end', async (s) => {
  const troupe = await s.troupe({
    config: {
      policy: allow_exec,
      model: { script: [exec(detached('sleep 300.2718')), exec('sleep 2'), { content: 'done' }] },
    },
  });
  const stream = await troupe.stream({ messages: [user('go')], user_key: 'pska:sleeper' });
  assert.equal(stream.status, 200, stream.body);
  await stream.wait_for((f) => f.json?.type === 'tool_result' && f.json.content === 'started\n', 30_000);
  const ended = performance.now();
  await until(() => processes_with('sleep 300.2718').length === 0,
    { timeout_ms: 1000, interval_ms: 5, message: 'the setsid sleep to be gone within 1 s of the call\'s end' });
  s.t.diagnostic(`setsid child gone ${(performance.now() - ended).toFixed(1)} ms after the call's result`);
  await stream.finished;
});

scenario('a sandboxed exec works when the data directory is given as a relative path', async (s) => {
  // troupe serve runs in its own temporary directory; `--data-dir data` is relative to it.
  const troupe = await s.troupe({
    data_dir: 'data',
    config: { policy: allow_exec, model: { script: [exec('echo inside > made.txt && cat made.txt'), { content: 'done' }] } },
  });
  const [out] = await tool_results(troupe, 'pska:relative');
  assert.equal(out, 'inside\n', out);
});

scenario('tools.exec.sandbox "none" is the explicit opt-out: commands run as troupe\'s own children', async (s) => {
  const data_dir = path.join(s.tmpdir('troupe-sandbox-'), 'data');
  const troupe = await s.troupe({
    data_dir,
    config: {
      tools: { exec: { sandbox: 'none' } },
      policy: allow_exec,
      model: { script: [exec(`echo $PPID; ls ${data_dir}`), { content: 'done' }] },
    },
  });
  const [out] = await tool_results(troupe, 'pska:optout');
  assert.equal(out.split('\n')[0], String(troupe.pid), out);
  assert.match(out, /troupe\.db/, 'unsandboxed, the data directory is visible');
  const ready = await troupe.request('GET', '/ready');
  assert.equal(ready.status, 200, ready.text);
  assert.deepEqual(ready.json.exec, { sandbox: 'none', ready: true });
  assert.match(troupe.stderr, /tools\.exec\.sandbox is "none"/);
});

scenario('without bwrap each exec answers a clear [ERROR] and /ready says why', async (s) => {
  // No bwrap on troupe's PATH (an empty directory); node is started by absolute path.
  const empty = s.tmpdir('troupe-no-bwrap-');
  const troupe = await s.troupe({
    env: { PATH: empty },
    config: { policy: allow_exec, model: { script: [exec('touch ran'), { content: 'done' }] } },
  });
  assert.match(troupe.stderr, /\[?error\]?.*exec: the sandbox cannot run commands/i, troupe.stderr);
  const [out] = await tool_results(troupe, 'pska:nobwrap');
  assert.match(out, /^\[ERROR\] exec: the sandbox cannot run commands: bubblewrap \(bwrap\) is not installed/, out);
  assert.match(out, /tools\.exec\.sandbox/, 'the message names the opt-out');
  assert.ok(!fs.existsSync(path.join(troupe.workspace('pska', 'pska:nobwrap'), 'ran')), 'nothing ran');

  const ready = await troupe.request('GET', '/ready');
  assert.equal(ready.status, 200, ready.text);
  assert.equal(ready.json.status, 'ready', 'AS-58: status follows the agent and MCP; exec reports itself');
  assert.equal(ready.json.exec.sandbox, 'bwrap');
  assert.equal(ready.json.exec.ready, false);
  assert.match(ready.json.exec.error, /bubblewrap \(bwrap\) is not installed/);
});

scenario('tools.exec.sandbox takes only "bwrap" or "none" (exit 2 naming the key)', async (s) => {
  const r = await s.run_troupe(['check-config', '--set', 'tools.exec.sandbox=docker']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /tools\.exec\.sandbox: expected one of bwrap, none, got "docker"/);
});
