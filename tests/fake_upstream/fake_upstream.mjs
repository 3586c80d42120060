// A fake OpenAI-compatible upstream for troupe's tests and benchmarks: chat completions
// (POST /v1/chat/completions) and the Responses API (POST /v1/responses), both stateless, and the
// model list (GET /v1/models) that POST /__models sets (a JSON array of ids; none at first).
//
//   node tests/fake_upstream/fake_upstream.mjs [--port 0] [--script FILE]
//
// Prints `fake upstream listening on http://127.0.0.1:<port>` once ready. Replies come from one queue
// of scripted reply objects shared by both endpoints; when it is empty the `default` reply repeats.
// A reply object:
//   status      send this HTTP status with a JSON error body instead of a completion
//   message     the error body's message (with status)
//   retry_after the Retry-After header sent with status (a string, as given)
//   reasoning   reasoning text: chat streams it as `delta.reasoning_content` chunks before the
//               content (non-streaming: `message.reasoning_content`); Responses send a reasoning item
//   content     assistant text
//   tool_calls  [{id?, name, arguments: "<json text>"}]; chat sends a call without id without one;
//               Responses use the id as `call_id` and mint `call_up…` when it is absent
//   finish      'stop' (default), 'length' or 'content_filter'. Chat: the finish_reason (a reply with
//               tool calls and no other finish says 'tool_calls'); Responses: 'length' and
//               'content_filter' end with response.incomplete and incomplete_details.reason
//               'max_output_tokens' / 'content_filter', the last item `status:"incomplete"`
//   chunk_size  when streaming, reasoning, content and each call's arguments go out in pieces of N chars
//   chunk_delay_ms  when streaming, pause after each chunk (chat) or event (Responses)
//   delay_ms    wait before answering
//   hang        accept the request and never answer
//   usage       {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details?:{cached_tokens},
//               completion_tokens_details?:{reasoning_tokens}}; estimated when absent. Responses map
//               it to {input_tokens, input_tokens_details:{cached_tokens}, output_tokens,
//               output_tokens_details:{reasoning_tokens}, total_tokens} (Responses-style usage given
//               as is is sent as is)
//   fail        streaming: after the items, end with an error instead of a finish: chat sends a
//               `{"error":{…}}` chunk, Responses send `response.failed` with `error:{code:"server_error",
//               message:<fail>}`
//   eof         streaming: close the stream after the items without a finish_reason / terminal event
// Responses-only quirks (defaults are what the OpenAI API sends, which the openai SDK accepts):
//   reasoning_events  how a reasoning item's part is announced: 'content_part' (default:
//               response.content_part.added/.done with a `reasoning_text` part), 'reasoning_part'
//               (response.reasoning_part.added/.done, as some vLLM versions send) or 'none' (no part
//               events at all, as vLLM ≥ 0.21 sends)
//   reasoning_content_null  the reasoning item's output_item.added carries `content:null`
//   done_marker  end the stream with `data: [DONE]` (vLLM); OpenAI sends none
// Logprobs, as the real APIs give them only when asked (chat: `logprobs:true`; Responses: include
// `message.output_text.logprobs` or top_logprobs > 0): one entry per content piece, {token: the piece,
// logprob: -0.25, bytes, top_logprobs: `top_logprobs` alternatives (the piece, then "alt<i>")}.
// Every Responses event has `event: <type>`, a `sequence_number` from 0 and upstream-style ids
// (resp_up…, rs_up…, msg_up…, fc_up…) that troupe must not expose.
// Control: POST /__script {"replies":[...],"default":{...}}, GET /__requests (every request body
// received, oldest first, each with `path` added: the route it came to, e.g. "/v1/chat/completions"
// or "/v1/responses"; `?path=<route>` keeps only those), POST /__reset, GET /__active ({"active": n}:
// model requests of either endpoint whose response or socket is still open).
import http from 'node:http';
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';

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

const tokens = (text) => Math.ceil(text.length / 4);

// Chat-style usage, as a chat upstream reports it.
function estimate_usage(request, reply) {
  const prompt_text = request.messages !== undefined || request.input === undefined
    ? JSON.stringify(request.messages ?? [])
    : JSON.stringify(request.input) + (request.instructions ?? '');
  const prompt = tokens(prompt_text);
  const produced = (reply.content ?? '') + (reply.tool_calls ?? []).map((c) => c.name + (c.arguments ?? '')).join('');
  const reasoning = tokens(reply.reasoning ?? '');
  const completion = tokens(produced) + reasoning;
  const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  if (reply.reasoning) usage.completion_tokens_details = { reasoning_tokens: reasoning };
  return usage;
}

// Responses-style usage from the reply's (chat-style) usage or the estimate.
function responses_usage(request, reply) {
  const u = reply.usage ?? estimate_usage(request, reply);
  if (u.input_tokens !== undefined || u.output_tokens !== undefined) return u;
  const input = u.prompt_tokens ?? 0;
  const output = u.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: {
      reasoning_tokens: u.completion_tokens_details?.reasoning_tokens ?? (reply.usage ? 0 : tokens(reply.reasoning ?? '')),
    },
    total_tokens: u.total_tokens ?? input + output,
  };
}

function send_json(res, status, value, headers = {}) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- logprobs ----

function piece_logprobs(piece, top) {
  const entry = (token, logprob) => ({ token, logprob, bytes: [...Buffer.from(token, 'utf8')] });
  const alternatives = [];
  for (let i = 0; i < (top ?? 0); ++i) alternatives.push(i === 0 ? entry(piece, -0.25) : entry(`alt${i}`, -2 - i));
  return [{ ...entry(piece, -0.25), top_logprobs: alternatives }];
}

const chat_wants_logprobs = (request) => request.logprobs === true;
const responses_wants_logprobs = (request) =>
  (request.include ?? []).includes('message.output_text.logprobs') || (request.top_logprobs ?? 0) > 0;

// ---- chat completions ----

function chat_finish_reason(reply) {
  const calls = reply.tool_calls ?? [];
  if (reply.finish && reply.finish !== 'stop') return reply.finish;
  return calls.length ? 'tool_calls' : 'stop';
}

function completion_json(request, reply, id, created) {
  const calls = reply.tool_calls ?? [];
  const message = { role: 'assistant', content: calls.length && !reply.content ? null : reply.content ?? '' };
  if (reply.reasoning) message.reasoning_content = reply.reasoning;
  if (calls.length) {
    message.tool_calls = calls.map((c) => ({
      ...(c.id ? { id: c.id } : {}),
      type: 'function',
      function: { name: c.name, arguments: c.arguments ?? '{}' },
    }));
  }
  return {
    id, object: 'chat.completion', created, model: request.model ?? 'fake',
    choices: [{
      index: 0, message, finish_reason: chat_finish_reason(reply),
      ...(chat_wants_logprobs(request) && reply.content
        ? { logprobs: { content: pieces(reply.content, reply.chunk_size).flatMap((p) => piece_logprobs(p, request.top_logprobs)) } }
        : {}),
    }],
    usage: reply.usage ?? estimate_usage(request, reply),
  };
}

function stream_chunks(request, reply, id, created) {
  const base = { id, object: 'chat.completion.chunk', created, model: request.model ?? 'fake' };
  const chunk = (delta, finish_reason = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason }] });
  const calls = reply.tool_calls ?? [];
  const out = [chunk({ role: 'assistant', content: '' })];
  if (reply.reasoning)
    for (const p of pieces(reply.reasoning, reply.chunk_size)) out.push(chunk({ reasoning_content: p }));
  if (reply.content) {
    for (const p of pieces(reply.content, reply.chunk_size)) {
      const c = chunk({ content: p });
      if (chat_wants_logprobs(request)) c.choices[0].logprobs = { content: piece_logprobs(p, request.top_logprobs) };
      out.push(c);
    }
  }
  calls.forEach((c, index) => {
    pieces(c.arguments ?? '{}', reply.chunk_size).forEach((p, n) => {
      const call = n === 0
        ? { index, ...(c.id ? { id: c.id } : {}), type: 'function', function: { name: c.name, arguments: p } }
        : { index, function: { arguments: p } };
      out.push(chunk({ tool_calls: [call] }));
    });
  });
  if (reply.fail) {
    out.push({ error: { message: String(reply.fail), type: 'server_error', code: null } });
    return out;
  }
  if (reply.eof) return out;
  out.push(chunk({}, chat_finish_reason(reply)));
  if (request.stream_options?.include_usage)
    out.push({ ...base, choices: [], usage: reply.usage ?? estimate_usage(request, reply) });
  return out;
}

async function answer_chat(res, request, reply) {
  const id = `chatcmpl-fake${next_id++}`;
  const created = Math.floor(Date.now() / 1000);
  if (!request.stream) return send_json(res, 200, completion_json(request, reply, id, created));
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const c of stream_chunks(request, reply, id, created)) {
    if (res.destroyed) return;
    res.write(`data: ${JSON.stringify(c)}\n\n`);
    if (reply.chunk_delay_ms) await sleep(reply.chunk_delay_ms);
  }
  if (res.destroyed) return;
  if (reply.fail || reply.eof) res.end();
  else res.end('data: [DONE]\n\n');
}

// ---- Responses API ----

const up_id = (prefix) => `${prefix}_up${String(next_id++).padStart(4, '0')}${randomBytes(6).toString('hex')}`;

// The reply as Responses output items, each with the events that stream it (minus output_index
// and sequence_number, added when the stream is assembled).
function responses_items(request, reply) {
  const size = reply.chunk_size;
  const logprobs = responses_wants_logprobs(request);
  const items = [];
  const text_pieces = (text) => pieces(text, size).filter((p) => p !== '');
  if (reply.reasoning) {
    const id = up_id('rs');
    const text = reply.reasoning;
    const part_events = reply.reasoning_events ?? 'content_part';
    const part = (t) => ({ type: 'reasoning_text', text: t });
    const events = [];
    const added_item = { id, type: 'reasoning', summary: [], content: reply.reasoning_content_null ? null : [], status: 'in_progress' };
    if (part_events === 'content_part') events.push({ type: 'response.content_part.added', item_id: id, content_index: 0, part: part('') });
    if (part_events === 'reasoning_part') events.push({ type: 'response.reasoning_part.added', item_id: id, content_index: 0, part: part('') });
    for (const p of text_pieces(text)) events.push({ type: 'response.reasoning_text.delta', item_id: id, content_index: 0, delta: p });
    events.push({ type: 'response.reasoning_text.done', item_id: id, content_index: 0, text });
    if (part_events === 'content_part') events.push({ type: 'response.content_part.done', item_id: id, content_index: 0, part: part(text) });
    if (part_events === 'reasoning_part') events.push({ type: 'response.reasoning_part.done', item_id: id, content_index: 0, part: part(text) });
    items.push({
      added: added_item,
      events,
      done: (status) => ({ id, type: 'reasoning', summary: [], content: [part(text)], status }),
    });
  }
  const calls = reply.tool_calls ?? [];
  if (reply.content || (!calls.length && !reply.reasoning)) {
    const id = up_id('msg');
    const text = reply.content ?? '';
    const all = logprobs ? text_pieces(text).flatMap((p) => piece_logprobs(p, request.top_logprobs)) : [];
    const part = (t) => ({ type: 'output_text', annotations: [], logprobs: t === '' ? [] : all, text: t });
    const events = [{ type: 'response.content_part.added', item_id: id, content_index: 0, part: part('') }];
    for (const p of text_pieces(text)) {
      events.push({
        type: 'response.output_text.delta', item_id: id, content_index: 0, delta: p,
        logprobs: logprobs ? piece_logprobs(p, request.top_logprobs) : [],
        obfuscation: randomBytes(6).toString('hex'),
      });
    }
    events.push({ type: 'response.output_text.done', item_id: id, content_index: 0, text, logprobs: all });
    events.push({ type: 'response.content_part.done', item_id: id, content_index: 0, part: part(text) });
    items.push({
      added: { id, type: 'message', status: 'in_progress', content: [], role: 'assistant' },
      events,
      done: (status) => ({ id, type: 'message', status, content: [part(text)], role: 'assistant' }),
    });
  }
  for (const c of calls) {
    const id = up_id('fc');
    const call_id = c.id ?? up_id('call');
    const args = c.arguments ?? '{}';
    const events = text_pieces(args).map((p) => ({
      type: 'response.function_call_arguments.delta', item_id: id, delta: p, obfuscation: randomBytes(6).toString('hex'),
    }));
    events.push({ type: 'response.function_call_arguments.done', item_id: id, name: c.name, arguments: args });
    items.push({
      added: { id, type: 'function_call', status: 'in_progress', arguments: '', call_id, name: c.name },
      events,
      done: (status) => ({ id, type: 'function_call', status, arguments: args, call_id, name: c.name }),
    });
  }
  return items;
}

function response_object(request, reply, base, status, output, usage) {
  const incomplete = status === 'incomplete'
    ? { reason: reply.finish === 'content_filter' ? 'content_filter' : 'max_output_tokens' } : null;
  return {
    id: base.id,
    object: 'response',
    created_at: base.created_at,
    status,
    background: false,
    completed_at: status === 'completed' ? Math.floor(Date.now() / 1000) : null,
    error: status === 'failed' ? { code: 'server_error', message: String(reply.fail) } : null,
    incomplete_details: incomplete,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    max_tool_calls: request.max_tool_calls ?? null,
    model: request.model ?? 'fake',
    output,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: request.reasoning ?? { effort: null, summary: null },
    store: request.store ?? true,
    temperature: request.temperature ?? 1.0,
    text: request.text ?? { format: { type: 'text' } },
    tool_choice: request.tool_choice ?? 'auto',
    tools: request.tools ?? [],
    top_p: request.top_p ?? 1.0,
    truncation: request.truncation ?? 'disabled',
    usage,
    metadata: {},
  };
}

function final_status(reply) {
  if (reply.finish === 'length' || reply.finish === 'content_filter') return 'incomplete';
  return 'completed';
}

// Every event of a Responses stream, in order, numbered; the last is the terminal event unless
// `eof` cuts it.
function responses_events(request, reply) {
  const base = { id: up_id('resp'), created_at: Math.floor(Date.now() / 1000) };
  const items = responses_items(request, reply);
  const status = reply.fail ? 'failed' : final_status(reply);
  const events = [];
  const lifecycle = (type, st, output, usage) => events.push({ type, response: response_object(request, reply, base, st, output, usage) });
  lifecycle('response.created', 'in_progress', [], null);
  lifecycle('response.in_progress', 'in_progress', [], null);
  const output = [];
  items.forEach((item, output_index) => {
    const last = output_index === items.length - 1;
    const item_status = last && status === 'incomplete' ? 'incomplete' : 'completed';
    events.push({ type: 'response.output_item.added', item: item.added, output_index });
    for (const e of item.events) events.push({ ...e, output_index });
    const done = item.done(item_status);
    output.push(done);
    events.push({ type: 'response.output_item.done', item: done, output_index });
  });
  if (!reply.eof) {
    const terminal = status === 'completed' ? 'response.completed' : status === 'incomplete' ? 'response.incomplete' : 'response.failed';
    lifecycle(terminal, status, output, responses_usage(request, reply));
  }
  events.forEach((e, i) => { e.sequence_number = i; });
  return { events, base, output, status };
}

async function answer_responses(res, request, reply) {
  const { events, base, output, status } = responses_events(request, reply);
  if (!request.stream) {
    return send_json(res, 200, response_object(request, reply, base, status, output, responses_usage(request, reply)));
  }
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  for (const e of events) {
    if (res.destroyed) return;
    res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
    if (reply.chunk_delay_ms) await sleep(reply.chunk_delay_ms);
  }
  if (res.destroyed) return;
  res.end(reply.done_marker ? 'data: [DONE]\n\n' : undefined);
}

// ---- both ----

async function answer(req, res, request, protocol) {
  const reply = queue.length ? queue.shift() : fallback;
  if (reply.hang) return; // the socket stays open until the client goes away
  if (reply.delay_ms) await sleep(reply.delay_ms);
  if (res.destroyed) return;
  if (reply.status && reply.status !== 200) {
    return send_json(res, reply.status, {
      error: { message: reply.message ?? `scripted status ${reply.status}`, type: 'fake_upstream', code: reply.status },
    }, reply.retry_after === undefined ? {} : { 'retry-after': String(reply.retry_after) });
  }
  return protocol === 'responses' ? answer_responses(res, request, reply) : answer_chat(res, request, reply);
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

let model_ids = [];

const model_routes = new Map([
  ['/v1/chat/completions', 'chat'],
  ['/chat/completions', 'chat'],
  ['/v1/responses', 'responses'],
  ['/responses', 'responses'],
]);

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  const path = url.pathname;
  try {
    if (req.method === 'POST' && model_routes.has(path)) {
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
      // The Authorization header is kept when sent, so a test can see which key reached which upstream.
      const auth = req.headers.authorization ? { authorization: req.headers.authorization } : {};
      requests.push(Array.isArray(request) ? request : { ...request, path, ...auth });
      return await answer(req, res, request, model_routes.get(path));
    }
    if (req.method === 'GET' && (path === '/v1/models' || path === '/models')) {
      requests.push({ path, method: 'GET', ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
      return send_json(res, 200, {
        object: 'list',
        data: model_ids.map((id) => ({ id, object: 'model', created: 1767225600, owned_by: 'fake' })),
      });
    }
    if (req.method === 'POST' && path === '/__models') {
      const ids = parse(await read_body(req));
      if (!Array.isArray(ids)) return send_json(res, 400, { error: 'models is not a JSON array' });
      model_ids = ids;
      return send_json(res, 200, { ok: true });
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
    if (req.method === 'GET' && path === '/__requests') {
      const only = url.searchParams.get('path');
      return send_json(res, 200, only === null ? requests : requests.filter((r) => r.path === only));
    }
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
