// Caller identity at the caller endpoints (AS-3..AS-8, AS-92) against the real binary: the three
// auth modes (service token, trusted headers, HS256 JWT) on POST /v1/chat/completions and
// POST /v1/runs, the identity a run records in its metadata (AS-7), the per-user block, allow and
// rate limits (AS-8) with their persistent windows (AS-92), the order of refusals (AS-8), and the
// operator endpoints that stay behind the service token in the identity modes (AS-3).
import assert from 'node:assert/strict';
import { hs256_jwt, scenario, until, user } from './harness.mjs';

const service_token = 'identity-it-service-token';
const op = { authorization: `Bearer ${service_token}` };
const secret = 'identity-it-jwt-secret';
const issuer = 'https://idp.example';
const token_required = { detail: 'FastReAct service token required' };

// A one-step script: every run answers at once, with no tool call.
const quick = { model: { script: [{ content: 'identity ok' }] } };

const now_s = () => Math.floor(Date.now() / 1000);
const b64url = (obj) => Buffer.from(JSON.stringify(obj)).toString('base64url');
const jwt = (claims, key = secret, header = {}) => hs256_jwt(claims, key, header);
const bearer = (token) => ({ authorization: `Bearer ${token}` });

// The two caller endpoints, each returning {status, json, text, headers, run_id}.
const endpoints = {
  chat: async (troupe, body, headers = {}) => {
    const r = await troupe.chat(body, headers);
    return { ...r, run_id: r.json?.run_id };
  },
  runs: async (troupe, body, headers = {}) => {
    const r = await troupe.request('POST', '/v1/runs', { body, headers });
    return { ...r, run_id: r.json?.run_id };
  },
};

// A run's stored snapshot, read with the service token (a control endpoint).
async function snapshot(troupe, run_id) {
  const r = await troupe.request('GET', `/v1/runs/${encodeURIComponent(run_id)}`, { headers: op });
  assert.equal(r.status, 200, `GET /v1/runs/${run_id}: ${r.text}`);
  return r.json;
}

// The stored metadata of a run once it is terminal (a background run may still be queued).
async function stored_metadata(troupe, run_id) {
  const snap = await until(async () => {
    const s = await snapshot(troupe, run_id);
    return ['completed', 'failed', 'cancelled'].includes(s.status) && s;
  }, { timeout_ms: 10_000, interval_ms: 20, message: `run ${run_id} to finish` });
  assert.equal(snap.status, 'completed', `run ${run_id} completes: ${JSON.stringify(snap)}`);
  return snap.metadata;
}

// The number of runs the store holds (GET /v1/runs total_count).
async function run_count(troupe) {
  const r = await troupe.request('GET', '/v1/runs?limit=1', { headers: op });
  assert.equal(r.status, 200, `GET /v1/runs: ${r.text}`);
  return r.json.total_count;
}

// AS-7: the run metadata carries tenant_key, user_key and the full identity object.
function check_identity(metadata, expected, what) {
  const text = JSON.stringify(metadata);
  assert.ok(metadata && typeof metadata === 'object', `${what}: metadata is an object: ${text}`);
  assert.equal(metadata.tenant_key, expected.tenant_key, `${what}: metadata.tenant_key: ${text}`);
  assert.equal(metadata.user_key, expected.user_key, `${what}: metadata.user_key: ${text}`);
  assert.deepEqual(metadata.identity, {
    display_name: null, email: null, groups: [], roles: [], ...expected,
  }, `${what}: metadata.identity: ${text}`);
  assert.deepEqual(Object.keys(metadata.identity).sort(),
    ['auth_provider', 'display_name', 'email', 'groups', 'roles', 'subject', 'tenant_key', 'user_key'],
    `${what}: identity has exactly the AS-7 keys: ${text}`);
}

// Sends `body` with `headers` to both caller endpoints, expects 200, and checks the stored identity.
async function expect_identity(troupe, body, headers, expected, what) {
  for (const [name, send] of Object.entries(endpoints)) {
    const r = await send(troupe, { messages: [user('who am I?')], ...body }, headers);
    assert.equal(r.status, 200, `${what} via ${name}: ${r.text}`);
    assert.ok(r.run_id, `${what} via ${name}: a run id: ${r.text}`);
    check_identity(await stored_metadata(troupe, r.run_id), expected, `${what} via ${name}`);
  }
}

// Sends `body` with `headers` to both caller endpoints and expects `status` with `{detail}`.
async function expect_refusal(troupe, body, headers, status, detail, what) {
  for (const [name, send] of Object.entries(endpoints)) {
    const r = await send(troupe, body, headers);
    assert.equal(r.status, status, `${what} via ${name}: ${r.text}`);
    assert.deepEqual(r.json, { detail }, `${what} via ${name}`);
  }
}

const hi = { messages: [user('hi')] };

// --- jwt (AS-6) ------------------------------------------------------------------------------------

scenario('in jwt mode a valid HS256 token admits the caller on both caller endpoints and the run records the mapped claims as its identity (AS-6, AS-7)', async (s) => {
  const troupe = await s.troupe({
    config: { ...quick, service: { service_token }, auth: { mode: 'jwt', jwt_secret: secret } },
  });
  const exp = now_s() + 600;

  // Every mapped claim; tenant_id comes before tenant and org_id in the default claim order, and the
  // body user_key does not override the token's subject.
  const full = jwt({
    sub: 'pska:u1', tenant_id: 'acme', tenant: 'not-this', org_id: 'nor-this', name: 'Uma One',
    email: 'u1@example.com', groups: ['g1', 'g2'], roles: ['admin'], iss: issuer, exp,
  });
  for (const [name, send] of Object.entries(endpoints)) {
    const r = await send(troupe, {
      messages: [user('who am I?')], user_key: 'pska:intruder',
      tool_policy: { mode: 'allowlist', allowed_tools: ['list_dir'] },
      metadata: { caller: 'identity-it', custom: { a: 1 } },
    }, bearer(full));
    assert.equal(r.status, 200, `full token via ${name}: ${r.text}`);
    const md = await stored_metadata(troupe, r.run_id);
    check_identity(md, {
      tenant_key: 'acme', user_key: 'pska:u1', subject: 'pska:u1', display_name: 'Uma One',
      email: 'u1@example.com', groups: ['g1', 'g2'], roles: ['admin'], auth_provider: issuer,
    }, `full token via ${name}`);
    assert.deepEqual(md.tool_policy, { mode: 'allowlist', allowed_tools: ['list_dir'] },
      `via ${name}: the normalized tool_policy is recorded at the top level of the metadata (AS-7): ${JSON.stringify(md)}`);
    assert.equal(md.caller, 'identity-it', `via ${name}: other caller metadata is kept verbatim (AS-7)`);
    assert.deepEqual(md.custom, { a: 1 }, `via ${name}: other caller metadata is kept verbatim (AS-7)`);
  }

  // tenant_key is the first tenant claim tried.
  await expect_identity(troupe, {}, bearer(jwt({ sub: 'pska:u1', tenant_key: 'first', tenant_id: 'second', exp })),
    { tenant_key: 'first', user_key: 'pska:u1', subject: 'pska:u1', auth_provider: 'jwt' }, 'tenant_key claim');
  // With only org_id, org_id names the tenant.
  await expect_identity(troupe, {}, bearer(jwt({ sub: 'pska:u1', org_id: 'org-7', exp })),
    { tenant_key: 'org-7', user_key: 'pska:u1', subject: 'pska:u1', auth_provider: 'jwt' }, 'org_id claim');
  // With no tenant claim, the tenant is the user_key's prefix.
  await expect_identity(troupe, {}, bearer(jwt({ sub: 'pska:u1', exp })),
    { tenant_key: 'pska', user_key: 'pska:u1', subject: 'pska:u1', auth_provider: 'jwt' }, 'no tenant claim');
  // A subject without ':' becomes sso:<sub>; with no iss the provider is "jwt".
  await expect_identity(troupe, {}, bearer(jwt({ sub: 'alice', exp })),
    { tenant_key: 'sso', user_key: 'sso:alice', subject: 'alice', auth_provider: 'jwt' }, 'sub without a colon');
  // A token without exp would never expire: refused unless auth.jwt_require_exp is false (issue 15 #9).
  await expect_refusal(troupe, hi, bearer(jwt({ sub: 'alice' })), 401, 'JWT exp claim required', 'no exp');
  const lenient = await s.troupe({ config: { ...quick, service: { service_token }, auth: { mode: 'jwt', jwt_secret: secret, jwt_require_exp: false } } });
  await expect_identity(lenient, {}, bearer(jwt({ sub: 'alice' })),
    { tenant_key: 'sso', user_key: 'sso:alice', subject: 'alice', auth_provider: 'jwt' }, 'no exp, allowed by config');
});

scenario('in jwt mode a missing, expired, not-yet-valid, wrongly signed, wrong-issuer, wrong-audience or subject-less token is refused 401 with its AS-6 detail', async (s) => {
  const troupe = await s.troupe({
    config: {
      ...quick, service: { service_token },
      auth: { mode: 'jwt', jwt_secret: secret, jwt_issuer: issuer, jwt_audience: 'troupe' },
    },
  });
  const now = now_s();
  const good = { sub: 'pska:u1', iss: issuer, aud: 'troupe', exp: now + 600 };
  const cases = [
    [{}, 'Bearer JWT required', 'no Authorization header'],
    [{ authorization: 'Bearer ' }, 'Bearer JWT required', 'an empty bearer'],
    [bearer(jwt({ ...good, exp: now - 60 })), 'JWT has expired', 'exp in the past'],
    [bearer(jwt({ ...good, nbf: now + 600 })), 'JWT is not valid yet', 'nbf in the future'],
    [bearer(jwt({ ...good, aud: 'someone-else' })), 'JWT audience is invalid', 'another audience'],
    [bearer(jwt({ ...good, aud: ['a', 'b'] })), 'JWT audience is invalid', 'an audience list without troupe'],
    [bearer(jwt({ sub: 'pska:u1', iss: issuer, exp: now + 600 })), 'JWT audience is invalid', 'no aud claim'],
    [bearer(jwt({ ...good, iss: 'https://evil.example' })), 'JWT issuer is invalid', 'another issuer'],
    [bearer(jwt({ iss: issuer, aud: 'troupe', exp: now + 600 })), 'JWT subject claim required', 'no sub claim'],
    [bearer(jwt(good, 'another-secret')), 'JWT signature is invalid', 'signed with another key'],
  ];
  for (const [headers, detail, what] of cases)
    await expect_refusal(troupe, hi, headers, 401, detail, what);

  // HS256 only: an unsigned ("none") token is refused.
  const unsigned = `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(good)}.`;
  for (const [name, send] of Object.entries(endpoints)) {
    const r = await send(troupe, hi, bearer(unsigned));
    assert.equal(r.status, 401, `alg none via ${name}: ${r.text}`);
  }
  assert.equal(await run_count(troupe), 0, 'no refused request created a run');

  // The same configuration admits a token that passes every check; aud may be a list holding it.
  await expect_identity(troupe, {}, bearer(jwt({ ...good, aud: ['other', 'troupe'], nbf: now - 5 })),
    { tenant_key: 'pska', user_key: 'pska:u1', subject: 'pska:u1', auth_provider: issuer }, 'a valid token');
});

scenario('jwt mode without a key answers 500 JWT auth requires jwt_secret, and jwt_secret_env takes the key from the environment (AS-6)', async (s) => {
  const keyless = await s.troupe({
    config: { ...quick, service: { service_token }, auth: { mode: 'jwt', jwt_secret_env: 'IDENTITY_IT_UNSET_KEY' } },
  });
  await expect_refusal(keyless, hi, bearer(jwt({ sub: 'pska:u1', exp: now_s() + 600 })), 500, 'JWT auth requires jwt_secret',
    'a token with no key configured');
  // The service token still works (AS-4).
  await expect_identity(keyless, { user_key: 'pska:svc' }, op,
    { tenant_key: 'pska', user_key: 'pska:svc', subject: 'pska:svc', auth_provider: 'service_token' },
    'the service token on a keyless jwt troupe');

  const from_env = await s.troupe({
    config: { ...quick, service: { service_token }, auth: { mode: 'jwt', jwt_secret_env: 'IDENTITY_IT_JWT_KEY' } },
    env: { IDENTITY_IT_JWT_KEY: 'key-from-the-environment' },
  });
  await expect_identity(from_env, {}, bearer(jwt({ sub: 'corp:u9', exp: now_s() + 600 }, 'key-from-the-environment')),
    { tenant_key: 'corp', user_key: 'corp:u9', subject: 'corp:u9', auth_provider: 'jwt' },
    'a token signed with the environment key');
  await expect_refusal(from_env, hi, bearer(jwt({ sub: 'corp:u9' }, secret)), 401, 'JWT signature is invalid',
    'a token signed with another key');
});

// --- trusted_headers (AS-5) ------------------------------------------------------------------------

scenario('in trusted_headers mode the identity comes from the X-FastReAct headers, the body user_key is ignored, and a missing user header is 401 (AS-5, AS-7)', async (s) => {
  const troupe = await s.troupe({
    config: { ...quick, service: { service_token }, auth: { mode: 'trusted_headers' } },
  });
  await expect_identity(troupe, { user_key: 'pska:body-user' }, {
    'X-FastReAct-User-Key': 'pska:u2',
    'X-FastReAct-Tenant-Key': 'acme',
    'X-FastReAct-Subject': 'subject-2',
    'X-FastReAct-Display-Name': 'Uma Two',
    'X-FastReAct-Email': 'u2@example.com',
    'X-FastReAct-Groups': 'g1, g2',
    'X-FastReAct-Roles': 'reader,writer',
    'X-FastReAct-Auth-Provider': 'oidc-proxy',
  }, {
    tenant_key: 'acme', user_key: 'pska:u2', subject: 'subject-2', display_name: 'Uma Two',
    email: 'u2@example.com', groups: ['g1', 'g2'], roles: ['reader', 'writer'], auth_provider: 'oidc-proxy',
  }, 'every trusted header');

  // Only the user key: subject = user key, tenant = its prefix, provider trusted_headers; the body
  // user_key is ignored.
  await expect_identity(troupe, { user_key: 'pska:admin' }, { 'X-FastReAct-User-Key': 'corp:bob' },
    { tenant_key: 'corp', user_key: 'corp:bob', subject: 'corp:bob', auth_provider: 'trusted_headers' },
    'only the user key header');

  await expect_refusal(troupe, { ...hi, user_key: 'pska:body-user' }, {}, 401,
    'FastReAct trusted identity header required', 'no user key header, a body user_key');
  await expect_refusal(troupe, hi, { 'X-FastReAct-Tenant-Key': 'acme', 'X-FastReAct-Subject': 's' }, 401,
    'FastReAct trusted identity header required', 'other trusted headers but no user key');
});

scenario('in trusted_headers mode configured header names replace the X-FastReAct defaults (AS-5)', async (s) => {
  const troupe = await s.troupe({
    config: {
      ...quick, service: { service_token },
      auth: { mode: 'trusted_headers', trusted_headers: { user_key: 'X-Remote-User', tenant_key: 'X-Remote-Org' } },
    },
  });
  await expect_identity(troupe, {}, { 'X-Remote-User': 'pska:u3', 'X-Remote-Org': 'org-3' },
    { tenant_key: 'org-3', user_key: 'pska:u3', subject: 'pska:u3', auth_provider: 'trusted_headers' },
    'the configured headers');
  await expect_refusal(troupe, hi, { 'X-FastReAct-User-Key': 'pska:u3' }, 401,
    'FastReAct trusted identity header required', 'only the default user key header');
});

// --- the service token in every mode (AS-4) --------------------------------------------------------

scenario('in every auth mode a valid service token wins with auth_provider service_token and user_key from the body, else the header, else anonymous (AS-4, AS-7)', async (s) => {
  for (const mode of ['service_token', 'trusted_headers', 'jwt']) {
    const troupe = await s.troupe({
      config: { ...quick, service: { service_token }, auth: { mode, jwt_secret: secret } },
    });
    const svc = (provider) => ({ auth_provider: 'service_token', ...provider });
    const header_token = { 'X-FastReAct-Service-Token': service_token };
    await expect_identity(troupe, { user_key: 'pska:body' }, { ...op, 'X-FastReAct-User-Key': 'corp:header' },
      svc({ tenant_key: 'pska', user_key: 'pska:body', subject: 'pska:body' }), `${mode}: body user_key`);
    await expect_identity(troupe, { user_key: 'pska:body', metadata: { tenant_key: 'explicit' } },
      { ...header_token, 'X-FastReAct-Tenant-Key': 'from-header' },
      svc({ tenant_key: 'explicit', user_key: 'pska:body', subject: 'pska:body' }), `${mode}: metadata.tenant_key`);
    await expect_identity(troupe, {}, { ...op, 'X-FastReAct-User-Key': 'corp:header', 'X-FastReAct-Tenant-Key': 'hdr' },
      svc({ tenant_key: 'hdr', user_key: 'corp:header', subject: 'corp:header' }), `${mode}: header user and tenant`);
    await expect_identity(troupe, {}, header_token,
      svc({ tenant_key: '', user_key: 'anonymous', subject: 'anonymous' }), `${mode}: no user key`);
    if (mode === 'jwt')
      // The service token in its own header wins over an invalid JWT in Authorization.
      await expect_identity(troupe, { user_key: 'pska:body' }, { ...header_token, authorization: 'Bearer not-a-jwt' },
        svc({ tenant_key: 'pska', user_key: 'pska:body', subject: 'pska:body' }), 'jwt: service token beside a bad JWT');
    // A wrong service token is no credential.
    const wrong = await endpoints.chat(troupe, hi, { 'X-FastReAct-Service-Token': 'wrong', 'X-FastReAct-User-Key': 'pska:u' });
    if (mode === 'service_token') assert.deepEqual([wrong.status, wrong.json], [401, token_required], wrong.text);
    else if (mode === 'jwt') assert.deepEqual([wrong.status, wrong.json], [401, { detail: 'Bearer JWT required' }], wrong.text);
    else {
      assert.equal(wrong.status, 200, `trusted_headers: the user header admits, not the wrong token: ${wrong.text}`);
      const md = await stored_metadata(troupe, wrong.run_id);
      assert.equal(md.identity.auth_provider, 'trusted_headers', JSON.stringify(md));
    }
    await s.children.at(-1).stop();
  }
});

// --- operator and control endpoints (AS-3, AS-84) --------------------------------------------------

scenario('in jwt and trusted_headers modes the operator endpoints need the service token and refuse caller identities 401 (AS-3, AS-84)', async (s) => {
  const jwt_caller = bearer(jwt({ sub: 'pska:u1', exp: now_s() + 600 }));
  const trusted_caller = { 'X-FastReAct-User-Key': 'pska:u1' };
  for (const [mode, caller] of [['jwt', jwt_caller], ['trusted_headers', trusted_caller]]) {
    for (const token of [service_token, undefined]) {
      const troupe = await s.troupe({
        config: { ...quick, service: token ? { service_token: token } : {}, auth: { mode, jwt_secret: secret } },
      });
      const what = `${mode}, ${token ? 'a' : 'no'} service token configured`;
      // The caller identity is good on a caller endpoint ...
      const c = await endpoints.chat(troupe, hi, caller);
      assert.equal(c.status, 200, `${what}: the caller identity is admitted on chat: ${c.text}`);
      // ... but not on an operator endpoint.
      const operator = [
        ['GET', '/ready', undefined],
        ['GET', '/v1/policy', undefined],
        ['POST', '/v1/policy/check', { tool_name: 'list_dir', tool_args: {} }],
      ];
      for (const [method, route, body] of operator) {
        for (const headers of [{}, caller, { authorization: 'Bearer wrong' }]) {
          const r = await troupe.request(method, route, { body, headers });
          assert.equal(r.status, 401, `${what}: ${method} ${route} with ${JSON.stringify(headers)}: ${r.text}`);
          assert.deepEqual(r.json, token_required, `${what}: ${method} ${route}`);
        }
        if (token) {
          for (const headers of [op, { 'X-FastReAct-Service-Token': service_token }]) {
            const r = await troupe.request(method, route, { body, headers });
            assert.equal(r.status, 200, `${what}: ${method} ${route} with the service token: ${r.text}`);
          }
        }
      }
      // Control endpoints refuse a request with no credential at all.
      for (const route of ['/v1/runs', `/v1/runs/${c.run_id}`, `/v1/runs/${c.run_id}/events`]) {
        const r = await troupe.request('GET', route);
        assert.equal(r.status, 401, `${what}: GET ${route} with no credential: ${r.text}`);
        if (token) {
          const ok = await troupe.request('GET', route, { headers: op });
          assert.equal(ok.status, 200, `${what}: GET ${route} with the service token: ${ok.text}`);
        }
      }
      await s.children.at(-1).stop();
    }
  }
});

// --- limits (AS-8, AS-92) --------------------------------------------------------------------------

scenario('a blocked user is refused 403 User is blocked and a user missing from a non-empty allow list 403 User is not allowed, on both caller endpoints (AS-8)', async (s) => {
  const troupe = await s.troupe({
    config: {
      ...quick,
      service: { service_token, blocked_user_keys: ['pska:bad'], allowed_user_keys: ['pska:good', 'pska:bad'] },
      auth: { mode: 'trusted_headers' },
    },
  });
  const as = (key) => ({ 'X-FastReAct-User-Key': key });
  await expect_refusal(troupe, hi, as('pska:bad'), 403, "User 'pska:bad' is blocked", 'blocked (also allowed)');
  await expect_refusal(troupe, hi, as('pska:other'), 403, "User 'pska:other' is not allowed", 'not on the allow list');
  // The service-token identity is checked the same way (its user_key comes from the body).
  await expect_refusal(troupe, { ...hi, user_key: 'pska:bad' }, op, 403, "User 'pska:bad' is blocked",
    'blocked, named in the body with the service token');
  await expect_refusal(troupe, hi, op, 403, "User 'anonymous' is not allowed",
    'anonymous with the service token');
  assert.equal(await run_count(troupe), 0, 'no refused request created a run');
  await expect_identity(troupe, {}, as('pska:good'),
    { tenant_key: 'pska', user_key: 'pska:good', subject: 'pska:good', auth_provider: 'trusted_headers' },
    'an allowed user');
  assert.equal(await run_count(troupe), 2, 'the allowed user ran once per endpoint');
});

scenario('request N+1 of a user within the hour is refused 429 with Retry-After, per user, and the window survives a restart (AS-8, AS-92)', async (s) => {
  const config = { ...quick, service: { service_token, rate_limit_per_hour: 3 } };
  const first = await s.troupe({ config });
  const as = (key) => ({ ...hi, user_key: key });
  const limited = "Rate limit exceeded for user 'pska:rl': 3/hour";

  // Requests on either caller endpoint count against the same window.
  const sends = [endpoints.chat, endpoints.runs, endpoints.chat];
  for (const [i, send] of sends.entries()) {
    const r = await send(first, as('pska:rl'), op);
    assert.equal(r.status, 200, `request ${i + 1} of 3: ${r.text}`);
  }
  const check_429 = (r, what) => {
    assert.equal(r.status, 429, `${what}: ${r.text}`);
    assert.deepEqual(r.json, { detail: limited }, what);
    const retry = r.headers.get('retry-after');
    assert.match(String(retry), /^\d+$/, `${what}: Retry-After is a number of seconds: ${retry}`);
    assert.ok(Number(retry) >= 1 && Number(retry) <= 3600, `${what}: 1 <= Retry-After <= 3600: ${retry}`);
  };
  for (const [name, send] of Object.entries(endpoints))
    check_429(await send(first, as('pska:rl'), op), `request 4 via ${name}`);
  // Another user has a window of its own.
  const other = await endpoints.runs(first, as('pska:other'), op);
  assert.equal(other.status, 200, `another user: ${other.text}`);
  const runs_before = await run_count(first);
  assert.equal(runs_before, 4, 'the refused requests created no run');

  // AS-92: SIGTERM, then the same data dir and config.
  const exit = await first.stop('SIGTERM');
  assert.ok(!exit.killed_after_timeout, `troupe stops on SIGTERM: ${JSON.stringify(exit)}`);
  const second = await s.troupe({ data_dir: first.data_dir, config });
  for (const [name, send] of Object.entries(endpoints))
    check_429(await send(second, as('pska:rl'), op), `after the restart via ${name}`);
  // pska:other used 1 of 3 before the restart: two more are admitted, the next is refused.
  for (const i of [2, 3]) {
    const r = await endpoints.chat(second, as('pska:other'), op);
    assert.equal(r.status, 200, `pska:other request ${i} after the restart: ${r.text}`);
  }
  const over = await endpoints.chat(second, as('pska:other'), op);
  assert.equal(over.status, 429, `pska:other request 4 after the restart: ${over.text}`);
  assert.deepEqual(over.json, { detail: "Rate limit exceeded for user 'pska:other': 3/hour" });
});

// --- order of refusals (AS-8: 401/500 → 422 → 403 → 429 (counted) → 400) ---------------------------

scenario('refusals come in the order 401 before 422 before 403 before 429 before 400 (AS-8, AS-2)', async (s) => {
  const troupe = await s.troupe({
    config: {
      ...quick,
      service: { service_token, blocked_user_keys: ['pska:bad'], rate_limit_per_hour: 2 },
      auth: { mode: 'trusted_headers' },
    },
  });
  const malformed = '{"messages": [';
  const bad_temperature = { messages: [user('hi')], temperature: 5 };
  const post_raw = (route, raw, headers) => troupe.request('POST', route, {
    raw, headers: { 'content-type': 'application/json', ...headers },
  });
  for (const route of ['/v1/chat/completions', '/v1/runs']) {
    // No identity and an invalid body: 401 first.
    let r = await post_raw(route, malformed, {});
    assert.equal(r.status, 401, `${route}: malformed JSON, no identity: ${r.text}`);
    assert.deepEqual(r.json, { detail: 'FastReAct trusted identity header required' });
    r = await troupe.request('POST', route, { body: bad_temperature });
    assert.equal(r.status, 401, `${route}: temperature 5, no identity: ${r.text}`);
    // A blocked user with an invalid body: 422 before 403.
    r = await post_raw(route, malformed, { 'X-FastReAct-User-Key': 'pska:bad' });
    assert.equal(r.status, 422, `${route}: malformed JSON from a blocked user: ${r.text}`);
    assert.ok(Array.isArray(r.json?.detail), `${route}: a 422 detail is a list (AS-2): ${r.text}`);
    r = await troupe.request('POST', route, { body: bad_temperature, headers: { 'X-FastReAct-User-Key': 'pska:bad' } });
    assert.equal(r.status, 422, `${route}: temperature 5 from a blocked user: ${r.text}`);
    assert.ok(Array.isArray(r.json?.detail), `${route}: a 422 detail is a list (AS-2): ${r.text}`);
  }

  // A 400 request is counted against the window (429 comes before 400): with a limit of 2, an
  // empty-messages request and one good request use it up.
  const as_counted = { 'X-FastReAct-User-Key': 'pska:counted' };
  let r = await endpoints.chat(troupe, { messages: [] }, as_counted);
  assert.equal(r.status, 400, `empty messages: ${r.text}`);
  assert.deepEqual(r.json, { detail: 'No messages provided' });
  r = await endpoints.chat(troupe, hi, as_counted);
  assert.equal(r.status, 200, `the second request: ${r.text}`);
  r = await endpoints.runs(troupe, { messages: [] }, as_counted);
  assert.equal(r.status, 429, `over the limit, a 400 body gets 429: ${r.text}`);
  assert.deepEqual(r.json, { detail: "Rate limit exceeded for user 'pska:counted': 2/hour" });
  // 422 still comes before 429.
  r = await troupe.request('POST', '/v1/runs', { body: bad_temperature, headers: as_counted });
  assert.equal(r.status, 422, `over the limit, a 422 body gets 422: ${r.text}`);
  // A blocked user is refused 403, never counted into a 429.
  for (let i = 0; i < 4; i++) {
    r = await endpoints.chat(troupe, hi, { 'X-FastReAct-User-Key': 'pska:bad' });
    assert.equal(r.status, 403, `blocked request ${i + 1}: ${r.text}`);
  }
});
