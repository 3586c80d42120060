// Service-token auth (AS-3, AS-89): the file token and FASTREACT_SERVICE_TOKEN are both accepted, in
// either header, on caller and operator endpoints; anything else is 401; public endpoints stay open.
import assert from 'node:assert/strict';
import { scenario, user } from './harness.mjs';

const denied = { detail: 'FastReAct service token required' };

scenario('the config token and the FASTREACT_SERVICE_TOKEN token are both accepted and any other is refused 401', async (s) => {
  const troupe = await s.troupe({
    config: { service: { service_token: 'token-from-file-A' }, model: { script: [{ content: 'authorised' }] } },
    env: { FASTREACT_SERVICE_TOKEN: 'token-from-env-B' },
  });
  const chat = (headers) => troupe.chat({ messages: [user('hi')] }, headers);
  const ready = (headers) => troupe.request('GET', '/ready', { headers });

  const accepted = [];
  for (const token of ['token-from-file-A', 'token-from-env-B']) {
    accepted.push({ authorization: `Bearer ${token}` });
    accepted.push({ 'x-fastreact-service-token': token });
  }
  for (const headers of accepted) {
    const c = await chat(headers);
    assert.equal(c.status, 200, `chat with ${JSON.stringify(headers)}: ${c.text}`);
    assert.equal(c.json.content, 'authorised');
    const r = await ready(headers);
    assert.equal(r.status, 200, `ready with ${JSON.stringify(headers)}: ${r.text}`);
    assert.equal(r.json.auth.required, true);
  }

  const refused = [
    {},
    { authorization: 'Bearer wrong' },
    { authorization: 'Bearer ' },
    { authorization: 'token-from-file-A' }, // no Bearer scheme
    { authorization: 'Bearer token-from-file-Atoken-from-env-B' },
    { authorization: 'Bearer token-from-file-' }, // a prefix
    { 'x-fastreact-service-token': 'token-from-env-C' },
    { 'x-fastreact-service-token': '' },
  ];
  for (const headers of refused) {
    const c = await chat(headers);
    assert.equal(c.status, 401, `chat with ${JSON.stringify(headers)}: ${c.text}`);
    assert.deepEqual(c.json, denied);
    const r = await ready(headers);
    assert.equal(r.status, 401, `ready with ${JSON.stringify(headers)}: ${r.text}`);
    assert.deepEqual(r.json, denied);
  }

  // A streamed request without a token is refused before streaming starts, as plain JSON (AS-11).
  const st = await troupe.stream({ messages: [user('hi')] });
  await st.finished;
  assert.equal(st.status, 401);
  assert.deepEqual(JSON.parse(st.body), denied);

  // Public endpoints need no token (AS-1).
  const health = await troupe.request('GET', '/health');
  assert.equal(health.status, 200, health.text);
  assert.equal(health.json.status, 'healthy');
  const tools = await troupe.request('GET', '/v1/tools');
  assert.equal(tools.status, 200, tools.text);
});

scenario('a token configured with surrounding whitespace is accepted trimmed', async (s) => {
  const troupe = await s.troupe({
    config: { service: { service_token: '  padded-token  ' }, model: { script: [{ content: 'ok' }] } },
  });
  const ok = await troupe.chat({ messages: [user('hi')] }, { authorization: 'Bearer padded-token' });
  assert.equal(ok.status, 200, ok.text);
  const bad = await troupe.chat({ messages: [user('hi')] }, { authorization: 'Bearer nope' });
  assert.equal(bad.status, 401, bad.text);
});
