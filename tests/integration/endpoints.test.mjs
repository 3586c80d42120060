// The service's fixed endpoints: /health (AS-57), /ready (AS-58), /v1/tools and / (AS-60), and the
// JSON answers for unknown paths and wrong methods (AS-2).
import assert from 'node:assert/strict';
import path from 'node:path';
import { scenario, timestamp_re } from './harness.mjs';

const builtins = ['exec', 'read_file', 'write_file', 'edit_file', 'list_dir'];

scenario('GET /health answers healthy with the service contract and an AS-78 timestamp', async (s) => {
  const troupe = await s.troupe();
  const res = await troupe.request('GET', '/health');
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  const { timestamp, ...rest } = res.json;
  assert.deepEqual(rest, { status: 'healthy', agent_ready: true, service_contract: 'fastreact.agent_event.v1' });
  assert.match(timestamp, timestamp_re);
});

scenario('GET /ready answers 200 with the AS-58 shape', async (s) => {
  const troupe = await s.troupe();
  const res = await troupe.request('GET', '/ready');
  assert.equal(res.status, 200, res.text);
  const r = res.json;
  assert.ok(r.status === 'ready' || r.status === 'degraded');
  assert.equal(r.status === 'ready', r.agent_ready === true && r.mcp.ready === true, 'ready iff agent_ready and mcp.ready');
  assert.equal(r.status, 'ready', 'no MCP server configured: ready');
  assert.equal(r.agent_ready, true);
  assert.equal(r.service_contract, 'fastreact.agent_event.v1');
  assert.deepEqual(r.auth, {
    required: false,
    mode: 'service_token',
    header: 'Authorization: Bearer <token>',
    alternate_header: 'X-FastReAct-Service-Token',
  });
  assert.equal(typeof r.model.name, 'string');
  assert.equal(typeof r.model.api_base_configured, 'boolean');
  assert.equal(typeof r.model.api_key_configured, 'boolean');
  assert.equal(typeof r.multitenant.enabled, 'boolean');
  assert.equal(path.resolve(r.multitenant.workspaces_root), path.resolve(troupe.data_dir, 'workspaces'),
    'workspaces_root defaults to <data_dir>/workspaces (AS-26)');
  assert.equal(r.mcp.ready, true);
  assert.deepEqual(r.mcp.servers, []);
  assert.deepEqual(r.mcp.tools, []);
  assert.match(r.timestamp, timestamp_re);
});

scenario('GET /v1/tools lists the five built-in tools with summaries', async (s) => {
  const troupe = await s.troupe();
  const res = await troupe.request('GET', '/v1/tools');
  assert.equal(res.status, 200, res.text);
  const names = res.json.tools.map((t) => (typeof t === 'string' ? t : t.name));
  for (const b of builtins) assert.ok(names.includes(b), `tools lists ${b}: ${res.text}`);
  assert.deepEqual(res.json.mcp_tools, []);
  assert.deepEqual(res.json.mcp_servers, []);
  const summaries = res.json.tool_summaries;
  for (const b of builtins) {
    const sum = summaries.find((t) => t.name === b);
    assert.ok(sum, `tool_summaries has ${b}`);
    assert.equal(typeof sum.description, 'string');
    assert.ok(sum.description.length > 0);
  }
});

scenario('GET / names the service, its version and contract', async (s) => {
  const troupe = await s.troupe();
  const res = await troupe.request('GET', '/');
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.name, 'troupe');
  assert.equal(typeof res.json.version, 'string');
  assert.equal(res.json.service_contract, 'fastreact.agent_event.v1');
  assert.equal(typeof res.json.endpoints, 'object');
});

scenario('an unknown path is 404 and a known path with the wrong method is 405, both as JSON detail', async (s) => {
  const troupe = await s.troupe();
  for (const route of ['/nope', '/v1/chat', '/v1/tools/extra']) {
    const res = await troupe.request('GET', route);
    assert.equal(res.status, 404, `${route}: ${res.text}`);
    assert.match(res.headers.get('content-type'), /^application\/json/);
    assert.equal(typeof res.json?.detail, 'string', `${route}: ${res.text}`);
  }
  for (const [method, route] of [['GET', '/v1/chat/completions'], ['DELETE', '/health'], ['POST', '/v1/tools']]) {
    const res = await troupe.request(method, route);
    assert.equal(res.status, 405, `${method} ${route}: ${res.text}`);
    assert.equal(typeof res.json?.detail, 'string', `${method} ${route}: ${res.text}`);
  }
});
