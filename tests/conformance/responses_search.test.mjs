// Conformance: the Responses gateway's search tools (RS-27) driven by the official `openai` SDK.
// A fake upstream calls `web_search`/`file_search`, troupe runs the search on its configured
// provider — a small HTTP endpoint in this file, or an MCP server (http_mcp_server.mjs's `search`
// tool) — and the upstream's next round must carry the results as numbered text.
//
// Needs `npm ci` in tests/conformance and TROUPE_BIN (see the integration harness).
import assert from 'node:assert/strict';
import http from 'node:http';
import OpenAI, { BadRequestError } from 'openai';
import { start_http_mcp_server } from './http_mcp_child.mjs';
import { scenario, upstream_config, wait_mcp_ready } from '../integration/harness.mjs';

const model = 'fake-model';
const protocols = ['chat_completions', 'responses'];

function sdk_client(base_url) {
  return new OpenAI({ baseURL: base_url, apiKey: 'test', maxRetries: 0, timeout: 60_000 });
}

async function gateway(s, protocol, config = {}, env = {}) {
  const up = await s.upstream();
  const troupe = await s.troupe({ config: { ...upstream_config(up, { protocol }), ...config }, env });
  return { up, troupe, client: sdk_client(`${troupe.url}/v1`) };
}

async function collect(stream) {
  const events = [];
  for await (const e of stream) events.push(structuredClone(e));
  return events;
}

// A search provider over HTTP: records each request; a query of "slow" answers after 2 s, "fail" 500, "garbage" text
// that is not JSON; any other query two results (web_search) or one file hit (a body with
// vector_store_ids).
async function start_search_provider(s) {
  const seen = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const json = JSON.parse(body);
      seen.push({ method: req.method, path: req.url, authorization: req.headers.authorization ?? null, body: json });
      if (json.query === 'slow') {
        const timer = setTimeout(() => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('[]'); }, 2000);
        res.on('close', () => clearTimeout(timer));
        return undefined;
      }
      if (json.query === 'fail') {
        res.writeHead(500, { 'content-type': 'application/json' });
        return res.end('{"error":"index offline"}');
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      if (json.query === 'garbage') return res.end('<html>not json</html>');
      if (json.vector_store_ids)
        return res.end(JSON.stringify({ results: [
          { file_id: 'file_abc', filename: 'guide.md', score: 0.91, text: `Guide text about ${json.query}.` },
        ] }));
      return res.end(JSON.stringify([
        { title: 'Troupe home', url: 'https://troupe.example/home', snippet: `All about ${json.query}.` },
        { title: 'Actors', url: 'https://troupe.example/actors', snippet: 'CAF actors.' },
      ]));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  s.children.push({ stop: () => new Promise((r) => server.close(r)), describe: () => `search provider saw ${JSON.stringify(seen)}` });
  return { url: `http://127.0.0.1:${server.address().port}/search`, seen };
}

// What the upstream read as tool outputs, for either adapter.
function tool_outputs(req) {
  if (req.path.endsWith('/chat/completions'))
    return req.messages.filter((m) => m.role === 'tool').map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
  const input = Array.isArray(req.input) ? req.input : [];
  return input.filter((i) => i.type === 'function_call_output').map((i) => (typeof i.output === 'string' ? i.output : JSON.stringify(i.output)));
}

const tool_names = (req) => (req.tools ?? []).map((t) => t.function?.name ?? t.name);

// The events of the one item of `type`, and checks every event's sequence_number is its place.
function item_events(events, type) {
  events.forEach((e, i) => assert.equal(e.sequence_number, i, 'RS-37.1: sequence numbers rise by one'));
  const added = events.findIndex((e) => e.type === 'response.output_item.added' && e.item.type === type);
  assert.ok(added >= 0, `a ${type} item was added: ${events.map((e) => e.type).join(', ')}`);
  const done = events.findIndex((e, i) => i > added && e.type === 'response.output_item.done');
  return events.slice(added, done + 1);
}

const http_provider = (url, extra = {}) => ({ provider: { url, timeout_seconds: 5, ...extra } });

for (const protocol of protocols) {
  const via = ` [${protocol}]`;

  scenario(`a web_search the model calls runs on the HTTP provider with its bearer token, streams added/in_progress/searching/completed/done with the query and, when included, its sources, and the next round reads the numbered results (RS-27, RS-36)${via}`, async (s) => {
    const provider = await start_search_provider(s);
    const { up, client } = await gateway(s, protocol,
      { tools: { web_search: http_provider(provider.url, { bearer_token_env: 'TEST_SEARCH_TOKEN' }) } },
      { TEST_SEARCH_TOKEN: 'tok-search-1' });
    await up.script([
      { tool_calls: [{ id: 'call_ws_1', name: 'web_search', arguments: '{"query":"troupe actors"}' }], chunk_size: 5 },
      { content: 'Troupe runs on actors.' },
    ]);
    const events = await collect(await client.responses.create({
      model, input: 'What is troupe?', tools: [{ type: 'web_search' }], include: ['web_search_call.action.sources'], stream: true,
    }));
    const search = item_events(events, 'web_search_call');
    assert.deepEqual(search.map((e) => e.type), [
      'response.output_item.added', 'response.web_search_call.in_progress', 'response.web_search_call.searching',
      'response.web_search_call.completed', 'response.output_item.done',
    ]);
    assert.equal(search[0].item.status, 'in_progress');
    assert.match(search[0].item.id, /^ws_[0-9a-f]{32}$/, 'RS-18: ws_ ids');
    for (const e of search.slice(1, 4)) {
      assert.equal(e.item_id, search[0].item.id);
      assert.equal(e.output_index, search[0].output_index);
    }
    const item = search[4].item;
    assert.equal(item.status, 'completed');
    assert.deepEqual(item.action, { type: 'search', query: 'troupe actors', sources: [
      { type: 'url', url: 'https://troupe.example/home' }, { type: 'url', url: 'https://troupe.example/actors' },
    ] });
    const terminal = events.at(-1);
    assert.equal(terminal.type, 'response.completed');
    assert.deepEqual(terminal.response.output.map((i) => i.type), ['web_search_call', 'message']);

    assert.equal(provider.seen.length, 1);
    assert.equal(provider.seen[0].method, 'POST');
    assert.equal(provider.seen[0].authorization, 'Bearer tok-search-1');
    assert.deepEqual(provider.seen[0].body, { query: 'troupe actors' });

    const reqs = await up.requests();
    assert.ok(tool_names(reqs[0]).includes('web_search'), `the model is offered web_search: ${tool_names(reqs[0])}`);
    const [output] = tool_outputs(reqs[1]);
    assert.match(output, /\[1\] Troupe home\nURL: https:\/\/troupe\.example\/home\nAll about troupe actors\./);
    assert.match(output, /\[2\] Actors/);
  });
}

scenario('without the include, web_search_call.action carries the query but no sources, and web_search_preview is the same tool (RS-27, RS-17)', async (s) => {
  const provider = await start_search_provider(s);
  const { up, client } = await gateway(s, 'chat_completions', { tools: { web_search: http_provider(provider.url) } });
  await up.script([
    { tool_calls: [{ id: 'call_ws_2', name: 'web_search', arguments: '{"query":"caf"}' }] },
    { content: 'Done.' },
  ]);
  const r = await client.responses.create({ model, input: 'Search caf', tools: [{ type: 'web_search_preview' }] });
  assert.equal(r.status, 'completed', JSON.stringify(r));
  const [ws] = r.output;
  assert.deepEqual(ws.action, { type: 'search', query: 'caf' });
  assert.equal(provider.seen[0].authorization, null, 'no bearer token configured, none sent');
  const stored = await client.responses.retrieve(r.id);
  assert.deepEqual(stored.output[0], ws, 'the stored item is the one returned');
});

scenario('file_search sends vector_store_ids and max_num_results to the HTTP provider; results appear only with the file_search_call.results include (RS-27)', async (s) => {
  const provider = await start_search_provider(s);
  const { up, client } = await gateway(s, 'responses', { tools: { file_search: http_provider(provider.url) } });
  const call = { tool_calls: [{ id: 'call_fs_1', name: 'file_search', arguments: '{"query":"setup"}' }] };
  await up.script([call, { content: 'One.' }, call, { content: 'Two.' }]);
  const tools = [{ type: 'file_search', vector_store_ids: ['vs_1', 'vs_2'], max_num_results: 3 }];
  const plain = await client.responses.create({ model, input: 'Find setup', tools });
  assert.equal(plain.output[0].type, 'file_search_call');
  assert.deepEqual(plain.output[0].queries, ['setup']);
  assert.equal(plain.output[0].results, null, 'results only with the include');
  assert.deepEqual(provider.seen[0].body, { query: 'setup', vector_store_ids: ['vs_1', 'vs_2'], max_num_results: 3 });

  const events = await collect(await client.responses.create({ model, input: 'Find setup', tools, include: ['file_search_call.results'], stream: true }));
  const search = item_events(events, 'file_search_call');
  assert.deepEqual(search.map((e) => e.type), [
    'response.output_item.added', 'response.file_search_call.in_progress', 'response.file_search_call.searching',
    'response.file_search_call.completed', 'response.output_item.done',
  ]);
  assert.match(search[0].item.id, /^fs_[0-9a-f]{32}$/);
  assert.deepEqual(search[4].item.results, [
    { attributes: {}, file_id: 'file_abc', filename: 'guide.md', score: 0.91, text: 'Guide text about setup.' },
  ]);
  const reqs = await up.requests();
  assert.match(tool_outputs(reqs[1])[0], /^\[1\] guide\.md \(file file_abc\)\nScore: 0\.91\nGuide text about setup\.$/);
});

scenario('a provider that answers 500 or text that is not JSON ends the search item failed, without a completed event, and the model reads the error; the response still completes (RS-27, RS-25)', async (s) => {
  const provider = await start_search_provider(s);
  const { up, client } = await gateway(s, 'chat_completions', { tools: { web_search: http_provider(provider.url) } });
  await up.script([
    { tool_calls: [{ id: 'call_a', name: 'web_search', arguments: '{"query":"fail"}' }] },
    { tool_calls: [{ id: 'call_b', name: 'web_search', arguments: '{"query":"garbage"}' }] },
    { content: 'No luck.' },
  ]);
  const events = await collect(await client.responses.create({ model, input: 'Search', tools: [{ type: 'web_search' }], stream: true }));
  const terminal = events.at(-1);
  assert.equal(terminal.type, 'response.completed', JSON.stringify(terminal));
  assert.deepEqual(terminal.response.output.map((i) => [i.type, i.status]),
    [['web_search_call', 'failed'], ['web_search_call', 'failed'], ['message', 'completed']]);
  assert.ok(!events.some((e) => e.type === 'response.web_search_call.completed'), 'a failed search has no completed event');
  assert.equal(events.filter((e) => e.type === 'response.web_search_call.searching').length, 2);
  const reqs = await up.requests();
  const [first] = tool_outputs(reqs[1]);
  assert.match(JSON.parse(first).error, /the search provider answered HTTP 500/);
  const outputs = tool_outputs(reqs[2]);
  assert.match(JSON.parse(outputs[1]).error, /not valid JSON/);
});

scenario('a search provider that is a configured MCP server is called with the query and the file_search parameters; a reply that is not JSON fails the item (RS-27, RS-25)', async (s) => {
  const mcp = await start_http_mcp_server(s, ['--search']);
  const { up, troupe, client } = await gateway(s, 'chat_completions', {
    mcp: { servers: [{ name: 'finder', transport: 'http', url: mcp.url, isolation: 'shared' }] },
    tools: { web_search: { provider: { mcp_server: 'finder', tool: 'search' } }, file_search: { provider: { mcp_server: 'finder', tool: 'search' } } },
  });
  await wait_mcp_ready(troupe, ['finder'], 60_000);
  await up.script([
    { tool_calls: [{ id: 'call_f', name: 'file_search', arguments: '{"query":"quota"}' }] },
    { tool_calls: [{ id: 'call_w', name: 'web_search', arguments: '{"query":"garbage"}' }] },
    { content: 'Checked.' },
  ]);
  const r = await client.responses.create({
    model, input: 'Look it up', include: ['file_search_call.results'],
    tools: [{ type: 'file_search', vector_store_ids: ['vs_9'], max_num_results: 2 }, { type: 'web_search' }],
  });
  assert.equal(r.status, 'completed', JSON.stringify(r));
  const [fs_call, ws_call] = r.output;
  assert.equal(fs_call.status, 'completed', JSON.stringify(fs_call));
  assert.equal(fs_call.results[0].text, 'MCP file hit for quota in vs_9 (max 2)');
  assert.equal(ws_call.status, 'failed');
  assert.ok(mcp.stderr.includes('tools/call(search)'), mcp.stderr);
  const reqs = await up.requests();
  assert.match(tool_outputs(reqs[1])[0], /^\[1\] notes\.txt \(file file_mcp_1\)/);
  assert.match(JSON.parse(tool_outputs(reqs[2])[1]).error, /not valid JSON/);
});

scenario('with no provider configured, web_search, web_search_preview and file_search tools are refused with 400 invalid_value naming tools[i].type (RS-14, RS-27)', async (s) => {
  const { client } = await gateway(s, 'chat_completions');
  for (const type of ['web_search', 'web_search_preview', 'file_search']) {
    let err;
    try {
      await client.responses.create({ model, input: 'x', tools: [{ type: 'function', name: 'f' }, { type }] });
    } catch (e) {
      err = e;
    }
    assert.ok(err instanceof BadRequestError, `${type}: ${err}`);
    assert.equal(err.error.code, 'invalid_value');
    assert.equal(err.error.param, 'tools[1].type');
    assert.equal(err.error.message, `Tool type '${type}' is not enabled on this server.`);
  }
});

scenario('a stored search call replays with its status events, and a continuation renders it as the search function call and its results for the model (RS-27, RS-44, RS-46)', async (s) => {
  const provider = await start_search_provider(s);
  const { up, client } = await gateway(s, 'chat_completions', { tools: { web_search: http_provider(provider.url) } });
  await up.script([
    { tool_calls: [{ id: 'call_ws_3', name: 'web_search', arguments: '{"query":"replay"}' }] },
    { content: 'Found.' },
    { content: 'Still found.' },
  ]);
  const first = await client.responses.create({
    model, input: 'Search replay', tools: [{ type: 'web_search' }], include: ['web_search_call.action.sources'],
  });
  assert.equal(first.status, 'completed', JSON.stringify(first));

  const replay = await collect(await client.responses.retrieve(first.id, { stream: true }));
  const search = item_events(replay, 'web_search_call');
  assert.deepEqual(search.map((e) => e.type), [
    'response.output_item.added', 'response.web_search_call.in_progress', 'response.web_search_call.searching',
    'response.web_search_call.completed', 'response.output_item.done',
  ]);
  assert.deepEqual(search[4].item, first.output[0], 'RS-44: the replayed item is the stored one');

  const next = await client.responses.create({ model, previous_response_id: first.id, input: 'And again?' });
  assert.equal(next.status, 'completed', JSON.stringify(next));
  const reqs = await up.requests();
  const call = reqs[2].messages.flatMap((m) => m.tool_calls ?? []);
  assert.deepEqual(call.map((c) => [c.id, c.function.name, c.function.arguments]),
    [[first.output[0].id, 'web_search', '{"query":"replay"}']], 'RS-46: the search renders as its function call');
  const [output] = tool_outputs(reqs[2]);
  assert.match(output, /^\[1\] https:\/\/troupe\.example\/home\nURL: https:\/\/troupe\.example\/home\n\n\[2\] /,
    'RS-46: a later response reads the results the stored item carries');
});

scenario('an HTTP provider slower than its timeout_seconds ends the search item failed and the model reads that it timed out (RS-27, RS-25)', async (s) => {
  const provider = await start_search_provider(s);
  const { up, client } = await gateway(s, 'chat_completions', { tools: { web_search: http_provider(provider.url, { timeout_seconds: 0.3 }) } });
  await up.script([
    { tool_calls: [{ id: 'call_slow', name: 'web_search', arguments: '{"query":"slow"}' }] },
    { content: 'Too slow.' },
  ]);
  const r = await client.responses.create({ model, input: 'Search slowly', tools: [{ type: 'web_search' }] });
  assert.equal(r.status, 'completed', JSON.stringify(r));
  assert.deepEqual(r.output.map((i) => [i.type, i.status]), [['web_search_call', 'failed'], ['message', 'completed']]);
  const reqs = await up.requests();
  assert.match(JSON.parse(tool_outputs(reqs[1])[0]).error, /could not be reached: timed out/);
});
