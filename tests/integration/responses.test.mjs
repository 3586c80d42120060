// The Responses gateway's edges (docs: the Responses spec, RS-n) against the real binary and the fake
// upstream over plain HTTP: the error envelope and validation messages (RS-1, RS-2, RS-6, RS-7, RS-9),
// auth (RS-3), keepalives (RS-35), foreground disconnects (RS-42), run failures (RS-43, RS-32),
// conversation locking (RS-54), crash recovery of background responses (RS-55, RS-62), resumable
// streams (RS-61), store:false (RS-56), and, with the fake MCP server as a configured stdio server,
// the gateway-call limits (RS-23, RS-24) and the cancellation of running calls (RS-42, RS-9).
// The SDK happy paths live in tests/conformance/responses.test.mjs; this file covers what they do not.
import assert from 'node:assert/strict';
import path from 'node:path';
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import {
  scenario, deep_merge, open_sse, source_dir, fake_mcp_spy_source, until, upstream_config, wait_mcp_ready,
} from './harness.mjs';

const model = 'fake-model';
const fake_mcp_script = path.join(source_dir, 'tests', 'fake_mcp', 'fake_mcp_server.mjs');
const mcp_ready_timeout_ms = 30_000; // a node server starting on a loaded 2-core machine
const terminal_types = new Set(['response.completed', 'response.incomplete', 'response.failed']);
const restarted = { code: 'server_error', message: 'The server restarted before the response finished.' };

// ---------------------------------------------------------------------------------------------
// Helpers

// A fake upstream and troupe serving it through `protocol`. Retries are off so that a scripted
// failure is the run's failure (retrying is the upstream client's business, not the gateway's).
async function gateway(s, { protocol = 'chat_completions', config = {}, env = {} } = {}) {
  const up = await s.upstream();
  const full = deep_merge(upstream_config(up, { protocol, max_retries: 0 }), config);
  const troupe = await s.troupe({ config: full, env });
  return { up, troupe, config: full };
}

const post = (troupe, body, headers = {}) => troupe.request('POST', '/v1/responses', { body: { model, ...body }, headers });
const get = (troupe, id) => troupe.request('GET', `/v1/responses/${encodeURIComponent(id)}`);

// POST /v1/responses with stream:true, as an SSE client that can drop the connection.
const stream_create = (troupe, body) => open_sse(`${troupe.url}/v1/responses`, { body: { model, stream: true, ...body } });

// GET /v1/responses/{id}?stream=true[&starting_after=N] (RS-6).
function replay(troupe, id, after) {
  const q = after === undefined ? '' : `&starting_after=${after}`;
  return open_sse(`${troupe.url}/v1/responses/${encodeURIComponent(id)}?stream=true${q}`, { method: 'GET' });
}

// The event frames of a finished SSE stream as {event, json}; the frame name must equal data.type
// and every frame carries one JSON payload (RS-35).
async function finished_events(stream, what = 'the stream', timeout_ms = 60_000) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not end within ${timeout_ms} ms; frames so far:\n` +
      stream.frames.map((f) => f.raw).join('\n\n'))), timeout_ms);
  });
  const { frames } = await Promise.race([stream.finished, late]).finally(() => clearTimeout(timer));
  const events = frames.filter((f) => f.event !== undefined);
  for (const f of events) {
    assert.ok(f.json, `${what}: every frame carries one JSON payload: ${f.raw}`);
    assert.equal(f.event, f.json.type, `${what}: event: names data.type (RS-35)`);
  }
  return events.map((f) => ({ event: f.event, json: f.json }));
}

// Event types for a failure message; a long stream is shown by its ends.
function types(events) {
  const names = events.map((e) => e.json.type);
  if (names.length <= 12)
    return names.join(', ');
  return `${names.slice(0, 4).join(', ')}, … (${names.length - 10} more), ${names.slice(-6).join(', ')}`;
}

// RS-37.1: sequence numbers rise by exactly 1 from `first`.
function assert_contiguous(events, first, what) {
  events.forEach((e, i) => assert.equal(e.json.sequence_number, first + i,
    `${what}: sequence numbers run ${first}, ${first + 1}, … without gap or repeat: ${events.map((x) => x.json.sequence_number)}`));
}

// RS-37.3: exactly one terminal event and it is the last one.
function assert_one_terminal(events, type, what) {
  const terminals = events.filter((e) => terminal_types.has(e.json.type) || e.json.type === 'error');
  assert.equal(terminals.length, 1, `${what}: exactly one terminal event: ${types(events)}`);
  assert.equal(events[events.length - 1].json.type, type, `${what}: the stream ends with ${type}: ${types(events)}`);
  return events[events.length - 1].json;
}

// RS-37.4, RS-37.6: each output_item.added has one output_item.done with the same id, and the done
// items, in output order, are the terminal object's output.
function assert_folds_to_terminal(events, what) {
  const added = events.filter((e) => e.json.type === 'response.output_item.added').map((e) => e.json);
  const done = events.filter((e) => e.json.type === 'response.output_item.done').map((e) => e.json);
  added.forEach((a, n) => assert.equal(a.output_index, n, `${what}: output_index is dense (RS-37.4)`));
  for (const a of added) {
    const d = done.filter((x) => x.item.id === a.item.id);
    assert.equal(d.length, 1, `${what}: item ${a.item.id} (${a.item.type}) added at ${a.output_index} has one output_item.done (RS-37.4): ${types(events)}`);
    assert.equal(d[0].output_index, a.output_index);
  }
  const terminal = events[events.length - 1].json.response;
  assert.deepEqual(terminal.output, done.sort((x, y) => x.output_index - y.output_index).map((x) => x.item),
    `${what}: folding the events reproduces the terminal output (RS-37.6)`);
}

const text_deltas = (events) => events.filter((e) => e.json.type === 'response.output_text.delta').map((e) => e.json.delta).join('');

// RS-1: the body is {"error":{message, type, param, code}} and nothing else; `expected` names the
// fields the spec fixes.
function assert_error(res, status, expected, what = '') {
  assert.equal(res.status, status, `${what} HTTP status: ${res.text}`);
  const ctype = typeof res.headers.get === 'function' ? res.headers.get('content-type') : res.headers['content-type'];
  assert.match(String(ctype ?? ''), /^application\/json/, `${what} the error is plain JSON (RS-1): ${ctype}`);
  const body = res.json ?? (() => { try { return JSON.parse(res.text); } catch { return undefined; } })();
  assert.ok(body && typeof body === 'object', `${what} the body is JSON: ${res.text}`);
  assert.deepEqual(Object.keys(body), ['error'], `${what} RS-1: only an error key: ${res.text}`);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type'], `${what} RS-1 error fields: ${res.text}`);
  assert.equal(typeof body.error.message, 'string');
  assert.equal(body.error.type, status >= 500 ? 'server_error' : 'invalid_request_error', `${what} RS-1 type: ${res.text}`);
  for (const k of ['param', 'code'])
    assert.ok(body.error[k] === null || typeof body.error[k] === 'string', `${what} RS-1: ${k} is a string or null: ${res.text}`);
  for (const [k, v] of Object.entries(expected))
    assert.equal(body.error[k], v, `${what} error.${k}: ${res.text}`);
  return body.error;
}

// A subtest sharing the scenario's processes; a failure carries their output.
function part(s, name, fn) {
  return s.t.test(name, async () => {
    try {
      await fn();
    } catch (err) {
      try { err.message = `${err.message}\n${s.logs()}`; } catch { /* read-only message */ }
      throw err;
    }
  });
}

// SIGKILL: no drain, no cleanup.
async function kill9(troupe) {
  troupe.signal('SIGKILL');
  const exit = await troupe.wait_exit(10_000);
  assert.ok(exit, 'the killed process exited');
  assert.equal(exit.signal, 'SIGKILL', JSON.stringify(exit));
}

// Polls GET /v1/responses/{id} until pred holds; returns the object.
async function wait_response(troupe, id, pred, message, timeout_ms = 30_000) {
  let last;
  try {
    return await until(async () => {
      const res = await get(troupe, id);
      last = res.text;
      return res.status === 200 && pred(res.json) && res.json;
    }, { timeout_ms, interval_ms: 20, message });
  } catch (err) {
    err.message += `\nlast GET: ${last}`;
    throw err;
  }
}

// A slow reply: `text` streamed `size` characters at a time, `delay` ms apart.
const slow = (text, { size = 2, delay = 40, ...rest } = {}) => ({ content: text, chunk_size: size, chunk_delay_ms: delay, ...rest });
const long_text = (n) => Array.from({ length: n }, (_, i) => `w${i}`).join(' ') + '.';

// ---- what a chat-completions upstream received ----

const content_text = (c) => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => p.text ?? '').join('') : '');
const chat_texts = (req) => req.messages.map((m) => `${m.role}: ${content_text(m.content)}`);

// ---------------------------------------------------------------------------------------------
// RS-1, RS-2, RS-7, RS-9: error bodies

scenario('invalid requests and impossible operations are answered with the exact RS-1 envelope and the RS-2/RS-7/RS-9 messages, before any upstream call (RS-1, RS-2, RS-7, RS-9)', async (s) => {
  const { up, troupe } = await gateway(s);
  await up.script([], { content: 'ok' });

  await part(s, 'a body without model is 400 missing_required_parameter naming model (RS-2)', async () => {
    const res = await troupe.request('POST', '/v1/responses', { body: { input: 'hi' } });
    assert_error(res, 400, { message: "Missing required parameter: 'model'.", param: 'model', code: 'missing_required_parameter' });
  });

  await part(s, 'max_tool_calls 0 is 400 integer_below_min_value with the exact message (RS-2)', async () => {
    const res = await post(troupe, { input: 'hi', max_tool_calls: 0 });
    assert_error(res, 400, {
      message: "Invalid 'max_tool_calls': integer below minimum value. Expected a value >= 1, but got 0 instead.",
      param: 'max_tool_calls', code: 'integer_below_min_value',
    });
  });

  for (const [v, got] of [['2', 'a string'], [2.5, 'a decimal number'], [true, 'a boolean']]) {
    await part(s, `max_tool_calls ${JSON.stringify(v)} is 400 invalid_type "expected an integer, but got ${got} instead." (RS-2)`, async () => {
      const res = await post(troupe, { input: 'hi', max_tool_calls: v });
      assert_error(res, 400, {
        message: `Invalid type for 'max_tool_calls': expected an integer, but got ${got} instead.`,
        param: 'max_tool_calls', code: 'invalid_type',
      });
    });
  }

  await part(s, 'temperature 3 is 400 decimal_above_max_value with the exact message (RS-2)', async () => {
    const res = await post(troupe, { input: 'hi', temperature: 3 });
    assert_error(res, 400, {
      message: "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.",
      param: 'temperature', code: 'decimal_above_max_value',
    });
  });

  await part(s, 'an invalid stream:true request gets a plain JSON 400 and not one SSE byte (RS-1)', async () => {
    const st = await open_sse(`${troupe.url}/v1/responses`, { body: { model, stream: true, input: 'hi', temperature: 3 } });
    await st.finished;
    assert.equal(st.frames.length, 0, `no SSE frame: ${st.frames.map((f) => f.raw).join('\n\n')}`);
    assert.doesNotMatch(st.body, /^(event|data):/m, `no SSE bytes: ${st.body}`);
    assert_error({ status: st.status, headers: st.headers, text: st.body }, 400, {
      message: "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.",
      param: 'temperature', code: 'decimal_above_max_value',
    }, 'stream:true with temperature 3:');
  });

  await part(s, "an unknown tool type is 400 invalid_value \"Tool type 'x' is not enabled on this server.\" at tools[0].type (RS-14)", async () => {
    const res = await post(troupe, { input: 'hi', tools: [{ type: 'x' }] });
    assert_error(res, 400, { message: "Tool type 'x' is not enabled on this server.", param: 'tools[0].type', code: 'invalid_value' });
  });

  await part(s, 'an include value outside the RS-14 list is 400 invalid_value (RS-14)', async () => {
    assert_error(await post(troupe, { input: 'hi', include: ['message.bogus'] }), 400, { code: 'invalid_value' });
  });

  await part(s, 'previous_response_id together with conversation is 400 mutually_exclusive_parameters (RS-2)', async () => {
    const res = await post(troupe, { input: 'hi', previous_response_id: 'resp_0123', conversation: 'conv_0123' });
    assert_error(res, 400, {
      message: "Only one of 'previous_response_id' or 'conversation' may be provided.", code: 'mutually_exclusive_parameters',
    });
  });

  await part(s, "background with store:false is 400 invalid_value at background: \"Background mode requires 'store' to be true.\" (RS-2)", async () => {
    const res = await post(troupe, { input: 'hi', background: true, store: false });
    assert_error(res, 400, { message: "Background mode requires 'store' to be true.", param: 'background', code: 'invalid_value' });
  });

  await part(s, 'an unknown previous_response_id is 400 previous_response_not_found naming it (RS-2)', async () => {
    const id = 'resp_0190000000007000800000000000dead';
    const res = await post(troupe, { input: 'hi', previous_response_id: id });
    assert_error(res, 400, { message: `Previous response with id '${id}' not found.`, code: 'previous_response_not_found' });
  });

  await part(s, "GET of an unknown response id is 404 \"Response with id '<id>' not found.\" with code null (RS-2, RS-5)", async () => {
    const id = 'resp_0190000000007000800000000000beef';
    assert_error(await get(troupe, id), 404, { message: `Response with id '${id}' not found.`, code: null });
    const st = await replay(troupe, id);
    await st.finished;
    assert_error({ status: st.status, headers: st.headers, text: st.body }, 404,
      { message: `Response with id '${id}' not found.`, code: null }, 'the replay of an unknown id:');
  });

  await part(s, "an unknown conversation is 404 \"Conversation with id '<id>' not found.\", on its route and as the conversation of a response (RS-2, RS-11)", async () => {
    const id = 'conv_0190000000007000800000000000cafe';
    const message = `Conversation with id '${id}' not found.`;
    assert_error(await troupe.request('GET', `/v1/conversations/${id}`), 404, { message, code: null }, 'GET conversation:');
    assert_error(await post(troupe, { input: 'hi', conversation: id }), 404, { message, code: null }, 'POST responses:');
  });

  const before = (await up.requests()).length;
  assert.equal(before, 0, 'RS-21: no invalid request reached the upstream');

  await up.script([{ content: 'Stored foreground answer.' }]);
  const fg = await post(troupe, { input: 'hi' });
  assert.equal(fg.status, 200, fg.text);
  assert.equal(fg.json.status, 'completed', fg.text);

  await part(s, 'starting_after -2 is 400 invalid_value naming starting_after (RS-6)', async () => {
    const st = await replay(troupe, fg.json.id, -2);
    await st.finished;
    assert.equal(st.frames.length, 0);
    assert_error({ status: st.status, headers: st.headers, text: st.body }, 400,
      { message: "Invalid value for 'starting_after': '-2'.", param: 'starting_after', code: 'invalid_value' });
  });

  await part(s, 'a replay of a stored foreground response starting after its last event is an empty 200 event stream (RS-6, RS-44)', async () => {
    const all = await finished_events(await replay(troupe, fg.json.id), 'the replay');
    const last = all.at(-1).json.sequence_number;
    assert.equal(all.at(-1).json.type, 'response.completed');
    for (const after of [last, last + 50]) {
      const st = await replay(troupe, fg.json.id, after);
      assert.deepEqual(await finished_events(st), [], `starting_after=${after}`);
      assert.equal(st.status, 200);
      assert.match(String(st.headers['content-type']), /^text\/event-stream/);
    }
  });

  await part(s, 'cancelling a stored foreground response is 400 "Only responses created with background=true can be cancelled." code null (RS-9)', async () => {
    const res = await troupe.request('POST', `/v1/responses/${fg.json.id}/cancel`);
    assert_error(res, 400, { message: 'Only responses created with background=true can be cancelled.', code: null });
    assert.equal((await get(troupe, fg.json.id)).json.status, 'completed', 'the response is untouched');
  });

  await part(s, 'cancelling a completed background response is 400 "Cannot cancel a completed response." code null (RS-9)', async () => {
    await up.script([{ content: 'Background answer.' }]);
    const bg = await post(troupe, { input: 'hi', background: true });
    assert.equal(bg.status, 200, bg.text);
    await wait_response(troupe, bg.json.id, (r) => r.status === 'completed', 'the background response to complete');
    const res = await troupe.request('POST', `/v1/responses/${bg.json.id}/cancel`);
    assert_error(res, 400, { message: 'Cannot cancel a completed response.', code: null });
  });

  await part(s, 'deleting an in-progress background response is 400 "Cannot delete a response that is still in progress; cancel it first." code null (RS-7)', async () => {
    await up.script([{ hang: true }]);
    const bg = await post(troupe, { input: 'hang', background: true });
    assert.equal(bg.status, 200, bg.text);
    await until(async () => (await up.active()) === 1, { timeout_ms: 10_000, message: 'the upstream request to arrive' });
    const res = await troupe.request('DELETE', `/v1/responses/${bg.json.id}`);
    assert_error(res, 400, { message: 'Cannot delete a response that is still in progress; cancel it first.', code: null });
    const now = await get(troupe, bg.json.id);
    assert.equal(now.status, 200, `the response is still there: ${now.text}`);
    assert.ok(now.json.status === 'queued' || now.json.status === 'in_progress', now.text);
    // RS-20: it cannot be continued yet either.
    assert_error(await post(troupe, { input: 'next', previous_response_id: bg.json.id }), 400, {
      message: `Previous response with id '${bg.json.id}' is still in progress.`, param: 'previous_response_id', code: 'invalid_value',
    }, 'continuing it:');
    const cancel = await troupe.request('POST', `/v1/responses/${bg.json.id}/cancel`);
    assert.equal(cancel.status, 200, cancel.text);
  });
});

scenario('a body over service.max_body_bytes is 413 request_too_large "Request body exceeds <n> bytes." in the RS-1 envelope (RS-1, RS-2)', async (s) => {
  const { up, troupe } = await gateway(s, { config: { service: { max_body_bytes: 4096 } } });
  const res = await post(troupe, { input: 'x'.repeat(8192) });
  assert_error(res, 413, { message: 'Request body exceeds 4096 bytes.', code: 'request_too_large' });
  assert.equal((await up.requests()).length, 0);
});

// ---------------------------------------------------------------------------------------------
// RS-3: auth

scenario('with a service token configured every Responses route answers 401 invalid_api_key without the bearer or with a wrong one, and 200 with it (RS-3)', async (s) => {
  const token = 'rs-service-token';
  const { up, troupe } = await gateway(s, { config: { service: { service_token: token } } });
  await up.script([], { content: 'authorised' });
  const denied = (res, what) => assert_error(res, 401, { code: 'invalid_api_key' }, what);

  for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: token }, { authorization: `Bearer ${token}x` }]) {
    const what = `with ${JSON.stringify(headers)}:`;
    denied(await post(troupe, { input: 'hi' }, headers), `POST /v1/responses ${what}`);
    denied(await troupe.request('GET', '/v1/responses/resp_x', { headers }), `GET /v1/responses/{id} ${what}`);
    denied(await troupe.request('POST', '/v1/conversations', { body: {}, headers }), `POST /v1/conversations ${what}`);
    const st = await open_sse(`${troupe.url}/v1/responses`, { body: { model, input: 'hi', stream: true }, headers });
    await st.finished;
    assert.equal(st.frames.length, 0, 'a refused stream sends no SSE frame');
    denied({ status: st.status, headers: st.headers, text: st.body }, `streaming POST ${what}`);
  }
  assert.equal((await up.requests()).length, 0, 'a refused request never reaches the upstream');

  const ok = await post(troupe, { input: 'hi' }, { authorization: `Bearer ${token}` });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.status, 'completed');
  assert.equal(ok.json.output[0].content[0].text, 'authorised');
  const again = await troupe.request('GET', `/v1/responses/${ok.json.id}`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(again.status, 200, again.text);
});

scenario('a FASTREACT_SERVICE_TOKEN from the environment guards the Responses routes too (RS-3)', async (s) => {
  const token = 'rs-env-token';
  const { up, troupe } = await gateway(s, { env: { FASTREACT_SERVICE_TOKEN: token } });
  await up.script([], { content: 'authorised' });
  assert_error(await post(troupe, { input: 'hi' }), 401, { code: 'invalid_api_key' });
  const ok = await post(troupe, { input: 'hi' }, { authorization: `Bearer ${token}` });
  assert.equal(ok.status, 200, ok.text);
});

scenario('with auth.api_keys configured a Responses request needs one of those keys as its bearer (RS-3)', async (s) => {
  const key = 'sk-client-key-1';
  const { up, troupe } = await gateway(s, { config: { auth: { api_keys: [key] } } });
  await up.script([], { content: 'authorised' });
  assert_error(await post(troupe, { input: 'hi' }), 401, { code: 'invalid_api_key' }, 'without a key:');
  assert_error(await post(troupe, { input: 'hi' }, { authorization: 'Bearer sk-other' }), 401, { code: 'invalid_api_key' }, 'with another key:');
  const ok = await post(troupe, { input: 'hi' }, { authorization: `Bearer ${key}` });
  assert.equal(ok.status, 200, ok.text);
});

scenario('each client key and the service token alone reads, continues, changes and deletes its own responses and conversations; to any other they answer exactly as missing ones do (RS-3, RS-2)', async (s) => {
  // Issue 15 finding 9.
  const key_a = 'sk-client-a';
  const key_b = 'sk-client-b';
  const token = 'rs-service-token';
  const { up, troupe } = await gateway(s, { config: { auth: { api_keys: [key_a, key_b] }, service: { service_token: token } } });
  await up.script([], { content: 'answer' });
  const as = (key) => ({ authorization: `Bearer ${key}` });
  const call = (key, method, route, body) => troupe.request(method, route, { headers: as(key), ...(body ? { body } : {}) });

  const created = await post(troupe, { input: 'my question' }, as(key_a));
  assert.equal(created.status, 200, created.text);
  const conv = await call(key_a, 'POST', '/v1/conversations', { items: [{ role: 'user', content: 'secret note' }], metadata: { k: 'v' } });
  assert.equal(conv.status, 200, conv.text);
  const rid = created.json.id;
  const cid = conv.json.id;
  const iid = (await call(key_a, 'GET', `/v1/conversations/${cid}/items`)).json.data[0].id;
  const no_rid = 'resp_00000000000000000000000000000000';
  const no_cid = 'conv_00000000000000000000000000000000';

  const routes = [
    ['GET', (r) => `/v1/responses/${r}`],
    ['GET', (r) => `/v1/responses/${r}?stream=true`],
    ['GET', (r) => `/v1/responses/${r}/input_items`],
    ['POST', (r) => `/v1/responses/${r}/cancel`],
    ['DELETE', (r) => `/v1/responses/${r}`],
  ];
  const conversation_routes = [
    ['GET', (c) => `/v1/conversations/${c}`],
    ['POST', (c) => `/v1/conversations/${c}`, { metadata: { k: 'changed' } }],
    ['GET', (c) => `/v1/conversations/${c}/items`],
    ['POST', (c) => `/v1/conversations/${c}/items`, { items: [{ role: 'user', content: 'planted' }] }],
    ['GET', (c) => `/v1/conversations/${c}/items/${iid}`],
    ['DELETE', (c) => `/v1/conversations/${c}/items/${iid}`],
    ['DELETE', (c) => `/v1/conversations/${c}`],
  ];
  for (const other of [key_b, token]) {
    for (const [list, mine, none] of [[routes, rid, no_rid], [conversation_routes, cid, no_cid]]) {
      for (const [method, route, body] of list) {
        const what = `${method} ${route('{id}')} as ${other}:`;
        const foreign = await call(other, method, route(mine), body);
        const missing = await call(other, method, route(none), body);
        assert_error(foreign, 404, { code: null }, what);
        assert.equal(foreign.text, missing.text.replaceAll(none, mine), `${what} the same answer as a missing one`);
      }
    }
    const continued = await post(troupe, { input: 'theirs', previous_response_id: rid }, as(other));
    assert_error(continued, 400, { code: 'previous_response_not_found', message: `Previous response with id '${rid}' not found.` });
    const joined = await post(troupe, { input: 'theirs', conversation: cid }, as(other));
    assert_error(joined, 404, { message: `Conversation with id '${cid}' not found.` });
    const referenced = await post(troupe, { input: [{ type: 'item_reference', id: iid }] }, as(other));
    assert_error(referenced, 400, { param: 'input[0].id', message: `No item found with id '${iid}'.` }, 'an item_reference to another key\'s item:');
  }
  assert.equal((await up.requests()).length, 1, 'no foreign continuation reached the upstream');

  // The owner's objects are untouched and still its own to use.
  const again = await call(key_a, 'GET', `/v1/responses/${rid}`);
  assert.equal(again.status, 200, again.text);
  assert.equal(again.json.id, rid);
  const conv_now = await call(key_a, 'GET', `/v1/conversations/${cid}`);
  assert.deepEqual(conv_now.json.metadata, { k: 'v' });
  const items = await call(key_a, 'GET', `/v1/conversations/${cid}/items`);
  assert.deepEqual(items.json.data.map((i) => i.content[0].text), ['secret note']);
  const next = await post(troupe, { input: 'follow-up', previous_response_id: rid }, as(key_a));
  assert.equal(next.status, 200, next.text);
  assert.equal((await call(key_a, 'DELETE', `/v1/responses/${rid}`)).status, 200);
  assert.equal((await call(key_a, 'DELETE', `/v1/conversations/${cid}`)).status, 200);
});

// ---------------------------------------------------------------------------------------------
// RS-42: foreground disconnects

scenario('a streaming foreground client that drops after the first delta cancels the run within 1 s: the upstream request is closed and the response id stays 404 (RS-42)', async (s) => {
  const { up, troupe } = await gateway(s);
  await up.script([slow(long_text(200), { size: 2, delay: 50 })]);

  const st = await stream_create(troupe, { input: 'Tell me a long story.' });
  assert.equal(st.status, 200);
  const created = await st.wait_for((f) => f.json?.type === 'response.created');
  const id = created.json.response.id;
  await st.wait_for((f) => f.json?.type === 'response.output_text.delta');
  assert.equal(await up.active(), 1, 'the upstream is still streaming');

  const t0 = performance.now();
  st.abort();
  await until(async () => (await up.active()) === 0, {
    timeout_ms: 1000, interval_ms: 5, message: 'the upstream request to be closed within 1 s of the disconnect',
  });
  s.t.diagnostic(`disconnect → upstream closed in ${(performance.now() - t0).toFixed(1)} ms`);

  assert_error(await get(troupe, id), 404, { message: `Response with id '${id}' not found.`, code: null }, 'GET after the disconnect:');
  assert.equal((await troupe.request('GET', `/v1/responses/${id}/input_items`)).status, 404, 'nothing of it is stored');
  assert.equal((await up.requests()).length, 1, 'no further upstream call');
});

scenario('a non-streaming foreground client that aborts its request cancels the run within 1 s and nothing is appended to its conversation (RS-42, RS-54)', async (s) => {
  const { up, troupe } = await gateway(s);
  const conv = await troupe.request('POST', '/v1/conversations', { body: {} });
  assert.equal(conv.status, 200, conv.text);
  const conv_id = conv.json.id;
  await up.script([slow(long_text(200), { size: 2, delay: 50 }), { content: 'After the abort.' }]);

  const controller = new AbortController();
  const pending = fetch(`${troupe.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: controller.signal,
    body: JSON.stringify({ model, input: 'Tell me a long story.', conversation: conv_id }),
  }).then((r) => r.text(), (err) => err);
  await until(async () => (await up.active()) === 1, { timeout_ms: 10_000, message: 'the upstream request to arrive' });

  const t0 = performance.now();
  controller.abort();
  const outcome = await pending;
  assert.ok(outcome instanceof Error, `the fetch was aborted before an answer: ${outcome}`);
  await until(async () => (await up.active()) === 0, {
    timeout_ms: 1000, interval_ms: 5, message: 'the upstream request to be closed within 1 s of the disconnect',
  });
  s.t.diagnostic(`abort → upstream closed in ${(performance.now() - t0).toFixed(1)} ms`);

  const items = await troupe.request('GET', `/v1/conversations/${conv_id}/items?order=asc`);
  assert.equal(items.status, 200, items.text);
  assert.deepEqual(items.json.data, [], 'RS-42: nothing is appended to the conversation');
  // The conversation is not left locked by the cancelled run (RS-54).
  const next = await post(troupe, { input: 'Are you there?', conversation: conv_id });
  assert.equal(next.status, 200, next.text);
  assert.equal(next.json.status, 'completed');
  const reqs = await up.requests();
  assert.ok(!chat_texts(reqs[1]).some((t) => t.includes('Tell me a long story.')),
    `the aborted turn is not in the conversation's history: ${chat_texts(reqs[1])}`);
});

// ---------------------------------------------------------------------------------------------
// RS-43: run failures

for (const protocol of ['chat_completions', 'responses']) {
  const via = ` (${protocol} upstream)`;

  scenario(`a non-streaming foreground response whose upstream answers 500 is 502 server_error, and an upstream 400 on round 1 is 400 carrying the upstream's message (RS-43)${via}`, async (s) => {
    const { up, troupe } = await gateway(s, { protocol });
    await up.script([], { status: 500, message: 'the upstream exploded' });
    const res = await post(troupe, { input: 'hi' });
    assert_error(res, 502, {}, 'upstream 500:');

    await up.script([], { status: 400, message: 'context length exceeded by 12 tokens' });
    const bad = await post(troupe, { input: 'hi' });
    const err = assert_error(bad, 400, {}, 'upstream 400:');
    assert.ok(err.message.includes('context length exceeded by 12 tokens'), `the upstream's message is carried: ${bad.text}`);
  });

  const stream_failures = [
    ['an upstream 500', { status: 500, message: 'the upstream exploded' }, 'server_error'],
    ['an upstream 400', { status: 400, message: 'your prompt is bad' }, 'invalid_prompt'],
    ['an upstream 429', { status: 429, message: 'slow down' }, 'rate_limit_exceeded'],
    ['an upstream error in mid-stream', { content: 'Partial answer that', chunk_size: 4, fail: 'the model crashed' }, 'server_error'],
    ['an upstream stream that ends without a finish', { content: 'Cut short', chunk_size: 4, eof: true }, 'server_error'],
  ];
  scenario(`a streaming response whose upstream fails ends with one response.failed carrying error.code server_error / invalid_prompt (4xx) / rate_limit_exceeded (429), and the failed response is stored (RS-16, RS-43, RS-37)${via}`, async (s) => {
    const { up, troupe } = await gateway(s, { protocol });
    for (const [what, reply, code] of stream_failures) {
      await part(s, `${what} → response.failed with error.code ${code}, stored as failed${via}`, async () => {
        await up.script([reply]);
        const st = await stream_create(troupe, { input: `hi (${what})` });
        assert.equal(st.status, 200);
        const events = await finished_events(st, what);
        assert.equal(events[0]?.json.type, 'response.created', types(events));
        assert_contiguous(events, 0, what);
        const terminal = assert_one_terminal(events, 'response.failed', what);
        assert.equal(terminal.response.status, 'failed');
        assert.equal(terminal.response.error?.code, code, `error.code: ${JSON.stringify(terminal.response.error)}`);
        assert.equal(typeof terminal.response.error.message, 'string');
        assert_folds_to_terminal(events, what);
        const stored = await get(troupe, terminal.response.id);
        assert.equal(stored.status, 200, `RS-43: a failed response is stored: ${stored.text}`);
        assert.equal(stored.json.status, 'failed');
        assert.deepEqual(stored.json, terminal.response, 'the stored object is the terminal one');
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// RS-55, RS-62: kill -9 in the middle of a background response

// Starts a slow background stream (a reasoning item, then a long message), reads until the reasoning
// item is done and some message deltas arrived, kills troupe with SIGKILL and restarts it on the
// same data dir. Returns what the client had received and the restarted process.
async function crash_mid_response(s) {
  const { up, troupe, config } = await gateway(s);
  const text = long_text(150);
  await up.script([{ reasoning: 'Thinking it over.', ...slow(text, { size: 3, delay: 40 }) }]);

  const st = await stream_create(troupe, { input: 'Write a long answer.', background: true });
  assert.equal(st.status, 200);
  await st.wait_for((f) => f.json?.type === 'response.output_item.done' && f.json.item.type === 'reasoning');
  await until(() => st.frames.filter((f) => f.json?.type === 'response.output_text.delta').length >= 4,
    { timeout_ms: 10_000, message: 'some message deltas' });
  await kill9(troupe);
  const received = await finished_events(st, 'the live stream');
  const id = received[0].json.response.id;
  assert.ok(!received.some((e) => terminal_types.has(e.json.type)), `the response was mid-run: ${types(received)}`);

  const second = await s.troupe({ config, data_dir: troupe.data_dir });
  return { up, troupe: second, id, received };
}

scenario('after kill -9 mid background response and a restart, the response is failed "The server restarted before the response finished." and its replay keeps every event a client received and passes the RS-37 validator (RS-5, RS-6, RS-37, RS-55, RS-62)', async (s) => {
  const { troupe, id, received } = await crash_mid_response(s);
  const reasoning_done = received.find((e) => e.json.type === 'response.output_item.done' && e.json.item.type === 'reasoning').json.item;
  const now = await get(troupe, id);
  const events = await finished_events(await replay(troupe, id), 'the replay');

  await part(s, 'GET answers status failed with error {code:"server_error", message:"The server restarted before the response finished."} (RS-55)', async () => {
    assert.equal(now.status, 200, now.text);
    assert.equal(now.json.status, 'failed', now.text);
    assert.deepEqual(now.json.error, restarted);
  });

  await part(s, 'the replay holds every event the client received with the same sequence numbers and payloads, then ends with exactly one response.failed, numbered contiguously from 0 (RS-62, RS-55, RS-37.1, RS-37.3)', async () => {
    assert_contiguous(events, 0, 'the replay');
    assert.ok(events.length > received.length, `the replay has more than the ${received.length} events received: ${types(events)}`);
    assert.deepEqual(events.slice(0, received.length), received,
      'RS-62: every event the client received is in the replay with the same sequence number and payload');
    const terminal = assert_one_terminal(events, 'response.failed', 'the replay');
    assert.equal(terminal.response.status, 'failed');
    assert.deepEqual(terminal.response.error, restarted);
    const again = await finished_events(await replay(troupe, id), 'the second replay');
    assert.deepEqual(again, events, 'a second replay reads the same log');
  });

  await part(s, 'the stored object holds the item whose output_item.done was written before the crash (RS-55: the snapshot is updated at each output_item.done)', async () => {
    assert.equal(now.status, 200, now.text);
    assert.deepEqual(now.json.output[0], reasoning_done, `the completed reasoning item: ${now.text}`);
  });

  await part(s, 'the replay passes RS-37.4 and RS-37.6: the message open at the crash gets its output_item.done and the terminal output is the fold of the events (RS-37, RS-62)', async () => {
    assert_folds_to_terminal(events, 'the replay after the crash');
  });

  await part(s, 'GET returns the object the replay\'s response.failed carries (RS-5, RS-41)', async () => {
    assert.deepEqual(now.json, events[events.length - 1].json.response);
  });
});

// ---------------------------------------------------------------------------------------------
// RS-61: resumable background streams

scenario('a background stream client that drops after event k and reconnects with starting_after=k gets k+1… through response.completed with no gap or duplicate while the run carries on (RS-6, RS-55, RS-61)', async (s) => {
  const { up, troupe } = await gateway(s);
  const text = long_text(80);
  await up.script([slow(text, { size: 3, delay: 30 })]);

  const st = await stream_create(troupe, { input: 'Write a long answer.', background: true });
  assert.equal(st.status, 200);
  await st.wait_for((f) => (f.json?.sequence_number ?? -1) >= 8);
  st.abort();
  const received = await finished_events(st, 'the first connection');
  const k = received[received.length - 1].json.sequence_number;
  assert_contiguous(received, 0, 'the first connection');
  const id = received[0].json.response.id;
  assert.equal(received[0].json.response.status, 'queued', 'RS-37.2: a background stream starts queued');

  const mid = await get(troupe, id);
  assert.equal(mid.status, 200, mid.text);
  assert.equal(mid.json.status, 'in_progress', `the run carries on without its client: ${mid.text}`);
  // RS-5: a running response as its log folds: the open message with partial text, in_progress.
  const open = mid.json.output[0];
  assert.equal(open?.type, 'message', `the open message is in the object: ${mid.text}`);
  assert.equal(open.status, 'in_progress');
  const partial = open.content[0]?.text ?? '';
  assert.ok(partial.length >= text_deltas(received).length && text.startsWith(partial),
    `partial text "${partial}" covers what was streamed ("${text_deltas(received)}")`);

  const resumed = await finished_events(await replay(troupe, id, k), 'the resumed stream');
  assert.ok(resumed.length > 0, 'the resumed stream has events');
  assert_contiguous(resumed, k + 1, `the resumed stream after ${k}`);
  assert.ok(resumed.some((e) => e.json.type === 'response.output_text.delta'), 'live deltas follow the reconnection');
  const terminal = assert_one_terminal(resumed, 'response.completed', 'the resumed stream');
  assert.equal(text_deltas([...received, ...resumed]), text, 'the two connections together carry the whole text once');
  assert.equal(terminal.response.output[0].content[0].text, text);

  const full = await finished_events(await replay(troupe, id), 'the full replay');
  assert.deepEqual([...received, ...resumed], full, 'the two connections are exactly the durable log');
  // RS-6: starting after the terminal event is an empty 200 stream.
  const last = full[full.length - 1].json.sequence_number;
  for (const after of [last, last + 100]) {
    const st_end = await replay(troupe, id, after);
    const none = await finished_events(st_end, `starting_after=${after}`);
    assert.equal(st_end.status, 200);
    assert.match(String(st_end.headers['content-type']), /^text\/event-stream/);
    assert.deepEqual(none, [], `starting_after=${after} of a terminal response replays nothing`);
  }
  assert.equal((await up.requests()).length, 1, 'one upstream call: the drop did not restart anything');
});

// ---------------------------------------------------------------------------------------------
// RS-39: backpressure

scenario('a foreground client that stops reading holds the upstream read back instead of being buffered for: with a client buffer far smaller than the stream, it still gets every event once it reads again (RS-39)', async (s) => {
  const buffer_bytes = 256 * 1024;
  const { up, troupe } = await gateway(s, { config: { service: { max_stream_buffer_bytes: buffer_bytes } } });
  const text = 'abcd'.repeat(5_000); // 5,000 deltas: about 1.2 MB of client frames, 4.5 buffers
  await up.script([{ content: text, chunk_size: 4 }]);
  const st = await stream_create(troupe, { input: 'A long answer, please.' });
  assert.equal(st.status, 200);
  await st.wait_for((f) => f.json?.type === 'response.output_text.delta');
  st.pause();
  // Unread, the stream would outgrow the client's buffer many times over within this pause.
  await new Promise((r) => setTimeout(r, 1500));
  st.resume();
  const events = await finished_events(st, 'the paused stream');
  const terminal = assert_one_terminal(events, 'response.completed', 'the paused stream');
  const deltas = events.filter((e) => e.json.type === 'response.output_text.delta');
  assert.equal(deltas.length, 5_000);
  assert.equal(deltas.map((e) => e.json.delta).join(''), text);
  assert.equal(terminal.response.output[0].content[0].text, text);
  assert_contiguous(events, 0, 'the paused stream');
  assert.ok(!troupe.stderr.includes('dropping a slow event-stream client'), troupe.stderr);
});

scenario('a streamed response whose final events are each larger than the client buffer still reaches the client whole (RS-39)', async (s) => {
  const buffer_bytes = 64 * 1024;
  const { troupe, up } = await gateway(s, { config: { service: { max_stream_buffer_bytes: buffer_bytes } } });
  // output_text.done, content_part.done, output_item.done and response.completed each carry the text.
  const text = 'x'.repeat(100_000);
  await up.script([{ content: text, chunk_size: 4_000 }]);
  const st = await stream_create(troupe, { input: 'A long answer, please.' });
  assert.equal(st.status, 200);
  const events = await finished_events(st, 'the stream');
  const terminal = assert_one_terminal(events, 'response.completed', 'the stream');
  assert.equal(terminal.response.output[0].content[0].text, text);
  assert_contiguous(events, 0, 'the stream');
  assert.ok(!troupe.stderr.includes('dropping a slow event-stream client'), troupe.stderr);
});

// ---------------------------------------------------------------------------------------------
// RS-54: one run per conversation

scenario('while a response runs on a conversation a second response, an item create and an item delete on it are 409 conversation_locked; after the run a new response on it works and sees the whole history (RS-54)', async (s) => {
  const { up, troupe } = await gateway(s);
  const conv = await troupe.request('POST', '/v1/conversations', { body: { items: [{ role: 'user', content: 'Earlier note.' }] } });
  assert.equal(conv.status, 200, conv.text);
  const conv_id = conv.json.id;
  const first_items = await troupe.request('GET', `/v1/conversations/${conv_id}/items`);
  const note_id = first_items.json.data[0].id;
  const first_text = long_text(40);
  await up.script([slow(first_text, { size: 2, delay: 30 }), { content: 'Second answer.' }]);

  const st = await stream_create(troupe, { input: 'First question.', conversation: conv_id });
  assert.equal(st.status, 200);
  await st.wait_for((f) => f.json?.type === 'response.output_text.delta');

  const locked = { message: `Another response is in progress for conversation '${conv_id}'.`, param: 'conversation', code: 'conversation_locked' };
  assert_error(await post(troupe, { input: 'Second question too early.', conversation: conv_id }), 409, locked, 'a second response:');
  assert_error(await post(troupe, { input: 'Again, as an object.', conversation: { id: conv_id } }), 409, locked, 'conversation as {id}:');
  assert_error(await troupe.request('POST', `/v1/conversations/${conv_id}/items`, { body: { items: [{ role: 'user', content: 'sneaked in' }] } }),
    409, locked, 'an item create:');
  assert_error(await troupe.request('DELETE', `/v1/conversations/${conv_id}/items/${note_id}`), 409, locked, 'an item delete:');

  const events = await finished_events(st, 'the first response');
  const first = assert_one_terminal(events, 'response.completed', 'the first response').response;
  assert.equal(first.output[0].content[0].text, first_text);

  const second = await post(troupe, { input: 'Second question.', conversation: conv_id });
  assert.equal(second.status, 200, `after the run the conversation is free: ${second.text}`);
  assert.equal(second.json.status, 'completed');

  const reqs = await up.requests();
  assert.equal(reqs.length, 2, 'the refused requests never reached the upstream');
  const seen = chat_texts(reqs[1]);
  for (const t of ['user: Earlier note.', 'user: First question.', `assistant: ${first_text}`, 'user: Second question.'])
    assert.ok(seen.includes(t), `the second run sees "${t}": ${JSON.stringify(seen)}`);
  assert.ok(!seen.some((t) => t.includes('too early') || t.includes('sneaked in')), 'nothing of the refused requests');

  const items = await troupe.request('GET', `/v1/conversations/${conv_id}/items?order=asc`);
  assert.deepEqual(items.json.data.map((i) => `${i.role}: ${i.content[0].text}`),
    ['user: Earlier note.', 'user: First question.', `assistant: ${first_text}`, 'user: Second question.', 'assistant: Second answer.']);
});

// ---------------------------------------------------------------------------------------------
// RS-56: store:false

scenario('a store:false response completes but its id is unknown to GET, input_items, cancel and previous_response_id, while it can itself continue a stored response without changing it (RS-56)', async (s) => {
  const { up, troupe } = await gateway(s);
  await up.script([
    { content: 'Ephemeral answer.' },
    { content: 'Stored answer.' },
    { content: 'Continued without storing.' },
    { content: 'Continued again.' },
  ]);

  const eph = await post(troupe, { input: 'Do not keep this.', store: false });
  assert.equal(eph.status, 200, eph.text);
  assert.equal(eph.json.status, 'completed');
  assert.equal(eph.json.store, false);
  const id = eph.json.id;
  assert_error(await get(troupe, id), 404, { message: `Response with id '${id}' not found.`, code: null }, 'GET:');
  assert.equal((await troupe.request('GET', `/v1/responses/${id}/input_items`)).status, 404, 'input_items');
  assert.equal((await troupe.request('POST', `/v1/responses/${id}/cancel`)).status, 404, 'cancel');
  assert_error(await post(troupe, { input: 'Continue it.', previous_response_id: id }), 400,
    { message: `Previous response with id '${id}' not found.`, code: 'previous_response_not_found' }, 'previous_response_id:');

  const a = await post(troupe, { input: 'Keep this one.' });
  assert.equal(a.status, 200, a.text);
  const b = await post(troupe, { input: 'Follow up, unstored.', previous_response_id: a.json.id, store: false });
  assert.equal(b.status, 200, b.text);
  assert.equal(b.json.status, 'completed');
  assert.equal(b.json.previous_response_id, a.json.id);
  assert.equal((await get(troupe, b.json.id)).status, 404, 'the continuation is not stored either');

  const c = await post(troupe, { input: 'Follow up, stored.', previous_response_id: a.json.id });
  assert.equal(c.status, 200, c.text);

  const reqs = await up.requests();
  assert.equal(reqs.length, 4);
  assert.deepEqual(chat_texts(reqs[2]).filter((t) => !t.startsWith('system')),
    ['user: Keep this one.', 'assistant: Stored answer.', 'user: Follow up, unstored.'],
    'the store:false continuation sends the stored history upstream');
  assert.deepEqual(chat_texts(reqs[3]).filter((t) => !t.startsWith('system')),
    ['user: Keep this one.', 'assistant: Stored answer.', 'user: Follow up, stored.'],
    'the stored response is unchanged by the store:false continuation');
  assert.ok(!reqs.slice(1).some((r) => chat_texts(r).some((t) => t.includes('Do not keep this.'))), 'the ephemeral turn is gone');
});

scenario('a store:false response on a conversation sees its items but appends nothing to it (RS-56, RS-14)', async (s) => {
  const { up, troupe } = await gateway(s);
  const conv = await troupe.request('POST', '/v1/conversations', { body: { items: [{ role: 'user', content: 'Remember the code 4471.' }] } });
  assert.equal(conv.status, 200, conv.text);
  await up.script([{ content: 'The code is 4471.' }]);
  const res = await post(troupe, { input: 'What was the code?', conversation: conv.json.id, store: false });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.status, 'completed');
  const [req] = await up.requests();
  assert.ok(chat_texts(req).includes('user: Remember the code 4471.'), `hydrated from the conversation: ${chat_texts(req)}`);
  const items = await troupe.request('GET', `/v1/conversations/${conv.json.id}/items?order=asc`);
  assert.deepEqual(items.json.data.map((i) => i.content[0].text), ['Remember the code 4471.'], 'nothing appended');
});

// ---------------------------------------------------------------------------------------------
// RS-23, RS-24: gateway-call limits, with the fake MCP server as a configured stdio server


// The fake MCP server as the configured stdio server `fake`, with what it logged.
function fake_mcp(s) {
  const dir = s.tmpdir('troupe-rs-mcp-');
  const log_file = path.join(dir, 'fake_mcp.log');
  const spy_file = path.join(dir, 'spy.mjs');
  fs.writeFileSync(spy_file, fake_mcp_spy_source);
  const server = {
    name: 'fake', command: process.execPath, args: ['--import', pathToFileURL(spy_file).href, fake_mcp_script],
    env: { FAKE_MCP_LOG: log_file }, transport: 'stdio', isolation: 'shared',
  };
  const lines = () => {
    try { return fs.readFileSync(log_file, 'utf8').split('\n').filter(Boolean); } catch { return []; }
  };
  const touches = () => lines().filter((l) => l.startsWith('touch '));
  // [{tool, id}] of the tools/call requests the server read.
  const calls = () => lines().map((l) => l.match(/^request tools\/call (\S+) (.+)$/)).filter(Boolean)
    .map((m) => ({ tool: m[1], id: JSON.parse(m[2]) }));
  const cancellations = () => lines().map((l) => l.match(/^notification notifications\/cancelled (.*)$/)).filter(Boolean)
    .map((m) => JSON.parse(m[1]));
  return { server, touches, calls, cancellations, describe: () => `--- ${log_file}:\n${lines().join('\n')}` };
}

// The tool calls and tool results a chat upstream received.
const chat_calls = (req) => req.messages.flatMap((m) => (m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })));
const chat_results = (req) => req.messages.filter((m) => m.role === 'tool').map((m) => ({ id: m.tool_call_id, output: content_text(m.content) }));
const chat_tool_names = (req) => (req.tools ?? []).map((t) => t.function?.name);

scenario('with max_tool_calls 1 and two gateway calls in one round, one mcp_call runs and is shown while the other gets "Reached tool call limit of 1" upstream only, and the next round offers no MCP tools (RS-24)', async (s) => {
  const mcp = fake_mcp(s);
  const { up, troupe } = await gateway(s, { config: { mcp: { servers: [mcp.server] } } });
  await wait_mcp_ready(troupe, ['fake'], mcp_ready_timeout_ms);
  await up.script([
    { tool_calls: [
      { id: 'call_first', name: 'mcp__fake__touch', arguments: '{"marker":"first-call"}' },
      { id: 'call_second', name: 'mcp__fake__touch', arguments: '{"marker":"second-call"}' },
    ], chunk_size: 5 },
    { content: 'One touch was enough.' },
  ]);

  const st = await stream_create(troupe, {
    input: 'Touch twice.', max_tool_calls: 1, tools: [{ type: 'mcp', server_label: 'fake', require_approval: 'never' }],
  });
  const events = await finished_events(st, 'the stream');
  assert_contiguous(events, 0, 'the stream');
  const terminal = assert_one_terminal(events, 'response.completed', 'the stream').response;
  assert_folds_to_terminal(events, 'the stream');
  assert.deepEqual(terminal.output.map((i) => i.type), ['mcp_list_tools', 'mcp_call', 'message'], JSON.stringify(terminal.output));
  const call = terminal.output[1];
  assert.equal(call.name, 'touch');
  assert.equal(call.arguments, '{"marker":"first-call"}');
  assert.equal(call.status, 'completed');
  assert.equal(call.output, 'touched');
  assert.ok(!JSON.stringify(events).includes('second-call'), 'RS-24: the call beyond the budget has no client-visible event');
  assert.equal(terminal.max_tool_calls, 1);
  assert.deepEqual(mcp.touches(), ['touch {"marker":"first-call"}'], 'only the first call reached the MCP server');
  const stored = await get(troupe, terminal.id);
  assert.deepEqual(stored.json.output, terminal.output, 'the stored output has no trace of the hidden call');

  const reqs = await up.requests();
  assert.equal(reqs.length, 2, JSON.stringify(reqs.map(chat_texts)));
  assert.ok(chat_tool_names(reqs[0]).includes('mcp__fake__touch'), `round 1 offers the MCP tools: ${chat_tool_names(reqs[0])}`);
  const calls = chat_calls(reqs[1]);
  const results = chat_results(reqs[1]);
  assert.equal(calls.length, 2, `round 2 carries both calls: ${JSON.stringify(calls)}`);
  const hidden = calls.find((c) => c.arguments === '{"marker":"second-call"}');
  const shown = calls.find((c) => c.arguments === '{"marker":"first-call"}');
  assert.ok(hidden && shown, JSON.stringify(calls));
  assert.equal(results.find((r) => r.id === shown.id)?.output, 'touched');
  assert.equal(results.find((r) => r.id === hidden.id)?.output, '{"error":"Reached tool call limit of 1"}',
    `RS-24: the model is told the limit: ${JSON.stringify(results)}`);
  assert.ok(!chat_tool_names(reqs[1]).some((n) => n?.startsWith('mcp__')),
    `RS-24: once the budget is spent no gateway tool is offered: ${chat_tool_names(reqs[1])}`);
});

scenario('a gateway call whose arguments are not a JSON object, or to an MCP tool the request does not offer, never runs: its mcp_call ends failed, the model is told why, and no function_call or mcp__ name reaches the client (RS-25, RS-31)', async (s) => {
  // Issue 15 finding 13.
  const mcp = fake_mcp(s);
  const { up, troupe } = await gateway(s, { config: { mcp: { servers: [mcp.server] } } });
  await wait_mcp_ready(troupe, ['fake'], mcp_ready_timeout_ms);
  await up.script([
    { tool_calls: [
      { id: 'call_broken', name: 'mcp__fake__echo', arguments: '{"text": "hi"' },
      { id: 'call_unoffered', name: 'mcp__fake__touch', arguments: '{"marker":"unoffered"}' },
      { id: 'call_ghost', name: 'mcp__ghost__wipe', arguments: '{}' },
    ] },
    { content: 'Understood.' },
  ]);
  const tools = [{ type: 'mcp', server_label: 'fake', require_approval: 'never', allowed_tools: ['echo'] }];
  const res = await post(troupe, { input: 'Go.', tools });
  assert.equal(res.status, 200, res.text);
  const output = res.json.output;
  assert.deepEqual(output.map((i) => i.type), ['mcp_list_tools', 'mcp_call', 'mcp_call', 'mcp_call', 'message'], JSON.stringify(output));
  const [broken, unoffered, ghost] = output.slice(1, 4);
  for (const call of [broken, unoffered, ghost]) {
    assert.equal(call.status, 'failed', JSON.stringify(call));
    assert.equal(call.error?.type, 'mcp_protocol_error', JSON.stringify(call));
  }
  assert.equal(broken.arguments, '{"text": "hi"', 'the item shows the arguments as the model gave them');
  assert.match(broken.error.message, /^Invalid arguments for tool 'echo': arguments are not valid JSON: /, broken.error.message);
  assert.equal(unoffered.error.message, "Unknown tool 'touch' on MCP server 'fake'");
  assert.equal(ghost.error.message, "Unknown tool 'wipe' on MCP server 'ghost'");
  assert.ok(!res.text.includes('mcp__'), `RS-31: clients never see the model-facing names: ${res.text}`);
  assert.deepEqual(mcp.calls(), [], `no call reached the MCP server:\n${mcp.describe()}`);
  assert.deepEqual(mcp.touches(), []);

  const reqs = await up.requests();
  assert.equal(reqs.length, 2, 'the model is asked again, with the errors');
  const results = chat_results(reqs[1]);
  const said = (id) => results.find((r) => r.id === id)?.output ?? ''; // gateway calls go upstream under their item ids
  assert.match(said(broken.id), /"error":.*Invalid arguments for tool 'echo': arguments are not valid JSON/, JSON.stringify(results));
  assert.match(said(unoffered.id), /"error":.*Unknown tool 'touch'/, JSON.stringify(results));
  assert.match(said(ghost.id), /"error":.*Unknown tool 'wipe'/, JSON.stringify(results));
});

scenario('a call that needs approval but whose arguments are not JSON is not put to the client and never runs, nor does an approved request carrying such arguments (RS-33, RS-25)', async (s) => {
  // Issue 15 finding 13: an approved call ran with {} instead of the arguments shown.
  const mcp = fake_mcp(s);
  const { up, troupe } = await gateway(s, { config: { mcp: { servers: [mcp.server] } } });
  await wait_mcp_ready(troupe, ['fake'], mcp_ready_timeout_ms);
  await up.script([
    { tool_calls: [{ id: 'call_touch', name: 'mcp__fake__touch', arguments: '{"marker":' }] },
    { content: 'It could not run.' },
    { content: 'Nothing ran.' },
  ]);
  const tools = [{ type: 'mcp', server_label: 'fake', require_approval: 'always' }];
  const first = await post(troupe, { input: 'Touch.', tools });
  assert.equal(first.status, 200, first.text);
  assert.deepEqual(first.json.output.map((i) => i.type), ['mcp_list_tools', 'mcp_call', 'message'], first.text);
  const call = first.json.output[1];
  assert.equal(call.status, 'failed');
  assert.equal(call.arguments, '{"marker":');
  assert.match(call.error.message, /arguments are not valid JSON/);

  const second = await post(troupe, {
    previous_response_id: first.json.id, tools,
    input: [
      { type: 'mcp_approval_request', id: 'mcpr_client_made', server_label: 'fake', name: 'touch', arguments: '{"marker":' },
      { type: 'mcp_approval_response', approval_request_id: 'mcpr_client_made', approve: true },
    ],
  });
  assert.equal(second.status, 200, second.text);
  const approved = second.json.output.find((i) => i.type === 'mcp_call');
  assert.ok(approved, second.text);
  assert.equal(approved.approval_request_id, 'mcpr_client_made');
  assert.equal(approved.status, 'failed', JSON.stringify(approved));
  assert.match(approved.error.message, /arguments are not valid JSON/);
  assert.deepEqual(mcp.calls(), [], `no call reached the MCP server:\n${mcp.describe()}`);
  assert.deepEqual(mcp.touches(), []);
});

scenario('an upstream 4xx on round 2 (after a gateway call) is a 502 server_error for a non-streaming client, not a 400 (RS-43)', async (s) => {
  const mcp = fake_mcp(s);
  const { up, troupe } = await gateway(s, { config: { mcp: { servers: [mcp.server] } } });
  await wait_mcp_ready(troupe, ['fake'], mcp_ready_timeout_ms);
  await up.script([
    { tool_calls: [{ id: 'call_echo', name: 'mcp__fake__echo', arguments: '{"text":"hello"}' }] },
    { status: 400, message: 'round two is refused' },
  ]);
  const res = await post(troupe, { input: 'Echo.', tools: [{ type: 'mcp', server_label: 'fake', require_approval: 'never' }] });
  assert_error(res, 502, {}, 'round-2 upstream 400:');
  assert.equal((await up.requests()).length, 2);
});

scenario('a response whose upstream calls a gateway tool in each of 10 rounds runs all 10 calls, asks no 11th round and ends incomplete max_tool_rounds; a continuation from it is well-formed (RS-23)', async (s) => {
  const mcp = fake_mcp(s);
  const { up, troupe } = await gateway(s, { config: { mcp: { servers: [mcp.server] } } });
  await wait_mcp_ready(troupe, ['fake'], mcp_ready_timeout_ms);
  const rounds = Array.from({ length: 10 }, (_, i) => ({
    tool_calls: [{ id: `call_round_${i + 1}`, name: 'mcp__fake__echo', arguments: JSON.stringify({ text: `round ${i + 1}` }) }],
  }));
  await up.script([...rounds, { content: 'Continued after the cap.' }], { content: 'a round too many' });
  const tools = [{ type: 'mcp', server_label: 'fake', require_approval: 'never' }];

  const res = await post(troupe, { input: 'Echo forever.', tools });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.status, 'incomplete', res.text);
  assert.deepEqual(res.json.incomplete_details, { reason: 'max_tool_rounds' });
  const calls = res.json.output.filter((i) => i.type === 'mcp_call');
  assert.equal(calls.length, 10, 'RS-23: round 10\'s call is executed and recorded too');
  calls.forEach((c, i) => {
    assert.equal(c.status, 'completed');
    assert.equal(c.output, `round ${i + 1}`);
  });
  assert.equal((await up.requests()).length, 10, 'RS-23: no 11th round');

  const next = await post(troupe, { input: 'Go on.', previous_response_id: res.json.id, tools });
  assert.equal(next.status, 200, `RS-23: a continuation from it is well-formed: ${next.text}`);
  assert.equal(next.json.status, 'completed', next.text);
  const reqs = await up.requests();
  assert.equal(reqs.length, 11);
  const up_calls = chat_calls(reqs[10]);
  const up_results = chat_results(reqs[10]);
  assert.equal(up_calls.length, 10, JSON.stringify(up_calls));
  assert.deepEqual(up_results.map((r) => r.id), up_calls.map((c) => c.id), 'every call has its output');
  assert.deepEqual(up_results.map((r) => r.output), calls.map((c) => c.output));
  assert.equal(chat_texts(reqs[10]).at(-1), 'user: Go on.');
});

scenario('a running MCP call is sent notifications/cancelled within 1 s when a foreground streaming client disconnects (nothing stored) and when a background response is cancelled (its mcp_call closed incomplete) (RS-42, RS-9)', async (s) => {
  const mcp = fake_mcp(s);
  const { up, troupe } = await gateway(s, { config: { mcp: { servers: [mcp.server] } } });
  await wait_mcp_ready(troupe, ['fake'], mcp_ready_timeout_ms);
  const tools = [{ type: 'mcp', server_label: 'fake', require_approval: 'never' }];
  const hang_round = { tool_calls: [{ id: 'call_hang', name: 'mcp__fake__hang', arguments: '{}' }] };

  // Waits for the n-th tools/call hang to reach the server, then for its cancellation after `act`.
  async function cancelled_within_1s(n, act, what) {
    const call = await until(() => mcp.calls().filter((c) => c.tool === 'hang')[n - 1],
      { timeout_ms: 10_000, message: `tools/call hang #${n} to reach the server` });
    const t0 = performance.now();
    await act();
    try {
      await until(() => mcp.cancellations().some((p) => JSON.stringify(p.requestId) === JSON.stringify(call.id)),
        { timeout_ms: 1000, interval_ms: 5, message: `notifications/cancelled for request ${JSON.stringify(call.id)} (${what})` });
    } catch (err) {
      err.message += `\n${mcp.describe()}`;
      throw err;
    }
    s.t.diagnostic(`${what} → notifications/cancelled in ${(performance.now() - t0).toFixed(1)} ms`);
  }

  await part(s, 'a foreground streaming client that disconnects during the call gets the call cancelled and nothing stored (RS-42)', async () => {
    await up.script([hang_round, { content: 'never asked' }]);
    const st = await stream_create(troupe, { input: 'Hang.', tools });
    assert.equal(st.status, 200);
    const id = (await st.wait_for((f) => f.json?.type === 'response.created')).json.response.id;
    await cancelled_within_1s(1, () => st.abort(), 'disconnect');
    assert.equal((await get(troupe, id)).status, 404, 'RS-42: nothing stored');
  });

  await part(s, 'cancelling a background response during the call cancels it, and the cancelled object closes the mcp_call incomplete (RS-9)', async () => {
    await up.script([hang_round, { content: 'never asked' }]);
    const bg = await post(troupe, { input: 'Hang in the background.', tools, background: true });
    assert.equal(bg.status, 200, bg.text);
    let cancel;
    await cancelled_within_1s(2, async () => {
      cancel = await troupe.request('POST', `/v1/responses/${bg.json.id}/cancel`);
    }, 'cancel');
    assert.equal(cancel.status, 200, cancel.text);
    assert.equal(cancel.json.status, 'cancelled', cancel.text);
    const call = cancel.json.output.find((i) => i.type === 'mcp_call');
    assert.ok(call, `the started call is in the output: ${cancel.text}`);
    assert.equal(call.status, 'incomplete', `RS-9: the open call is closed incomplete: ${JSON.stringify(call)}`);
    const stored = await get(troupe, bg.json.id);
    assert.deepEqual(stored.json, cancel.json, 'the stored object is the one cancel returned');
  });
  assert.equal((await up.requests()).length, 2, 'no round after a cancelled call');
});

scenario('a response stream that waits on a slow upstream carries ": keepalive" comments every service.sse_heartbeat_seconds (RS-35)', async (s) => {
  const { up, troupe } = await gateway(s, { config: { service: { sse_heartbeat_seconds: 0.1 } } });
  await up.script([{ content: 'Late but here.', delay_ms: 1500 }]);
  const st = await stream_create(troupe, { input: 'Take your time.' });
  const { frames } = await st.finished;
  const first_item = frames.findIndex((f) => f.json?.type === 'response.output_item.added');
  assert.ok(first_item > 0, frames.map((f) => f.raw).join('\n\n'));
  const keepalives = frames.slice(0, first_item).filter((f) => f.event === undefined && f.comment === 'keepalive');
  assert.ok(keepalives.length >= 3, `keepalive comments while the upstream is silent for 1.5 s: ${frames.map((f) => f.raw).join('\n\n')}`);
  assert.ok(keepalives.every((f) => f.data === undefined), 'a keepalive is a comment only');
  assert.equal(frames.filter((f) => f.event !== undefined).at(-1).json.type, 'response.completed');
});

scenario('an MCP server whose tools cannot be listed fails the response: mcp_list_tools.failed, the list item carries its error and the response fails "Error retrieving tool list from MCP server: \'<label>\'." without an upstream call (RS-32, RS-43)', async (s) => {
  const broken = {
    name: 'broken', command: process.execPath, args: ['-e', 'process.exit(1)'], transport: 'stdio', isolation: 'shared',
  };
  const { up, troupe } = await gateway(s, { config: { mcp: { servers: [broken] } } });
  await until(async () => {
    const ready = await troupe.request('GET', '/ready');
    const v = ready.json?.mcp?.servers?.find((x) => x.name === 'broken');
    return v && v.alive === false;
  }, { timeout_ms: 30_000, message: 'the broken server to be reported down' });
  const message = "Error retrieving tool list from MCP server: 'broken'.";
  const tools = [{ type: 'mcp', server_label: 'broken', require_approval: 'never' }];

  const st = await stream_create(troupe, { input: 'List them.', tools });
  assert.equal(st.status, 200);
  const events = await finished_events(st, 'the stream');
  assert_contiguous(events, 0, 'the stream');
  const terminal = assert_one_terminal(events, 'response.failed', 'the stream').response;
  assert_folds_to_terminal(events, 'the stream');
  assert.equal(terminal.error?.message, message, JSON.stringify(terminal.error));
  assert.equal(terminal.error.code, 'server_error');
  const list = terminal.output.find((i) => i.type === 'mcp_list_tools');
  assert.ok(list && list.error, `the list item carries the error: ${JSON.stringify(terminal.output)}`);
  assert.equal(list.server_label, 'broken');
  assert.ok(events.some((e) => e.json.type === 'response.mcp_list_tools.failed' && e.json.item_id === list.id),
    `RS-32: response.mcp_list_tools.failed: ${types(events)}`);
  assert.equal((await get(troupe, terminal.id)).json.status, 'failed', 'stored as failed');

  const res = await post(troupe, { input: 'List them.', tools });
  assert_error(res, 500, { message }, 'non-streaming:');
  assert.equal((await up.requests()).length, 0, 'no upstream round without the tool list');
});

scenario('GET /v1/models lists the configured model as an OpenAI model object with a creation time (RS-13)', async (s) => {
  const { troupe } = await gateway(s);
  const before = Math.floor(Date.now() / 1000);
  const res = await troupe.request('GET', '/v1/models');
  assert.equal(res.status, 200);
  assert.equal(res.json.object, 'list');
  assert.equal(res.json.data.length, 1);
  const [m] = res.json.data;
  assert.deepEqual(Object.keys(m).sort(), ['created', 'id', 'object', 'owned_by']);
  assert.equal(m.id, model);
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'troupe');
  assert.ok(Number.isInteger(m.created) && m.created > 1_700_000_000 && m.created <= before + 1, `created is an epoch time: ${m.created}`);
});
