// A fake MCP server for troupe's tests (Node 20, built-ins only): stdio by default, streamable HTTP
// with --http.
//
//   node tests/fake_mcp/fake_mcp_server.mjs [flags]
//
// Tools: echo (readOnlyHint; returns arguments.text), add (idempotentHint; a + b), touch (no hints;
// appends `touch <arguments json>` to $FAKE_MCP_LOG), slow (answers after arguments.ms), hang (never
// answers), crash (exits with code 3 before answering), fail (answers isError: true); with --pska-tools
// also PSKA's digest tools: pska_write_candidates (appends `write <arguments json>` to $FAKE_MCP_LOG) and
// pska_job_context (answers a small job context).
// Every notification it receives is appended to $FAKE_MCP_LOG as `notification <method> <params json>`;
// notifications/cancelled also drops the pending slow/hang call it names.
//
// Flags:
//   --garbage          print a non-JSON line to stdout before every message (stdio)
//   --page-size N      tools/list pages of N tools, with nextCursor
//   --die-after N      exit (code 0) after answering N tool calls
//   --name-prefix P    tool names are P + name
//   --pska-tools       add pska_write_candidates and pska_job_context
//   --media-tools      add snapshot (readOnlyHint): answers text, a 4096-byte PNG image, an embedded
//                      text resource, an embedded blob resource and a resource_link
//   --pid-file F       write the server's pid to F (and the helper's, with --spawn-child, on line 2)
//   --spawn-child      start a long-lived helper process in the server's process group
//   --spawn-detached   the same, but the helper leads a session of its own (setsid)
//   --dump-env F       write the server's environment to F as JSON (not --env-file: node 20 takes
//                      that for its own option wherever it appears)
//   --ignore-sigterm   survive SIGTERM and the end of stdin (only SIGKILL ends it)
//   --http PORT        serve streamable HTTP on 127.0.0.1:PORT (0: any) at POST /mcp; prints
//                      `fake mcp listening on http://127.0.0.1:<port>/mcp`. initialize issues an
//                      Mcp-Session-Id that every later request must carry (400 without, 404 unknown).
//   --tls-cert F --tls-key F  (http) serve https instead, with this certificate and key (PEM)
//   --sse              (http) answer requests with an event stream: a notifications/message event,
//                      then the response
// HTTP control: POST /__expire forgets every session; POST /__status {"status": 503} makes the next
// POST /mcp answer that status; GET /__requests lists what was received as
// [{http_method, rpc_method, session, protocol_version}]. DELETE /mcp ends the session and appends
// `delete <session>` to $FAKE_MCP_LOG.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';

const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
function option(name, otherwise) {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : otherwise;
}

const garbage = flag('--garbage');
const page_size = Number(option('--page-size', '0'));
const die_after = Number(option('--die-after', '0'));
const prefix = option('--name-prefix', '');
const http_port = option('--http', null);
const sse = flag('--sse');
const log_file = process.env.FAKE_MCP_LOG;

function log(line) {
  if (log_file) fs.appendFileSync(log_file, line + '\n');
}

const stubborn = flag('--ignore-sigterm');
if (stubborn) process.on('SIGTERM', () => {});

const pid_file = option('--pid-file', null);
let helper = null;
if (flag('--spawn-child') || flag('--spawn-detached')) {
  // --spawn-child: same process group, which the transport takes down with the server. --spawn-detached:
  // out of reach of any group signal; only a PID namespace takes it down. Its command line names the
  // pid file, so a test can find it by that from outside the server's PID namespace.
  helper = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)', ...(pid_file ? [pid_file] : [])],
    { stdio: 'ignore', detached: flag('--spawn-detached') });
}
if (pid_file) fs.writeFileSync(pid_file, [process.pid, ...(helper ? [helper.pid] : [])].join('\n') + '\n');
const env_file = option('--dump-env', null);
if (env_file) fs.writeFileSync(env_file, JSON.stringify(process.env));

process.stderr.write(`fake mcp: started pid ${process.pid}\n`);

const tools = [
  {
    name: 'echo', description: 'Returns the text it is given.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    annotations: { readOnlyHint: true },
  },
  {
    name: 'add', description: 'Adds two numbers.',
    inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
    annotations: { idempotentHint: true },
  },
  { name: 'touch', description: 'Records a side effect.', inputSchema: { type: 'object', properties: {} } },
  {
    name: 'slow', description: 'Answers after arguments.ms milliseconds.',
    inputSchema: { type: 'object', properties: { ms: { type: 'number' } } },
  },
  { name: 'hang', description: 'Never answers.', inputSchema: { type: 'object', properties: {} } },
  { name: 'crash', description: 'Exits with code 3.', inputSchema: { type: 'object', properties: {} } },
  { name: 'fail', description: 'Fails at tool level.', inputSchema: { type: 'object', properties: {} } },
  ...(flag('--pska-tools') ? [
    {
      name: 'pska_write_candidates', description: 'Writes digest candidates.',
      inputSchema: { type: 'object', properties: { knowledge_claims: { type: 'array' }, digest_notes: { type: 'array' } } },
    },
    {
      name: 'pska_job_context', description: 'Reads the digest job context.',
      inputSchema: { type: 'object', properties: { job_id: { type: 'string' } } },
      annotations: { readOnlyHint: true },
    },
  ] : []),
  ...(flag('--media-tools') ? [
    {
      name: 'snapshot', description: 'Answers text, an image and resources.',
      inputSchema: { type: 'object', properties: {} }, annotations: { readOnlyHint: true },
    },
  ] : []),
].map((t) => ({ ...t, name: prefix + t.name }));

let tool_calls = 0;
const pending = new Map(); // request id (as JSON) → {timer} for slow and hang

const result = (id, value) => ({ jsonrpc: '2.0', id, result: value });
const error = (id, code, message) => ({ jsonrpc: '2.0', id, error: { code, message } });
const text = (t, is_error = false) => ({ content: [{ type: 'text', text: String(t) }], ...(is_error ? { isError: true } : {}) });

// Handles one message; `reply(obj)` sends the answer (at most once), `after()` runs once it is sent.
function handle(msg, reply) {
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return reply(error(null, -32600, 'Invalid Request'));
  const { id, method, params } = msg;
  if (method === undefined) return; // a response to something we never ask
  if (id === undefined) {
    log(`notification ${method} ${JSON.stringify(params ?? {})}`);
    if (method === 'notifications/cancelled') {
      const key = JSON.stringify(params?.requestId);
      const p = pending.get(key);
      if (p) {
        clearTimeout(p.timer);
        pending.delete(key);
        p.abandon?.();
      }
    }
    return;
  }
  switch (method) {
    case 'initialize':
      return reply(result(id, {
        protocolVersion: params?.protocolVersion ?? '2025-03-26',
        capabilities: { tools: { listChanged: false } },
        serverInfo: { name: 'fake-mcp', version: '1.0.0' },
      }));
    case 'ping':
      return reply(result(id, {}));
    case 'tools/list': {
      const start = Number(params?.cursor ?? 0) || 0;
      const size = page_size > 0 ? page_size : tools.length;
      const page = tools.slice(start, start + size);
      const next = start + size < tools.length ? { nextCursor: String(start + size) } : {};
      return reply(result(id, { tools: page, ...next }));
    }
    case 'tools/call':
      return call_tool(id, params ?? {}, reply);
    default:
      return reply(error(id, -32601, `Method not found: ${method}`));
  }
}

function call_tool(id, params, reply) {
  const name = String(params.name ?? '');
  const args = params.arguments ?? {};
  const tool = name.startsWith(prefix) ? name.slice(prefix.length) : '';
  const answer = (value) => {
    reply(result(id, value));
    if (die_after > 0 && ++tool_calls >= die_after) {
      // Over HTTP the answer must leave the socket first; stdio writes are already done.
      if (reply.on_sent) reply.on_sent(() => process.exit(0));
      else process.exit(0);
    }
  };
  switch (tool) {
    case 'echo':
      return answer(text(args.text ?? ''));
    case 'add':
      return answer(text(Number(args.a ?? 0) + Number(args.b ?? 0)));
    case 'touch':
      log(`touch ${JSON.stringify(args)}`);
      return answer(text('touched'));
    case 'slow': {
      const ms = Number(args.ms ?? 0);
      const timer = setTimeout(() => {
        pending.delete(JSON.stringify(id));
        answer(text(`slept ${ms} ms`));
      }, ms);
      pending.set(JSON.stringify(id), { timer, abandon: reply.abandon });
      return;
    }
    case 'hang':
      pending.set(JSON.stringify(id), { timer: setInterval(() => {}, 1 << 30), abandon: reply.abandon });
      return;
    case 'crash':
      process.exit(3);
      return;
    case 'fail':
      return answer(text('failed on purpose', true));
    case 'pska_write_candidates':
      log(`write ${JSON.stringify(args)}`);
      return answer(text(JSON.stringify({ ok: true, written: (args.knowledge_claims ?? []).length })));
    case 'snapshot':
      return answer({
        content: [
          { type: 'text', text: 'snapshot taken' },
          { type: 'image', mimeType: 'image/png', data: Buffer.alloc(4096, 7).toString('base64') },
          { type: 'resource', resource: { uri: 'file:///notes.txt', mimeType: 'text/plain', text: 'first note' } },
          { type: 'resource', resource: { uri: 'file:///a.pdf', mimeType: 'application/pdf', blob: Buffer.alloc(300, 1).toString('base64') } },
          { type: 'resource_link', uri: 'file:///report.md', name: 'report.md', mimeType: 'text/markdown' },
        ],
      });
    case 'pska_job_context':
      return answer(text(JSON.stringify({ job_id: args.job_id ?? 'j1', source_refs: ['src_1'] })));
    default:
      return reply(error(id, -32602, `Unknown tool: ${name}`));
  }
}

// ---- stdio ----------------------------------------------------------------------------------------

function serve_stdio() {
  // Writes to a pipe are synchronous on Linux, so process.exit right after a reply loses nothing.
  const write = (obj) => {
    if (garbage) process.stdout.write('garbage: this line is not JSON\n');
    process.stdout.write(JSON.stringify(obj) + '\n');
  };
  let buffered = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (chunk) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (!line) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        write(error(null, -32700, 'Parse error'));
        continue;
      }
      let sent = false;
      const reply = (obj) => {
        if (!sent) write(obj);
        sent = true;
      };
      handle(msg, reply);
    }
  });
  process.stdin.on('end', () => {
    if (stubborn) setInterval(() => {}, 1 << 30);
    else process.exit(0);
  });
}

// ---- streamable HTTP ------------------------------------------------------------------------------

function serve_http(port) {
  const sessions = new Set();
  const requests = [];
  let next_status = null;
  const cert = option('--tls-cert', null);
  const key = option('--tls-key', null);
  const scheme = cert && key ? 'https' : 'http';
  const on_request = (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const session = req.headers['mcp-session-id'];
      const send_json = (status, value, headers = {}) => {
        const text = JSON.stringify(value);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
        res.end(text);
      };
      if (url.pathname === '/__expire' && req.method === 'POST') {
        sessions.clear();
        return send_json(200, { expired: true });
      }
      if (url.pathname === '/__status' && req.method === 'POST') {
        next_status = Number(JSON.parse(body || '{}').status ?? 500);
        return send_json(200, { status: next_status });
      }
      if (url.pathname === '/__requests' && req.method === 'GET') return send_json(200, requests);
      if (url.pathname !== '/mcp') return send_json(404, { error: 'not found' });
      if (req.method === 'DELETE') {
        requests.push({ http_method: 'DELETE', rpc_method: null, session: session ?? null, protocol_version: req.headers['mcp-protocol-version'] ?? null });
        if (session && sessions.delete(session)) log(`delete ${session}`);
        res.writeHead(200);
        return res.end();
      }
      if (req.method !== 'POST') return send_json(405, { error: 'method not allowed' });
      let msg;
      try {
        msg = JSON.parse(body);
      } catch {
        return send_json(400, error(null, -32700, 'Parse error'));
      }
      requests.push({ http_method: 'POST', rpc_method: msg?.method ?? null, session: session ?? null, protocol_version: req.headers['mcp-protocol-version'] ?? null });
      if (next_status !== null) {
        const status = next_status;
        next_status = null;
        res.writeHead(status, { 'content-type': 'text/plain' });
        return res.end(`fake failure ${status}`);
      }
      const headers = {};
      if (msg?.method === 'initialize') {
        const id = crypto.randomUUID();
        sessions.add(id);
        headers['mcp-session-id'] = id;
      } else if (!session) {
        return send_json(400, error(null, -32000, 'Bad Request: Mcp-Session-Id header is required'));
      } else if (!sessions.has(session)) {
        return send_json(404, error(null, -32001, 'Session not found'));
      }
      if (msg?.id === undefined || msg?.method === undefined) {
        handle(msg, () => {});
        res.writeHead(202, headers);
        return res.end();
      }
      let sent = false;
      const reply = (obj) => {
        if (sent) return;
        sent = true;
        if (sse) {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
          const note = { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `handling ${msg.method}` } };
          res.write(`event: message\ndata: ${JSON.stringify(note)}\n\n`);
          res.end(`id: 1\nevent: message\ndata: ${JSON.stringify(obj)}\n\n`);
        } else {
          send_json(200, obj, headers);
        }
      };
      reply.on_sent = (f) => (res.writableFinished ? f() : res.on('finish', f));
      reply.abandon = () => {
        if (!sent) {
          sent = true;
          res.writeHead(202, headers);
          res.end();
        }
      };
      handle(msg, reply);
    });
  };
  const server = scheme === 'https'
    ? https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, on_request)
    : http.createServer(on_request);
  server.listen(Number(port), '127.0.0.1', () => {
    console.log(`fake mcp listening on ${scheme}://127.0.0.1:${server.address().port}/mcp`);
  });
}

if (http_port !== null) serve_http(http_port);
else serve_stdio();
