// Request validation on POST /v1/chat/completions: 422 with pydantic-style details (AS-2), 400 for
// missing messages (AS-10), unknown fields ignored (AS-2), and the body limit (AS-1: 413).
import assert from 'node:assert/strict';
import { scenario, user } from './harness.mjs';

const script = [{ content: 'fine' }];

function assert_422(res, field) {
  assert.equal(res.status, 422, `${field}: ${res.text}`);
  assert.ok(res.json && Array.isArray(res.json.detail) && res.json.detail.length > 0,
    `422 detail is a list: ${res.text}`);
  for (const d of res.json.detail) {
    assert.ok(Array.isArray(d.loc), `detail item has loc: ${res.text}`);
    assert.equal(typeof d.msg, 'string');
    assert.equal(typeof d.type, 'string');
  }
  if (field) assert.ok(res.json.detail.some((d) => d.loc.includes(field)), `a detail names ${field}: ${res.text}`);
}

scenario('invalid chat requests are answered 422 with a detail list naming the field', async (s) => {
  const troupe = await s.troupe({ config: { model: { script } } });
  const post = (raw) => troupe.request('POST', '/v1/chat/completions', {
    raw, headers: { 'content-type': 'application/json' },
  });
  const body = (extra) => JSON.stringify({ messages: [user('hi')], stream: false, ...extra });

  assert_422(await post('{"messages": [{"role": "user", "content": "hi"}'), null); // malformed JSON
  assert_422(await post('not json at all'), null);
  assert_422(await post(body({ temperature: 5 })), 'temperature');
  assert_422(await post(body({ temperature: -0.1 })), 'temperature');
  assert_422(await post(body({ top_p: 2 })), 'top_p');
  assert_422(await post(body({ max_tokens: 0 })), 'max_tokens');
  assert_422(await post(body({ max_tokens: -5 })), 'max_tokens');
  assert_422(await post(body({ stream: 'yes' })), 'stream');
  assert_422(await post(JSON.stringify({ messages: 'hello' })), 'messages');

  // Boundaries are accepted.
  const ok = await post(body({ temperature: 2, top_p: 0, max_tokens: 1 }));
  assert.equal(ok.status, 200, ok.text);
});

scenario('a chat request without a usable user message is answered 400 with the exact detail', async (s) => {
  const troupe = await s.troupe({ config: { model: { script } } });
  const none = await troupe.chat({ messages: [] });
  assert.equal(none.status, 400, none.text);
  assert.deepEqual(none.json, { detail: 'No messages provided' });

  const system_only = await troupe.chat({ messages: [{ role: 'system', content: 'You are helpful.' }] });
  assert.equal(system_only.status, 400, system_only.text);
  assert.deepEqual(system_only.json, { detail: 'At least one user message with non-empty content is required' });

  const empty_user = await troupe.chat({ messages: [{ role: 'system', content: 'sys' }, user('')] });
  assert.equal(empty_user.status, 400, empty_user.text);
  assert.deepEqual(empty_user.json, { detail: 'At least one user message with non-empty content is required' });
});

scenario('unknown request fields are ignored', async (s) => {
  const troupe = await s.troupe({ config: { model: { script } } });
  const res = await troupe.chat({
    messages: [{ role: 'user', content: 'hi', flavour: 'vanilla' }],
    frobnicate: { deeply: ['nested', 1, null] },
    n: 3,
    response_format: { type: 'text' },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.type, 'chat.completion');
  assert.equal(res.json.content, 'fine');
});

scenario('a body over service.max_body_bytes is answered 413 Request body too large', async (s) => {
  const troupe = await s.troupe({ config: { service: { max_body_bytes: 1024 }, model: { script } } });
  const big = JSON.stringify({ messages: [user('x'.repeat(4096))], stream: false });
  const res = await troupe.request('POST', '/v1/chat/completions', { raw: big, headers: { 'content-type': 'application/json' } });
  assert.equal(res.status, 413, res.text);
  assert.deepEqual(res.json, { detail: 'Request body too large' });

  // A body under the limit on the same server still works.
  const small = await troupe.chat({ messages: [user('small')] });
  assert.equal(small.status, 200, small.text);
  assert.equal(small.json.content, 'fine');
});
