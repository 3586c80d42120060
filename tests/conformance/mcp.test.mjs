// Conformance: troupe as an MCP client (AS-58, AS-60..AS-65) against the real reference MCP servers
// from npm (@modelcontextprotocol/server-everything, -filesystem, -memory), started by troupe over
// stdio with `node <package bin>` straight from node_modules (no npx), and against a streamable-HTTP
// server built with the official MCP SDK (http_mcp_server.mjs). The model is troupe's scripted model,
// so every tool call and its arguments are fixed by the test.
//
// Needs `npm ci` in tests/conformance (scripts/test does it) and TROUPE_BIN (see the integration
// harness, which this file reuses).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { package_bin } from './packages.mjs';
import { start_http_mcp_server } from './http_mcp_child.mjs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  scenario, check_event_stream, check_attempt_order, until, user, wait_mcp_ready as wait_ready,
} from '../integration/harness.mjs';

const wait_mcp_ready = (troupe, names, timeout_ms = mcp_ready_timeout_ms) => wait_ready(troupe, names, timeout_ms);

const builtins = ['exec', 'read_file', 'write_file', 'edit_file', 'list_dir'];
const mcp_ready_timeout_ms = 60_000; // three node servers starting on a loaded 2-core machine
const run_timeout_ms = 60_000;
const exit_timeout_ms = 20_000;



const everything_bin = package_bin('@modelcontextprotocol/server-everything');
const filesystem_bin = package_bin('@modelcontextprotocol/server-filesystem');
const memory_bin = package_bin('@modelcontextprotocol/server-memory');
const server_bins = [everything_bin, filesystem_bin, memory_bin];

// The three reference servers as mcp.servers entries, each with its own world in temp dirs:
//   everything: `node …/server-everything/dist/index.js stdio`
//   fs:         `node …/server-filesystem/dist/index.js <root>` (the only allowed directory)
//   memory:     `node …/server-memory/dist/index.js` with MEMORY_FILE_PATH=<temp file>
// Every server gets CONFORMANCE_MARK=<uuid> in its environment so leftovers can be found in /proc.
function reference_servers(s) {
  const root = s.tmpdir('troupe-mcp-root-');
  const outside = s.tmpdir('troupe-mcp-outside-');
  const memory_file = path.join(s.tmpdir('troupe-mcp-memory-'), 'memory.jsonl');
  const mark = randomUUID();
  const env = { CONFORMANCE_MARK: mark };
  const servers = [
    { name: 'everything', command: process.execPath, args: [everything_bin, 'stdio'], env, transport: 'stdio', isolation: 'shared' },
    { name: 'fs', command: process.execPath, args: [filesystem_bin, root], env, transport: 'stdio', isolation: 'shared' },
    { name: 'memory', command: process.execPath, args: [memory_bin], env: { ...env, MEMORY_FILE_PATH: memory_file }, transport: 'stdio', isolation: 'shared' },
  ];
  return { servers, root, outside, memory_file, mark };
}

// The tool names in /v1/tools' `tools` (strings, or objects with a name).
const tool_names = (list) => list.map((t) => (typeof t === 'string' ? t : t.name));
const server_name = (v) => (typeof v === 'string' ? v : v?.name);

// Streams one run with a scripted model and returns its checked event payloads and tool results.
async function scripted_run(troupe, script_name, query = 'use the tools', body = {}) {
  const stream = await troupe.stream({ messages: [user(query)], model: `scripted:${script_name}`, ...body });
  assert.equal(stream.status, 200, stream.body);
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

const call = (name, args) => ({ name, arguments: args });

// The tools a reference server offers to a plain MCP client (the SDK's), for comparing with what
// troupe registered.
async function list_server_tools(command, args, env = {}) {
  const client = new Client({ name: 'troupe-conformance-probe', version: '1.0.0' });
  const transport = new StdioClientTransport({ command, args, env: { ...process.env, ...env }, stderr: 'pipe' });
  try {
    await client.connect(transport);
    return (await client.listTools()).tools;
  } finally {
    await client.close().catch(() => {});
  }
}

// /proc helpers (Linux): {pid, ppid, state} of every process, its cmdline and environment.
function proc_table() {
  const table = new Map();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      table.set(Number(entry), { pid: Number(entry), state: after[0], ppid: Number(after[1]) });
    } catch { /* exited meanwhile */ }
  }
  return table;
}
function proc_argv(pid) {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean); } catch { return null; }
}
const proc_cmdline = (pid) => proc_argv(pid)?.join(' ') ?? null;
function proc_environ(pid) {
  try { return fs.readFileSync(`/proc/${pid}/environ`, 'utf8'); } catch { return null; }
}
// Living (not zombie) processes: the descendants of `root_pid`.
function descendants(root_pid) {
  const table = proc_table();
  const out = [];
  const queue = [root_pid];
  while (queue.length) {
    const parent = queue.shift();
    for (const p of table.values()) {
      if (p.ppid === parent) {
        const argv = proc_argv(p.pid);
        out.push({ ...p, argv, cmdline: argv?.join(' ') ?? null });
        queue.push(p.pid);
      }
    }
  }
  return out.filter((p) => p.state !== 'Z');
}
// Whether `p` is node running `bin`: the server itself, not the bwrap processes that hold it in a PID
// namespace of its own (their command lines name it too).
const runs = (p, bin) => p.argv?.[0] === process.execPath && p.argv.includes(bin);
// Living processes whose environment carries CONFORMANCE_MARK=<mark>.
function marked_processes(mark) {
  const out = [];
  for (const p of proc_table().values()) {
    if (p.state === 'Z' || p.pid === process.pid) continue;
    const env = proc_environ(p.pid);
    if (env && env.split('\0').includes(`CONFORMANCE_MARK=${mark}`)) out.push({ ...p, cmdline: proc_cmdline(p.pid) });
  }
  return out;
}
const alive = (pid) => {
  const p = proc_table().get(pid);
  return p !== undefined && p.state !== 'Z';
};

// How many tools/call requests for `tool` the HTTP MCP server logged.
const tool_calls = (server, tool) => server.stderr.split('\n').filter((l) => l.includes(`tools/call(${tool})`)).length;

// Bytes the process has read so far (/proc/<pid>/io rchar): an idle stdio server reads nothing, so
// growth means it has read a request from troupe.
function proc_rchar(pid) {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/io`, 'utf8').match(/^rchar: (\d+)$/m)[1]);
  } catch {
    return null;
  }
}

scenario('troupe registers every tool of the three reference stdio servers as {server}_{tool} after the built-ins in GET /v1/tools (AS-60, AS-62)', async (s) => {
  const ref = reference_servers(s);
  // What each server offers a plain MCP client, asked while troupe starts.
  const offered = Promise.all(ref.servers.map((v) => list_server_tools(v.command, v.args, v.env)));
  const troupe = await s.troupe({ config: { mcp: { servers: ref.servers } } });
  await wait_mcp_ready(troupe, ['everything', 'fs', 'memory']);
  const res = await troupe.request('GET', '/v1/tools');
  assert.equal(res.status, 200, res.text);
  const body = res.json;
  const names = tool_names(body.tools);

  assert.deepEqual(names.slice(0, builtins.length).sort(), [...builtins].sort(), `built-ins come first: ${names}`);
  assert.deepEqual(names.slice(builtins.length), body.mcp_tools, 'then the MCP tools, as in mcp_tools');
  for (const n of ['everything_echo', 'everything_get-sum', 'fs_read_text_file', 'fs_read_file', 'fs_list_directory',
    'memory_create_entities', 'memory_read_graph'])
    assert.ok(body.mcp_tools.includes(n), `mcp_tools lists ${n}: ${JSON.stringify(body.mcp_tools)}`);
  assert.equal(new Set(body.mcp_tools).size, body.mcp_tools.length, 'no MCP tool is listed twice');

  // Every tool a server offers is registered under its prefixed name, with the server's description.
  const per_server = await offered;
  ref.servers.forEach((v, i) => {
    assert.ok(per_server[i].length > 0, `${v.name} offers tools`);
    for (const tool of per_server[i]) {
      const name = `${v.name}_${tool.name}`;
      assert.ok(body.mcp_tools.includes(name), `${v.name}'s tool ${tool.name} is registered as ${name}`);
      const summary = body.tool_summaries.find((t) => t.name === name);
      assert.ok(summary, `tool_summaries has ${name}`);
      if (tool.description)
        assert.ok(summary.description.includes(tool.description),
          `${name}'s summary carries the server's description ${JSON.stringify(tool.description)}: ${JSON.stringify(summary.description)}`);
    }
  });
  for (const b of builtins) assert.ok(body.tool_summaries.find((t) => t.name === b), `tool_summaries keeps built-in ${b}`);
  assert.deepEqual(body.mcp_servers.map(server_name).sort(), ['everything', 'fs', 'memory'], `mcp_servers: ${JSON.stringify(body.mcp_servers)}`);
});

scenario('GET /ready reports mcp.ready with the three reference servers alive, their transport, isolation and tool counts (AS-58, AS-65)', async (s) => {
  const ref = reference_servers(s);
  const troupe = await s.troupe({ config: { mcp: { servers: ref.servers } } });
  const ready = await wait_mcp_ready(troupe, ['everything', 'fs', 'memory']);
  assert.equal(ready.status, 'ready', 'status is ready iff agent_ready and mcp.ready');
  assert.equal(ready.agent_ready, true);
  assert.equal(ready.mcp.ready, true);
  assert.deepEqual(ready.mcp.servers.map((v) => v.name).sort(), ['everything', 'fs', 'memory']);
  for (const v of ready.mcp.servers) {
    assert.equal(v.alive, true, JSON.stringify(v));
    assert.equal(v.transport, 'stdio', JSON.stringify(v));
    assert.equal(v.isolation, 'shared', JSON.stringify(v));
    assert.ok(Number.isInteger(v.tool_count) && v.tool_count > 0, `tool_count > 0: ${JSON.stringify(v)}`);
    assert.ok(v.error === undefined || v.error === null || v.error === '', `no error on a healthy server: ${JSON.stringify(v)}`);
    assert.equal(v.tool_count, ready.mcp.tools.filter((t) => t.startsWith(`${v.name}_`)).length,
      `${v.name}'s tool_count matches its registered tools`);
  }
  const tools = await troupe.request('GET', '/v1/tools');
  assert.deepEqual(ready.mcp.tools, tools.json.mcp_tools, 'mcp.tools lists the registered MCP names');
});

scenario('a streamed scripted run calling everything_echo gets the server\'s echo as its tool_result (AS-62)', async (s) => {
  const ref = reference_servers(s);
  const troupe = await s.troupe({
    config: {
      mcp: { servers: ref.servers },
      model: {
        scripts: {
          echo: [
            { content: 'Asking the everything server.', tool_calls: [call('everything_echo', { message: 'hi from troupe' })] },
            { content: 'The server said: {{last_tool_result}}' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['everything', 'fs', 'memory']);
  const run = await scripted_run(troupe, 'echo');
  assert.equal(run.results.length, 1, run.summary);
  const [result] = run.results;
  const [tool_call] = run.steps[0].calls;
  assert.equal(tool_call.tool_name, 'everything_echo');
  const args = typeof tool_call.tool_args === 'string' ? JSON.parse(tool_call.tool_args) : tool_call.tool_args;
  assert.deepEqual(args, { message: 'hi from troupe' });
  assert.equal(result.tool_name, 'everything_echo');
  assert.ok(result.content.includes('hi from troupe'), run.summary);
  assert.equal(result.content, 'Echo: hi from troupe', 'the result is the server\'s text content');
  assert.equal(run.end.type, 'session_end', run.summary);
  assert.equal(run.end.content, 'The server said: Echo: hi from troupe', 'the model saw the same text');
});

scenario('the filesystem server reads a file inside its allowed root and refuses one outside it with an [MCP_ERROR] result (AS-62)', async (s) => {
  const ref = reference_servers(s);
  const inside = path.join(ref.root, 'notes.txt');
  fs.writeFileSync(inside, 'hello from the allowed root\nsecond line\n');
  const secret = path.join(ref.outside, 'secret.txt');
  fs.writeFileSync(secret, 'top secret\n');
  const troupe = await s.troupe({
    config: {
      mcp: { servers: ref.servers },
      model: {
        scripts: {
          files: [
            { tool_calls: [call('fs_read_text_file', { path: inside })] },
            { tool_calls: [call('fs_read_text_file', { path: secret })] },
            { tool_calls: [call('fs_list_directory', { path: ref.root })] },
            { content: 'done' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['everything', 'fs', 'memory']);
  const run = await scripted_run(troupe, 'files');
  assert.equal(run.results.length, 3, run.summary);
  const [read_in, read_out, listing] = run.results;
  assert.equal(read_in.tool_name, 'fs_read_text_file');
  assert.equal(read_in.content, 'hello from the allowed root\nsecond line\n', 'the file text, unchanged');

  // The server answers isError with "Access denied - path outside allowed directories: <p> not in <root>".
  assert.equal(read_out.tool_name, 'fs_read_text_file');
  assert.match(read_out.content, /^\[MCP_ERROR\] Access denied - path outside allowed directories: /, run.summary);
  assert.ok(read_out.content.includes(secret), `the error names the refused path: ${read_out.content}`);
  assert.ok(!read_out.content.includes('top secret'), 'no byte of the outside file leaks');

  assert.equal(listing.content, '[FILE] notes.txt');
  assert.equal(run.end.type, 'session_end', run.summary);
  assert.equal(run.end.metadata.status, 'completed', 'a tool error never fails the run');
});

scenario('the memory server keeps an entity created earlier in the same run and reads the graph back (AS-62)', async (s) => {
  const ref = reference_servers(s);
  const entity = { name: 'troupe', entityType: 'project', observations: ['speaks MCP over stdio'] };
  const troupe = await s.troupe({
    config: {
      mcp: { servers: ref.servers },
      model: {
        scripts: {
          memory: [
            { tool_calls: [call('memory_create_entities', { entities: [entity] })] },
            { tool_calls: [call('memory_read_graph', {})] },
            { content: 'Graph: {{last_tool_result}}' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['everything', 'fs', 'memory']);
  const run = await scripted_run(troupe, 'memory');
  assert.equal(run.results.length, 2, run.summary);
  const [created, graph] = run.results;
  assert.ok(!created.content.startsWith('[MCP_ERROR]'), created.content);
  assert.deepEqual(JSON.parse(created.content), [entity], 'create_entities answers with the new entities');
  assert.deepEqual(JSON.parse(graph.content), { entities: [entity], relations: [] }, 'read_graph sees the entity');
  // The server got MEMORY_FILE_PATH from the server entry's env and wrote there.
  const stored = fs.readFileSync(ref.memory_file, 'utf8');
  assert.ok(stored.includes('"name":"troupe"'), `MEMORY_FILE_PATH holds the entity: ${stored}`);
});

for (const mode of ['sse', 'json']) {
  scenario(`an http MCP server answering with ${mode === 'sse' ? 'SSE streams' : 'JSON bodies'} works like a stdio one: tools listed, echo and add round trips, tool errors as [MCP_ERROR] (AS-61, AS-62, AS-65)`, async (s) => {
    const web = await start_http_mcp_server(s, mode === 'json' ? ['--json'] : []);
    const troupe = await s.troupe({
      config: {
        mcp: { servers: [{ name: 'web', transport: 'http', url: web.url, isolation: 'shared', timeout_seconds: 30 }] },
        model: {
          scripts: {
            web: [
              { tool_calls: [call('web_echo', { message: 'hi from troupe' }), call('web_add', { a: 2, b: 3 })] },
              { tool_calls: [call('web_add', { a: 'two', b: 3 })] },
              { content: 'sum is in' },
            ],
          },
        },
      },
    });
    const ready = await wait_mcp_ready(troupe, ['web']);
    assert.equal(ready.status, 'ready');
    const status = ready.mcp.servers.find((v) => v.name === 'web');
    assert.equal(status.transport, 'http', JSON.stringify(status));
    assert.equal(status.isolation, 'shared', JSON.stringify(status));
    assert.equal(status.tool_count, 3, JSON.stringify(status));
    assert.deepEqual([...ready.mcp.tools].sort(), ['web_add', 'web_echo', 'web_slow']);

    const tools = (await troupe.request('GET', '/v1/tools')).json;
    assert.deepEqual([...tools.mcp_tools].sort(), ['web_add', 'web_echo', 'web_slow']);
    assert.ok(tool_names(tools.tools).includes('web_echo'));
    assert.ok(tools.tool_summaries.find((t) => t.name === 'web_echo')?.description.includes('Echoes the message back.'),
      JSON.stringify(tools.tool_summaries));

    const run = await scripted_run(troupe, 'web');
    assert.equal(run.results.length, 3, run.summary);
    assert.equal(run.results[0].tool_name, 'web_echo');
    assert.equal(run.results[0].content, 'Echo: hi from troupe');
    assert.equal(run.results[1].tool_name, 'web_add');
    assert.equal(run.results[1].content, '5');
    // The SDK answers invalid arguments with isError and an "MCP error -32602: Input validation error…" text.
    assert.match(run.results[2].content, /^\[MCP_ERROR\] .*Input validation error/s, run.summary);
    assert.equal(run.end.type, 'session_end', run.summary);

    // One POST per message, all in the session the server issued.
    assert.match(web.stderr, /POST session=[0-9a-f-]{36} tools\/call\(echo\)/, 'tools/call carried the Mcp-Session-Id');
    assert.equal(tool_calls(web, 'add'), 2, 'a tool-level error is not retried (AS-64)');
    const exit = await troupe.stop('SIGTERM', exit_timeout_ms);
    assert.deepEqual({ code: exit.code, signal: exit.signal, killed: exit.killed_after_timeout ?? false },
      { code: 0, signal: null, killed: false }, 'troupe exits 0 on SIGTERM with an http session open');
  });
}

scenario('a server whose command cannot start is reported not alive with an error and /ready is degraded, while the other servers serve (AS-58, AS-65)', async (s) => {
  const ref = reference_servers(s);
  const ghost = { name: 'ghost', command: path.join(s.tmpdir('troupe-mcp-ghost-'), 'no-such-mcp-server'), args: [], transport: 'stdio', isolation: 'shared' };
  const troupe = await s.troupe({ config: { mcp: { servers: [ref.servers[0], ghost] } } });
  let last;
  const ready = await until(async () => {
    const res = await troupe.request('GET', '/ready');
    last = res.text;
    const servers = res.json?.mcp?.servers ?? [];
    const e = servers.find((v) => v.name === 'everything');
    const g = servers.find((v) => v.name === 'ghost');
    return e?.alive === true && g && g.alive === false && typeof g.error === 'string' && g.error.length > 0 && res.json;
  }, { timeout_ms: mcp_ready_timeout_ms, interval_ms: 100, message: `everything alive and ghost failed; last /ready ${last}` });
  assert.equal(ready.status, 'degraded', 'a server that is not alive degrades /ready');
  assert.equal(ready.agent_ready, true);
  assert.equal(ready.mcp.ready, false);
  const g = ready.mcp.servers.find((v) => v.name === 'ghost');
  assert.equal(g.tool_count, 0, JSON.stringify(g));
  assert.ok(ready.mcp.tools.includes('everything_echo'), JSON.stringify(ready.mcp.tools));
  assert.ok(!ready.mcp.tools.some((t) => t.startsWith('ghost_')));
  const tools = (await troupe.request('GET', '/v1/tools')).json;
  assert.ok(tools.mcp_tools.includes('everything_echo'));
});

scenario('a call that outlasts the server\'s timeout_seconds ends as an [MCP_ERROR] result naming the timeout and the server keeps serving (AS-61, AS-64)', async (s) => {
  const ref = reference_servers(s);
  const everything = { ...ref.servers[0], timeout_seconds: 1 };
  const troupe = await s.troupe({
    config: {
      mcp: { call_timeout_seconds: 120, servers: [everything] },
      model: {
        scripts: {
          slow: [
            { tool_calls: [call('everything_trigger-long-running-operation', { duration: 30, steps: 30 })] },
            { tool_calls: [call('everything_echo', { message: 'still here' })] },
            { content: 'done' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['everything']);
  const started = Date.now();
  const run = await scripted_run(troupe, 'slow');
  const elapsed = Date.now() - started;
  assert.equal(run.results.length, 2, run.summary);
  assert.match(run.results[0].content, /^\[MCP_ERROR\] .*timed out/i, run.summary);
  assert.ok(elapsed < 28_000, `the 1 s per-server timeout beat the 30 s operation: took ${elapsed} ms`);
  assert.ok(run.results[0].duration_ms >= 1000, `the call waited for its timeout: ${run.results[0].duration_ms} ms`);
  assert.equal(run.results[1].content, 'Echo: still here', 'the server still answers after a timed-out call');
});

scenario('a timed-out call to a read-only tool is retried 3 times, 1 s apart, before its [MCP_ERROR] result (AS-64)', async (s) => {
  const web = await start_http_mcp_server(s);
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [{ name: 'web', transport: 'http', url: web.url, timeout_seconds: 1 }] },
      model: { scripts: { slow: [{ tool_calls: [call('web_slow', { seconds: 30 })] }, { content: 'done' }] } },
    },
  });
  await wait_mcp_ready(troupe, ['web']);
  const run = await scripted_run(troupe, 'slow');
  assert.equal(run.results.length, 1, run.summary);
  assert.match(run.results[0].content, /^\[MCP_ERROR\] /, run.summary);
  assert.equal(tool_calls(web, 'slow'), 4,
    `a timeout is a transport failure: one attempt and 3 retries reach the server (took ${run.results[0].duration_ms} ms; result ${JSON.stringify(run.results[0].content)})`);
  assert.ok(run.results[0].duration_ms >= 6000, `4 timeouts of 1 s and 3 pauses of 1 s: ${run.results[0].duration_ms} ms`);
});

scenario('http 503 answers to a call of a read-only tool are retried 1 s apart and the call succeeds once the server recovers (AS-64)', async (s) => {
  const web = await start_http_mcp_server(s, ['--fail-calls', '2']);
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [{ name: 'web', transport: 'http', url: web.url, timeout_seconds: 30 }] },
      model: { scripts: { flaky: [{ tool_calls: [call('web_echo', { message: 'after two 503s' })] }, { content: 'done' }] } },
    },
  });
  await wait_mcp_ready(troupe, ['web']);
  const run = await scripted_run(troupe, 'flaky');
  assert.equal(run.results.length, 1, run.summary);
  assert.equal(run.results[0].content, 'Echo: after two 503s', `${run.summary}\nhttp server log:\n${web.stderr}`);
  assert.equal(tool_calls(web, 'echo'), 3, 'two failed attempts, then the one that succeeded');
  assert.ok(run.results[0].duration_ms >= 2000, `two 1 s pauses before the retries: ${run.results[0].duration_ms} ms`);
});

// The issue narrows AS-64: a call that may already have reached the server is repeated only when
// the tool says a repeat is harmless, so a side effect never runs twice.
scenario('a failed call of a tool without read-only or idempotent hints is not repeated and answers [MCP_ERROR] (AS-64)', async (s) => {
  const web = await start_http_mcp_server(s, ['--fail-calls', '1']);
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [{ name: 'web', transport: 'http', url: web.url, timeout_seconds: 30 }] },
      model: { scripts: { flaky: [{ tool_calls: [call('web_add', { a: 40, b: 2 })] }, { content: 'done' }] } },
    },
  });
  await wait_mcp_ready(troupe, ['web']);
  const run = await scripted_run(troupe, 'flaky');
  assert.equal(run.results.length, 1, run.summary);
  assert.match(run.results[0].content, /^\[MCP_ERROR\] .*503/, run.summary);
  assert.equal(tool_calls(web, 'add'), 1, 'the call reached the server once and was not repeated');
});

scenario('a stdio server killed during a call is restarted and re-initialized, and the read-only call is retried on it (AS-64)', async (s) => {
  const ref = reference_servers(s);
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [ref.servers[0]] },
      model: {
        scripts: {
          crash: [
            { tool_calls: [call('everything_trigger-long-running-operation', { duration: 3, steps: 3 })] },
            { tool_calls: [call('everything_echo', { message: 'after the restart' })] },
            { content: 'done' },
          ],
        },
      },
    },
  });
  await wait_mcp_ready(troupe, ['everything']);
  const server_pids = () => descendants(troupe.pid).filter((p) => runs(p, everything_bin)).map((p) => p.pid);
  const [first] = server_pids();
  assert.ok(first, 'troupe runs the everything server');

  const idle = proc_rchar(first);
  assert.ok(idle !== null, `/proc/${first}/io is readable`);
  const stream = await troupe.stream({ messages: [user('crash it')], model: 'scripted:crash' });
  assert.equal(stream.status, 200, stream.body);
  await stream.wait_for((f) => f.json?.type === 'tool_call', run_timeout_ms);
  // The server has read the tools/call and works on it for 3 s: kill it under the call.
  await until(() => proc_rchar(first) > idle, { timeout_ms: 10_000, interval_ms: 5, message: 'the server to read the tools/call' });
  assert.equal(stream.frames.filter((f) => f.json?.type === 'tool_result').length, 0, 'the call is still running');
  process.kill(first, 'SIGKILL');
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('the run did not finish')), run_timeout_ms); });
  const { frames } = await Promise.race([stream.finished, late]).finally(() => clearTimeout(timer));
  const events = check_event_stream(frames);
  check_attempt_order(events);
  const results = events.filter((e) => e.type === 'tool_result').map((e) => e.content);
  assert.deepEqual(results, ['Long running operation completed. Duration: 3 seconds, Steps: 3.', 'Echo: after the restart'],
    'the interrupted call was retried on the restarted server, and the next call used it too');

  const ready = await wait_mcp_ready(troupe, ['everything']);
  assert.ok(ready.mcp.servers[0].tool_count > 0, JSON.stringify(ready.mcp.servers[0]));
  const now = server_pids();
  assert.equal(now.length, 1, `one everything server runs: ${now}`);
  assert.notEqual(now[0], first, 'it is a new process');
});

scenario('on SIGTERM troupe exits 0 and leaves none of its MCP server processes behind (AS-63)', async (s) => {
  const ref = reference_servers(s);
  const troupe = await s.troupe({ config: { mcp: { servers: ref.servers } } });
  await wait_mcp_ready(troupe, ['everything', 'fs', 'memory']);

  // troupe's MCP children: descendants whose command line runs one of the reference servers.
  const children = descendants(troupe.pid).filter((p) => server_bins.some((b) => runs(p, b)));
  for (const bin of server_bins)
    assert.ok(children.some((p) => p.cmdline.includes(bin)), `troupe runs ${bin}: ${JSON.stringify(children)}`);
  const marked_before = marked_processes(ref.mark).map((p) => p.pid);
  for (const p of children) assert.ok(marked_before.includes(p.pid), `the server entry's env reached pid ${p.pid}`);

  const exit = await troupe.stop('SIGTERM', exit_timeout_ms);
  const left = children.filter((p) => alive(p.pid) && proc_cmdline(p.pid) === p.cmdline);
  const marked = marked_processes(ref.mark);
  if (left.length || marked.length) {
    // Tell "killed late" from "never killed" before failing.
    const seen = Date.now();
    await until(() => marked_processes(ref.mark).length === 0, { timeout_ms: 5000, interval_ms: 50 }).catch(() => {});
    const still = marked_processes(ref.mark);
    assert.fail(`MCP server processes outlived troupe: ${JSON.stringify([...left, ...marked])}; ` +
      (still.length ? `still running 5 s later: ${JSON.stringify(still)}` : `all gone within ${Date.now() - seen} ms after troupe's exit`));
  }
  assert.deepEqual({ code: exit.code, signal: exit.signal, killed: exit.killed_after_timeout ?? false },
    { code: 0, signal: null, killed: false }, 'troupe exits 0 on SIGTERM');
});

scenario('check-config refuses an unknown isolation and a duplicate server name by their JSON paths (AS-61)', async (s) => {
  const dir = s.tmpdir();
  const cases = [
    [{ name: 'everything', command: process.execPath, args: [everything_bin], isolation: 'per_tenant' }],
    [{ name: 'twin', command: process.execPath, args: [everything_bin] }, { name: 'twin', command: process.execPath, args: [memory_bin] }],
  ];
  const expected = [/mcp\.servers\[0\]\.isolation/, /mcp\.servers\[1\]\.name: .*duplicate/];
  for (const [i, servers] of cases.entries()) {
    const file = path.join(dir, `bad${i}.json`);
    fs.writeFileSync(file, JSON.stringify({ mcp: { servers } }));
    const r = await s.run_troupe(['check-config', '--config', file]);
    assert.equal(r.code, 2, JSON.stringify(r));
    assert.match(r.stderr + r.stdout, expected[i]);
  }
});

// AS-63: a lazy_per_user server runs one instance per (tenant, user), started on the user's first
// call, at most max_instances at once (the least recently used idle one makes room), stopped after
// idle_timeout. The first instance only learns the tools.
scenario('a lazy_per_user server gives each user an instance of their own, within max_instances, stopped when idle (AS-63)', async (s) => {
  const ref = reference_servers(s);
  const everything = { ...ref.servers[0], isolation: 'lazy_per_user', max_instances: 1, idle_timeout: 2 };
  const troupe = await s.troupe({
    config: {
      mcp: { servers: [everything] },
      model: { scripts: { echo: [{ tool_calls: [call('everything_echo', { message: 'mine' })] }, { content: 'done' }] } },
    },
  });
  await wait_mcp_ready(troupe, ['everything']);
  const instances = () => descendants(troupe.pid).filter((p) => runs(p, everything_bin)).map((p) => p.pid);
  assert.equal(instances().length, 1, 'only the instance that learns the tools runs before any call');

  const alice = await scripted_run(troupe, 'echo', 'echo', { user_key: 'acme:alice' });
  assert.equal(alice.results[0].content, 'Echo: mine', alice.summary);
  const after_alice = instances();
  assert.equal(after_alice.length, 2, 'alice got an instance of her own');

  const bob = await scripted_run(troupe, 'echo', 'echo', { user_key: 'acme:bob' });
  assert.equal(bob.results[0].content, 'Echo: mine', bob.summary);
  await until(() => instances().length === 2 && !instances().every((p) => after_alice.includes(p)),
    { timeout_ms: 10_000, message: "bob's instance replaced alice's idle one (max_instances 1)" });

  await until(() => instances().length === 1, { timeout_ms: 15_000, message: 'the idle instance to stop after idle_timeout' });
});

