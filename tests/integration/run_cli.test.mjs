// `troupe run` (issue 20 item 11), the real binary as a client of a real server: readable lines and
// the exit code of the run's outcome without a terminal, raw events with --json, --background then
// --follow, a dropped stream resumed by Last-Event-ID (a proxy cuts the connections), a stream out of
// reach read by page, and the approve prompt answered under a pseudo-terminal (util-linux `script`).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { scenario, closed_port, get_run, troupe_bin, until } from './harness.mjs';

const schema = 'fastreact.agent_event.v1';
const escape_re = /[\x00-\x08\x0b-\x1f\x7f]/; // what a terminal would act on (\t and \n aside)

// write_file (runs), a dangerous exec (asks), then an answer quoting what the model saw.
const rm_script = [
  { content: 'Making a file.', tool_calls: [{ name: 'write_file', arguments: { path: 'test.txt', content: 'bye\n' } }] },
  { content: 'Removing it.', tool_calls: [{ name: 'exec', arguments: { command: 'rm test.txt' } }] },
  { content: 'Model saw: {{last_tool_result}}' },
];

// The environment of a `troupe run`: ours without anything that configures troupe behind the test's back.
function cli_env(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('TROUPE_') && k !== 'FASTREACT_SERVICE_TOKEN') env[k] = v;
  return { ...env, ...extra };
}

// A `troupe run` (or any command) whose output is collected; registered with the scenario so it is
// stopped and described like the server.
class cli_process {
  constructor(s, command, args, { env = {}, cwd } = {}) {
    this.command = [command, ...args].join(' ');
    this.stdout = '';
    this.stderr = '';
    this.exit = null;
    this.proc = spawn(command, args, { env: cli_env(env), cwd: cwd ?? s.tmpdir(), stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc.stdout.setEncoding('utf8');
    this.proc.stderr.setEncoding('utf8');
    this.waiters = [];
    const poke = () => { for (const w of [...this.waiters]) w(); };
    this.proc.stdout.on('data', (d) => { this.stdout += d; poke(); });
    this.proc.stderr.on('data', (d) => { this.stderr += d; poke(); });
    this.exited = new Promise((resolve) => this.proc.once('close', (code, signal) => {
      this.exit = { code, signal };
      poke();
      resolve(this.exit);
    }));
    s.children.push(this);
  }

  // Resolves once `text()` matches `re` (its match); rejects on exit first or past the deadline.
  wait(text, re, what, timeout_ms = 30_000) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => finish(reject, new Error(`no ${what} within ${timeout_ms} ms\n${this.describe()}`)), timeout_ms);
      const finish = (fn, v) => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
        fn(v);
      };
      const check = () => {
        const m = text().match(re);
        if (m) return finish(resolve, m);
        if (this.exit) finish(reject, new Error(`exited before ${what}\n${this.describe()}`));
      };
      this.waiters.push(check);
      check();
    });
  }

  out(re, what = `stdout matching ${re}`) { return this.wait(() => this.stdout, re, what); }
  err(re, what = `stderr matching ${re}`) { return this.wait(() => this.stderr, re, what); }

  async done(timeout_ms = 60_000) {
    let timer;
    const late = new Promise((r) => { timer = setTimeout(() => r(null), timeout_ms); });
    const e = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    assert.ok(e, `exits within ${timeout_ms} ms\n${this.describe()}`);
    return e;
  }

  async stop() {
    if (!this.exit) this.proc.kill('SIGKILL');
    return this.exited;
  }

  describe() {
    return `--- ${this.command}\n--- exit: ${JSON.stringify(this.exit)}\n--- stdout:\n${this.stdout}\n--- stderr:\n${this.stderr}`;
  }
}

const troupe_run = (s, args, options) => new cli_process(s, troupe_bin(), ['run', ...args], options);

// A TCP proxy in front of the server that can cut every connection, or answer the stream route 503
// itself; it records each request's head.
async function proxy_to(target_url, { refuse_streams = false } = {}) {
  const target = new URL(target_url);
  const sockets = new Set();
  const heads = [];
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    client.once('data', (first) => {
      const head = first.toString('latin1');
      heads.push(head);
      if (refuse_streams && /^GET \S+\/stream /.test(head)) {
        client.end('HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 20\r\n' +
          'connection: close\r\n\r\n{"detail":"refused"}');
        return;
      }
      const upstream = net.connect(Number(target.port), target.hostname, () => {
        upstream.write(first);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      sockets.add(upstream);
      upstream.on('close', () => { sockets.delete(upstream); client.destroy(); });
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    heads,
    cut() { for (const sock of sockets) sock.destroy(); },
    close() { this.cut(); server.close(); },
  };
}

// The lines of a --json stdout, each one parsed.
function json_events(stdout) {
  return stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

function check_sequences(events) {
  events.forEach((e, i) => {
    assert.equal(e.schema, schema);
    assert.equal(e.sequence, i, `event ${i} is sequence ${i}, printed once: ${events.map((x) => x.sequence)}`);
  });
}

async function approvals_of(troupe, run_id) {
  const res = await troupe.request('GET', `/v1/approvals?run_id=${encodeURIComponent(run_id)}`);
  assert.equal(res.status, 200, res.text);
  return res.json.approvals;
}

scenario('troupe run without a terminal prints each event as a readable, escape-free line and exits 0 when the run completes; the token comes from FASTREACT_SERVICE_TOKEN', async (s) => {
  const troupe = await s.troupe({
    config: {
      service: { service_token: 'cli-secret' },
      model: {
        script: [
          { content: 'Writing.', tool_calls: [{ name: 'write_file', arguments: { path: 'n.txt', content: 'hi' } }] },
          { content: 'Done \u001b[2J\u001b]0;owned\u0007 there\r\nsecond line' },
        ],
      },
    },
  });
  const run = troupe_run(s, ['leave a note', '--url', troupe.url], { env: { FASTREACT_SERVICE_TOKEN: 'cli-secret' } });
  const exit = await run.done();
  assert.equal(exit.code, 0, run.describe());
  const lines = run.stdout.split('\n');
  const run_id = run.stdout.match(/^\[run\] (\S+): queued/m)?.[1];
  assert.ok(run_id, `the run and its status come first\n${run.stdout}`);
  for (const want of [
    /^\[start\] run \S+, attempt 1, model scripted$/, /^\[query\] leave a note$/, /^\[think\] Writing\.$/,
    /^\[tool\] write_file \{"path":"n\.txt","content":"hi"\}$/, /^\[step 1 done\]$/, /^\[result\] write_file:/,
    /^\[answer\] Done \\x1b\[2J\\x1b\]0;owned\\x07 there\\x0d$/, /^ {9}second line$/,
    new RegExp(`^\\[run\\] ${run_id}: completed, attempt 1, \\d+ events, 2 steps$`),
  ])
    assert.ok(lines.some((l) => want.test(l)), `a line matches ${want}\n${run.stdout}`);
  assert.ok(!escape_re.test(run.stdout), 'no control character reaches the terminal');
  const snapshot = await troupe.request('GET', `/v1/runs/${run_id}`, { headers: { authorization: 'Bearer cli-secret' } });
  assert.equal(snapshot.json?.status, 'completed', snapshot.text);

  const refused = troupe_run(s, ['again', '--url', troupe.url]);
  assert.equal((await refused.done()).code, 4, refused.describe());
  assert.match(refused.stderr, /answered 401: FastReAct service token required/);
});

scenario('troupe run --json prints every event once as one JSON object per line, in sequence order; --model picks the run\'s model', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'plain answer' }] } } });
  const run = troupe_run(s, ['hello', '--json', '--model', 'chosen-model', '--url', troupe.url]);
  assert.equal((await run.done()).code, 0, run.describe());
  const events = json_events(run.stdout);
  check_sequences(events);
  assert.deepEqual(events.map((e) => e.type), ['session_start', 'think', 'step_end', 'session_end']);
  assert.equal(events.at(-1).content, 'plain answer');
  assert.equal(events[0].metadata.model, 'chosen-model', '--model is the run\'s model (AS-9)');
  assert.match(run.stderr, /: completed, attempt 1, 4 events, 1 step/, 'progress goes to stderr under --json');
});

scenario('troupe run exits 1 when the run fails, and 3 when it is cancelled; usage errors exit 2', async (s) => {
  const dead = `http://127.0.0.1:${await closed_port()}/v1`;
  const troupe = await s.troupe({
    config: {
      service: { run_max_attempts: 1 },
      model: { provider: 'openai', base_url: dead, name: 'm', api_key: 'k', max_retries: 0 },
    },
  });
  const failing = troupe_run(s, ['fail please', '--url', troupe.url]);
  assert.equal((await failing.done()).code, 1, failing.describe());
  assert.match(failing.stdout, /^\[error\] LLM call failed: .*\(upstream_model_error\)$/m);
  assert.match(failing.stdout, /^\[run\] \S+: failed/m);

  const scripted = await s.troupe({ config: { model: { script: rm_script } } });
  const waiting = troupe_run(s, ['remove test.txt', '--url', scripted.url]);
  await waiting.out(/^\[approval\] waiting for approval-[0-9a-f]{10}/m, 'the approval notice');
  const run_id = waiting.stdout.match(/^\[run\] (\S+):/m)[1];
  const cancel = await scripted.request('POST', `/v1/runs/${encodeURIComponent(run_id)}/cancel`);
  assert.equal(cancel.status, 200, cancel.text);
  assert.equal((await waiting.done()).code, 3, waiting.describe());
  assert.match(waiting.stdout, /^\[error\] Run cancelled \(CancelledError\)$/m);

  for (const args of [[], ['a prompt', '--follow', 'r1'], ['--follow', 'r1', '--background'], ['--after', '3', 'p'],
    ['p', '--no-such-flag']]) {
    const usage = troupe_run(s, [...args, '--url', scripted.url]);
    assert.equal((await usage.done()).code, 2, `troupe run ${args.join(' ')} is a usage error\n${usage.describe()}`);
  }
});

scenario('troupe run --background prints the run id and exits at once; --follow then shows its progress and events, from the start or after a sequence', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: rm_script } } });
  const started = troupe_run(s, ['remove test.txt', '--background', '--url', troupe.url]);
  assert.equal((await started.done()).code, 0, started.describe());
  const run_id = started.stdout.trim();
  assert.match(run_id, /^\S+$/, started.stdout);
  // The run goes on without a client: it reaches the approval and waits there.
  const approval = await until(async () => (await approvals_of(troupe, run_id)).find((a) => a.status === 'pending'),
    { timeout_ms: 20_000, message: 'the pending approval' });

  const follow = troupe_run(s, ['--follow', run_id, '--url', troupe.url]);
  await follow.out(new RegExp(`^\\[approval\\] waiting for ${approval.request_id}`, 'm'), 'the approval notice');
  assert.match(follow.stdout, new RegExp(`^\\[run\\] ${run_id}: running, attempt 1, \\d+ events, 0 steps$`, 'm'));
  assert.match(follow.stdout, /^\[tool\] exec \{"command":"rm test\.txt"\}$/m);
  const ok = await troupe.request('POST', `/v1/approvals/${approval.request_id}/approve`, { body: {} });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await follow.done()).code, 0, follow.describe());
  assert.match(follow.stdout, /^\[result\] exec \(approved\):/m);
  assert.match(follow.stdout, /^\[answer\] Model saw:/m);
  assert.match(follow.stdout, new RegExp(`^\\[run\\] ${run_id}: completed, attempt 1, \\d+ events, 3 steps$`, 'm'));

  const tail = troupe_run(s, ['--follow', run_id, '--after', '5', '--json', '--url', troupe.url]);
  assert.equal((await tail.done()).code, 0, tail.describe());
  const events = json_events(tail.stdout);
  assert.ok(events.length > 0 && events[0].sequence === 6, `events after sequence 5: ${tail.stdout}`);
  assert.equal(events.at(-1).type, 'session_end');
  assert.match(tail.stderr, new RegExp(`\\[approval\\] ${approval.request_id} is approved`),
    'an approval resolved long ago is not asked again');
});

scenario('troupe run resumes a dropped stream by Last-Event-ID and prints every event exactly once', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: rm_script } } });
  const proxy = await proxy_to(troupe.url);
  s.t.after(() => proxy.close());
  const run = troupe_run(s, ['remove test.txt', '--json', '--url', proxy.url]);
  const m = await run.err(/\[approval\] waiting for (approval-[0-9a-f]{10})/, 'the approval notice');
  await run.out(/"type":"ask_user"/, 'the ask_user event'); // stdout and stderr are separate pipes
  const streams_before = proxy.heads.filter((h) => /^GET \S+\/stream /.test(h)).length;
  const seen = json_events(run.stdout).at(-1).sequence;
  proxy.cut();
  const resumed = await until(() => proxy.heads.slice(0).filter((h) => /^GET \S+\/stream /.test(h))[streams_before],
    { timeout_ms: 20_000, message: 'the stream requested again' });
  assert.match(resumed, new RegExp(`\\r\\nLast-Event-ID: ${seen}\\r\\n`, 'i'), resumed);
  assert.match(run.stderr, new RegExp(`dropped .*resuming after sequence ${seen}`));
  const ok = await troupe.request('POST', `/v1/approvals/${m[1]}/approve`, { body: {} });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await run.done()).code, 0, run.describe());
  const events = json_events(run.stdout);
  check_sequences(events);
  assert.equal(events.at(-1).type, 'session_end');
});

scenario('troupe run reads the events by page when the stream stays out of reach, and still exits with the outcome', async (s) => {
  const troupe = await s.troupe({ config: { model: { script: [{ content: 'paged answer' }] } } });
  const proxy = await proxy_to(troupe.url, { refuse_streams: true });
  s.t.after(() => proxy.close());
  const run = troupe_run(s, ['hello', '--url', proxy.url]);
  assert.equal((await run.done()).code, 0, run.describe());
  assert.match(run.stderr, /attempt 5 of 5/);
  assert.match(run.stderr, /stays out of reach; reading its events by page/);
  assert.match(run.stdout, /^\[answer\] paged answer$/m);
  assert.equal(run.stdout.match(/^\[answer\]/gm).length, 1, 'each event once');
  assert.ok(proxy.heads.some((h) => /^GET \S+\/events\?limit=1000/.test(h)), 'the events were paged');
});

// `troupe run` under a pseudo-terminal (stdin and stdout are a tty) on a fresh server whose run asks
// for approval, the prompt answered `answer`: the run exits 0 either way; its approval as resolved.
async function under_terminal(s, answer) {
  const troupe = await s.troupe({ config: { model: { script: rm_script } } });
  const command = [troupe_bin(), 'run', "'remove test.txt'", '--url', troupe.url].join(' ');
  const term = new cli_process(s, 'script', ['-q', '-e', '-c', command, '/dev/null']);
  await term.out(/approve exec\? \[y\/N\] /, 'the approve prompt');
  term.proc.stdin.write(`${answer}\n`);
  const exit = await term.done();
  term.proc.stdin.end();
  assert.equal(exit.code, 0, term.describe());
  const run_id = term.stdout.match(/\[run\] (\S+): queued/)[1];
  assert.equal((await get_run(troupe, run_id)).status, 'completed');
  const [approval] = await approvals_of(troupe, run_id);
  return { troupe, term, approval };
}

scenario('troupe run on a terminal asks approve? [y/N]; answering y approves the call, which runs, and the run completes', async (s) => {
  const { troupe, term, approval } = await under_terminal(s, 'y');
  assert.equal(approval.status, 'approved');
  assert.match(term.stdout, new RegExp(`\\[approval\\] ${approval.request_id} approved`));
  assert.ok(!fs.existsSync(path.join(troupe.workspace('', approval.user_key), 'test.txt')), 'the approved rm ran');
});

scenario('troupe run on a terminal: answering n denies the call, which does not run', async (s) => {
  const { troupe, term, approval } = await under_terminal(s, 'n');
  assert.equal(approval.status, 'denied');
  assert.match(term.stdout, /\[result\] exec \(not approved\): \[SAFETY_DENIED\]/);
  assert.ok(fs.existsSync(path.join(troupe.workspace('', approval.user_key), 'test.txt')), 'the denied rm did not run');
});
