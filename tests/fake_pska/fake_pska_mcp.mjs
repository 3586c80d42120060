// PSKA's MCP tools for troupe's digest worker tests: a stdio MCP server (newline-delimited JSON-RPC
// 2.0; initialize, ping, tools/list, tools/call; notifications are ignored). Node 20, built-ins only.
//
//   FAKE_PSKA_URL=http://127.0.0.1:<port> node tests/fake_pska/fake_pska_mcp.mjs
//
// Tools (troupe names them pska_pska_job_context and pska_pska_write_candidates when the server is
// configured as `pska`):
//   pska_job_context       {job_id, cursor?}: the job, its batch count and source refs (readOnlyHint)
//   pska_write_candidates  {job_id, schema_version, producer, knowledge_claims, digest_notes, entities,
//                          memory_candidates, review_items, hyperedges, summaries, …}: stores the write
//                          on the job; an error when every candidate array is empty (no hints: a side
//                          effect that must not be retried)
// Each call is executed by the fake PSKA (POST $FAKE_PSKA_URL/_control/mcp_calls), which records it, so
// a test reads every call from GET /_control/mcp_calls. When the fake PSKA cannot be reached the call
// answers isError. A line over $FAKE_PSKA_MCP_MAX_LINE bytes (1 MiB) or one that is not JSON answers a
// parse error; the server keeps going.
const pska_url = (process.env.FAKE_PSKA_URL ?? '').replace(/\/+$/, '');
const max_line_bytes = Number(process.env.FAKE_PSKA_MCP_MAX_LINE) || 1024 * 1024;
const call_timeout_ms = 30_000;

const candidate_array = { type: 'array', items: { type: 'object' } };
const tools = [
  {
    name: 'pska_job_context',
    description: 'Reads a PSKA digest job: the job, its batch count and the source items it covers.',
    inputSchema: {
      type: 'object',
      properties: { job_id: { type: 'string' }, cursor: { type: 'string' }, user_id: { type: 'string' } },
      required: ['job_id'],
    },
    annotations: { readOnlyHint: true },
  },
  {
    name: 'pska_write_candidates',
    description: 'Writes one merged set of digest candidates for a PSKA job.',
    inputSchema: {
      type: 'object',
      properties: {
        job_id: { type: 'string' },
        schema_version: { type: 'string' },
        producer: { type: 'string' },
        source_refs: { type: 'array' },
        confidence: { type: 'number' },
        knowledge_claims: candidate_array,
        digest_notes: candidate_array,
        entities: candidate_array,
        memory_candidates: candidate_array,
        review_items: candidate_array,
        hyperedges: candidate_array,
        summaries: candidate_array,
      },
      required: ['job_id'],
    },
  },
];

const result = (id, value) => ({ jsonrpc: '2.0', id, result: value });
const error = (id, code, message) => ({ jsonrpc: '2.0', id, error: { code, message } });

// The parent may go away mid-write; nothing is left to answer then.
process.stdout.on('error', () => process.exit(0));
const send = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

if (!pska_url) process.stderr.write('fake pska mcp: FAKE_PSKA_URL is not set; every tool call will fail\n');

async function call_tool(id, params) {
  const name = String(params?.name ?? '');
  if (!tools.some((t) => t.name === name)) return send(error(id, -32602, `Unknown tool: ${name}`));
  const args = params.arguments ?? {};
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return send(error(id, -32602, 'arguments must be an object'));
  let text;
  let is_error;
  try {
    if (!pska_url) throw new Error('FAKE_PSKA_URL is not set');
    const res = await fetch(`${pska_url}/_control/mcp_calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool: name, arguments: args, pid: process.pid }),
      signal: AbortSignal.timeout(call_timeout_ms),
    });
    const answer = await res.json();
    if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${JSON.stringify(answer)}`);
    text = typeof answer.result === 'string' ? answer.result : JSON.stringify(answer.result);
    is_error = answer.is_error === true;
  } catch (err) {
    text = `fake pska unreachable: ${err?.message ?? err}`;
    is_error = true;
  }
  send(result(id, { content: [{ type: 'text', text }], ...(is_error ? { isError: true } : {}) }));
}

function handle(msg) {
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return send(error(null, -32600, 'Invalid Request'));
  const { id, method, params } = msg;
  if (method === undefined) return; // a response to something never asked
  if (id === undefined) return; // notifications need no answer
  if (id !== null && typeof id !== 'string' && typeof id !== 'number') return send(error(null, -32600, 'Invalid Request: bad id'));
  switch (method) {
    case 'initialize':
      return send(result(id, {
        protocolVersion: params?.protocolVersion ?? '2025-03-26',
        capabilities: { tools: { listChanged: false } },
        serverInfo: { name: 'fake-pska', version: '1.0.0' },
      }));
    case 'ping':
      return send(result(id, {}));
    case 'tools/list':
      return send(result(id, { tools }));
    case 'tools/call':
      return call_tool(id, params).catch((err) => send(error(id, -32603, String(err?.message ?? err))));
    default:
      return send(error(id, -32601, `Method not found: ${method}`));
  }
}

function on_line(line) {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return send(error(null, -32700, 'Parse error'));
  }
  try {
    handle(msg);
  } catch (err) {
    send(error(null, -32603, `Internal error: ${err?.message ?? err}`));
  }
}

// Lines are cut on the byte 0x0A; an overlong line is dropped as it arrives, never held in memory.
let parts = [];
let size = 0;
let overlong = false;
process.stdin.on('data', (chunk) => {
  let start = 0;
  for (;;) {
    const nl = chunk.indexOf(10, start);
    const piece = chunk.subarray(start, nl < 0 ? chunk.length : nl);
    if (!overlong && size + piece.length > max_line_bytes) {
      overlong = true;
      parts = [];
    } else if (!overlong) {
      parts.push(piece);
      size += piece.length;
    }
    if (nl < 0) return;
    if (overlong) send(error(null, -32700, `Parse error: line longer than ${max_line_bytes} bytes`));
    else on_line(Buffer.concat(parts).toString('utf8'));
    parts = [];
    size = 0;
    overlong = false;
    start = nl + 1;
  }
});
process.stdin.on('end', () => process.exit(0));
