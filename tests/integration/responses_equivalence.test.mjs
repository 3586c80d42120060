// Adapter equivalence (RS-49, RS-64): the same reasoning fragments, text fragments, tool call with the
// same argument fragments, finish and usage, served once over chat completions and once over
// /v1/responses, give the client identical streams, final objects and stored items, ids and
// timestamps aside.
import assert from 'node:assert/strict';
import { parse_sse, scenario, upstream_config } from './harness.mjs';

const reply = {
  reasoning: 'First, think about the weather.',
  content: 'Let me check the weather in Paris for you.',
  tool_calls: [{ id: 'call_paris', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' }],
  chunk_size: 4,
  usage: { prompt_tokens: 31, completion_tokens: 17, total_tokens: 48 },
};

const request = {
  model: 'fake-model',
  input: 'What is the weather in Paris?',
  stream: true,
  tools: [{
    type: 'function', name: 'get_weather', description: 'Weather by city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } },
  }],
};

// Ids become their prefix and order of first appearance; times become 0.
function normalize(value) {
  const ids = new Map();
  const walk = (v, key) => {
    if (typeof v === 'string' && /^(resp|msg|rs|fc|fco|mcp|mcpl|cmp)_[0-9a-f]{32}$/.test(v)) {
      if (!ids.has(v)) ids.set(v, `${v.split('_')[0]}#${ids.size}`);
      return ids.get(v);
    }
    if (['created_at', 'completed_at'].includes(key) && typeof v === 'number') return 0;
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    return v;
  };
  return walk(value);
}

async function run(s, protocol, scripted = reply, body = request) {
  const fake = await s.upstream();
  const troupe = await s.troupe({ config: upstream_config(fake, { protocol }) });
  await fake.script([scripted]);
  const res = await fetch(`${troupe.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  const [frames] = parse_sse(await res.text());
  const events = frames.filter((f) => f.event).map((f) => f.json);
  const id = events[0].response.id;
  const stored = await (await fetch(`${troupe.url}/v1/responses/${id}`)).json();
  const items = await (await fetch(`${troupe.url}/v1/responses/${id}/input_items?order=asc`)).json();
  return { events, stored, items };
}

scenario('chat-completions and /v1/responses upstreams give identical client streams, objects and stored items (RS-49, RS-64)', async (s) => {
  const chat = await run(s, 'chat_completions');
  const responses = await run(s, 'responses');
  const types = chat.events.map((e) => e.type);
  assert.ok(types.includes('response.reasoning_text.delta') && types.includes('response.output_text.delta')
    && types.includes('response.function_call_arguments.delta'), `the stream carries every kind: ${types}`);
  assert.deepEqual(responses.events.map((e) => e.type), types, 'the same event types in the same order');
  assert.deepEqual(normalize(responses.events), normalize(chat.events), 'the same payloads');
  assert.deepEqual(normalize(responses.stored), normalize(chat.stored), 'the same final object');
  assert.deepEqual(normalize(responses.items), normalize(chat.items), 'the same stored input items');
  assert.equal(chat.stored.usage.total_tokens, 48);
  assert.equal(chat.stored.output.at(-1).call_id, 'call_paris', 'the upstream call_id is kept (RS-18)');
});

scenario('RS-49 an upstream cut for length gives the same incomplete response over either adapter: its last item incomplete, the same events and stored items', async (s) => {
  const cut = { reasoning: 'Think it over.', content: 'A long answer that stops sho', chunk_size: 5, finish: 'length',
    usage: { prompt_tokens: 12, completion_tokens: 16, total_tokens: 28 } };
  const body = { model: 'fake-model', input: 'Write at length.', stream: true, max_output_tokens: 16 };
  const chat = await run(s, 'chat_completions', cut, body);
  const responses = await run(s, 'responses', cut, body);
  assert.equal(chat.stored.status, 'incomplete');
  assert.deepEqual(chat.stored.incomplete_details, { reason: 'max_output_tokens' });
  assert.deepEqual(chat.stored.output.map((i) => [i.type, i.status]), [['reasoning', 'completed'], ['message', 'incomplete']]);
  assert.equal(chat.events.at(-1).type, 'response.incomplete');
  assert.deepEqual(responses.events.map((e) => e.type), chat.events.map((e) => e.type), 'the same event types in the same order');
  assert.deepEqual(normalize(responses.events), normalize(chat.events), 'the same payloads, the message incomplete in both');
  assert.deepEqual(normalize(responses.stored), normalize(chat.stored), 'the same final object');
  assert.deepEqual(normalize(responses.items), normalize(chat.items), 'the same stored input items');
});
