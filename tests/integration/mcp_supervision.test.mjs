// MCP server supervision (AS-62, AS-64, AS-65, AS-11) against the fake stdio MCP server
// (tests/fake_mcp/fake_mcp_server.mjs), driven by troupe's scripted model so every tool call is fixed
// by the test: a server killed under a call is restarted, a call that met the crash is repeated on
// the new instance only when the tool says a repeat is harmless, a server that never answers meets
// the timeout and is told to cancel, non-JSON stdout lines are survived, a client that leaves cancels
// the call at the server, and SIGTERM takes the server down with troupe.
//
// Every server runs under a small spy (`node --import <spy> fake_mcp_server.mjs …`) that appends each
// request it reads to $FAKE_MCP_LOG as `request <method> <tool> <id>`, next to the fake's own
// `notification <method> <params>` and `touch <args>` lines, so the test can count the calls that
// reached a server instance. The spy only watches stdin's data events; it changes nothing.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import {
  scenario, check_event_stream, check_attempt_order, source_dir, fake_mcp_spy_source, until, user, wait_mcp_ready as wait_ready,
} from './harness.mjs';

const wait_mcp_ready = (troupe, names, timeout_ms = mcp_ready_timeout_ms) => wait_ready(troupe, names, timeout_ms);

const fake_server = path.join(source_dir, 'tests', 'fake_mcp', 'fake_mcp_server.mjs');
const mcp_ready_timeout_ms = 30_000; // a node server starting on a loaded 2-core machine
const run_timeout_ms = 60_000;
const exit_timeout_ms = 20_000;


const call = (name, args) => ({ name, arguments: args });

// One fake server for a scenario: its mcp.servers entry, its log and its pid file.
function fake_mcp(s, { flags = [], timeout_seconds = 30, name = 'fake' } = {}) {
  const dir = s.tmpdir('troupe-mcp-sup-');
  const log_file = path.join(dir, 'fake_mcp.log');
  const pid_file = path.join(dir, 'fake_mcp.pid');
  const spy_file = path.join(dir, 'spy.mjs');
  fs.writeFileSync(spy_file, fake_mcp_spy_source);
  const server = {
    name,
    command: process.execPath,
    args: ['--import', pathToFileURL(spy_file).href, fake_server, '--pid-file', pid_file, ...flags],
    env: { FAKE_MCP_LOG: log_file },
    transport: 'stdio',
    isolation: 'shared',
    timeout_seconds,
  };
  const lines = () => {
    try { return fs.readFileSync(log_file, 'utf8').split('\n').filter(Boolean); } catch { return []; }
  };
  // [{method, tool, id}] of the requests the server instances read.
  const requests = (method = 'tools/call') => lines()
    .map((l) => l.match(/^request (\S+) (\S+) (.+)$/))
    .filter((m) => m && m[1] === method)
    .map((m) => ({ method: m[1], tool: m[2], id: JSON.parse(m[3]) }));
  const calls_of = (tool) => requests().filter((r) => r.tool === tool);
  // [{method, params}] of the notifications the server instances received.
  const notifications = (method) => lines()
    .map((l) => l.match(/^notification (\S+) (.*)$/))
    .filter((m) => m && (method === undefined || m[1] === method))
    .map((m) => ({ method: m[1], params: JSON.parse(m[2]) }));
  const touches = () => lines().filter((l) => l.startsWith('touch '));
  // [server, helper] host pids of the live instance. troupe runs the server in a PID namespace of its
  // own, so the pids it writes are not the host's: its processes are found by the pid file their
  // command lines name.
  const pids = () => {
    const mine = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((p) => {
      const argv = proc_argv(p);
      return argv && argv[0] === process.execPath && argv.includes(pid_file) && alive(p);
    });
    const server = mine.filter((p) => proc_argv(p)?.includes(fake_server));
    return [...server, ...mine.filter((p) => !server.includes(p))];
  };
  const pid = () => pids()[0] ?? null;
  const describe = () => `--- ${log_file}:\n${lines().join('\n')}`;
  return { server, log_file, pid_file, lines, requests, calls_of, notifications, touches, pids, pid, describe };
}

// /proc (Linux): a living process (not a zombie) whose command line runs the fake server.
function proc_state(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return null;
  }
}
function proc_argv(pid) {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean); } catch { return null; }
}
const proc_cmdline = (pid) => proc_argv(pid)?.join(' ') ?? null;
const alive = (pid) => {
  const state = proc_state(pid);
  return state !== null && state !== 'Z';
};
const fake_alive = (pid) => alive(pid) && (proc_cmdline(pid) ?? '').includes('fake_mcp_server.mjs');

// Waits for an open run stream to finish; returns its checked payloads and tool results.
async function finish_run(stream) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the run did not finish within ${run_timeout_ms} ms; frames so far:\n` +
      stream.frames.map((f) => f.raw).join('\n\n'))), run_timeout_ms);
  });
  const { frames } = await Promise.race([stream.finished, late]).finally(() => clearTimeout(timer));
  const events = check_event_stream(frames);
  const steps = check_attempt_order(events);
  const results = events.filter((e) => e.type === 'tool_result');
  const summary = events.map((e) => `${e.type}${e.tool_name ? ` ${e.tool_name}` : ''}: ${e.content}`).join('\n');
  return { events, steps, results, summary, end: events[events.length - 1] };
}

async function open_run(troupe, script_name, query = 'use the tools') {
  const stream = await troupe.stream({ messages: [user(query)], model: `scripted:${script_name}` });
  assert.equal(stream.status, 200, stream.body);
  return stream;
}

async function scripted_run(troupe, script_name, query) {
  return finish_run(await open_run(troupe, script_name, query));
}

const is_tool = (type, tool) => (f) => f.json?.type === type && f.json.tool_name === tool;

scenario('a server SIGKILLed during a call of a tool without hints answers [MCP_ERROR] at once, is restarted, and the next step\'s side effect runs exactly once on the new instance (AS-64, AS-65)', async (s) => {
  const fake = fake_mcp(s, { timeout_seconds: 30 });
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [fake.server] },
      model: {
        scripts: {
          kill: [
            { content: 'Waiting on the server.', tool_calls: [call('fake_hang', {})] },
            { content: 'Leaving a mark.', tool_calls: [call('fake_touch', { mark: 1 })] },
            { content: 'carried on' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['fake']);
  const first = fake.pid();
  assert.ok(first && fake_alive(first), `the fake server wrote its pid: ${fake.pids()}`);

  const stream = await open_run(troupe, 'kill', 'kill it under the call');
  await stream.wait_for(is_tool('tool_call', 'fake_hang'), run_timeout_ms);
  await until(() => fake.calls_of('hang').length === 1, { timeout_ms: 10_000, message: `the server to read the hang call\n${fake.describe()}` });
  assert.ok(!stream.frames.some(is_tool('tool_result', 'fake_hang')), 'the hang call is still running');

  const killed_at = performance.now();
  process.kill(first, 'SIGKILL');
  const hang_result = await stream.wait_for(is_tool('tool_result', 'fake_hang'), 5_000)
    .catch((err) => { throw new Error(`no prompt tool_result after the SIGKILL: ${err.message}\n${fake.describe()}`); });
  const latency_ms = performance.now() - killed_at;
  s.t.diagnostic(`SIGKILL → tool_result in ${latency_ms.toFixed(1)} ms`);
  assert.match(hang_result.json.content, /^\[MCP_ERROR\] .*signal 9/, 'the attempt failed with the reason of the crash');
  assert.ok(latency_ms < 5_000, `the crash was answered after ${latency_ms.toFixed(0)} ms, well under the 30 s timeout`);

  const run = await finish_run(stream);
  assert.deepEqual(run.results.map((r) => r.tool_name), ['fake_hang', 'fake_touch'], run.summary);
  assert.equal(run.results[1].content, 'touched', `the next step's call was served by the restarted server\n${run.summary}`);
  assert.equal(run.end.type, 'session_end', `the run continued after the crash\n${run.summary}`);
  assert.equal(run.end.content, 'carried on');
  assert.equal(run.end.metadata.status, 'completed');

  assert.equal(fake.touches().length, 1, `the side effect ran exactly once\n${fake.describe()}`);
  assert.equal(fake.calls_of('hang').length, 1, `the call without hints was not repeated on the new instance\n${fake.describe()}`);
  assert.equal(fake.requests('initialize').length, 2, `the new instance was initialized\n${fake.describe()}`);
  const second = fake.pid();
  assert.notEqual(second, first, 'the server was restarted as a new process');
  assert.ok(fake_alive(second), `the restarted server ${second} runs`);
  assert.ok(!fake_alive(first), `the killed server ${first} is gone`);
  const ready = await wait_mcp_ready(troupe, ['fake']);
  assert.equal(ready.mcp.servers.find((v) => v.name === 'fake').tool_count, 7, JSON.stringify(ready.mcp));
});

scenario('a read-only call that was in the pipe of a server killed before answering is retried on the restarted server and succeeds (AS-64)', async (s) => {
  const fake = fake_mcp(s, { timeout_seconds: 30 });
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [fake.server] },
      model: { scripts: { echo: [{ tool_calls: [call('fake_echo', { text: 'survived a crash' })] }, { content: 'done: {{last_tool_result}}' }] } },
    },
  });
  await wait_mcp_ready(troupe, ['fake']);
  const first = fake.pid();
  assert.ok(first && fake_alive(first), `the fake server wrote its pid: ${fake.pids()}`);

  // Freeze the server so that the echo call (which it would answer at once) stays unanswered in its
  // stdin pipe; read the pipe to see troupe's tools/call there, then kill the server under it.
  process.kill(first, 'SIGSTOP');
  let pipe_fd = null;
  try {
    const stream = await open_run(troupe, 'echo', 'echo through a crash');
    await stream.wait_for(is_tool('tool_call', 'fake_echo'), run_timeout_ms);
    pipe_fd = fs.openSync(`/proc/${first}/fd/0`, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    let sent = '';
    const chunk = Buffer.alloc(65536);
    await until(() => {
      try {
        const n = fs.readSync(pipe_fd, chunk, 0, chunk.length, null);
        sent += chunk.toString('utf8', 0, n);
      } catch (err) {
        if (err.code !== 'EAGAIN') throw err;
      }
      return sent.includes('"tools/call"') && sent.includes('"echo"');
    }, { timeout_ms: 10_000, message: 'troupe to write the echo tools/call to the stopped server' });
    process.kill(first, 'SIGKILL');

    const run = await finish_run(stream);
    assert.equal(run.results.length, 1, run.summary);
    assert.equal(run.results[0].content, 'survived a crash', `the retried call succeeded\n${run.summary}\n${fake.describe()}`);
    assert.ok(run.results[0].duration_ms >= 1000, `the retry came after the 1 s pause: ${run.results[0].duration_ms} ms`);
    assert.equal(run.end.type, 'session_end', run.summary);
    assert.equal(run.end.content, 'done: survived a crash');
  } finally {
    if (pipe_fd !== null) fs.closeSync(pipe_fd);
    if (alive(first)) process.kill(first, 'SIGKILL');
  }
  assert.deepEqual(fake.calls_of('echo').map((r) => r.tool), ['echo'], `the new instance got the call once\n${fake.describe()}`);
  const second = fake.pid();
  assert.notEqual(second, first, 'the call was answered by a new server process');
  assert.ok(fake_alive(second), `the restarted server ${second} runs`);
});

scenario('a server that prints a non-JSON line before every message is survived: tools are listed and calls answer (AS-62, AS-65)', async (s) => {
  const fake = fake_mcp(s, { flags: ['--garbage'] });
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [fake.server] },
      model: {
        scripts: {
          garbage: [
            { tool_calls: [call('fake_echo', { text: 'garbage in, text out' }), call('fake_add', { a: 2, b: 3 })] },
            { content: 'sum {{last_tool_result}}' },
          ],
        },
      },
    },
  });
  const ready = await wait_mcp_ready(troupe, ['fake']);
  assert.equal(ready.mcp.servers.find((v) => v.name === 'fake').tool_count, 7, JSON.stringify(ready.mcp));
  const first = fake.pid();

  const run = await scripted_run(troupe, 'garbage');
  assert.deepEqual(run.results.map((r) => r.content), ['garbage in, text out', '5'], run.summary);
  assert.equal(run.end.type, 'session_end', run.summary);
  assert.equal(run.end.content, 'sum 5');
  assert.equal(fake.pid(), first, 'the garbage did not make troupe restart the server');
  assert.equal(fake.requests('initialize').length, 1, fake.describe());
  assert.ok(fake_alive(first));
});

scenario('a call to a server that never answers meets the server\'s 1 s timeout as [MCP_ERROR], the server is sent notifications/cancelled, and the next step\'s call works (AS-61, AS-64)', async (s) => {
  const fake = fake_mcp(s, { timeout_seconds: 1 });
  const troupe = await s.troupe({
    config: {
      mcp: { call_timeout_seconds: 120, servers: [fake.server] },
      model: {
        scripts: {
          hang: [
            { tool_calls: [call('fake_hang', {})] },
            { tool_calls: [call('fake_echo', { text: 'still here' })] },
            { content: 'done' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['fake']);
  const started = performance.now();
  const run = await scripted_run(troupe, 'hang');
  const elapsed_ms = performance.now() - started;
  assert.equal(run.results.length, 2, run.summary);
  assert.equal(run.results[0].content, '[MCP_ERROR] Tool call timed out after 1 seconds', run.summary);
  assert.ok(run.results[0].duration_ms >= 1000, `the call waited for its timeout: ${run.results[0].duration_ms} ms`);
  assert.ok(elapsed_ms < 20_000, `the 1 s timeout ended the call (run took ${elapsed_ms.toFixed(0)} ms)`);
  assert.equal(run.results[1].content, 'still here', `the server still answers after a timed-out call\n${run.summary}`);
  assert.equal(run.end.type, 'session_end', run.summary);

  const hangs = fake.calls_of('hang');
  assert.equal(hangs.length, 1, `the timed-out call of a tool without hints was not repeated\n${fake.describe()}`);
  const cancelled = fake.notifications('notifications/cancelled');
  assert.equal(cancelled.length, 1, `the server was told to stop the call\n${fake.describe()}`);
  assert.deepEqual(cancelled[0].params.requestId, hangs[0].id, 'notifications/cancelled names the timed-out request');
});

scenario('a tool-level error answers [MCP_ERROR] with the server\'s text, is not retried, and the run completes (AS-62, AS-64)', async (s) => {
  const fake = fake_mcp(s);
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [fake.server] },
      model: {
        scripts: {
          fail: [
            { tool_calls: [call('fake_fail', {})] },
            { tool_calls: [call('fake_echo', { text: 'after the failure' })] },
            { content: 'finished anyway' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['fake']);
  const first = fake.pid();
  const run = await scripted_run(troupe, 'fail');
  assert.deepEqual(run.results.map((r) => r.content), ['[MCP_ERROR] failed on purpose', 'after the failure'], run.summary);
  assert.equal(run.end.type, 'session_end', run.summary);
  assert.equal(run.end.content, 'finished anyway');
  assert.equal(run.end.metadata.status, 'completed', 'a tool error never fails the run');
  assert.equal(fake.calls_of('fail').length, 1, `the failed call reached the server once\n${fake.describe()}`);
  assert.equal(fake.notifications('notifications/cancelled').length, 0, fake.describe());
  assert.equal(fake.pid(), first, 'a tool-level error does not restart the server');
});

scenario('AS-62 an MCP result with an image and resources reaches the model as its text items joined with newlines, binary parts only described', async (s) => {
  const fake = fake_mcp(s, { flags: ['--media-tools'] });
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [fake.server] },
      model: { scripts: { media: [{ tool_calls: [call('fake_snapshot', {})] }, { content: 'seen' }] } },
    },
  });
  await wait_mcp_ready(troupe, ['fake']);
  const run = await scripted_run(troupe, 'media');
  assert.equal(run.results.length, 1, run.summary);
  assert.equal(run.results[0].content, [
    'snapshot taken',
    '[image: image/png, 4096 bytes]',
    '[resource: file:///notes.txt]',
    'first note',
    '[resource: file:///a.pdf, application/pdf, 300 bytes]',
    '[resource_link: file:///report.md (report.md)]',
  ].join('\n'));
  assert.equal(run.end.metadata.status, 'completed', run.summary);
});

scenario('a client that disconnects during an MCP call gets the call cancelled at the server with notifications/cancelled within 2 s (AS-11, AS-64)', async (s) => {
  const fake = fake_mcp(s, { timeout_seconds: 60 });
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [fake.server] },
      model: {
        scripts: {
          hang: [{ tool_calls: [call('fake_hang', {})] }, { content: 'never reached' }],
          echo: [{ tool_calls: [call('fake_echo', { text: 'next run' })] }, { content: 'done' }],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['fake']);
  const first = fake.pid();

  const stream = await open_run(troupe, 'hang', 'wait forever');
  await stream.wait_for(is_tool('tool_call', 'fake_hang'), run_timeout_ms);
  await until(() => fake.calls_of('hang').length === 1, { timeout_ms: 10_000, message: `the server to read the hang call\n${fake.describe()}` });
  const [hang] = fake.calls_of('hang');
  assert.equal(fake.notifications('notifications/cancelled').length, 0, 'nothing is cancelled before the client leaves');

  const left_at = performance.now();
  stream.abort();
  const [cancelled] = await until(() => {
    const n = fake.notifications('notifications/cancelled');
    return n.length > 0 && n;
  }, { timeout_ms: 2_000, interval_ms: 5, message: `notifications/cancelled at the server after the client left\n${fake.describe()}` });
  s.t.diagnostic(`disconnect → notifications/cancelled in ${(performance.now() - left_at).toFixed(1)} ms`);
  assert.deepEqual(cancelled.params.requestId, hang.id, 'the notification names the call in flight');

  // The server was not restarted and serves the next run.
  const run = await scripted_run(troupe, 'echo');
  assert.deepEqual(run.results.map((r) => r.content), ['next run'], run.summary);
  assert.equal(fake.pid(), first, 'a cancelled call does not restart the server');
  assert.equal(fake.calls_of('hang').length, 1, `the cancelled call was not repeated\n${fake.describe()}`);
});

scenario('on SIGTERM troupe exits 0 and its MCP server and the helper in its process group are gone by then (AS-63, AS-64)', async (s) => {
  const fake = fake_mcp(s, { flags: ['--spawn-child'] });
  const troupe = await s.troupe({ config: { mcp: { servers: [fake.server] } } });
  await wait_mcp_ready(troupe, ['fake']);
  const [server_pid, helper_pid] = fake.pids();
  assert.ok(server_pid && fake_alive(server_pid), `the fake server runs: ${fake.pids()}`);
  assert.ok(helper_pid && alive(helper_pid), `its helper runs: ${fake.pids()}`);

  const exit = await troupe.stop('SIGTERM', exit_timeout_ms);
  const server_left = fake_alive(server_pid);
  const helper_left = alive(helper_pid) && (proc_cmdline(helper_pid) ?? '').includes('setInterval');
  for (const [pid, left] of [[server_pid, server_left], [helper_pid, helper_left]])
    if (left) process.kill(pid, 'SIGKILL'); // leave nothing behind, then fail below
  assert.deepEqual({ code: exit.code, signal: exit.signal, killed: exit.killed_after_timeout ?? false },
    { code: 0, signal: null, killed: false }, 'troupe exits 0 on SIGTERM');
  assert.deepEqual({ server_left, helper_left }, { server_left: false, helper_left: false },
    `no MCP process outlives troupe (server ${server_pid}, helper ${helper_pid})`);
});

scenario('troupe killed with SIGKILL takes its stdio MCP server with it, and the helper it started in a session of its own (finding 6: the orphan rule)', async (s) => {
  const fake = fake_mcp(s, { flags: ['--ignore-sigterm', '--spawn-detached'] });
  const troupe = await s.troupe({ config: { mcp: { servers: [fake.server] } } });
  await wait_mcp_ready(troupe, ['fake']);
  await until(() => fake.pids().length === 2, { timeout_ms: 10_000, message: `the server and its helper to run: ${fake.pids()}` });
  const [server_pid, helper_pid] = fake.pids();

  await troupe.stop('SIGKILL');
  try {
    await until(() => !alive(server_pid) && !alive(helper_pid), { timeout_ms: 2000, interval_ms: 10,
      message: `the MCP server ${server_pid} and its helper ${helper_pid} to die with troupe` });
  } finally {
    for (const pid of fake.pids()) process.kill(pid, 'SIGKILL'); // leave nothing behind
  }
});

scenario('troupe killed with SIGKILL takes its stdio MCP server with it, even one that outlives the end of its stdin (finding 6: the orphan rule)', async (s) => {
  const fake = fake_mcp(s, { flags: ['--ignore-sigterm'] });
  const troupe = await s.troupe({ config: { mcp: { servers: [fake.server] } } });
  await wait_mcp_ready(troupe, ['fake']);
  const server_pid = fake.pid();
  assert.ok(server_pid && fake_alive(server_pid), `the fake server runs: ${fake.pids()}`);

  await troupe.stop('SIGKILL');
  try {
    await until(() => !fake_alive(server_pid), { timeout_ms: 2000, interval_ms: 10,
      message: `the MCP server ${server_pid} to die with troupe` });
  } finally {
    if (fake_alive(server_pid)) process.kill(server_pid, 'SIGKILL'); // leave nothing behind
  }
});
