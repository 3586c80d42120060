// The process: start-up, signals and draining, the data-dir lock (AS-56), config errors (AS-2),
// and the CLI's informational commands.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, check_event_stream, deep_merge, default_config, user } from './harness.mjs';

scenario('SIGTERM while idle exits 0', async (s) => {
  const troupe = await s.troupe();
  const health = await troupe.request('GET', '/health');
  assert.equal(health.status, 200);
  const exit = await troupe.stop('SIGTERM');
  assert.deepEqual(exit, { code: 0, signal: null });
});

scenario('SIGINT while idle exits 0', async (s) => {
  const troupe = await s.troupe();
  const exit = await troupe.stop('SIGINT');
  assert.deepEqual(exit, { code: 0, signal: null });
});

scenario('SIGTERM during a streamed run lets the client receive the terminal frame and done, then exits 0', async (s) => {
  const troupe = await s.troupe({
    config: { service: { shutdown_grace_seconds: 10 }, model: { script: [{ content: 'Slow but complete.', delay_ms: 2000 }] } },
  });
  const stream = await troupe.stream({ messages: [user('take your time')] });
  assert.equal(stream.status, 200);
  await stream.wait_for((f) => f.event === 'session_start');
  troupe.signal('SIGTERM');
  const { frames } = await stream.finished;
  const events = check_event_stream(frames);
  const last = events[events.length - 1];
  assert.ok(last.type === 'session_end' || last.type === 'error', `a terminal event precedes done: ${last.type}`);
  assert.equal(last.type, 'session_end', 'a 2 s run finishes within the drain grace');
  assert.equal(last.content, 'Slow but complete.');
  assert.deepEqual(await troupe.wait_exit(), { code: 0, signal: null }, 'the process exits 0 after draining');
});

scenario('SIGTERM during a run longer than the drain grace cancels it, still sends error and done, and exits 0', async (s) => {
  const troupe = await s.troupe({
    config: { service: { shutdown_grace_seconds: 0.3 }, model: { script: [{ content: 'never seen', delay_ms: 60_000 }] } },
  });
  const stream = await troupe.stream({ messages: [user('take forever')] });
  assert.equal(stream.status, 200);
  await stream.wait_for((f) => f.event === 'session_start');
  troupe.signal('SIGTERM');
  const { frames } = await stream.finished;
  const events = check_event_stream(frames);
  const last = events[events.length - 1];
  assert.equal(last.type, 'error', `the cancelled run ends with an error event: ${events.map((e) => e.type)}`);
  assert.deepEqual(await troupe.wait_exit(), { code: 0, signal: null }, 'the process exits 0 after draining');
});

scenario('a second troupe serve on the same data dir exits 2 because the store is locked', async (s) => {
  const first = await s.troupe();
  const second = await s.run_troupe(['serve', '--config', first.config_file, '--port', '0', '--data-dir', first.data_dir]);
  assert.equal(second.code, 2, `exit ${JSON.stringify(second)}`);
  assert.match(second.stderr + second.stdout, /store is locked by another troupe process/);
  assert.doesNotMatch(second.stdout, /troupe listening on/);
  const health = await first.request('GET', '/health');
  assert.equal(health.status, 200, 'the first process is unaffected');
});

scenario('the data dir can be reused once the first process has exited', async (s) => {
  const first = await s.troupe();
  assert.equal((await first.stop('SIGTERM')).code, 0);
  const second = await s.troupe({ data_dir: first.data_dir });
  const health = await second.request('GET', '/health');
  assert.equal(health.status, 200);
});

scenario('check-config reports a bad service.port by its JSON path and exits 2', async (s) => {
  const dir = s.tmpdir();
  const bad = path.join(dir, 'bad.json');
  fs.writeFileSync(bad, JSON.stringify({ service: { port: 'x' } }));
  const r = await s.run_troupe(['check-config', '--config', bad]);
  assert.equal(r.code, 2, JSON.stringify(r));
  assert.match(r.stderr + r.stdout, /service\.port: expected an integer 0\.\.65535/);

  // serve refuses the same file the same way, before listening.
  const serve = await s.run_troupe(['serve', '--config', bad, '--data-dir', path.join(dir, 'data')]);
  assert.equal(serve.code, 2, JSON.stringify(serve));
  assert.match(serve.stderr + serve.stdout, /service\.port: expected an integer 0\.\.65535/);
  assert.doesNotMatch(serve.stdout, /troupe listening on/);
});

// Issue 15 finding 16: a misspelt key fails closed instead of leaving its setting at the default.
scenario('check-config and serve refuse an unknown key with exit 2, naming it and the nearest known key', async (s) => {
  const dir = s.tmpdir();
  const r = await s.run_troupe(['check-config', '--set', 'auth.moed=jwt']);
  assert.equal(r.code, 2, JSON.stringify(r));
  assert.ok((r.stderr + r.stdout).includes('auth.moed: unknown key (did you mean "mode")'), r.stderr + r.stdout);

  const file = path.join(dir, 'colour.json');
  fs.writeFileSync(file, JSON.stringify(deep_merge(default_config(), { workspaces: { colour: 'red' } })));
  const serve = await s.run_troupe(['serve', '--config', file, '--port', '0', '--data-dir', path.join(dir, 'data')]);
  assert.equal(serve.code, 2, JSON.stringify(serve));
  assert.ok((serve.stderr + serve.stdout).includes('workspaces.colour: unknown key'), serve.stderr + serve.stdout);
  assert.doesNotMatch(serve.stdout, /troupe listening on/);

  // The embedded default, read by the same rule, is accepted.
  const defaults = await s.run_troupe(['check-config']);
  assert.equal(defaults.code, 0, JSON.stringify(defaults));
});

scenario('check-config accepts a valid file and exits 0', async (s) => {
  const dir = s.tmpdir();
  const good = path.join(dir, 'good.json');
  fs.writeFileSync(good, JSON.stringify(deep_merge(default_config(), { service: { port: 9999 } })));
  const r = await s.run_troupe(['check-config', '--config', good]);
  assert.equal(r.code, 0, JSON.stringify(r));
  assert.match(r.stdout, /9999/, 'the summary shows the configured listener');
});

scenario('troupe --version prints a version and exits 0', async (s) => {
  const r = await s.run_troupe(['--version']);
  assert.equal(r.code, 0, JSON.stringify(r));
  assert.match(r.stdout, /\d+\.\d+\.\d+/);
});

scenario('troupe serve --help exits 0 and documents its flags', async (s) => {
  const r = await s.run_troupe(['serve', '--help']);
  assert.equal(r.code, 0, JSON.stringify(r));
  for (const flag of ['--config', '--host', '--port', '--data-dir', '--set'])
    assert.ok(r.stdout.includes(flag), `help mentions ${flag}`);
});

scenario('port 0 picks a free port and the listening line shows the real one', async (s) => {
  const a = await s.troupe();
  const b = await s.troupe();
  assert.ok(a.port > 0 && b.port > 0);
  assert.notEqual(a.port, b.port);
  assert.equal(a.url, `http://127.0.0.1:${a.port}`);
  assert.equal((await a.request('GET', '/health')).status, 200);
  assert.equal((await b.request('GET', '/health')).status, 200);
});

scenario('--set overrides a config key from the command line', async (s) => {
  const troupe = await s.troupe({ args: ['--set', 'model.script=[{"content":"from --set"}]'] });
  const res = await troupe.chat({ messages: [user('hi')] });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.content, 'from --set');
});
