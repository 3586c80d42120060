// A fake OpenAI-compatible chat-completions upstream for troupe's tests and benchmarks.
//
//   node tests/fake_upstream/fake_upstream.mjs [--port 0] [--script FILE]
//
// Prints `fake upstream listening on http://127.0.0.1:<port>` once ready. Replies come from a queue of
// scripted reply objects; when it is empty the `default` reply repeats. A reply object:
//   status      send this HTTP status with a JSON error body instead of a completion
//   content     assistant text
//   tool_calls  [{id?, name, arguments: "<json text>"}]; a call without id is sent without one
//   chunk_size  when streaming, content and each call's arguments go out in pieces of N chars
//   chunk_delay_ms  when streaming, pause between chunks
//   delay_ms    wait before answering
//   hang        accept the request and never answer
//   usage       {prompt_tokens, completion_tokens, total_tokens}; estimated when absent
// Control: POST /__script {"replies":[...],"default":{...}}, GET /__requests, POST /__reset,
// GET /__active ({"active": n}: chat requests whose response or socket is still open).
import http from 'node:http';
import fs from 'node:fs';

const max_body_bytes = 64 * 1024 * 1024;
const builtin_default = { content: 'ok' };

let queue = [];
let fallback = builtin_default;
let startup_default = builtin_default; // what /__reset returns to: the --script file's default
let requests = [];
let active = 0;
let next_id = 1;

function arg(name, otherwise) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : otherwise;
}

function load_script(script) {
  if (Array.isArray(script)) script = { replies: script };
  queue = Array.isArray(script?.replies) ? [...script.replies] : [];
  fallback = script?.default ?? builtin_default;
}

function pieces(text, size) {
  if (!size || size <= 0 || text.length <= size) return [text];
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function estimate_usage(request, reply) {
  const prompt = Math.ceil(JSON.stringify(request.messages ?? []).length / 4);
  const produced = (reply.content ?? '') + (reply.tool_calls ?? []).map((c) => c.name + (c.arguments ?? '')).join('');
  const completion = Math.ceil(produced.length / 4);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function send_json(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function completion_json(request, reply, id, created) {
  const calls = reply.tool_calls ?? [];
  const message = { role: 'assistant', content: calls.length && !reply.content ? null : reply.content ?? '' };
  if (calls.length) {
    message.tool_calls = calls.map((c) => ({
      ...(c.id ? { id: c.id } : {}),
      type: 'function',
      function: { name: c.name, arguments: c.arguments ?? '{}' },
    }));
  }
  return {
    id, object: 'chat.completion', created, model: request.model ?? 'fake',
    choices: [{ index: 0, message, finish_reason: calls.length ? 'tool_calls' : 'stop' }],
    usage: reply.usage ?? estimate_usage(request, reply),
  };
}

function stream_chunks(request, reply, id, created) {
  const base = { id, object: 'chat.completion.chunk', created, model: request.model ?? 'fake' };
  const chunk = (delta, finish_reason = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason }] });
  const calls = reply.tool_calls ?? [];
  const out = [chunk({ role: 'assistant', content: '' })];
  if (reply.content) for (const p of pieces(reply.content, reply.chunk_size)) out.push(chunk({ content: p }));
  calls.forEach((c, index) => {
    pieces(c.arguments ?? '{}', reply.chunk_size).forEach((p, n) => {
      const call = n === 0
        ? { index, ...(c.id ? { id: c.id } : {}), type: 'function', function: { name: c.name, arguments: p } }
        : { index, function: { arguments: p } };
      out.push(chunk({ tool_calls: [call] }));
    });
  });
  out.push(chunk({}, calls.length ? 'tool_calls' : 'stop'));
  if (request.stream_options?.include_usage)
    out.push({ ...base, choices: [], usage: reply.usage ?? estimate_usage(request, reply) });
  return out;
}

async function answer(req, res, request) {
  const reply = queue.length ? queue.shift() : fallback;
  if (reply.hang) return; // the socket stays open until the client goes away
  if (reply.delay_ms) await new Promise((r) => setTimeout(r, reply.delay_ms));
  if (res.destroyed) return;
  if (reply.status && reply.status !== 200) {
    return send_json(res, reply.status, {
      error: { message: reply.message ?? `scripted status ${reply.status}`, type: 'fake_upstream', code: reply.status },
    });
  }
  const id = `chatcmpl-fake${next_id++}`;
  const created = Math.floor(Date.now() / 1000);
  if (!request.stream) return send_json(res, 200, completion_json(request, reply, id, created));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const c of stream_chunks(request, reply, id, created)) {
    if (res.destroyed) return;
    res.write(`data: ${JSON.stringify(c)}\n\n`);
    if (reply.chunk_delay_ms) await new Promise((r) => setTimeout(r, reply.chunk_delay_ms));
  }
  if (!res.destroyed) res.end('data: [DONE]\n\n');
}

function read_body(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on('data', (d) => {
      size += d.length;
      if (size > max_body_bytes) {
        reject(new Error('body too large'));
        req.destroy();
      } else parts.push(d);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const server = http.createServer(async (req, res) => {
  const path = new URL(req.url, 'http://x').pathname;
  try {
    if (req.method === 'POST' && (path === '/v1/chat/completions' || path === '/chat/completions')) {
      // Counted from acceptance until the socket closes, so a client that gave up stops counting.
      active += 1;
      let counted = true;
      const release = () => {
        if (counted) { counted = false; active -= 1; }
      };
      req.socket.once('close', release);
      const request = parse(await read_body(req));
      if (request === undefined || typeof request !== 'object' || request === null) {
        return send_json(res, 400, { error: { message: 'body is not a JSON object', type: 'invalid_request_error' } });
      }
      requests.push(request);
      return await answer(req, res, request);
    }
    if (req.method === 'POST' && path === '/__script') {
      const script = parse(await read_body(req));
      if (script === undefined) return send_json(res, 400, { error: 'script is not JSON' });
      load_script(script);
      return send_json(res, 200, { ok: true, queued: queue.length });
    }
    if (req.method === 'POST' && path === '/__reset') {
      await read_body(req);
      queue = [];
      requests = [];
      fallback = startup_default;
      return send_json(res, 200, { ok: true });
    }
    if (req.method === 'GET' && path === '/__requests') return send_json(res, 200, requests);
    if (req.method === 'GET' && path === '/__active') return send_json(res, 200, { active });
    send_json(res, 404, { error: { message: `no route for ${req.method} ${path}` } });
  } catch (err) {
    if (!res.headersSent && !res.destroyed) send_json(res, 500, { error: { message: String(err) } });
  }
});

const script_file = arg('--script', null);
if (script_file) {
  load_script(JSON.parse(fs.readFileSync(script_file, 'utf8')));
  startup_default = fallback;
}

server.listen(Number(arg('--port', '0')), '127.0.0.1', () => {
  process.stdout.write(`fake upstream listening on http://127.0.0.1:${server.address().port}\n`);
});

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections(); // hanging requests would otherwise keep close() waiting
  setTimeout(() => process.exit(0), 1000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
