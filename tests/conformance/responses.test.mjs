// Conformance: troupe's OpenAI Responses API gateway (docs: the Responses spec, RS-n) driven by the
// official `openai` Node SDK, pinned in package.json, against the fake upstream
// (tests/fake_upstream/fake_upstream.mjs). Every gateway test runs once per upstream adapter
// (`model.protocol` chat_completions and responses, RS-45..RS-48): the fake speaks both, from the
// same scripted reply objects, so each behaviour is checked through both adapters.
//
// The first tests need no troupe: they point the SDK straight at the fake upstream, proving that the
// fake's Responses streams are what the SDK accepts (so a failure in a gateway test is troupe's).
//
// Needs `npm ci` in tests/conformance (scripts/test does it) and TROUPE_BIN (see the integration
// harness, which this file reuses).
import assert from 'node:assert/strict';
import { package_bin } from './packages.mjs';
import { start_http_mcp_server } from './http_mcp_child.mjs';
import OpenAI, {
  APIConnectionError, APIError, BadRequestError, InternalServerError, NotFoundError, OpenAIError, RateLimitError,
} from 'openai';
import {
  scenario, open_sse, until, upstream_config, wait_mcp_ready,
} from '../integration/harness.mjs';


const model = 'fake-model';
const protocols = ['chat_completions', 'responses'];
const sdk_timeout_ms = 60_000;
const mcp_ready_timeout_ms = 60_000;


const everything_bin = package_bin('@modelcontextprotocol/server-everything');
const everything_server = {
  name: 'everything', command: process.execPath, args: [everything_bin, 'stdio'], transport: 'stdio', isolation: 'shared',
};

// ---------------------------------------------------------------------------------------------
// Helpers

function sdk_client(base_url) {
  return new OpenAI({ baseURL: base_url, apiKey: 'test', maxRetries: 0, timeout: sdk_timeout_ms });
}

// A fake upstream, troupe serving it with `model.protocol` = protocol, and an SDK client on troupe.
async function gateway(s, protocol, config = {}) {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: { ...upstream_config(up, { protocol }), ...config } });
  return { up, troupe, client: sdk_client(`${troupe.url}/v1`) };
}

// The SDK adds convenience fields (output_text, output_parsed, parsed, parsed_arguments) to what it
// returns; this is the object as it came over the wire.
function wire(value) {
  const v = structuredClone(value);
  if (v && typeof v === 'object') {
    delete v.output_text;
    delete v.output_parsed;
    for (const item of Array.isArray(v.output) ? v.output : []) {
      delete item.parsed_arguments;
      for (const part of Array.isArray(item.content) ? item.content : []) delete part.parsed;
    }
  }
  return v;
}

async function collect(stream) {
  const events = [];
  for await (const e of stream) events.push(structuredClone(e));
  return events;
}

// Rejects with an SDK error of class `cls` carrying the RS-1 envelope fields given.
async function rejects_with(promise, cls, expected) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected the call to fail with ${cls.name}`);
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, expected.status, err.message);
  assert.equal(err.error?.type, expected.status >= 500 ? 'server_error' : 'invalid_request_error', `RS-1 type: ${JSON.stringify(err.error)}`);
  for (const k of ['message', 'code', 'param'])
    if (k in expected) assert.equal(err.error?.[k], expected[k], `error.${k}: ${JSON.stringify(err.error)}`);
  return err;
}

// RS-18: troupe-minted ids are <prefix><32 lowercase hex>.
const id_prefix = {
  message: 'msg_', reasoning: 'rs_', function_call: 'fc_', function_call_output: 'fco_', mcp_call: 'mcp_',
  mcp_list_tools: 'mcpl_', mcp_approval_request: 'mcpr_', mcp_approval_response: 'mcpa_', compaction: 'cmp_',
  web_search_call: 'ws_', file_search_call: 'fs_',
};
const minted = (prefix) => new RegExp(`^${prefix}[0-9a-f]{32}$`);
function assert_item_id(item) {
  const prefix = id_prefix[item.type];
  assert.ok(prefix, `known item type ${item.type}`);
  assert.match(item.id, minted(prefix), `RS-18: ${item.type} id`);
}

// RS-18: upstream ids (the fake's resp_up…, msg_up…, rs_up…, fc_up…, chatcmpl-fake…) never reach clients.
function assert_no_upstream_ids(value) {
  const text = JSON.stringify(value);
  assert.doesNotMatch(text, /\b(?:resp|msg|rs|fc)_up\d{4}/, 'RS-18: upstream item ids are re-minted');
  assert.ok(!text.includes('chatcmpl-fake'), 'RS-18: upstream completion ids are not exposed');
}

const text_of = (content) => {
  if (content === null || content === undefined) return null;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === 'string' ? p : p.text ?? p.refusal ?? '')).join('');
  return String(content);
};

const output_text = (response) => response.output
  .filter((i) => i.type === 'message')
  .flatMap((i) => i.content.filter((p) => p.type === 'output_text').map((p) => p.text))
  .join('');

// ---- what the upstream received, for either adapter ----

const is_chat = (req) => req.path.endsWith('/chat/completions');

function upstream_input(req) {
  if (typeof req.input === 'string') return [{ type: 'message', role: 'user', content: req.input }];
  return Array.isArray(req.input) ? req.input : [];
}

// The conversation messages the upstream saw, as [{role, text}] (tool calls and outputs left out).
// For the responses adapter `instructions` is a separate field; for chat it is the first system message.
function upstream_messages(req) {
  if (is_chat(req))
    return req.messages.filter((m) => m.role !== 'tool' && text_of(m.content)).map((m) => ({ role: m.role, text: text_of(m.content) }));
  return upstream_input(req)
    .filter((i) => (i.type ?? 'message') === 'message')
    .map((i) => ({ role: i.role, text: text_of(i.content) }));
}

function upstream_tool_calls(req) {
  if (is_chat(req)) {
    return req.messages.flatMap((m) => (m.tool_calls ?? []).map((c) => ({
      call_id: c.id, name: c.function?.name, arguments: c.function?.arguments,
    })));
  }
  return upstream_input(req).filter((i) => i.type === 'function_call')
    .map((i) => ({ call_id: i.call_id, name: i.name, arguments: i.arguments }));
}

function upstream_tool_results(req) {
  if (is_chat(req))
    return req.messages.filter((m) => m.role === 'tool').map((m) => ({ call_id: m.tool_call_id, output: text_of(m.content) }));
  return upstream_input(req).filter((i) => i.type === 'function_call_output')
    .map((i) => ({ call_id: i.call_id, output: text_of(i.output) }));
}

const upstream_tool_names = (req) => (req.tools ?? []).map((t) => (is_chat(req) ? t.function?.name : t.name));

function upstream_instructions(req) {
  if (!is_chat(req)) return req.instructions ?? null;
  const first = req.messages[0];
  return first && (first.role === 'system' || first.role === 'developer') ? text_of(first.content) : null;
}

// ---------------------------------------------------------------------------------------------
// RS-36/RS-37: the event-stream validator, for every live, replayed and synthesized stream.

const lifecycle_types = new Set([
  'response.created', 'response.queued', 'response.in_progress', 'response.completed', 'response.incomplete', 'response.failed',
]);
const terminal_types = new Set(['response.completed', 'response.incomplete', 'response.failed']);
// RS-36: the closed set, each item-scoped type with the item type it belongs to (null: decided by the part).
const item_event_family = new Map([
  ['response.content_part.added', null], ['response.content_part.done', null],
  ['response.output_text.delta', 'message'], ['response.output_text.done', 'message'],
  ['response.output_text.annotation.added', 'message'],
  ['response.refusal.delta', 'message'], ['response.refusal.done', 'message'],
  ['response.reasoning_text.delta', 'reasoning'], ['response.reasoning_text.done', 'reasoning'],
  ['response.reasoning_summary_part.added', 'reasoning'], ['response.reasoning_summary_part.done', 'reasoning'],
  ['response.reasoning_summary_text.delta', 'reasoning'], ['response.reasoning_summary_text.done', 'reasoning'],
  ['response.function_call_arguments.delta', 'function_call'], ['response.function_call_arguments.done', 'function_call'],
  ['response.mcp_call_arguments.delta', 'mcp_call'], ['response.mcp_call_arguments.done', 'mcp_call'],
  ['response.mcp_call.in_progress', 'mcp_call'], ['response.mcp_call.completed', 'mcp_call'], ['response.mcp_call.failed', 'mcp_call'],
  ['response.mcp_list_tools.in_progress', 'mcp_list_tools'], ['response.mcp_list_tools.completed', 'mcp_list_tools'],
  ['response.mcp_list_tools.failed', 'mcp_list_tools'],
  ['response.web_search_call.in_progress', 'web_search_call'], ['response.web_search_call.searching', 'web_search_call'],
  ['response.web_search_call.completed', 'web_search_call'],
  ['response.file_search_call.in_progress', 'file_search_call'], ['response.file_search_call.searching', 'file_search_call'],
  ['response.file_search_call.completed', 'file_search_call'],
]);
const allowed_types = new Set([
  ...lifecycle_types, 'response.output_item.added', 'response.output_item.done', ...item_event_family.keys(), 'error',
]);
const part_text_field = { output_text: 'text', refusal: 'refusal', reasoning_text: 'text' };
const delta_part_type = {
  'response.output_text': 'output_text', 'response.refusal': 'refusal', 'response.reasoning_text': 'reasoning_text',
};

// Checks a complete Responses event stream (payloads in order) against RS-36 and RS-37 and returns
// {terminal, items, types}: the terminal payload, the items as output_item.done carried them, and
// the event types. Options:
//   background  the stream of a background response: response.created says `queued`, then one response.queued
//   troupe      false for the fake upstream's own streams: skip troupe-only rules (RS-18 id shapes)
function check_response_stream(events, { background = false, troupe = true } = {}) {
  const where = (i) => `event ${i} of [${events.map((e) => e.type).join(', ')}]`;
  assert.ok(events.length >= 3, `a stream has at least created, in_progress and a terminal event: ${JSON.stringify(events)}`);

  // RS-36: known types; type and sequence_number everywhere; only `error` has a top-level error.
  // RS-37.1: sequence numbers 0, 1, 2, …
  events.forEach((e, i) => {
    assert.ok(allowed_types.has(e.type), `RS-36: ${e.type} is in the closed event set (${where(i)})`);
    assert.equal(e.sequence_number, i, `RS-37.1: sequence_number rises by 1 from 0 (${where(i)})`);
    if (e.type !== 'error') assert.ok(!('error' in e), `RS-35: only error payloads have a top-level error key (${where(i)})`);
  });

  // RS-37.2: response.created first (queued → one response.queued for background), in_progress once.
  const first = events[0];
  assert.equal(first.type, 'response.created', 'RS-37.2: the first event is response.created');
  assert.equal(first.response.status, background ? 'queued' : 'in_progress', 'RS-37.2: response.created status');
  assert.deepEqual(first.response.output, [], 'response.created carries no output yet');
  assert.equal(first.response.usage, null, 'RS-15: usage is null until terminal');
  let next = 1;
  if (background) {
    assert.equal(events[1].type, 'response.queued', 'RS-37.2: a background response.created is followed by one response.queued');
    next = 2;
  }
  assert.equal(events.filter((e) => e.type === 'response.queued').length, background ? 1 : 0, 'RS-37.2: response.queued count');
  assert.equal(events.filter((e) => e.type === 'response.in_progress').length, 1, 'RS-37.2: response.in_progress exactly once');
  const in_progress_at = events.findIndex((e) => e.type === 'response.in_progress');
  const first_item_at = events.findIndex((e) => !lifecycle_types.has(e.type));
  if (first_item_at >= 0 && first_item_at < events.length - 1)
    assert.ok(in_progress_at >= next && in_progress_at < first_item_at, 'RS-37.2: response.in_progress comes before any item event');
  for (const e of events.filter((x) => lifecycle_types.has(x.type))) {
    assert.equal(e.response.id, first.response.id, 'every lifecycle event names the same response');
    assert.equal(e.response.object, 'response');
  }

  // RS-37.3: exactly one terminal (or error) event, last.
  const last = events[events.length - 1];
  assert.ok(terminal_types.has(last.type) || last.type === 'error', `RS-37.3: the last event is terminal, not ${last.type}`);
  assert.equal(events.filter((e) => terminal_types.has(e.type) || e.type === 'error').length, 1, 'RS-37.3: one terminal event');

  // RS-37.4..6: items, parts and the fold.
  const items = [];
  let open = null;
  events.slice(next, -1).forEach((e, k) => {
    const i = k + next;
    if (lifecycle_types.has(e.type)) return;
    if (e.type === 'response.output_item.added') {
      assert.equal(open, null, `RS-37.4: at most one item is open at a time (${where(i)})`);
      assert.equal(e.output_index, items.length, `RS-37.4: output_index is dense (${where(i)})`);
      assert.ok(e.item && typeof e.item.id === 'string' && e.item.id, `output_item.added carries an item with an id (${where(i)})`);
      if (troupe) assert_item_id(e.item);
      if (e.item.type === 'reasoning') {
        assert.deepEqual(e.item.content, [], 'RS-37.5: a reasoning item is added with content:[]');
        assert.deepEqual(e.item.summary, [], 'RS-37.5: a reasoning item is added with summary:[]');
      }
      const folded = structuredClone(e.item);
      if ('content' in folded && !Array.isArray(folded.content)) folded.content = [];
      open = { index: e.output_index, added: e.item, folded, part: null, summary: null, done: null };
      items.push(open);
      return;
    }
    if (e.type === 'response.output_item.done') {
      assert.ok(open, `RS-37.4: output_item.done closes an open item (${where(i)})`);
      assert.equal(e.output_index, open.index, `RS-37.4: output_item.done for the open item (${where(i)})`);
      assert.equal(e.item.id, open.added.id, 'RS-37.4: added and done carry the same item.id');
      assert.equal(e.item.type, open.added.type, 'RS-37.4: added and done carry the same item.type');
      if (open.part !== null || open.summary !== null)
        assert.equal(e.item.status, 'incomplete', `a part is still open only when the item ends incomplete (${where(i)})`);
      // RS-37.6: what the deltas built is what the item holds.
      const f = open.folded;
      if (Array.isArray(f.content) && Array.isArray(e.item.content) && f.content.length) {
        assert.equal(e.item.content.length, f.content.length, `RS-37.6: the item has the parts that were streamed (${where(i)})`);
        f.content.forEach((p, n) => {
          const field = part_text_field[p.type];
          if (field) assert.equal(e.item.content[n][field], p[field], `RS-37.6: part ${n} text is the fold of its deltas (${where(i)})`);
        });
      }
      if (Array.isArray(f.summary) && f.summary.length)
        f.summary.forEach((p, n) => assert.equal(e.item.summary[n]?.text, p.text, 'RS-37.6: summary text is the fold of its deltas'));
      if (open.args_streamed)
        assert.equal(e.item.arguments, f.arguments, `RS-37.6: arguments are the fold of their deltas (${where(i)})`);
      open.done = e.item;
      open = null;
      return;
    }
    // Item-scoped events (RS-36, RS-37.4).
    assert.ok(open, `RS-37.4: ${e.type} belongs to an open item (${where(i)})`);
    assert.equal(e.output_index, open.index, `RS-37.4: ${e.type} output_index is the open item's (${where(i)})`);
    assert.equal(e.item_id, open.added.id, `RS-37.4: ${e.type} item_id is the id of the item at its output_index (${where(i)})`);
    const family = item_event_family.get(e.type) ?? (e.part?.type === 'reasoning_text' ? 'reasoning' : 'message');
    assert.equal(open.added.type, family, `RS-37.4: ${e.type} belongs to a ${family} item (${where(i)})`);
    const f = open.folded;
    const type = e.type;
    if (type === 'response.content_part.added') {
      assert.equal(open.part, null, `one part open at a time (${where(i)})`);
      assert.equal(e.content_index, f.content.length, `RS-37.5: content_index is dense (${where(i)})`);
      const field = part_text_field[e.part.type];
      assert.ok(field, `RS-36: part type ${e.part.type}`);
      assert.equal(e.part[field], '', 'a part is added empty');
      f.content.push(structuredClone(e.part));
      open.part = e.content_index;
    } else if (type === 'response.content_part.done') {
      assert.equal(e.content_index, open.part, `RS-37.5: content_part.done closes the open part (${where(i)})`);
      const field = part_text_field[e.part.type];
      assert.equal(e.part.type, f.content[e.content_index].type, 'the part keeps its type');
      assert.equal(e.part[field], f.content[e.content_index][field], `RS-37.6: the done part holds the fold of its deltas (${where(i)})`);
      f.content[e.content_index] = structuredClone(e.part);
      open.part = null;
    } else if (/\.(delta|done)$/.test(type) && delta_part_type[type.replace(/\.(delta|done)$/, '')]) {
      const want = delta_part_type[type.replace(/\.(delta|done)$/, '')];
      assert.equal(e.content_index, open.part, `RS-37.5: ${type} lies between its part's added and done (${where(i)})`);
      const part = f.content[e.content_index];
      assert.equal(part.type, want, `${type} targets a ${want} part`);
      const field = part_text_field[want];
      if (type.endsWith('.delta')) {
        assert.equal(typeof e.delta, 'string');
        part[field] += e.delta;
        if (want === 'output_text') assert.deepEqual(e.logprobs, [], 'RS-36: output_text.delta carries logprobs:[]');
      } else {
        const final = want === 'refusal' ? e.refusal : e.text;
        assert.equal(final, part[field], `RS-37.6: ${type} text is the fold of the deltas (${where(i)})`);
      }
    } else if (type === 'response.reasoning_summary_part.added') {
      f.summary ??= [];
      assert.equal(e.summary_index, f.summary.length, 'RS-37.5: summary_index is dense');
      f.summary.push({ type: 'summary_text', text: '' });
      open.summary = e.summary_index;
    } else if (type === 'response.reasoning_summary_part.done') {
      assert.equal(e.summary_index, open.summary, 'summary part done closes the open summary part');
      assert.equal(e.part.text, f.summary[e.summary_index].text, 'RS-37.6: summary part text is the fold');
      open.summary = null;
    } else if (type === 'response.reasoning_summary_text.delta') {
      assert.equal(e.summary_index, open.summary, 'RS-37.5: summary deltas lie inside their part');
      f.summary[e.summary_index].text += e.delta;
    } else if (type === 'response.reasoning_summary_text.done') {
      assert.equal(e.text, f.summary[e.summary_index].text, 'RS-37.6: summary text is the fold');
    } else if (type === 'response.function_call_arguments.delta' || type === 'response.mcp_call_arguments.delta') {
      assert.equal(typeof e.delta, 'string');
      f.arguments = (f.arguments ?? '') + e.delta;
      open.args_streamed = true;
    } else if (type === 'response.function_call_arguments.done' || type === 'response.mcp_call_arguments.done') {
      assert.equal(e.arguments, f.arguments ?? '', `RS-37.6: ${type} arguments are the fold of the deltas (${where(i)})`);
      if (type === 'response.function_call_arguments.done') assert.equal(e.name, f.name, 'function_call_arguments.done names the function');
      open.args_streamed = true;
    }
  });

  const terminal = last.type === 'error' ? null : last.response;
  if (terminal) {
    const expected_status = { 'response.completed': ['completed'], 'response.incomplete': ['incomplete', 'cancelled'], 'response.failed': ['failed'] }[last.type];
    assert.ok(expected_status.includes(terminal.status), `RS-41: ${last.type} carries status ${terminal.status}`);
    if (terminal.status === 'completed' || terminal.status === 'incomplete' || terminal.status === 'cancelled') {
      assert.equal(open, null, 'RS-37.4: every added item has its done before the terminal event');
      // RS-37.6: folding the events reproduces the terminal output exactly.
      assert.deepEqual(terminal.output, items.map((it) => it.done), 'RS-37.6: the fold of the events is the terminal output');
    }
    if (troupe) assert.ok(terminal.usage, 'RS-15: the terminal object carries usage');
  }
  return { terminal, items: items.map((it) => it.done ?? it.folded), types: events.map((e) => e.type) };
}

// RS-35: one SSE body's frames: `event:` = data.type, one-line JSON data, no [DONE]; returns payloads.
function check_sse_framing(frames) {
  const payloads = [];
  for (const f of frames) {
    if (f.data === undefined) continue; // `: keepalive` comments
    assert.notEqual(f.data, '[DONE]', 'RS-35: no data: [DONE]');
    assert.ok(f.json, `RS-35: data is one JSON object: ${f.raw}`);
    assert.equal(f.event, f.json.type, 'RS-35: event: equals data.type');
    assert.ok(!f.data.includes('\n'), 'RS-35: data is one line');
    payloads.push(f.json);
  }
  return payloads;
}

// The fake's reply, piece by piece, as the deltas troupe must relay one to one (RS-38).
function pieces(text, size) {
  const out = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

const weather_tool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
};

// ---------------------------------------------------------------------------------------------
// Fake upstream self-checks (no troupe).

scenario('the fake upstream\'s /v1/responses stream is accepted by the openai SDK: responses.stream(...).finalResponse() and responses.create({stream:true}) (fake upstream self-check)', async (s) => {
  const up = await s.upstream();
  const client = sdk_client(up.base_url);
  const reply = {
    reasoning: 'The user wants the weather.',
    content: 'Let me look that up.',
    tool_calls: [{ id: 'call_fake_1', name: 'get_weather', arguments: '{"city":"Paris"}' }],
    chunk_size: 4,
    usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21, completion_tokens_details: { reasoning_tokens: 4 } },
  };
  await up.script([reply, reply, { content: 'plain', usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }]);

  // The stream helper: it validates every event against its accumulated snapshot.
  const helper = client.responses.stream({ model, input: 'weather in Paris?', tools: [weather_tool] });
  const helper_events = await collect(helper);
  const final = await helper.finalResponse();
  const checked = check_response_stream(helper_events, { troupe: false });
  assert.equal(final.status, 'completed');
  assert.deepEqual(final.output.map((i) => i.type), ['reasoning', 'message', 'function_call']);
  assert.equal(final.output[0].content[0].text, reply.reasoning);
  assert.equal(final.output_text, reply.content, 'the SDK derives output_text from the message');
  assert.equal(final.output[2].call_id, 'call_fake_1');
  assert.equal(final.output[2].arguments, '{"city":"Paris"}');
  assert.deepEqual(wire(final).output, checked.terminal.output, 'finalResponse() is the terminal object');
  assert.deepEqual(final.usage, {
    input_tokens: 12, input_tokens_details: { cached_tokens: 0 }, output_tokens: 9,
    output_tokens_details: { reasoning_tokens: 4 }, total_tokens: 21,
  }, 'chat-style usage is mapped to Responses usage');
  assert.match(final.id, /^resp_up/, 'the fake mints upstream-style ids');
  assert.match(final.output[1].id, /^msg_up/);
  assert.match(final.output[2].id, /^fc_up/);

  // The raw stream, as responses.create({stream:true}) yields it.
  const events = await collect(await client.responses.create({ model, input: 'again', stream: true }));
  const { types } = check_response_stream(events, { troupe: false });
  assert.deepEqual(types.slice(0, 5), [
    'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta',
  ]);
  assert.deepEqual(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta), pieces(reply.content, 4));
  assert.deepEqual(events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta), pieces('{"city":"Paris"}', 4));
  assert.equal(types[types.length - 1], 'response.completed');

  // Non-streaming: one JSON response object.
  const plain = await client.responses.create({ model, input: 'plain please' });
  assert.equal(plain.object, 'response');
  assert.equal(plain.status, 'completed');
  assert.equal(plain.output_text, 'plain');
  assert.equal(plain.usage.total_tokens, 4);

  // Both endpoints are recorded with their path.
  const reqs = await up.requests();
  assert.equal(reqs.length, 3);
  for (const r of reqs) assert.equal(r.path, '/v1/responses');
  assert.equal(reqs[0].stream, true);
  assert.equal(reqs[2].stream, undefined);
});

scenario('the fake upstream ends Responses streams incomplete for finish length/content_filter, can mimic vLLM, and streams chat reasoning_content before content with usage last (fake upstream self-check)', async (s) => {
  const up = await s.upstream();
  const client = sdk_client(up.base_url);
  await up.script([
    { content: 'cut sho', finish: 'length', chunk_size: 3 },
    { content: 'blocked', finish: 'content_filter' },
    { reasoning: 'vllm thinks', content: 'vllm says', done_marker: true, chunk_size: 5 },
    { reasoning: 'old vllm', content: 'x', reasoning_events: 'reasoning_part' },
    { reasoning: 'chat thinks', content: 'chat says', chunk_size: 5, usage: { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 } },
  ]);

  const cut = client.responses.stream({ model, input: 'long story' });
  const cut_events = await collect(cut);
  const cut_final = await cut.finalResponse();
  check_response_stream(cut_events, { troupe: false });
  assert.equal(cut_events[cut_events.length - 1].type, 'response.incomplete');
  assert.equal(cut_final.status, 'incomplete');
  assert.deepEqual(cut_final.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(cut_final.output[0].status, 'incomplete', 'the last item is cut');

  const filtered = await collect(await client.responses.create({ model, input: 'x', stream: true }));
  check_response_stream(filtered, { troupe: false });
  assert.deepEqual(filtered[filtered.length - 1].response.incomplete_details, { reason: 'content_filter' });

  // A trailing `data: [DONE]` (vLLM) is tolerated by the SDK.
  const vllm = client.responses.stream({ model, input: 'x' });
  check_response_stream(await collect(vllm), { troupe: false });
  assert.equal((await vllm.finalResponse()).output_text, 'vllm says');

  // response.reasoning_part.added is not an event the SDK knows: a gateway must translate it (RS-45).
  const old = client.responses.stream({ model, input: 'x' });
  await assert.rejects(collect(old), (err) => err instanceof OpenAIError && /Unhandled response stream event/.test(err.message),
    'the SDK stream helper rejects response.reasoning_part.added');

  // Chat: reasoning_content deltas first, then content, usage in the last chunk.
  const chunks = await collect(await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true },
  }));
  const deltas = chunks.filter((c) => c.choices.length).map((c) => c.choices[0].delta);
  assert.deepEqual(deltas.filter((d) => d.reasoning_content).map((d) => d.reasoning_content), pieces('chat thinks', 5));
  assert.deepEqual(deltas.filter((d) => d.content).map((d) => d.content), pieces('chat says', 5));
  const first_content = deltas.findIndex((d) => d.content);
  assert.ok(deltas.findLastIndex((d) => d.reasoning_content) < first_content, 'reasoning precedes content');
  assert.equal(chunks[chunks.length - 2].choices[0].finish_reason, 'stop');
  assert.deepEqual(chunks[chunks.length - 1].usage, { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 });

  const reqs = await up.requests();
  assert.deepEqual(reqs.map((r) => r.path), [...Array(4).fill('/v1/responses'), '/v1/chat/completions']);
  assert.equal((await fetch(`${up.url}/__requests?path=/v1/chat/completions`).then((r) => r.json())).length, 1);
});

// ---------------------------------------------------------------------------------------------
// troupe, once per upstream adapter.

for (const protocol of protocols) {
  const via = ` [${protocol} upstream]`;

  scenario(`responses.create answers a completed response whose one assistant message carries the scripted text, with resp_/msg_ ids, usage totals and the RS-15 fields (RS-4, RS-5, RS-15, RS-18, RS-19)${via}`, async (s) => {
    const { up, troupe, client } = await gateway(s, protocol);
    await up.script([{ content: 'OK', usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 } }]);
    const r = await client.responses.create({ model, input: 'Say OK' });

    assert.equal(r.object, 'response');
    assert.equal(r.status, 'completed', JSON.stringify(r));
    assert.match(r.id, minted('resp_'), 'RS-18: response id');
    assert.equal(r.model, model, 'RS-15: model as requested');
    assert.equal(r.background, false);
    assert.equal(r.error, null);
    assert.equal(r.incomplete_details, null);
    assert.equal(typeof r.created_at, 'number');
    assert.equal(typeof r.completed_at, 'number', 'RS-15: completed_at when completed');
    assert.equal(r.output.length, 1, JSON.stringify(r.output));
    const [msg] = r.output;
    assert_item_id(msg);
    assert.equal(msg.type, 'message');
    assert.equal(msg.role, 'assistant');
    assert.equal(msg.status, 'completed');
    assert.deepEqual(wire(r).output[0].content, [{ type: 'output_text', text: 'OK', annotations: [], logprobs: [] }], 'RS-17: message content');
    assert.equal(r.output_text, 'OK');
    assert.deepEqual(r.usage, {
      input_tokens: 9, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2,
      output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 11,
    }, 'RS-19: usage is the upstream call\'s, total = input + output');
    assert_no_upstream_ids(r);

    // RS-5, RS-15: the stored object over the wire: every field, no output_text, same content.
    const raw = await troupe.request('GET', `/v1/responses/${r.id}`);
    assert.equal(raw.status, 200, raw.text);
    for (const k of ['id', 'object', 'created_at', 'status', 'background', 'completed_at', 'error', 'incomplete_details',
      'instructions', 'max_output_tokens', 'max_tool_calls', 'metadata', 'model', 'output', 'parallel_tool_calls',
      'previous_response_id', 'conversation', 'reasoning', 'store', 'temperature', 'text', 'tool_choice', 'tools',
      'top_p', 'truncation', 'usage'])
      assert.ok(k in raw.json, `RS-15: the response object has ${k}`);
    assert.ok(!('output_text' in raw.json), 'RS-15: no output_text field on the wire');
    assert.deepEqual(raw.json, wire(r), 'RS-5: GET returns the object POST returned');
    assert.equal(raw.json.store, true);
    assert.deepEqual(raw.json.metadata, {});
    assert.deepEqual(raw.json.tools, []);

    // RS-45 / RS-47: what the upstream was sent.
    const reqs = await up.requests();
    assert.equal(reqs.length, 1);
    const [req] = reqs;
    assert.equal(req.model, model);
    assert.equal(req.stream, true, 'every round streams');
    assert.deepEqual(upstream_messages(req), [{ role: 'user', text: 'Say OK' }]);
    if (protocol === 'chat_completions') {
      assert.equal(req.path, '/v1/chat/completions', 'RS-47: {base_url}/chat/completions');
      assert.deepEqual(req.stream_options, { include_usage: true }, 'RS-47: stream_options.include_usage');
    } else {
      assert.equal(req.path, '/v1/responses', 'RS-45: {base_url}/responses');
      assert.equal(req.store, false, 'RS-45: store:false upstream');
    }
  });

  scenario(`responses.create({stream:true}) streams reasoning then message deltas as they arrive, and the stream passes the RS-37 validator (RS-35, RS-36, RS-37, RS-38, RS-48)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    const reasoning = 'The user asks for the answer; it is 42.';
    const content = 'The answer is 42.';
    await up.script([{ reasoning, content, chunk_size: 5, usage: { prompt_tokens: 20, completion_tokens: 15, total_tokens: 35, completion_tokens_details: { reasoning_tokens: 10 } } }]);
    const events = await collect(await client.responses.create({ model, input: 'What is the answer?', stream: true }));
    const { terminal, items, types } = check_response_stream(events);

    assert.equal(types[types.length - 1], 'response.completed');
    assert.equal(terminal.status, 'completed');
    assert.deepEqual(items.map((i) => i.type), ['reasoning', 'message'], 'reasoning first, then the message');
    const [rs, msg] = items;
    assert.deepEqual(rs.content, [{ type: 'reasoning_text', text: reasoning }], 'RS-17: reasoning content');
    assert.deepEqual(rs.summary, []);
    assert.equal(msg.content[0].text, content);
    // RS-48: the reasoning part is announced as a content_part with a reasoning_text part.
    const reasoning_part = events.find((e) => e.type === 'response.content_part.added' && e.item_id === rs.id);
    assert.deepEqual(reasoning_part?.part, { type: 'reasoning_text', text: '' });
    // RS-38: each upstream delta becomes one client delta, no re-chunking.
    assert.deepEqual(events.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta), pieces(reasoning, 5));
    assert.deepEqual(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta), pieces(content, 5));
    assert.deepEqual(terminal.usage, {
      input_tokens: 20, input_tokens_details: { cached_tokens: 0 }, output_tokens: 15,
      output_tokens_details: { reasoning_tokens: 10 }, total_tokens: 35,
    }, 'RS-19, RS-48: reasoning_tokens are carried over');
    assert_no_upstream_ids(events);
  });

  if (protocol === 'responses') {
    scenario(`vLLM-style upstream streams (response.reasoning_part.*, no part events, content:null, data: [DONE]) reach the SDK as content_part events with reasoning_text parts (RS-45, RS-37, RS-65)${via}`, async (s) => {
      const { up, client } = await gateway(s, protocol);
      await up.script([
        { reasoning: 'old vllm thinks', content: 'one', reasoning_events: 'reasoning_part', chunk_size: 4, done_marker: true },
        { reasoning: 'new vllm thinks', content: 'two', reasoning_events: 'none', reasoning_content_null: true, chunk_size: 4, done_marker: true },
      ]);
      for (const [reasoning, content] of [['old vllm thinks', 'one'], ['new vllm thinks', 'two']]) {
        const stream = client.responses.stream({ model, input: 'think' });
        const events = await collect(stream);
        const final = await stream.finalResponse();
        const { items } = check_response_stream(events);
        assert.ok(!events.some((e) => e.type.startsWith('response.reasoning_part')), 'RS-45: reasoning_part events are translated');
        const rs = items.find((i) => i.type === 'reasoning');
        assert.deepEqual(rs.content, [{ type: 'reasoning_text', text: reasoning }]);
        assert.ok(events.some((e) => e.type === 'response.content_part.added' && e.part.type === 'reasoning_text'), 'RS-45: a content_part with a reasoning_text part');
        assert.equal(final.output_text, content);
        assert.equal(final.status, 'completed');
      }
    });
  }

  scenario(`the responses.stream helper's finalResponse() equals the stored object responses.retrieve returns (RS-5, RS-38, RS-65)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    await up.script([{ reasoning: 'Short thought.', content: 'Helper text, streamed in pieces.', chunk_size: 6 }]);
    const stream = client.responses.stream({ model, input: 'Use the helper.' });
    const events = await collect(stream);
    const final = await stream.finalResponse();
    check_response_stream(events);
    assert.equal(final.status, 'completed');
    assert.equal(final.output_text, 'Helper text, streamed in pieces.');
    const stored = await client.responses.retrieve(final.id);
    assert.deepEqual(wire(final), wire(stored), 'RS-38: the streamed result is the stored object');
    assert.deepEqual(wire(final), events[events.length - 1].response, 'finalResponse() is the terminal payload');
  });

  scenario(`responses.retrieve returns the stored object and its stream replays the canonical events, starting_after N giving only the later ones through the terminal event (RS-6, RS-35, RS-44)${via}`, async (s) => {
    const { up, troupe, client } = await gateway(s, protocol);
    await up.script([{ reasoning: 'Replay me.', content: 'Replayed answer text.', chunk_size: 3 }]);
    const r = await client.responses.create({ model, input: 'Something to replay' });
    assert.equal(r.status, 'completed');
    assert.deepEqual(wire(await client.responses.retrieve(r.id)), wire(r), 'RS-5');

    // RS-44: the full canonical replay: valid, one delta per part carrying the full text.
    const all = await collect(await client.responses.retrieve(r.id, { stream: true }));
    const { terminal, types } = check_response_stream(all);
    assert.deepEqual(terminal, wire(r), 'RS-44: the replay ends with the stored object');
    assert.deepEqual(types, [
      'response.created', 'response.in_progress',
      'response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta', 'response.reasoning_text.done',
      'response.content_part.done', 'response.output_item.done',
      'response.output_item.added', 'response.content_part.added', 'response.output_text.delta', 'response.output_text.done',
      'response.content_part.done', 'response.output_item.done',
      'response.completed',
    ], 'RS-44: the canonical event sequence');
    assert.equal(all.find((e) => e.type === 'response.output_text.delta').delta, 'Replayed answer text.', 'RS-44: one delta with the full text');
    for (const e of all.filter((x) => x.type === 'response.output_item.added'))
      assert.equal(e.item.status ?? 'in_progress', 'in_progress', 'RS-44: items are added in_progress');

    // RS-6: starting_after N → exactly the events after N.
    const n = 4;
    const tail = await collect(await client.responses.retrieve(r.id, { stream: true, starting_after: n }));
    assert.deepEqual(tail, all.slice(n + 1), 'RS-6: the events with sequence_number > N, ending with the terminal event');
    assert.equal(tail[0].sequence_number, n + 1);
    assert.equal(tail[tail.length - 1].type, 'response.completed');

    // RS-65: the SDK stream helper accepts the replay, whole or resumed.
    for (const params of [{ response_id: r.id }, { response_id: r.id, starting_after: n }]) {
      const helper = client.responses.stream(params);
      const seen = await collect(helper);
      assert.deepEqual(seen.map((e) => e.sequence_number), all.slice((params.starting_after ?? -1) + 1).map((e) => e.sequence_number));
      assert.deepEqual(wire(await helper.finalResponse()), wire(r), `RS-65: responses.stream(${JSON.stringify(params)}) yields the stored object`);
    }

    // RS-35 framing and RS-44 byte-identical replays, read raw.
    const read_raw = async (query) => {
      const sse = await open_sse(`${troupe.url}/v1/responses/${r.id}?stream=true${query}`, { method: 'GET' });
      assert.equal(sse.status, 200);
      assert.match(String(sse.headers['content-type']), /^text\/event-stream/);
      assert.equal(sse.headers['cache-control'], 'no-cache', 'RS-35: Cache-Control: no-cache');
      const { frames } = await sse.finished;
      return frames;
    };
    const raw1 = await read_raw('');
    const raw2 = await read_raw('');
    assert.deepEqual(check_sse_framing(raw1), all);
    const data_lines = (frames) => frames.filter((f) => f.data !== undefined).map((f) => f.raw).join('\n\n');
    assert.equal(data_lines(raw2), data_lines(raw1), 'RS-44: the same snapshot yields a byte-identical replay');
    // RS-6: N at or past the last sequence number → 200, empty stream.
    const none = await read_raw(`&starting_after=${all.length - 1}`);
    assert.deepEqual(check_sse_framing(none), []);
  });

  scenario(`previous_response_id continues the history: the upstream gets turn 1's user and assistant text and turn 2's input, no previous_response_id and not turn 1's instructions (RS-14, RS-20, RS-45, RS-47)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    await up.script([{ content: 'Nice to meet you, Ada.' }, { content: 'Your name is Ada.' }]);
    const r1 = await client.responses.create({ model, instructions: 'Answer in one sentence.', input: 'My name is Ada.' });
    assert.equal(r1.status, 'completed');
    assert.equal(r1.instructions, 'Answer in one sentence.');
    const r2 = await client.responses.create({ model, previous_response_id: r1.id, input: 'What is my name?' });
    assert.equal(r2.status, 'completed');
    assert.equal(r2.output_text, 'Your name is Ada.');
    assert.equal(r2.previous_response_id, r1.id, 'RS-15: previous_response_id is echoed');
    assert.equal(r2.instructions, null, 'RS-14: instructions are never inherited');

    const [q1, q2] = await up.requests();
    assert.equal(upstream_instructions(q1), 'Answer in one sentence.', 'RS-14: instructions are sent on the round');
    assert.deepEqual(upstream_messages(q1).filter((m) => m.role !== 'system'), [{ role: 'user', text: 'My name is Ada.' }]);
    assert.equal(upstream_instructions(q2), null, 'RS-14: turn 1\'s instructions are not sent on turn 2');
    assert.ok(!JSON.stringify(q2).includes('Answer in one sentence.'), 'turn 1\'s instructions appear nowhere in turn 2\'s request');
    assert.deepEqual(upstream_messages(q2), [
      { role: 'user', text: 'My name is Ada.' },
      { role: 'assistant', text: 'Nice to meet you, Ada.' },
      { role: 'user', text: 'What is my name?' },
    ], 'RS-20: the full history goes upstream');
    for (const k of ['previous_response_id', 'conversation', 'background', 'metadata', 'context_management'])
      assert.ok(!(k in q2), `RS-45/RS-47: ${k} is never forwarded: ${JSON.stringify(q2)}`);
    if (protocol === 'responses') {
      assert.equal(q2.store, false, 'RS-45: store:false');
      assert.equal(q2.stream, true);
    }
  });

  scenario(`a client function tool round trip: the call comes back with its call_id and exact arguments, a continuation without its output is rejected, and function_call_output reaches the upstream (RS-17, RS-22, RS-28, RS-38, RS-47)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    const args = '{"city":"Paris","unit":"celsius"}';
    await up.script([
      { tool_calls: [{ id: 'call_weather_1', name: 'get_weather', arguments: args }], chunk_size: 3 },
      { content: 'It is 21 °C in Paris.' },
    ]);
    const events = await collect(await client.responses.create({ model, input: 'Weather in Paris?', tools: [weather_tool], stream: true }));
    const { terminal: r1 } = check_response_stream(events);
    assert.equal(r1.status, 'completed', 'RS-28: a response ending with client calls is completed');
    assert.equal(r1.output.length, 1, JSON.stringify(r1.output));
    const [fc] = r1.output;
    assert.equal(fc.type, 'function_call');
    assert_item_id(fc);
    assert.equal(fc.call_id, 'call_weather_1', 'RS-18: upstream call_ids are kept');
    assert.equal(fc.name, 'get_weather');
    assert.equal(fc.arguments, args);
    assert.equal(fc.status, 'completed');
    assert.deepEqual(events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta), pieces(args, 3),
      'RS-38: each argument fragment is relayed as it arrives');
    assert.equal(r1.tools.length, 1);
    assert.equal(r1.tools[0].type, 'function');
    assert.equal(r1.tools[0].name, 'get_weather', 'RS-15: tools echo the client\'s');

    // RS-28 (a): the call needs its output.
    await rejects_with(client.responses.create({ model, previous_response_id: r1.id, input: 'Any news?', tools: [weather_tool] }),
      BadRequestError, { status: 400, code: null, param: 'input', message: 'No tool output found for function call call_weather_1.' });
    assert.equal((await up.requests()).length, 1, 'RS-28: the check happens before any upstream call');

    const r2 = await client.responses.create({
      model, previous_response_id: r1.id, tools: [weather_tool],
      input: [{ type: 'function_call_output', call_id: 'call_weather_1', output: '{"temp_c":21}' }],
    });
    assert.equal(r2.status, 'completed');
    assert.equal(r2.output_text, 'It is 21 °C in Paris.');

    const reqs = await up.requests();
    assert.equal(reqs.length, 2);
    assert.deepEqual(upstream_tool_names(reqs[0]), ['get_weather'], 'the function tool is offered upstream');
    if (protocol === 'chat_completions') {
      const tool = reqs[0].tools[0];
      assert.equal(tool.type, 'function');
      assert.deepEqual(tool.function.parameters, weather_tool.parameters, 'RS-47: parameters are rendered');
    }
    assert.deepEqual(upstream_tool_calls(reqs[1]), [{ call_id: 'call_weather_1', name: 'get_weather', arguments: args }],
      'the call is in the history');
    assert.deepEqual(upstream_tool_results(reqs[1]), [{ call_id: 'call_weather_1', output: '{"temp_c":21}' }],
      'RS-28, RS-47: the tool result reaches the upstream (chat: role tool; responses: function_call_output)');
    assert.deepEqual(upstream_messages(reqs[1])[0], { role: 'user', text: 'Weather in Paris?' });
  });

  scenario(`an MCP tool on a configured stdio server (the reference everything server) is listed, called by the gateway and its output fed back upstream, with no mcp__ name ever shown to the client (RS-30, RS-31, RS-32, RS-34, RS-46, RS-65)${via}`, async (s) => {
    const { up, troupe, client } = await gateway(s, protocol, { mcp: { servers: [everything_server] } });
    await wait_mcp_ready(troupe, ['everything'], mcp_ready_timeout_ms);
    await up.script([
      { tool_calls: [{ id: 'call_echo_1', name: 'mcp__everything__echo', arguments: '{"message":"hi"}' }], chunk_size: 4 },
      { content: 'The server said hi.' },
    ]);
    const tools = [{ type: 'mcp', server_label: 'everything', require_approval: 'never' }];
    const stream = client.responses.stream({ model, input: 'Echo hi via MCP.', tools });
    const events = await collect(stream);
    const final = await stream.finalResponse();
    const { terminal, types } = check_response_stream(events);
    assert.equal(terminal.status, 'completed', JSON.stringify(terminal));
    assert.deepEqual(terminal.output.map((i) => i.type), ['mcp_list_tools', 'mcp_call', 'message']);
    const [list, call, msg] = terminal.output;

    // RS-32: the list item.
    assert_item_id(list);
    assert.equal(list.server_label, 'everything');
    assert.equal(list.error ?? null, null);
    const echo = list.tools.find((t) => t.name === 'echo');
    assert.ok(echo, `RS-32: the listed tools include echo: ${list.tools.map((t) => t.name)}`);
    assert.equal(typeof echo.input_schema, 'object', 'RS-17: tools carry input_schema');
    assert.ok(list.tools.every((t) => !t.name.startsWith('mcp__')), 'RS-31: listed under their own names');
    const list_added = events.find((e) => e.type === 'response.output_item.added' && e.item.type === 'mcp_list_tools');
    assert.deepEqual(list_added.item.tools, [], 'RS-32: added with tools:[]');

    // RS-34: the call item and its events.
    assert_item_id(call);
    assert.equal(call.server_label, 'everything');
    assert.equal(call.name, 'echo');
    assert.equal(call.arguments, '{"message":"hi"}');
    assert.match(call.output, /hi/);
    assert.equal(call.error, null);
    assert.equal(call.status, 'completed');
    assert.equal(call.approval_request_id ?? null, null);
    const call_events = types.filter((t, i) => events[i].item_id === call.id || events[i].item?.id === call.id);
    assert.equal(call_events[0], 'response.output_item.added');
    assert.equal(call_events[1], 'response.mcp_call.in_progress', 'RS-34: in_progress follows added');
    assert.ok(call_events.includes('response.mcp_call_arguments.delta'), 'RS-34: argument deltas');
    assert.deepEqual(call_events.slice(-3), ['response.mcp_call_arguments.done', 'response.mcp_call.completed', 'response.output_item.done'],
      `RS-34: the call's lifecycle: ${call_events.join(', ')}`);
    const call_added = events.find((e) => e.type === 'response.output_item.added' && e.item.id === call.id);
    assert.equal(call_added.item.arguments, '', 'RS-34: added with arguments ""');
    assert.ok(!types.some((t) => t.startsWith('response.function_call_arguments')), 'RS-34: the upstream function_call lifecycle is not forwarded');
    assert.equal(msg.content[0].text, 'The server said hi.');
    assert.equal(final.output_text, 'The server said hi.');

    // RS-15, RS-31, RS-65: the client's tools echoed, no mcp__ names anywhere the client sees.
    assert.equal(terminal.tools.length, 1);
    assert.equal(terminal.tools[0].type, 'mcp');
    assert.equal(terminal.tools[0].server_label, 'everything');
    assert.equal(terminal.tools[0].require_approval, 'never');
    assert.ok(!JSON.stringify(events).includes('mcp__'), 'RS-31: clients never see mcp__ names');
    assert.ok(!JSON.stringify(await client.responses.retrieve(terminal.id)).includes('mcp__'));
    assert_no_upstream_ids(events);

    // The upstream: offered mcp__everything__echo; round 2 carries the call and its output (RS-46).
    const reqs = await up.requests();
    assert.equal(reqs.length, 2);
    assert.ok(upstream_tool_names(reqs[0]).includes('mcp__everything__echo'), `RS-31: ${upstream_tool_names(reqs[0])}`);
    const [up_call] = upstream_tool_calls(reqs[1]);
    assert.equal(up_call?.name, 'mcp__everything__echo');
    assert.equal(up_call.arguments, '{"message":"hi"}');
    const [up_result] = upstream_tool_results(reqs[1]);
    assert.equal(up_result?.call_id, up_call.call_id, 'the output answers the call');
    assert.equal(up_result.call_id, call.id, 'RS-46: an mcp_call renders with call_id = its item id');
    assert.match(up_result.output, /Echo: hi/, 'the server\'s output reaches the upstream');
  });

  scenario(`an MCP server the request declares by server_url is reached over streamable HTTP with the request's authorization and headers, listed, called by the gateway, and its credentials are neither echoed nor stored (RS-30, RS-15, RS-32, RS-34)${via}`, async (s) => {
    const web = await start_http_mcp_server(s);
    const { up, troupe, client } = await gateway(s, protocol, { mcp: { allow_request_servers: true, allowed_hosts: ['127.0.0.1'] } });
    await up.script([
      { tool_calls: [{ id: 'call_echo_1', name: 'mcp__web__echo', arguments: '{"message":"hi"}' }], chunk_size: 4 },
      { content: 'The web server said hi.' },
    ]);
    const tools = [{ type: 'mcp', server_label: 'web', server_url: web.url, require_approval: 'never',
      authorization: 'tok-secret-123', headers: { 'X-Trace': 'trace-7' } }];
    const r = await client.responses.create({ model, input: 'Echo hi via the web server.', tools });
    assert.equal(r.status, 'completed', JSON.stringify(r));
    assert.deepEqual(r.output.map((i) => i.type), ['mcp_list_tools', 'mcp_call', 'message']);
    const [list, call] = r.output;
    assert.equal(list.server_label, 'web');
    assert.ok(list.tools.some((t) => t.name === 'echo'), `RS-32: ${JSON.stringify(list.tools)}`);
    assert.equal(call.name, 'echo');
    assert.equal(call.status, 'completed', JSON.stringify(call));
    assert.match(call.output, /hi/);
    assert.equal(r.output_text, 'The web server said hi.');

    // RS-30: every request troupe made carried the credentials; RS-15: the client never sees them again.
    const lines = web.stderr.split('\n').filter((l) => l.startsWith('POST '));
    assert.ok(lines.some((l) => l.includes('tools/call(echo)')), web.stderr);
    assert.ok(lines.every((l) => l.includes('authorization=Bearer tok-secret-123') && l.includes('x-trace=trace-7')), web.stderr);
    assert.deepEqual(Object.keys(r.tools[0]).filter((k) => k === 'authorization' || k === 'headers'), []);
    const stored = await client.responses.retrieve(r.id);
    assert.ok(!JSON.stringify(stored).includes('tok-secret-123'), 'RS-15: the stored response holds no credentials');
    const reqs = await up.requests();
    assert.ok(!JSON.stringify(reqs).includes('tok-secret-123'), 'the upstream never sees the MCP credentials');
    assert.ok(upstream_tool_names(reqs[0]).includes('mcp__web__echo'), `RS-31: ${upstream_tool_names(reqs[0])}`);
  });

  scenario(`a declared server_url is refused unless mcp.allow_request_servers is on and its host is in mcp.allowed_hosts, and an unreachable one fails the response's listing (RS-30, RS-32)${via}`, async (s) => {
    const web = await start_http_mcp_server(s);
    const closed = await start_http_mcp_server(s);
    const closed_url = closed.url;
    await closed.stop();
    const tools = (url) => [{ type: 'mcp', server_label: 'web', server_url: url, require_approval: 'never' }];
    {
      const { client } = await gateway(s, protocol);
      const e = await rejects_with(client.responses.create({ model, input: 'x', tools: tools(web.url) }), BadRequestError,
        { status: 400, param: 'tools[0].server_url', code: 'invalid_value' });
      assert.match(e.error.message, /mcp\.allow_request_servers/);
    }
    {
      const { client } = await gateway(s, protocol, { mcp: { allow_request_servers: true, allowed_hosts: ['mcp.example.com'] } });
      const e = await rejects_with(client.responses.create({ model, input: 'x', tools: tools(web.url) }), BadRequestError,
        { status: 400, param: 'tools[0].server_url', code: 'invalid_value' });
      assert.match(e.error.message, /mcp\.allowed_hosts/);
    }
    const { up, client } = await gateway(s, protocol, { mcp: { allow_request_servers: true } });
    const events = await collect(await client.responses.create({ model, input: 'x', tools: tools(closed_url), stream: true }));
    const { terminal, types } = check_response_stream(events);
    assert.equal(terminal.status, 'failed');
    assert.equal(terminal.error.message, "Error retrieving tool list from MCP server: 'web'.");
    assert.deepEqual(terminal.output.map((i) => i.type), ['mcp_list_tools']);
    assert.ok(terminal.output[0].error, 'RS-32: the list item carries the error');
    assert.ok(types.includes('response.mcp_list_tools.failed'), types.join(', '));
    assert.equal((await up.requests()).length, 0, 'no upstream round without the tool list');
  });

  scenario(`require_approval "always" ends turn 1 with an mcp_approval_request, and approving it runs the call first in turn 2 with its approval_request_id (RS-33, RS-46, RS-63)${via}`, async (s) => {
    const { up, troupe, client } = await gateway(s, protocol, { mcp: { servers: [everything_server] } });
    await wait_mcp_ready(troupe, ['everything'], mcp_ready_timeout_ms);
    await up.script([
      { tool_calls: [{ id: 'call_echo_2', name: 'mcp__everything__echo', arguments: '{"message":"approve me"}' }] },
      { content: 'Approved and echoed.' },
    ]);
    const tools = [{ type: 'mcp', server_label: 'everything', require_approval: 'always' }];
    const r1 = await client.responses.create({ model, input: 'Echo with approval.', tools });
    assert.equal(r1.status, 'completed', 'RS-22: an approval request is a client action; the response is completed');
    assert.deepEqual(r1.output.map((i) => i.type), ['mcp_list_tools', 'mcp_approval_request']);
    const request = r1.output[1];
    assert_item_id(request);
    assert.equal(request.server_label, 'everything');
    assert.equal(request.name, 'echo');
    assert.equal(request.arguments, '{"message":"approve me"}');
    assert.ok(!r1.output.some((i) => i.type === 'mcp_call'), 'RS-63: nothing ran');
    assert.equal((await up.requests()).length, 1);

    const r2 = await client.responses.create({
      model, previous_response_id: r1.id, tools,
      input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: true }],
    });
    assert.equal(r2.status, 'completed', JSON.stringify(r2));
    assert.equal(r2.output[0].type, 'mcp_call', `RS-63: the output starts with the approved call: ${JSON.stringify(r2.output)}`);
    const call = r2.output[0];
    assert_item_id(call);
    assert.equal(call.approval_request_id, request.id, 'RS-63: the call carries its approval_request_id');
    assert.equal(call.name, 'echo');
    assert.equal(call.server_label, 'everything');
    assert.match(call.output, /approve me/);
    assert.equal(call.error, null);
    assert.ok(!r2.output.some((i) => i.type === 'mcp_list_tools'), 'RS-32: the tool list is reused from the history');
    assert.equal(r2.output_text, 'Approved and echoed.');

    const reqs = await up.requests();
    assert.equal(reqs.length, 2, 'RS-63: the approved call runs before the first upstream round, without one of its own');
    const [up_call] = upstream_tool_calls(reqs[1]);
    assert.deepEqual(up_call, { call_id: request.id, name: 'mcp__everything__echo', arguments: '{"message":"approve me"}' },
      'RS-46: the approval request renders as the function call, call_id = the request id');
    const results = upstream_tool_results(reqs[1]);
    assert.equal(results.length, 1);
    assert.equal(results[0].call_id, request.id, 'RS-46: the approved call renders as its output only');
    assert.match(results[0].output, /Echo: approve me/);
    assert.ok(!JSON.stringify(r2).includes('mcp__'));
  });

  scenario(`responses.delete removes a response: deleted:true, retrieve 404, previous_response_id 400 previous_response_not_found, while its successor keeps the history (RS-2, RS-7, RS-57)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    await up.script([{ content: 'First answer.' }, { content: 'Second answer.' }, { content: 'Third answer.' }]);
    const a = await client.responses.create({ model, input: 'First question.' });
    const b = await client.responses.create({ model, previous_response_id: a.id, input: 'Second question.' });
    assert.equal(b.status, 'completed');

    const deleted = await client.responses.delete(a.id);
    assert.deepEqual(deleted, { id: a.id, object: 'response', deleted: true }, 'RS-7');
    await rejects_with(client.responses.retrieve(a.id), NotFoundError,
      { status: 404, code: null, message: `Response with id '${a.id}' not found.` });
    await rejects_with(client.responses.create({ model, previous_response_id: a.id, input: 'Again?' }), BadRequestError,
      { status: 400, code: 'previous_response_not_found', param: 'previous_response_id', message: `Previous response with id '${a.id}' not found.` });
    await rejects_with(client.responses.delete(a.id), NotFoundError, { status: 404 });

    // RS-57: continuing from B still sends A's turn upstream.
    const c = await client.responses.create({ model, previous_response_id: b.id, input: 'Third question.' });
    assert.equal(c.status, 'completed');
    const reqs = await up.requests();
    assert.equal(reqs.length, 3, 'the rejected continuation made no upstream call');
    assert.deepEqual(upstream_messages(reqs[2]), [
      { role: 'user', text: 'First question.' }, { role: 'assistant', text: 'First answer.' },
      { role: 'user', text: 'Second question.' }, { role: 'assistant', text: 'Second answer.' },
      { role: 'user', text: 'Third question.' },
    ]);
  });

  scenario(`responses.inputItems.list on turn 3 of a chain lists turn-1 input and output, turn-2 input and output and turn-3 input, and limit:2 paging visits each once (RS-8, RS-58)${via}`, async (s) => {
    const { up, troupe, client } = await gateway(s, protocol);
    await up.script([{ content: 'out one' }, { content: 'out two' }, { content: 'out three' }]);
    const r1 = await client.responses.create({ model, input: 'in one' });
    const r2 = await client.responses.create({ model, previous_response_id: r1.id, input: 'in two' });
    const r3 = await client.responses.create({ model, previous_response_id: r2.id, input: 'in three' });
    assert.equal(r3.status, 'completed');

    const page = await client.responses.inputItems.list(r3.id, { order: 'asc' });
    const shape = (i) => ({ type: i.type, role: i.role, text: text_of(i.content) });
    assert.deepEqual(page.data.map(shape), [
      { type: 'message', role: 'user', text: 'in one' },
      { type: 'message', role: 'assistant', text: 'out one' },
      { type: 'message', role: 'user', text: 'in two' },
      { type: 'message', role: 'assistant', text: 'out two' },
      { type: 'message', role: 'user', text: 'in three' },
    ], 'RS-8: full history, then this input, without its own output');
    for (const item of page.data) {
      assert_item_id(item);
      assert.equal(item.status, 'completed');
    }
    assert.deepEqual(page.data[0].content, [{ type: 'input_text', text: 'in one' }], 'RS-14: string input becomes input_text');
    assert.equal(page.data[1].id, r1.output[0].id, 'stored ids are kept');
    assert.equal(page.data[3].id, r2.output[0].id);
    assert.equal(page.body.has_more, false);
    assert.equal(page.body.first_id, page.data[0].id);
    assert.equal(page.body.last_id, page.data[4].id);
    const ids = page.data.map((i) => i.id);

    const desc = await client.responses.inputItems.list(r3.id);
    assert.deepEqual(desc.data.map((i) => i.id), [...ids].reverse(), 'RS-8: order defaults to desc');

    // RS-58: limit 2 with the SDK's `after` cursor.
    const pages = [];
    for await (const p of (await client.responses.inputItems.list(r3.id, { order: 'asc', limit: 2 })).iterPages()) {
      pages.push({ ids: p.data.map((i) => i.id), has_more: p.body.has_more });
      if (pages.length > 5) break;
    }
    assert.deepEqual(pages, [
      { ids: ids.slice(0, 2), has_more: true },
      { ids: ids.slice(2, 4), has_more: true },
      { ids: ids.slice(4), has_more: false },
    ], 'RS-58: each item once, ending has_more:false');
    const unknown = await troupe.request('GET', `/v1/responses/${r3.id}/input_items?after=msg_${'0'.repeat(32)}`);
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.json.error.param, 'after');
  });

  scenario(`conversations: create with items, list and add items, a response on the conversation sees them and appends its input and output, delete makes it 404 (RS-11, RS-12, RS-14)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    await up.script([{ content: 'The secret word is SAPPHIRE.' }]);
    const conv = await client.conversations.create({ items: [{ type: 'message', role: 'user', content: 'The secret word is SAPPHIRE.' }] });
    assert.match(conv.id, minted('conv_'), 'RS-18: conversation id');
    assert.equal(conv.object, 'conversation');
    assert.deepEqual(conv.metadata, {});

    const listed = await client.conversations.items.list(conv.id, { order: 'asc' });
    assert.equal(listed.data.length, 1);
    assert_item_id(listed.data[0]);
    assert.deepEqual({ ...listed.data[0], id: undefined }, {
      id: undefined, type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: 'The secret word is SAPPHIRE.' }],
    }, 'RS-12: string content normalized to input_text');

    const added = await client.conversations.items.create(conv.id, { items: [{ type: 'message', role: 'user', content: 'Remember it.' }] });
    assert.equal(added.object, 'list');
    assert.equal(added.data.length, 1);
    assert_item_id(added.data[0]);
    assert.equal(added.data[0].status, 'completed');

    const r = await client.responses.create({ model, conversation: conv.id, input: 'What is the secret word?' });
    assert.equal(r.status, 'completed');
    assert.deepEqual(r.conversation, { id: conv.id }, 'RS-14: conversation echoed as {id}');
    assert.equal(r.previous_response_id, null);
    const [req] = await up.requests();
    assert.deepEqual(upstream_messages(req), [
      { role: 'user', text: 'The secret word is SAPPHIRE.' },
      { role: 'user', text: 'Remember it.' },
      { role: 'user', text: 'What is the secret word?' },
    ], 'RS-14: the history is the conversation\'s items, then the input');

    const after = await client.conversations.items.list(conv.id, { order: 'asc' });
    assert.deepEqual(after.data.map((i) => ({ role: i.role, text: text_of(i.content) })), [
      { role: 'user', text: 'The secret word is SAPPHIRE.' },
      { role: 'user', text: 'Remember it.' },
      { role: 'user', text: 'What is the secret word?' },
      { role: 'assistant', text: 'The secret word is SAPPHIRE.' },
    ], 'RS-14: input and output are appended');
    assert.equal(after.data[3].id, r.output[0].id);

    const gone = await client.conversations.delete(conv.id);
    assert.deepEqual(gone, { id: conv.id, object: 'conversation.deleted', deleted: true }, 'RS-11');
    await rejects_with(client.conversations.retrieve(conv.id), NotFoundError,
      { status: 404, message: `Conversation with id '${conv.id}' not found.` });
    await rejects_with(client.conversations.items.list(conv.id), NotFoundError, { status: 404 });
    await rejects_with(client.responses.create({ model, conversation: conv.id, input: 'Still there?' }), NotFoundError, { status: 404 });
    const kept = await client.responses.retrieve(r.id);
    assert.deepEqual(wire(kept), wire(r), 'RS-11: stored responses keep their snapshots');
  });

  scenario(`a background response answers queued at once, cancel stops it within a second (upstream closed, open item incomplete), repeat cancel returns the same object, and the replay ends with response.incomplete status cancelled (RS-4, RS-9, RS-41, RS-59, RS-60)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    const slow = { content: 'slow '.repeat(200), chunk_size: 1, chunk_delay_ms: 20 };
    await up.script([slow, { content: 'quick' }, { content: 'foreground' }]);

    const t0 = Date.now();
    const r = await client.responses.create({ model, input: 'Take your time.', background: true });
    assert.ok(Date.now() - t0 < 1000, `RS-59: answered within 1 s (${Date.now() - t0} ms)`);
    assert.equal(r.status, 'queued', 'RS-4: background answers queued');
    assert.equal(r.background, true);
    assert.match(r.id, minted('resp_'));

    // RS-5: while it runs, GET shows the fold of its log: the open message with partial text.
    const running = await until(async () => {
      const v = await client.responses.retrieve(r.id);
      return v.status === 'in_progress' && v.output[0]?.content?.[0]?.text?.length > 0 && v;
    }, { timeout_ms: 15_000, interval_ms: 50, message: 'the background response in progress with partial text' });
    assert.equal(running.output[0].status, 'in_progress');
    assert.ok(await up.active() >= 1, 'the upstream request is open');

    const cancelled = await client.responses.cancel(r.id);
    const t1 = Date.now();
    assert.equal(cancelled.status, 'cancelled', 'RS-9');
    assert.equal(cancelled.id, r.id);
    assert.equal(cancelled.background, true);
    assert.equal(cancelled.output[0].type, 'message');
    assert.equal(cancelled.output[0].status, 'incomplete', 'RS-9: the open item is closed incomplete');
    assert.ok(cancelled.output[0].content[0].text.length > 0);
    await until(async () => (await up.active()) === 0, { timeout_ms: 1000, interval_ms: 20, message: 'the upstream connection closed (RS-60)' });
    assert.ok(Date.now() - t1 <= 1000);

    const again = await client.responses.cancel(r.id);
    assert.deepEqual(wire(again), wire(cancelled), 'RS-9: cancelling again returns the same object');
    assert.deepEqual(wire(await client.responses.retrieve(r.id)), wire(cancelled), 'the stored object is the cancelled one');

    // RS-41, RS-60: the replay ends with response.incomplete carrying status cancelled.
    const replay = await collect(await client.responses.retrieve(r.id, { stream: true }));
    const { terminal } = check_response_stream(replay, { background: true });
    const last = replay[replay.length - 1];
    assert.equal(last.type, 'response.incomplete');
    assert.equal(terminal.status, 'cancelled');
    assert.equal(terminal.incomplete_details, null, 'RS-41: incomplete_details null');
    assert.deepEqual(terminal, wire(cancelled));

    // RS-60: a completed background response cannot be cancelled; a foreground one never.
    const quick = await client.responses.create({ model, input: 'quick', background: true });
    const done = await until(async () => {
      const v = await client.responses.retrieve(quick.id);
      return v.status === 'completed' && v;
    }, { timeout_ms: 15_000, interval_ms: 50, message: 'the quick background response completed' });
    assert.equal(done.output_text, 'quick');
    await rejects_with(client.responses.cancel(quick.id), BadRequestError,
      { status: 400, code: null, message: 'Cannot cancel a completed response.' });
    const fg = await client.responses.create({ model, input: 'foreground' });
    await rejects_with(client.responses.cancel(fg.id), BadRequestError,
      { status: 400, code: null, message: 'Only responses created with background=true can be cancelled.' });
  });

  scenario(`responses.compact returns the history's user messages and one compaction item holding the summary, and its id continues a conversation whose upstream sees the summary instead of the old turns (RS-10, RS-50, RS-52)${via}`, async (s) => {
    const { up, troupe, client } = await gateway(s, protocol);
    const summary = 'User is planning a trip to Kyoto in April and wants a ryokan.';
    await up.script([
      { content: 'Kyoto in April is lovely.' },
      { content: 'I can suggest some ryokans.' },
      { content: summary, usage: { prompt_tokens: 50, completion_tokens: 14, total_tokens: 64 } },
      { content: 'You are going to Kyoto.' },
    ]);
    const r1 = await client.responses.create({ model, input: 'I am planning a trip to Kyoto in April.' });
    const r2 = await client.responses.create({ model, previous_response_id: r1.id, input: 'I want to stay in a ryokan.' });
    assert.equal(r2.status, 'completed');

    const body = { model, previous_response_id: r2.id };
    const c = typeof client.responses.compact === 'function'
      ? await client.responses.compact(body)
      : await client.post('/responses/compact', { body });
    assert.equal(c.object, 'response.compaction');
    assert.match(c.id, minted('resp_'), 'RS-18: compaction results are resp_ ids');
    assert.deepEqual(c.output.map((i) => ({ type: i.type, role: i.role, text: i.type === 'message' ? text_of(i.content) : i.encrypted_content })), [
      { type: 'message', role: 'user', text: 'I am planning a trip to Kyoto in April.' },
      { type: 'message', role: 'user', text: 'I want to stay in a ryokan.' },
      { type: 'compaction', role: undefined, text: summary },
    ], 'RS-52: the user messages, then one compaction item with the plaintext summary');
    for (const item of c.output) assert_item_id(item);
    const first_input = (await client.responses.inputItems.list(r2.id, { order: 'asc' })).data[0];
    assert.notEqual(c.output[0].id, first_input.id, 'RS-52: the user messages get new msg_ ids');
    assert.equal(c.usage.input_tokens, 50, 'RS-52: usage is the summary call\'s');
    assert.equal(c.usage.output_tokens, 14);
    assert.equal(c.usage.total_tokens, 64);

    const reqs = await up.requests();
    assert.equal(reqs.length, 3);
    assert.notEqual(reqs[2].stream, true, 'RS-52: one non-streaming summary call');
    assert.equal(upstream_tool_names(reqs[2]).length, 0, 'the summary call offers no tools');

    const stored = await troupe.request('GET', `/v1/responses/${c.id}`);
    assert.equal(stored.status, 200, `RS-52: the compaction result is stored: ${stored.text}`);
    assert.deepEqual(stored.json, wire(c));

    const r3 = await client.responses.create({ model, previous_response_id: c.id, input: 'Where am I going?' });
    assert.equal(r3.status, 'completed', 'RS-52: the compaction id is a valid previous_response_id');
    assert.equal(r3.output_text, 'You are going to Kyoto.');
    const q = (await up.requests())[3];
    assert.deepEqual(upstream_messages(q), [
      { role: 'user', text: 'I am planning a trip to Kyoto in April.' },
      { role: 'user', text: 'I want to stay in a ryokan.' },
      { role: 'assistant', text: summary },
      { role: 'user', text: 'Where am I going?' },
    ], 'RS-50: user messages, the summary as an assistant message, then the new input');
    assert.ok(!JSON.stringify(q).includes('"compaction"'), 'RS-50: upstreams never receive compaction items');
    assert.ok(!JSON.stringify(q).includes('Kyoto in April is lovely.'), 'RS-50: earlier assistant turns are dropped');
  });
}

// ---------------------------------------------------------------------------------------------
// Fields real clients read (issue 20, item 9).

for (const protocol of protocols) {
  const via = ` [${protocol} upstream]`;

  scenario(`tool_choice "none" keeps the tools upstream with tool_choice "none", and the response echoes both (RS-14, RS-15, RS-47)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    await up.script([{ content: 'No tools needed.' }]);
    const r = await client.responses.create({ model, input: 'Weather in Paris?', tools: [weather_tool], tool_choice: 'none' });
    assert.equal(r.status, 'completed', JSON.stringify(r));
    assert.equal(r.tool_choice, 'none', 'RS-15: tool_choice echoed');
    assert.deepEqual(r.tools.map((t) => t.name), ['get_weather'], 'RS-15: tools echoed');
    const [req] = await up.requests();
    assert.deepEqual(upstream_tool_names(req), ['get_weather'], 'the tools still reach the upstream');
    assert.equal(req.tool_choice, 'none', 'tool_choice passed through');
  });
}

scenario('the response object says reasoning {effort:null, summary:null} and temperature/top_p 1.0 when not requested, in create, stream events and retrieve, without sending them upstream (RS-15)', async (s) => {
  const { up, client } = await gateway(s, 'chat_completions');
  await up.script([{ content: 'one' }, { content: 'two' }, { content: 'three' }]);
  const defaults = { reasoning: { effort: null, summary: null }, temperature: 1, top_p: 1 };
  const pick = (o) => ({ reasoning: o.reasoning, temperature: o.temperature, top_p: o.top_p });

  const r = await client.responses.create({ model, input: 'hi' });
  assert.deepEqual(pick(r), defaults, 'create');
  assert.deepEqual(pick(await client.responses.retrieve(r.id)), defaults, 'retrieve');
  const events = await collect(await client.responses.create({ model, input: 'hi', stream: true }));
  check_response_stream(events);
  for (const e of events.filter((x) => x.response)) assert.deepEqual(pick(e.response), defaults, `${e.type}'s response`);
  const replay = await collect(await client.responses.retrieve(r.id, { stream: true }));
  for (const e of replay.filter((x) => x.response)) assert.deepEqual(pick(e.response), defaults, `replayed ${e.type}'s response`);
  for (const req of await up.requests()) {
    assert.ok(!('temperature' in req) && !('top_p' in req), 'defaults are not sent upstream');
    assert.ok(!('reasoning_effort' in req), 'no reasoning effort is sent upstream');
  }

  const given = await client.responses.create({ model, input: 'hi', temperature: 0.3, top_p: 0.5, reasoning: { effort: 'low' } });
  assert.deepEqual(pick(given), { reasoning: { effort: 'low', summary: null }, temperature: 0.3, top_p: 0.5 }, 'requested values are echoed');
});

scenario('a conversation update without metadata keeps it, metadata:null clears it, an object replaces it (RS-11)', async (s) => {
  const { client } = await gateway(s, 'chat_completions');
  const c = await client.conversations.create({ metadata: { topic: 'trip' } });
  assert.deepEqual(c.metadata, { topic: 'trip' });
  const kept = await client.conversations.update(c.id, {});
  assert.deepEqual(kept.metadata, { topic: 'trip' }, 'no metadata: kept');
  assert.deepEqual((await client.conversations.retrieve(c.id)).metadata, { topic: 'trip' });
  const replaced = await client.conversations.update(c.id, { metadata: { topic: 'kyoto' } });
  assert.deepEqual(replaced.metadata, { topic: 'kyoto' }, 'an object replaces');
  const cleared = await client.conversations.update(c.id, { metadata: null });
  assert.deepEqual(cleared.metadata, {}, 'null clears');
  assert.deepEqual((await client.conversations.retrieve(c.id)).metadata, {});
  await rejects_with(client.conversations.update('conv_00000000000000000000000000000000', {}), NotFoundError,
    { status: 404, code: null });
});

scenario('include[] on GET responses, input_items and conversation items is checked as on create: an unknown value is a 400 naming it (RS-5, RS-8, RS-12, RS-14)', async (s) => {
  const { up, client } = await gateway(s, 'chat_completions');
  await up.script([{ content: 'hello' }]);
  const r = await client.responses.create({ model, input: 'hi' });
  const c = await client.conversations.create({ items: [{ role: 'user', content: 'hi' }] });
  const bad = { status: 400, code: 'invalid_value', param: 'include[0]', message: "Invalid value for 'include[0]': 'output.secrets'." };
  await rejects_with(client.responses.retrieve(r.id, { include: ['output.secrets'] }), BadRequestError, bad);
  await rejects_with(client.responses.inputItems.list(r.id, { include: ['output.secrets'] }), BadRequestError, bad);
  await rejects_with(client.conversations.items.list(c.id, { include: ['output.secrets'] }), BadRequestError, bad);
  const item_id = (await client.conversations.items.list(c.id)).data[0].id;
  await rejects_with(client.conversations.items.retrieve(item_id, { conversation_id: c.id, include: ['output.secrets'] }),
    BadRequestError, bad);
  await rejects_with(client.responses.retrieve(r.id, { include: ['reasoning.encrypted_content', 'nope'] }), BadRequestError,
    { status: 400, code: 'invalid_value', param: 'include[1]' });

  const include = ['message.output_text.logprobs'];
  assert.equal((await client.responses.retrieve(r.id, { include })).id, r.id, 'a listed value is accepted');
  assert.ok((await client.responses.inputItems.list(r.id, { include })).data.length > 0);
  assert.equal((await client.conversations.items.list(c.id, { include })).data.length, 1);
});

scenario('an empty input with no history to continue is refused with the OpenAI error shape naming input, also before any stream (RS-1, RS-2, RS-14)', async (s) => {
  const { up, client } = await gateway(s, 'chat_completions');
  await rejects_with(client.responses.create({ model, input: '' }), BadRequestError, {
    status: 400, code: 'string_below_min_length', param: 'input',
    message: "Invalid 'input': string too short. Expected a string with minimum length 1, but got an empty string instead.",
  });
  await rejects_with(client.responses.create({ model, input: [] }), BadRequestError, {
    status: 400, code: 'array_below_min_length', param: 'input',
    message: "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.",
  });
  await rejects_with(client.responses.create({ model, input: [], stream: true }), BadRequestError,
    { status: 400, code: 'array_below_min_length', param: 'input' });
  assert.equal((await up.requests()).length, 0, 'nothing reached the upstream');
});

scenario('a background stream whose response is cancelled while queued sees created, queued, in_progress and response.incomplete with status cancelled, and its replay is the same (RS-9, RS-37.2, RS-41, RS-55)', async (s) => {
  const { up, client } = await gateway(s, 'chat_completions', { background: { max_active: 1 } });
  await up.script([{ hang: true }]);
  const running = await client.responses.create({ model, input: 'take the only slot', background: true });
  await until(async () => (await up.active()) === 1, { timeout_ms: 10_000, interval_ms: 20, message: 'the first response holds the slot' });

  const stream = await client.responses.create({ model, input: 'wait your turn', background: true, stream: true });
  const events = [];
  const it = stream[Symbol.asyncIterator]();
  for (let i = 0; i < 2; i += 1) events.push(structuredClone((await it.next()).value));
  assert.deepEqual(events.map((e) => e.type), ['response.created', 'response.queued']);
  const id = events[0].response.id;
  const cancelled = await client.responses.cancel(id);
  assert.equal(cancelled.status, 'cancelled');
  for (let next = await it.next(); !next.done; next = await it.next()) events.push(structuredClone(next.value));

  assert.deepEqual(events.map((e) => e.type),
    ['response.created', 'response.queued', 'response.in_progress', 'response.incomplete'], 'RS-37.2: in_progress once, before the terminal event');
  const { terminal } = check_response_stream(events, { background: true });
  assert.equal(terminal.status, 'cancelled', 'RS-41');
  assert.deepEqual(terminal, wire(cancelled));
  const replay = await collect(await client.responses.retrieve(id, { stream: true }));
  assert.deepEqual(replay, events, 'the replay is the stream');
  assert.equal((await up.requests()).length, 1, 'the queued response never reached the upstream');
  assert.equal((await client.responses.cancel(running.id)).status, 'cancelled');
});

// ---------------------------------------------------------------------------------------------
// Errors as SDKs read them: what an SDK retries, what it does not, and how a truncated round ends.

// A client that retries as the SDK does by default, counting its requests to troupe.
function counting_client(base_url, max_retries) {
  const sent = [];
  const client = new OpenAI({
    baseURL: base_url, apiKey: 'test', maxRetries: max_retries, timeout: sdk_timeout_ms,
    fetch: async (url, init) => {
      sent.push(String(url));
      return fetch(url, init);
    },
  });
  return { client, sent };
}

async function sdk_error(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected the call to fail');
}

for (const protocol of protocols) {
  const via = ` [${protocol} upstream]`;

  scenario(`RS-49 an upstream cut for length reaches the SDK as an incomplete response whose message is incomplete, streamed and not (RS-22, RS-48, RS-49)${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    const cut = { content: 'A long answer that stops sho', chunk_size: 6, finish: 'length' };
    await up.script([cut, cut]);
    const r = await client.responses.create({ model, input: 'Write at length.', max_output_tokens: 16 });
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.deepEqual(r.output.map((i) => [i.type, i.status]), [['message', 'incomplete']]);
    assert.equal(r.output_text, cut.content);
    const events = await collect(await client.responses.create({ model, input: 'Write at length.', max_output_tokens: 16, stream: true }));
    const done = events.find((e) => e.type === 'response.output_item.done');
    assert.equal(done.item.status, 'incomplete', 'the item ends incomplete in the stream too');
    assert.equal(events.at(-1).type, 'response.incomplete');
    assert.equal(events.at(-1).response.output[0].status, 'incomplete');
  });

  scenario(`RS-43 an upstream 429 reaches the SDK as a 429 RateLimitError with the upstream's message, which the SDK retries after the upstream's Retry-After${via}`, async (s) => {
    const up = await s.upstream();
    const troupe = await s.troupe({ config: upstream_config(up, { protocol, max_retries: 0 }) });
    const message = 'Rate limit reached for fake-model: 3 requests per minute.';
    await up.script([], { status: 429, message, retry_after: '1' });
    const { client, sent } = counting_client(`${troupe.url}/v1`, 2);
    const err = await sdk_error(client.responses.create({ model, input: 'hi' }));
    assert.ok(err instanceof RateLimitError, `RateLimitError, got ${err?.constructor?.name}: ${err?.message}`);
    assert.equal(err.status, 429);
    assert.equal(err.error?.type, 'rate_limit_error');
    assert.equal(err.error?.code, 'rate_limit_exceeded');
    assert.equal(err.error?.message, message, 'the upstream\'s own message, not its raw body');
    assert.equal(err.headers.get('retry-after'), '1', 'the upstream\'s Retry-After');
    assert.match(String(err.headers.get('x-request-id')), /^req_[0-9a-f]{32}$/);
    assert.equal(sent.length, 3, 'the SDK tried three times (maxRetries: 2)');
    assert.equal((await up.requests()).length, 3, 'each try reached the upstream once');

    // A streaming client is told the same in response.failed.
    await up.script([{ status: 429, message }]);
    const events = await collect(await sdk_client(`${troupe.url}/v1`).responses.create({ model, input: 'hi', stream: true }));
    const failed = events.at(-1);
    assert.equal(failed.type, 'response.failed');
    assert.deepEqual(failed.response.error, { code: 'rate_limit_exceeded', message });
  });

  scenario(`RS-43 an upstream 503 or 529 reaches the SDK as a 503 InternalServerError after its retries; another upstream 4xx on round 1 is a 400 with the upstream's message${via}`, async (s) => {
    const up = await s.upstream();
    const troupe = await s.troupe({ config: upstream_config(up, { protocol, max_retries: 0 }) });
    for (const status of [503, 529]) {
      await up.reset();
      await up.script([], { status, message: 'The engine is overloaded.', retry_after: 'soon, X-Evil: 1' });
      const { client, sent } = counting_client(`${troupe.url}/v1`, 1);
      const err = await sdk_error(client.responses.create({ model, input: 'hi' }));
      assert.ok(err instanceof InternalServerError, `InternalServerError, got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 503, `upstream ${status}`);
      assert.equal(err.error?.type, 'server_error');
      assert.equal(err.error?.message, 'The engine is overloaded.');
      assert.equal(err.headers.get('retry-after'), '1', 'an invalid upstream Retry-After is not copied: troupe\'s own instead');
      assert.equal(sent.length, 2, 'the SDK retried once (maxRetries: 1)');
    }

    await up.script([], { status: 400, message: 'This model\'s maximum context length is 8192 tokens.' });
    const { client, sent } = counting_client(`${troupe.url}/v1`, 2);
    const err = await sdk_error(client.responses.create({ model, input: 'hi' }));
    assert.ok(err instanceof BadRequestError, `BadRequestError, got ${err?.constructor?.name}`);
    assert.equal(err.error?.message, 'This model\'s maximum context length is 8192 tokens.');
    assert.equal(err.error?.code, 'invalid_prompt');
    assert.equal(sent.length, 1, 'a 400 is not retried');

    await up.script([], { status: 500, message: 'boom' });
    const broken = await sdk_error(sdk_client(`${troupe.url}/v1`).responses.create({ model, input: 'hi' }));
    assert.ok(broken instanceof InternalServerError);
    assert.equal(broken.status, 502, 'another upstream failure is 502');
  });
}

for (const protocol of protocols) {
  const via = ` [${protocol} upstream]`;

  scenario(`RS-14 logprobs asked for with include or top_logprobs reach output_text.logprobs and the output_text delta/done events through the SDK, and are [] when not asked for${via}`, async (s) => {
    const { up, client } = await gateway(s, protocol);
    const reply = { content: 'Hello there', chunk_size: 5 };
    await up.script([reply, reply, reply]);
    const entry = (token, logprob) => ({ token, logprob, bytes: [...Buffer.from(token, 'utf8')] });
    const expected = (top) => ['Hello', ' ther', 'e'].map((p) => ({
      ...entry(p, -0.25),
      top_logprobs: Array.from({ length: top }, (_, i) => (i === 0 ? entry(p, -0.25) : entry(`alt${i}`, -2 - i))),
    }));

    const plain = await client.responses.create({ model, input: 'hi' });
    assert.deepEqual(plain.output[0].content[0].logprobs, [], 'none when not asked for');
    const [plain_req] = await up.requests();
    assert.ok(!plain_req.logprobs && !plain_req.include, 'the upstream is not asked for logprobs');

    const included = await client.responses.create({ model, input: 'hi', include: ['message.output_text.logprobs'] });
    assert.deepEqual(included.output[0].content[0].logprobs, expected(0));

    const events = await collect(await client.responses.create({ model, input: 'hi', top_logprobs: 2, stream: true }));
    const deltas = events.filter((e) => e.type === 'response.output_text.delta');
    assert.deepEqual(deltas.map((e) => e.logprobs), expected(2).map((lp) => [lp]), 'each delta carries its own');
    assert.deepEqual(events.find((e) => e.type === 'response.output_text.done').logprobs, expected(2));
    assert.deepEqual(events.at(-1).response.output[0].content[0].logprobs, expected(2));
    const asked = (await up.requests())[2];
    if (protocol === 'chat_completions') {
      assert.equal(asked.logprobs, true);
      assert.equal(asked.top_logprobs, 2, 'top_logprobs is forwarded');
    } else {
      assert.deepEqual(asked.include, ['message.output_text.logprobs']);
      assert.equal(asked.top_logprobs, 2, 'top_logprobs is forwarded');
    }
    const err = await sdk_error(client.responses.create({ model, input: 'hi', top_logprobs: 21 }));
    assert.ok(err instanceof BadRequestError);
    assert.equal(err.error?.param, 'top_logprobs');
    assert.equal(err.error?.code, 'integer_above_max_value');
  });
}

scenario('RS-2 an 11 MiB input reaches the SDK as a 413 APIError in the openai error shape, read before the upload ends, and is not retried', async (s) => {
  const { up, troupe } = await gateway(s, 'chat_completions');
  const { client, sent } = counting_client(`${troupe.url}/v1`, 2);
  const err = await sdk_error(client.responses.create({ model, input: 'x'.repeat(11 * 1024 * 1024) }));
  assert.ok(!(err instanceof APIConnectionError), `not a connection error: ${err?.constructor?.name}: ${err?.message}`);
  assert.ok(err instanceof APIError, `an APIError, got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, 413);
  assert.deepEqual(err.error, {
    message: 'Request body exceeds 10485760 bytes.', type: 'invalid_request_error', param: null, code: 'request_too_large',
  });
  assert.match(String(err.headers.get('x-request-id')), /^req_[0-9a-f]{32}$/);
  assert.equal(sent.length, 1, 'a 413 is not retried');
  assert.equal((await up.requests()).length, 0, 'nothing reached the upstream');
  // The connection's next request is served as usual.
  const ok = await sdk_client(`${troupe.url}/v1`).responses.create({ model, input: 'hi' });
  assert.equal(ok.status, 'completed');
});

scenario('RS-13 models.retrieve answers the OpenAI model object for a routable model, ids with a slash included, and 404 model_not_found otherwise; every answer has its own x-request-id', async (s) => {
  const up = await s.upstream();
  const troupe = await s.troupe({
    config: { ...upstream_config(up, { protocol: 'chat_completions', models: ['fake-model', 'Qwen/Qwen3.6-35B-A3B'] }) },
  });
  const client = sdk_client(`${troupe.url}/v1`);
  const qwen = await client.models.retrieve('Qwen/Qwen3.6-35B-A3B');
  assert.deepEqual({ ...qwen }, { id: 'Qwen/Qwen3.6-35B-A3B', object: 'model', created: qwen.created, owned_by: 'troupe' });
  assert.equal(typeof qwen.created, 'number');
  const listed = (await client.models.list()).data.find((m) => m.id === 'fake-model');
  assert.deepEqual({ ...(await client.models.retrieve('fake-model')) }, { ...listed }, 'the object the list holds');
  const err = await sdk_error(client.models.retrieve('no-such-model'));
  assert.ok(err instanceof NotFoundError, `NotFoundError, got ${err?.constructor?.name}`);
  assert.deepEqual(err.error, {
    message: "The model 'no-such-model' does not exist.", type: 'invalid_request_error', param: 'model', code: 'model_not_found',
  });

  // x-request-id: fresh on every answer, never the client's.
  const ids = [];
  const { data, response } = await client.models.retrieve('fake-model').withResponse();
  assert.equal(data.id, 'fake-model');
  ids.push(response.headers.get('x-request-id'));
  ids.push(err.headers.get('x-request-id'));
  const stream = await fetch(`${troupe.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'client-chosen' },
    body: JSON.stringify({ model, input: 'hi', stream: true }),
  });
  assert.match(String(stream.headers.get('content-type')), /^text\/event-stream/);
  ids.push(stream.headers.get('x-request-id'));
  await stream.text();
  const bad = await fetch(`${troupe.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'mine' }, body: '{',
  });
  assert.equal(bad.status, 400);
  ids.push(bad.headers.get('x-request-id'));
  for (const id of ids) assert.match(String(id), /^req_[0-9a-f]{32}$/);
  assert.equal(new Set(ids).size, ids.length, `a fresh id each time: ${ids}`);
});
