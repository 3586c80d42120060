// The service policy as operators see it (§6): GET /v1/policy with its snapshot hash (AS-39, AS-93),
// POST /v1/policy/check running the one decision function (AS-35..AS-38, AS-40, AS-88), the service
// token on both (AS-1, AS-3), and invalid policies refused at startup (AS-2, AS-41).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { scenario, deep_merge, default_config, user } from './harness.mjs';

const check_keys = [
  'tool_name', 'user_key', 'tenant_key', 'level', 'reason', 'pattern_matched', 'policy_scope', 'policy_action',
  'policy_matched', 'requires_confirmation', 'should_allow',
];

// Canonical JSON (AS-93): keys sorted, no whitespace.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object')
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  return JSON.stringify(v);
}
const policy_hash = (policy) => crypto.createHash('sha256').update(canonical(policy)).digest('hex').slice(0, 16);

async function get_policy(troupe, headers = {}) {
  const res = await troupe.request('GET', '/v1/policy', { headers });
  assert.equal(res.status, 200, `GET /v1/policy: ${res.text}`);
  return res.json;
}

// POST /v1/policy/check → the decision, with every AS-40 key present.
async function check(troupe, body, headers = {}) {
  const res = await troupe.request('POST', '/v1/policy/check', { body, headers });
  assert.equal(res.status, 200, `POST /v1/policy/check ${JSON.stringify(body)}: ${res.text}`);
  for (const k of check_keys) assert.ok(k in res.json, `the decision has ${k}: ${res.text}`);
  assert.equal(res.json.requires_confirmation, res.json.level === 'danger', `requires_confirmation = danger: ${res.text}`);
  assert.equal(res.json.should_allow, res.json.level !== 'forbidden', `should_allow = not forbidden: ${res.text}`);
  return res.json;
}

const exec = (command, extra = {}) => ({ tool_name: 'exec', tool_args: { command }, ...extra });

// A policy that sets all five keys, so the configured object and the one GET /v1/policy shows are
// the same JSON. Keys deliberately out of order.
const full_policy = {
  user_rules: { 'pska:operator': { tools: { exec: 'require_approval' } } },
  tool_rules: { write_file: 'deny', exec: 'require_approval' },
  tool_profiles: { readonly: { tools: ['read_file', 'list_dir'] } },
  tenant_rules: { pska: { tools: { pska_search: 'allow', exec: 'deny' } } },
  default_action: 'caution',
};

scenario('GET /v1/policy shows the configured policy, the fixed priority and evaluation order, and a policy_snapshot_hash that is sha256 of its canonical JSON (AS-39, AS-93)', async (s) => {
  const troupe = await s.troupe({ config: { policy: full_policy } });
  const doc = await get_policy(troupe);
  assert.deepEqual(Object.keys(doc).sort(), [
    'actions', 'evaluation_order', 'policy', 'policy_snapshot_hash', 'policy_version', 'priority', 'reload_supported',
    'schema', 'tenant_inference',
  ]);
  assert.equal(doc.schema, 'fastreact.policy.v1');
  assert.deepEqual(doc.policy, full_policy, 'the policy is shown as configured');
  assert.deepEqual(Object.keys(doc.policy).sort(), ['default_action', 'tenant_rules', 'tool_profiles', 'tool_rules', 'user_rules']);
  assert.match(doc.policy_snapshot_hash, /^[0-9a-f]{16}$/);
  assert.equal(doc.policy_snapshot_hash, policy_hash(full_policy), `sha256 of ${canonical(full_policy)}`);
  assert.equal(doc.policy_snapshot_hash, policy_hash(doc.policy), 'a client can recompute it from the shown policy');
  assert.equal(typeof doc.policy_version, 'string');
  assert.ok(doc.policy_version.length > 0);
  assert.equal(doc.reload_supported, false);
  assert.deepEqual(doc.actions, { allow: 'safe', caution: 'caution', require_approval: 'danger', deny: 'forbidden' });
  assert.deepEqual(doc.priority, ['run_tool_policy', 'user_rules', 'tenant_rules', 'tool_rules', 'default_action', 'built_in_safety']);
  assert.deepEqual(doc.evaluation_order, [
    'run_tool_policy', 'allow_all', 'built_in_forbidden', 'user_rules', 'tenant_rules', 'tool_rules', 'default_action',
    'built_in_safety',
  ]);
  assert.equal(doc.tenant_inference, 'prefix_before_colon_in_user_key');
});

scenario('the policy hash ignores key order and whitespace in the config, changes with any rule, and differs without a policy (AS-93)', async (s) => {
  const reordered = {
    default_action: 'caution',
    tenant_rules: { pska: { tools: { exec: 'deny', pska_search: 'allow' } } },
    tool_profiles: { readonly: { tools: ['read_file', 'list_dir'] } },
    tool_rules: { exec: 'require_approval', write_file: 'deny' },
    user_rules: { 'pska:operator': { tools: { exec: 'require_approval' } } },
  };
  const changed = deep_merge(full_policy, { tool_rules: { write_file: 'caution' } });
  const a = await get_policy(await s.troupe({ config: { policy: full_policy } }));
  const b = await get_policy(await s.troupe({ config: { policy: reordered } }));
  const c = await get_policy(await s.troupe({ config: { policy: changed } }));
  assert.equal(a.policy_snapshot_hash, b.policy_snapshot_hash, 'the same policy in another key order hashes the same');
  assert.notEqual(a.policy_snapshot_hash, c.policy_snapshot_hash, 'one changed rule changes the hash');
  assert.equal(c.policy_snapshot_hash, policy_hash(changed));

  const none = await get_policy(await s.troupe());
  assert.deepEqual(none.policy, { default_action: null, tool_rules: {}, user_rules: {}, tenant_rules: {}, tool_profiles: {} });
  assert.match(none.policy_snapshot_hash, /^[0-9a-f]{16}$/);
  assert.notEqual(none.policy_snapshot_hash, a.policy_snapshot_hash);
});

scenario('POST /v1/policy/check answers the reference example: tool_rules.exec require_approval makes ls danger with scope tool:exec (AS-40)', async (s) => {
  const troupe = await s.troupe({ config: { policy: { tool_rules: { exec: 'require_approval' } } } });
  const res = await troupe.request('POST', '/v1/policy/check', { body: exec('ls', { user_key: 'pska:u1' }) });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.json, {
    tool_name: 'exec',
    user_key: 'pska:u1',
    tenant_key: 'pska',
    level: 'danger',
    reason: 'Policy tool:exec requires approval',
    pattern_matched: null,
    policy_scope: 'tool:exec',
    policy_action: 'require_approval',
    policy_matched: true,
    requires_confirmation: true,
    should_allow: true,
  });
});

scenario('dangerous exec patterns are checked before safe ones: echo x > f, ls; rm a and cat a | rm b are danger, ls -la and git status safe, python x.py caution (AS-37, AS-88)', async (s) => {
  const troupe = await s.troupe();
  const cases = [
    ['echo x > f', 'danger', 'Command matches dangerous pattern', '>\\s*'],
    ['ls; rm a', 'danger', 'Command matches dangerous pattern', '\\brm\\s+'],
    ['cat a | rm b', 'danger', 'Command matches dangerous pattern', '\\brm\\s+'],
    ['ls -la', 'safe', 'Command matches safe pattern', '\\bls\\b'],
    ['git status', 'safe', 'Command matches safe pattern', '\\bgit\\s+(status|log|diff|branch|show)'],
    ['python x.py', 'caution', 'Unknown command (logged but allowed)', null],
    ['chmod 600 key', 'danger', 'Command matches dangerous pattern', '\\bchmod\\s+'],
    ['mv a b', 'danger', 'Command matches dangerous pattern', '\\bmv\\s+'],
  ];
  for (const [command, level, reason, pattern] of cases) {
    const d = await check(troupe, exec(command, { user_key: 'pska:u1' }));
    assert.equal(d.level, level, `${command}: ${JSON.stringify(d)}`);
    assert.equal(d.reason, reason, command);
    assert.equal(d.pattern_matched, pattern, command);
    assert.equal(d.policy_matched, false, command);
    assert.equal(d.policy_scope, null, command);
    assert.equal(d.policy_action, null, command);
  }
  // The other heuristics (AS-37).
  const tools = [
    ['read_file', 'safe', 'Tool is in safe whitelist'],
    ['list_dir', 'safe', 'Tool is in safe whitelist'],
    ['write_file', 'caution', 'Tool modifies files (logged but allowed)'],
    ['edit_file', 'caution', 'Tool modifies files (logged but allowed)'],
    ['pska_pska_search', 'caution', 'Unclassified tool (logged but allowed)'],
  ];
  for (const [tool_name, level, reason] of tools) {
    const d = await check(troupe, { tool_name, tool_args: { path: 'x' } });
    assert.equal(d.level, level, `${tool_name}: ${JSON.stringify(d)}`);
    assert.equal(d.reason, reason, tool_name);
  }
});

scenario('forbidden exec patterns beat every policy rule and only safety.allow_all comes before them (AS-35, AS-36)', async (s) => {
  const forbidden = [
    ['rm -rf /', '\\brm\\s+-rf\\s+/'],
    ['rm -rf .', '\\brm\\s+-rf\\s+\\.'],
    ['mkfs /dev/sda1', '\\bmkfs\\s+'],
    ['dd if=/dev/zero of=/dev/sda', '\\bdd\\s+'],
    ['shutdown now', '\\bshutdown\\s+'],
    ['format c:', '\\bformat\\s+'],
  ];
  const troupe = await s.troupe({
    config: { policy: { default_action: 'allow', tool_rules: { exec: 'allow' }, user_rules: { 'pska:root': 'allow' } } },
  });
  for (const [command, pattern] of forbidden) {
    const d = await check(troupe, exec(command, { user_key: 'pska:root' }));
    assert.equal(d.level, 'forbidden', `${command}: ${JSON.stringify(d)}`);
    assert.equal(d.reason, 'Command matches forbidden pattern');
    assert.equal(d.pattern_matched, pattern, command);
    assert.equal(d.policy_matched, false);
    assert.equal(d.should_allow, false);
  }
  const open = await s.troupe({ config: { safety: { allow_all: true }, policy: { tool_rules: { exec: 'deny' } } } });
  const d = await check(open, exec('rm -rf /'));
  assert.equal(d.level, 'safe', JSON.stringify(d));
  assert.equal(d.reason, 'Safety checks disabled (allow_all=True)');
  const denied = await check(open, exec('ls'));
  assert.equal(denied.level, 'safe', 'allow_all comes before every policy rule too');
});

scenario('policy rules apply in the order user_rules, tenant_rules, tool_rules, tool_rules["*"], default_action, each naming its scope (AS-34, AS-35)', async (s) => {
  const troupe = await s.troupe({
    config: {
      policy: {
        default_action: 'require_approval',
        tool_rules: { exec: 'caution', '*': 'deny' },
        tenant_rules: {
          acme: { tools: { exec: 'deny' } },
          pska: { tools: { exec: 'allow' } },
          beta: { action: 'caution' },
          gamma: { default_action: 'deny', tools: { read_file: 'allow' } },
          delta: { tools: { '*': 'require_approval', list_dir: 'allow' } },
        },
        user_rules: {
          'pska:boss': { tools: { exec: 'require_approval' } },
          'pska:readonly': { tools: { read_file: 'allow' } }, // no entry for exec: falls through
        },
      },
    },
  });
  const cases = [
    // [request, level, reason, scope, action]
    [exec('ls', { user_key: 'pska:boss' }), 'danger', 'Policy user:pska:boss requires approval', 'user:pska:boss', 'require_approval'],
    [exec('ls', { user_key: 'pska:readonly' }), 'safe', 'Policy tenant:pska allows tool', 'tenant:pska', 'allow'],
    [exec('ls', { user_key: 'pska:anyone' }), 'safe', 'Policy tenant:pska allows tool', 'tenant:pska', 'allow'],
    [exec('ls', { user_key: 'pska:anyone', tenant_key: 'acme' }), 'forbidden', 'Policy tenant:acme denies tool', 'tenant:acme', 'deny'],
    [exec('ls', { user_key: 'beta:x' }), 'caution', 'Policy tenant:beta allows with caution', 'tenant:beta', 'caution'],
    [{ tool_name: 'read_file', tool_args: { path: 'a' }, user_key: 'gamma:x' }, 'safe', 'Policy tenant:gamma allows tool', 'tenant:gamma', 'allow'],
    [exec('ls', { user_key: 'gamma:x' }), 'forbidden', 'Policy tenant:gamma denies tool', 'tenant:gamma', 'deny'],
    [{ tool_name: 'list_dir', tool_args: {}, user_key: 'delta:x' }, 'safe', 'Policy tenant:delta allows tool', 'tenant:delta', 'allow'],
    [exec('ls', { user_key: 'delta:x' }), 'danger', 'Policy tenant:delta requires approval', 'tenant:delta', 'require_approval'],
    [exec('ls', { user_key: 'nobody' }), 'caution', 'Policy tool:exec allows with caution', 'tool:exec', 'caution'],
    [{ tool_name: 'read_file', tool_args: {}, user_key: 'nobody' }, 'forbidden', 'Policy tool:* denies tool', 'tool:*', 'deny'],
  ];
  for (const [body, level, reason, scope, action] of cases) {
    const d = await check(troupe, body);
    const what = JSON.stringify(body);
    assert.equal(d.level, level, `${what}: ${JSON.stringify(d)}`);
    assert.equal(d.reason, reason, what);
    assert.equal(d.policy_scope, scope, what);
    assert.equal(d.policy_action, action, what);
    assert.equal(d.policy_matched, true, what);
  }
  // The tenant is the explicit tenant_key, else the user_key prefix, else "" (AS-7).
  const inferred = await check(troupe, exec('ls', { user_key: 'acme:u' }));
  assert.equal(inferred.tenant_key, 'acme');
  const explicit = await check(troupe, exec('ls', { user_key: 'acme:u', tenant_key: 'pska' }));
  assert.equal(explicit.tenant_key, 'pska');
  assert.equal(explicit.policy_scope, 'tenant:pska', 'an explicit tenant wins');
  const bare = await check(troupe, exec('ls', { user_key: 'nobody' }));
  assert.equal(bare.tenant_key, '');

  // default_action decides when nothing else matches.
  const fallback = await s.troupe({ config: { policy: { default_action: 'require_approval', tool_rules: { exec: 'allow' } } } });
  const d = await check(fallback, { tool_name: 'read_file', tool_args: { path: 'a' } });
  assert.equal(d.level, 'danger', `default_action replaces the safe heuristics (AS-37): ${JSON.stringify(d)}`);
  assert.equal(d.reason, 'Policy default requires approval');
  assert.equal(d.policy_scope, 'default');
  assert.equal(d.policy_action, 'require_approval');
});

scenario('safety.enabled false answers safe "Safety policy disabled" and strict_mode makes write_file and edit_file danger (AS-37, AS-40)', async (s) => {
  const off = await s.troupe({ config: { safety: { enabled: false }, policy: { tool_rules: { exec: 'deny' } } } });
  for (const body of [exec('rm -rf /'), exec('ls'), { tool_name: 'write_file', tool_args: { path: 'a', content: 'b' } }]) {
    const d = await check(off, body);
    assert.equal(d.level, 'safe', `${JSON.stringify(body)}: ${JSON.stringify(d)}`);
    assert.equal(d.reason, 'Safety policy disabled');
  }
  const strict = await s.troupe({ config: { safety: { strict_mode: true } } });
  for (const tool_name of ['write_file', 'edit_file']) {
    const d = await check(strict, { tool_name, tool_args: { path: 'a' } });
    assert.equal(d.level, 'danger', `${tool_name}: ${JSON.stringify(d)}`);
    assert.equal(d.requires_confirmation, true);
  }
  assert.equal((await check(strict, { tool_name: 'read_file', tool_args: { path: 'a' } })).level, 'safe');
});

scenario('a policy check has no side effects: no approval, no audit record, no run (AS-40)', async (s) => {
  const troupe = await s.troupe({ config: { policy: { tool_rules: { exec: 'require_approval' } } } });
  for (const body of [exec('rm a'), exec('rm -rf /'), exec('ls')]) await check(troupe, body);
  const approvals = await troupe.request('GET', '/v1/approvals');
  assert.equal(approvals.status, 200, approvals.text);
  assert.equal(approvals.json.total_count, 0, 'a dry run opens no approval');
  const runs = await troupe.request('GET', '/v1/runs');
  assert.equal(runs.status, 200, runs.text);
  assert.equal(runs.json.total_count, 0, 'a dry run starts no run');
  const audit = path.join(troupe.data_dir, 'audit.jsonl');
  const text = fs.existsSync(audit) ? fs.readFileSync(audit, 'utf8') : '';
  assert.equal(text, '', 'a dry run writes no audit record');
});

scenario('a policy check without a string tool_name or with non-object tool_args is 422 (AS-2, AS-40)', async (s) => {
  const troupe = await s.troupe();
  for (const [body, field] of [
    [{ tool_args: {} }, 'tool_name'],
    [{ tool_name: 7 }, 'tool_name'],
    [{ tool_name: 'exec', tool_args: 'ls' }, 'tool_args'],
  ]) {
    const res = await troupe.request('POST', '/v1/policy/check', { body });
    assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
    assert.ok(Array.isArray(res.json.detail), res.text);
    assert.deepEqual(res.json.detail[0].loc, ['body', field], res.text);
  }
  const raw = await troupe.request('POST', '/v1/policy/check', { raw: '{not json', headers: { 'content-type': 'application/json' } });
  assert.equal(raw.status, 422, raw.text);
});

scenario('GET /v1/policy and POST /v1/policy/check require the service token when one is configured (AS-1, AS-3)', async (s) => {
  const troupe = await s.troupe({ config: { service: { service_token: 'policy-token' }, policy: full_policy } });
  const denied = { detail: 'FastReAct service token required' };
  for (const headers of [{}, { authorization: 'Bearer nope' }, { 'x-fastreact-service-token': 'policy-token-x' }]) {
    const g = await troupe.request('GET', '/v1/policy', { headers });
    assert.equal(g.status, 401, `GET with ${JSON.stringify(headers)}: ${g.text}`);
    assert.deepEqual(g.json, denied);
    const c = await troupe.request('POST', '/v1/policy/check', { body: exec('ls'), headers });
    assert.equal(c.status, 401, `check with ${JSON.stringify(headers)}: ${c.text}`);
    assert.deepEqual(c.json, denied);
  }
  for (const headers of [{ authorization: 'Bearer policy-token' }, { 'x-fastreact-service-token': 'policy-token' }]) {
    const doc = await get_policy(troupe, headers);
    assert.equal(doc.policy_snapshot_hash, policy_hash(full_policy));
    const d = await check(troupe, exec('ls', { user_key: 'pska:operator' }), headers);
    assert.equal(d.policy_scope, 'user:pska:operator');
  }
});

scenario('an invalid policy aborts check-config and serve with exit code 2 naming the offending key (AS-2, AS-41)', async (s) => {
  const dir = s.tmpdir();
  const cases = [
    [{ tool_rules: { exec: 'require-approval' } },
      'policy.tool_rules.exec has invalid action "require-approval"; expected one of allow, caution, require_approval, deny'],
    [{ tenant_rules: { pska: { tools: ['exec'] } } }, 'policy.tenant_rules.pska.tools must be an object'],
    [{ user_rules: { 'pska:u1': { note: 'nothing useful' } } },
      'policy.user_rules.pska:u1 must define action, default_action, tools, or tool_rules'],
    [{ default_action: 'maybe' }, 'policy.default_action has invalid action "maybe"'],
  ];
  for (const [policy, message] of cases) {
    const file = path.join(dir, `bad-${cases.findIndex((c) => c[0] === policy)}.json`);
    fs.writeFileSync(file, JSON.stringify(deep_merge(default_config(), { policy })));
    const r = await s.run_troupe(['check-config', '--config', file]);
    assert.equal(r.code, 2, `check-config ${JSON.stringify(policy)}: ${JSON.stringify(r)}`);
    assert.ok((r.stderr + r.stdout).includes(message), `check-config names the key: want ${message}\n${r.stderr}${r.stdout}`);
    const serve = await s.run_troupe(['serve', '--config', file, '--port', '0', '--data-dir', path.join(dir, 'data')]);
    assert.equal(serve.code, 2, `serve ${JSON.stringify(policy)}: ${JSON.stringify(serve)}`);
    assert.ok((serve.stderr + serve.stdout).includes(message), `serve names the key: want ${message}\n${serve.stderr}${serve.stdout}`);
    assert.doesNotMatch(serve.stdout, /troupe listening on/);
  }
  // A valid policy passes.
  const good = path.join(dir, 'good.json');
  fs.writeFileSync(good, JSON.stringify(deep_merge(default_config(), { policy: full_policy })));
  const ok = await s.run_troupe(['check-config', '--config', good]);
  assert.equal(ok.code, 0, JSON.stringify(ok));
});

scenario('a live call takes the same decision as /v1/policy/check: a user rule allowing exec runs a command the heuristics would gate (AS-38)', async (s) => {
  const troupe = await s.troupe({
    config: {
      policy: { user_rules: { 'pska:trusted': { tools: { exec: 'allow' } } } },
      model: { script: [{ tool_calls: [{ name: 'exec', arguments: { command: 'echo hi > out.txt' } }] }, { content: 'done' }] },
    },
  });
  const d = await check(troupe, exec('echo hi > out.txt', { user_key: 'pska:trusted' }));
  assert.equal(d.level, 'safe', JSON.stringify(d));
  assert.equal(d.policy_scope, 'user:pska:trusted');
  const other = await check(troupe, exec('echo hi > out.txt', { user_key: 'pska:other' }));
  assert.equal(other.level, 'danger', 'for anyone else the redirection needs approval');

  const res = await troupe.chat({ messages: [user('write it')], user_key: 'pska:trusted' });
  assert.equal(res.status, 200, res.text);
  const events = res.json.events;
  assert.ok(!events.some((e) => e.type === 'ask_user'), 'no approval was asked');
  const result = events.find((e) => e.type === 'tool_result');
  assert.equal(result.metadata.decision_level, d.level);
  assert.equal(fs.readFileSync(path.join(troupe.workspace('pska', 'pska:trusted'), 'out.txt'), 'utf8'), 'hi\n');
});
