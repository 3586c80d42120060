// Model routing of the Responses gateway (responses.md Appendix A): model.upstreams[] entries are tried
// in order, then the default upstream (model.*) with model.models; a model none of them serves is
// RS-2's 404 model_not_found, answered as plain JSON before any SSE byte (RS-1), for POST
// /v1/responses in every mode and for POST /v1/responses/compact (RS-10). An entry with discover_models
// also serves what its GET /models lists (RS-13). Each fake upstream records what reached it, so a
// request is shown to reach exactly one upstream.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, deep_merge, default_config, upstream_config, user } from './harness.mjs';

const post = (troupe, body) => troupe.request('POST', '/v1/responses', { body });
const compact = (troupe, body) => troupe.request('POST', '/v1/responses/compact', { body });

const output_text = (r) => r.output.filter((i) => i.type === 'message')
  .flatMap((i) => i.content).map((p) => p.text ?? '').join('');

function entry(name, protocol, up, models, more = {}) {
  return { name, protocol, base_url: up.base_url, models, ...more };
}

// The models each fake upstream was asked for, in order, with the route they came to.
async function seen(up) {
  return (await up.requests()).map((q) => `${q.path} ${q.model}`);
}

// RS-2, RS-1: exactly this body, as JSON (never an event stream).
function assert_model_not_found(res, model, what) {
  assert.equal(res.status, 404, `${what}: ${res.text}`);
  assert.match(String(res.headers.get('content-type')), /^application\/json/, `${what}: plain JSON, not SSE (RS-1)`);
  assert.deepEqual(res.json, {
    error: {
      message: `The model '${model}' does not exist.`,
      type: 'invalid_request_error',
      param: 'model',
      code: 'model_not_found',
    },
  }, `${what}: ${res.text}`);
}

scenario('each model reaches exactly the upstream whose entry lists it, over that entry\'s protocol, and a model nobody serves is model_not_found (Appendix A, RS-2)', async (s) => {
  const chat = await s.upstream();
  const resp = await s.upstream();
  await chat.script([], { content: 'from the chat upstream' });
  await resp.script([], { content: 'from the responses upstream' });
  const troupe = await s.troupe({
    config: {
      model: {
        models: ['scripted'], // the built-in scripted default serves only this name
        upstreams: [
          entry('chat', 'chat_completions', chat, ['alpha', 'alpha-mini'],
            { developer_role: 'developer', max_tokens_field: 'max_completion_tokens' }),
          entry('resp', 'responses', resp, ['beta'], { api_key: 'sk-resp-entry' }),
        ],
      },
    },
  });

  const alpha = await post(troupe, {
    model: 'alpha', max_output_tokens: 100,
    input: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'hi' }],
  });
  assert.equal(alpha.status, 200, alpha.text);
  assert.equal(alpha.json.model, 'alpha');
  assert.equal(output_text(alpha.json), 'from the chat upstream');
  assert.deepEqual(await seen(chat), ['/v1/chat/completions alpha']);
  assert.deepEqual(await seen(resp), []);
  // The entry's own chat options shape the request (RS-47).
  const [sent] = await chat.requests();
  assert.deepEqual(sent.messages.map((m) => m.role), ['developer', 'user'], JSON.stringify(sent.messages));
  assert.equal(sent.max_completion_tokens, 100, JSON.stringify(sent));
  assert.equal(sent.max_tokens, undefined);

  const beta = await post(troupe, { model: 'beta', input: 'hi', stream: false });
  assert.equal(beta.status, 200, beta.text);
  assert.equal(output_text(beta.json), 'from the responses upstream');
  assert.deepEqual(await seen(resp), ['/v1/responses beta']);
  // Each entry sends its own key, and an entry without one sends none.
  assert.equal((await resp.requests())[0].authorization, 'Bearer sk-resp-entry');
  assert.equal((await chat.requests())[0].authorization, undefined);

  const mini = await post(troupe, { model: 'alpha-mini', input: 'hi' });
  assert.equal(output_text(mini.json), 'from the chat upstream');
  assert.deepEqual(await seen(chat), ['/v1/chat/completions alpha', '/v1/chat/completions alpha-mini']);

  // The default upstream's model.models list: the built-in scripted model answers, no fake does.
  const scripted = await post(troupe, { model: 'scripted', input: 'hi' });
  assert.equal(scripted.status, 200, scripted.text);
  assert.equal(scripted.json.status, 'completed');
  assert.doesNotMatch(output_text(scripted.json), /from the/);

  // A routed compaction's summary call goes to the model's upstream too (RS-52).
  await resp.script([{ content: 'summary of the chat' }]);
  const summary = await compact(troupe, { model: 'beta', input: 'remember the number 7' });
  assert.equal(summary.status, 200, summary.text);
  assert.equal(summary.json.output.at(-1).encrypted_content, 'summary of the chat');
  assert.deepEqual(await seen(resp), ['/v1/responses beta', '/v1/responses beta']);

  // gamma: no entry lists it and model.models does not either.
  assert_model_not_found(await post(troupe, { model: 'gamma', input: 'hi' }), 'gamma', 'plain');
  assert_model_not_found(await post(troupe, { model: 'gamma', input: 'hi', stream: true }), 'gamma', 'stream:true');
  assert_model_not_found(await post(troupe, { model: 'gamma', input: 'hi', background: true }), 'gamma', 'background:true');
  assert_model_not_found(await post(troupe, { model: 'gamma', input: 'hi', background: true, stream: true }), 'gamma',
    'background:true, stream:true');
  assert_model_not_found(await compact(troupe, { model: 'gamma', input: 'hi' }), 'gamma', 'compact');
  // Names match exactly.
  assert_model_not_found(await post(troupe, { model: 'Alpha', input: 'hi' }), 'Alpha', 'another case');
  assert.equal((await chat.requests()).length, 2, 'no unknown model reached the chat upstream');
  assert.equal((await resp.requests()).length, 2, 'no unknown model reached the responses upstream');

  // RS-13: every routable name, in routing order.
  const models = await troupe.request('GET', '/v1/models');
  assert.equal(models.status, 200, models.text);
  assert.deepEqual(models.json.data.map((m) => m.id), ['alpha', 'alpha-mini', 'beta', 'scripted']);

  // The agent service stays on the default upstream whatever the model is called.
  const agent = await troupe.chat({ model: 'alpha', messages: [user('hi')] });
  assert.equal(agent.status, 200, agent.text);
  assert.equal((await chat.requests()).length, 2, 'the agent service never uses model.upstreams');
});

scenario('the first entry whose models match wins, and "*" on an entry or on the default upstream serves any name (Appendix A)', async (s) => {
  const first = await s.upstream();
  const rest = await s.upstream();
  const fallback = await s.upstream();
  await first.script([], { content: 'first' });
  await rest.script([], { content: 'rest' });
  await fallback.script([], { content: 'default' });

  // An entry with "*" shadows the default upstream.
  const shadowed = await s.troupe({
    config: deep_merge(upstream_config(fallback), {
      model: { upstreams: [entry('first', 'responses', first, ['beta']), entry('rest', 'chat_completions', rest, '*')] },
    }),
  });
  for (const [model, text] of [['beta', 'first'], ['whatever', 'rest'], ['fake-model', 'rest']]) {
    const res = await post(shadowed, { model, input: 'hi', stream: false });
    assert.equal(res.status, 200, `${model}: ${res.text}`);
    assert.equal(output_text(res.json), text, model);
  }
  assert.deepEqual(await seen(first), ['/v1/responses beta']);
  assert.deepEqual(await seen(rest), ['/v1/chat/completions whatever', '/v1/chat/completions fake-model']);
  assert.deepEqual(await seen(fallback), []);
  await shadowed.stop();
  await first.reset();
  await first.script([], { content: 'first' });

  // The default upstream keeps model.models "*": every name not listed by an entry reaches it.
  const troupe = await s.troupe({
    config: deep_merge(upstream_config(fallback), {
      model: { protocol: 'responses', upstreams: [entry('first', 'responses', first, ['beta'])] },
    }),
  });
  for (const model of ['any-name', 'gpt-4o', 'beta']) {
    const res = await post(troupe, { model, input: 'hi' });
    assert.equal(res.status, 200, `${model}: ${res.text}`);
    assert.equal(output_text(res.json), model === 'beta' ? 'first' : 'default', model);
  }
  const summary = await compact(troupe, { model: 'unlisted', input: 'hi' });
  assert.equal(summary.status, 200, summary.text);
  assert.deepEqual(await seen(fallback), ['/v1/responses any-name', '/v1/responses gpt-4o', '/v1/responses unlisted']);
  assert.deepEqual(await seen(first), ['/v1/responses beta']);

  // A finished compaction leaves nothing behind that would hold shutdown up.
  const exit = await troupe.stop('SIGTERM', 10_000);
  assert.deepEqual(exit, { code: 0, signal: null }, 'troupe exits on SIGTERM after serving /v1/responses/compact');
});

scenario('an entry with discover_models also serves and lists what its GET /models answers, asked with its key; one that cannot be asked keeps its configured names (RS-13, Appendix A)', async (s) => {
  const up = await s.upstream();
  await up.control('POST', '/__models', ['found-a', 'found-b']);
  await up.script([], { content: 'from the discovering upstream' });
  const troupe = await s.troupe({
    config: {
      model: {
        models: ['scripted'],
        upstreams: [
          entry('disc', 'chat_completions', up, ['listed'], { discover_models: true, api_key: 'sk-disc' }),
          { name: 'down', protocol: 'chat_completions', base_url: 'http://127.0.0.1:1/v1', models: ['offline'], discover_models: true },
        ],
      },
    },
  });

  const models = await troupe.request('GET', '/v1/models');
  assert.equal(models.status, 200, models.text);
  assert.deepEqual(models.json.data.map((m) => m.id), ['listed', 'found-a', 'found-b', 'offline', 'scripted']);

  const r = await post(troupe, { model: 'found-b', input: 'hi' });
  assert.equal(r.status, 200, r.text);
  assert.equal(output_text(r.json), 'from the discovering upstream');
  const asked = await up.requests();
  assert.deepEqual(asked[0], { path: '/v1/models', method: 'GET', authorization: 'Bearer sk-disc' });
  assert.equal(asked[1].path, '/v1/chat/completions');
  assert.equal(asked[1].model, 'found-b');

  assert_model_not_found(await post(troupe, { model: 'found-c', input: 'hi' }), 'found-c', 'a name no upstream lists');
  assert.match(troupe.stdout + troupe.stderr, /model\.upstreams\[1\] \(down\): the model list could not be read/);
});

scenario('check-config refuses a non-boolean discover_models and a model.upstreams entry without base_url, naming each field path', async (s) => {
  const dir = s.tmpdir();
  const file = path.join(dir, 'routing.json');
  fs.writeFileSync(file, JSON.stringify(deep_merge(default_config(), {
    model: {
      upstreams: [
        { name: 'a', protocol: 'responses', base_url: 'http://127.0.0.1:1/v1', models: '*', discover_models: 'yes' },
        { name: 'b', protocol: 'chat_completions', models: ['m'] },
      ],
    },
  })));
  const r = await s.run_troupe(['check-config', '--config', file]);
  assert.equal(r.code, 2, JSON.stringify(r));
  assert.match(r.stderr, /model\.upstreams\[0\]\.discover_models: /);
  assert.match(r.stderr, /model\.upstreams\[1\]\.base_url: required/);
});

scenario('GET /v1/models/{model} answers the model object of a routable name, a discovered one with a slash included, and 404 model_not_found in the OpenAI shape otherwise (RS-13, RS-2)', async (s) => {
  const up = await s.upstream();
  await up.control('POST', '/__models', ['Qwen/Qwen3.6-35B-A3B']);
  const troupe = await s.troupe({
    config: {
      model: {
        models: ['scripted'],
        upstreams: [entry('vllm', 'responses', up, ['beta'], { discover_models: true })],
      },
    },
  });
  const list = await troupe.request('GET', '/v1/models');
  assert.equal(list.status, 200, list.text);
  for (const id of ['beta', 'Qwen/Qwen3.6-35B-A3B', 'scripted']) {
    for (const path of [`/v1/models/${id}`, `/v1/models/${encodeURIComponent(id)}`]) {
      const one = await troupe.request('GET', path);
      assert.equal(one.status, 200, `${path}: ${one.text}`);
      assert.deepEqual(one.json, list.json.data.find((m) => m.id === id), `${path}: the object the list holds`);
    }
  }
  const missing = await troupe.request('GET', '/v1/models/Qwen/other');
  assert_model_not_found(missing, 'Qwen/other', 'GET /v1/models/Qwen/other');
});
