// A small streamable-HTTP MCP server built with the official MCP SDK, for troupe's conformance tier:
// McpServer + StreamableHTTPServerTransport over node:http, stateful sessions (one McpServer and
// transport per Mcp-Session-Id), tools `echo` (read-only), `add` (no hints), `slow` (read-only,
// sleeps `seconds` before answering), and with --search `search` (read-only: JSON results, a search
// provider).
//
//   node http_mcp_server.mjs [--port N] [--json] [--fail-calls N] [--search]
//     --port N        listen on 127.0.0.1:N (default 0: a free port)
//     --json          answer POSTs with plain JSON bodies instead of SSE streams
//     --fail-calls N  answer the first N tools/call POSTs with HTTP 503 (a transport failure)
//     --search        also offer the `search` tool
//
// Prints `mcp http listening on http://127.0.0.1:<port>/mcp` once it accepts connections, and one
// stderr line per HTTP request (`<METHOD> session=<id|-> <jsonrpc method>[(<tool>)] accept=<…>
// authorization=<…> x-trace=<…>`) so tests can count calls and check the headers a client sent, and
// a failing test can show them. Exits on SIGTERM/SIGINT.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

function parse_args(argv) {
  const opts = { port: 0, json: false, fail_calls: 0, search: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--port') opts.port = Number(argv[++i]);
    else if (argv[i] === '--json') opts.json = true;
    else if (argv[i] === '--fail-calls') opts.fail_calls = Number(argv[++i]);
    else if (argv[i] === '--search') opts.search = true;
    else {
      console.error(`usage: node http_mcp_server.mjs [--port N] [--json] [--fail-calls N] [--search] (unknown argument ${argv[i]})`);
      process.exit(2);
    }
  }
  return opts;
}

const opts = parse_args(process.argv.slice(2));

function make_server() {
  const server = new McpServer({ name: 'troupe-conformance-http', version: '1.0.0' });
  server.registerTool('echo', {
    description: 'Echoes the message back.',
    inputSchema: { message: z.string().describe('the text to echo') },
    annotations: { readOnlyHint: true },
  }, async ({ message }) => ({ content: [{ type: 'text', text: `Echo: ${message}` }] }));
  server.registerTool('add', {
    description: 'Adds two numbers.',
    inputSchema: { a: z.number(), b: z.number() },
  }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  server.registerTool('slow', {
    description: 'Waits the given number of seconds, then answers.',
    inputSchema: { seconds: z.number().min(0) },
    annotations: { readOnlyHint: true },
  }, async ({ seconds }) => {
    await new Promise((r) => setTimeout(r, seconds * 1000));
    return { content: [{ type: 'text', text: `waited ${seconds} s` }] };
  });
  // A search provider for the gateway's search tools (RS-27): its results as JSON text, or, for a
  // query of "garbage", text that is not JSON.
  if (opts.search) server.registerTool('search', {
    description: 'Searches; answers results as JSON.',
    inputSchema: { query: z.string(), vector_store_ids: z.array(z.string()).optional(), max_num_results: z.number().optional() },
    annotations: { readOnlyHint: true },
  }, async ({ query, vector_store_ids, max_num_results }) => {
    if (query === 'garbage') return { content: [{ type: 'text', text: 'not json at all' }] };
    const results = vector_store_ids
      ? [{ file_id: 'file_mcp_1', filename: 'notes.txt', score: 0.5, text: `MCP file hit for ${query} in ${vector_store_ids.join(',')} (max ${max_num_results})` }]
      : [{ title: `MCP hit for ${query}`, url: 'https://mcp.example.com/hit', snippet: 'Found over MCP.' }];
    return { content: [{ type: 'text', text: JSON.stringify(results) }] };
  });
  return server;
}

const sessions = new Map(); // session id → transport

function read_body(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function reply_error(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

const httpd = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://127.0.0.1');
    const sid = req.headers['mcp-session-id'];
    if (url.pathname !== '/mcp') return reply_error(res, 404, `no MCP endpoint at ${url.pathname}`);
    let body;
    if (req.method === 'POST') {
      const text = await read_body(req);
      try {
        body = JSON.parse(text);
      } catch {
        console.error(`POST session=${sid ?? '-'} unparsable body: ${text.slice(0, 200)}`);
        return reply_error(res, 400, 'Parse error');
      }
    }
    const messages = body === undefined ? [] : [].concat(body);
    const methods = messages.map((m) => (m.method === 'tools/call' ? `tools/call(${m.params?.name})` : m.method ?? (m.result ? 'result' : 'error'))).join(',');
    console.error(`${req.method} session=${sid ?? '-'} ${methods} accept=${req.headers.accept ?? '-'} authorization=${req.headers.authorization ?? '-'} x-trace=${req.headers['x-trace'] ?? '-'}`);
    if (opts.fail_calls > 0 && messages.some((m) => m.method === 'tools/call')) {
      opts.fail_calls--;
      console.error('  → 503 (--fail-calls)');
      return reply_error(res, 503, 'Service Unavailable (--fail-calls)');
    }

    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport) {
      if (sid) return reply_error(res, 404, 'Session not found');
      if (req.method !== 'POST' || !isInitializeRequest(body))
        return reply_error(res, 400, 'Bad Request: no valid session ID provided');
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: opts.json,
        onsessioninitialized: (id) => { sessions.set(id, transport); },
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await make_server().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (err) {
    console.error(`request failed: ${err?.stack ?? err}`);
    if (!res.headersSent) reply_error(res, 500, 'Internal server error');
    else res.end();
  }
});

httpd.listen(opts.port, '127.0.0.1', () => {
  const { port } = httpd.address();
  console.log(`mcp http listening on http://127.0.0.1:${port}/mcp`);
});

function shutdown() {
  for (const t of sessions.values()) t.close().catch(() => {});
  httpd.close(() => process.exit(0));
  httpd.closeAllConnections?.();
  setTimeout(() => process.exit(0), 1000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
