// Two nodes on one PostgreSQL (CJ-12 to CJ-14, CJ-47, CJ-48): a node killed with SIGKILL is declared
// dead by the other within expiry + heartbeat, which takes its runs over at once; a node frozen past
// its expiry comes back fenced, writes nothing more of what it held and rejoins under a new id. Run
// through scripts/pg-throwaway (ctest: integration_cluster); CJ-47's short timings.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { cluster_secret, deep_merge, open_sse, postgres_database, scenario, until, user } from './harness.mjs';
import { all_events, check_recovered_log, kill9, post_run, terminal, types, wait_all } from './run_checks.mjs';

const timings = { heartbeat_seconds: 0.25, node_expiry_seconds: 2, fence_margin_seconds: 0.5 };

// Both nodes' config: one fresh database, CJ-47's timings, leases of 6 s, runs of about 2 s.
function cluster_config(database) {
  return {
    store: { postgres_url: database },
    cluster: timings,
    service: { run_concurrency: 0, run_max_attempts: 3, run_lease_seconds: 6, run_recovery_interval_seconds: 1 },
    model: {
      script: [
        { content: 'Looking first.', delay_ms: 50, tool_calls: [{ name: 'list_dir', arguments: { path: '.' } }] },
        { content: 'Done after a think.', delay_ms: 2000 },
      ],
    },
  };
}

// Nodes A and B on one fresh database; B reaches it through `b_url(database)` when given, and
// `a_config` and `b_config` are merged into A's and B's config.
// `before_a(b)`, when given, runs once B is up and before A starts: what B claims then is all B's,
// since an idle A would otherwise claim its share on B's wake-ups (CJ-10).
async function two_nodes(s, { b_url, model, a_config = {}, b_config = {}, before_a } = {}) {
  const database = postgres_database('cluster_' + crypto.randomBytes(6).toString('hex'));
  const config = cluster_config(database);
  if (model) config.model = model;
  const start_b = async () => s.troupe({
    config: deep_merge(b_url ? { ...config, store: { postgres_url: await b_url(database) } } : config, b_config),
  });
  if (before_a) {
    const b = await start_b();
    await before_a(b);
    return { a: await s.troupe({ config: deep_merge(config, a_config) }), b, database, config };
  }
  const a = await s.troupe({ config: deep_merge(config, a_config) });
  return { a, b: await start_b(), database, config };
}

// Nodes A and B as two_nodes starts them, B reaching the database through a stall proxy (`proxy`).
async function two_nodes_b_behind_proxy(s, options = {}) {
  let proxy;
  const nodes = await two_nodes(s, {
    ...options,
    b_url: async (database) => {
      const through = await s.stall_proxy(database);
      proxy = through.proxy;
      return through.url;
    },
  });
  return { ...nodes, proxy };
}

// One unlabelled sample of the node's GET /metrics.
async function metric(node, name) {
  const res = await node.request('GET', '/metrics');
  assert.equal(res.status, 200);
  const m = res.text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `${name} in GET /metrics`);
  return Number(m[1]);
}

async function cluster_view(node) {
  const res = await node.request('GET', '/v1/cluster');
  assert.equal(res.status, 200, `GET /v1/cluster: ${res.text}`);
  return res.json;
}

// Posts `n` runs, alternately to each node; answers their ids.
async function post_alternately(nodes, n, prefix) {
  const ids = [];
  for (let i = 0; i < n; i++) {
    const id = `${prefix}-${String(i).padStart(3, '0')}`;
    await post_run(nodes[i % nodes.length], { messages: [user(`run ${i}`)], metadata: { run_id: id } });
    ids.push(id);
  }
  return ids;
}

// Each run completed once: one session_end, sequences without gap or repeat, attempts in order.
async function check_completed(node, ids) {
  const done = await wait_all(node, ids, (r) => terminal.has(r.status),
    { timeout_ms: 90_000, message: 'every run to be terminal' });
  const attempts = new Map();
  for (const id of ids) {
    const run = done.get(id);
    assert.equal(run.status, 'completed', `${id}: ${JSON.stringify(run)}`);
    const events = await all_events(node, id);
    assert.equal(run.event_count, events.length, `${id}: event_count is the log length`);
    const parts = check_recovered_log(run, events);
    assert.equal(parts[parts.length - 1][0].metadata.attempt, run.attempts,
      `${id}: the attempt that completed it is its last: ${types(events)}`);
    assert.equal(events.filter((e) => e.type === 'session_end').length, 1, `${id}: one session_end: ${types(events)}`);
    attempts.set(id, run.attempts);
  }
  return attempts;
}

scenario('a node killed with SIGKILL is declared dead by the other, which runs its runs again at once and every run completes once (CJ-13, CJ-48)', async (s) => {
  const { a, b } = await two_nodes(s);
  const view = await cluster_view(a);
  assert.equal(view.data.length, 2, JSON.stringify(view));
  assert.ok(view.data.every((n) => n.state === 'alive' && /^node-[0-9a-f]{16}$/.test(n.node_id)), JSON.stringify(view));
  const b_id = (await b.request('GET', '/v1/cluster/health')).json.node_id;
  const a_id = view.node_id;
  assert.notEqual(a_id, b_id);

  const ids = await post_alternately([a, b], 100, 'kill');
  // Each node claims what was posted to it; B is killed while it holds at least 20 running runs.
  const holding = await until(async () => {
    const b_row = (await cluster_view(a)).data.find((n) => n.node_id === b_id);
    return b_row.leases_held >= 20 && b_row;
  }, { timeout_ms: 20_000, interval_ms: 20, message: 'node B to hold 20 runs' });
  await kill9(b);
  const killed_at = Date.now();

  // CJ-48: B's runs start their next attempt on A within expiry + heartbeat + 0.5 s.
  const limit_ms = (timings.node_expiry_seconds + timings.heartbeat_seconds + 0.5) * 1000;
  await until(async () => {
    const b_row = (await cluster_view(a)).data.find((n) => n.node_id === b_id);
    return b_row.state === 'dead' && b_row.leases_held === 0;
  }, { timeout_ms: limit_ms + 2000, interval_ms: 20, message: 'B to be declared dead with its leases released' });
  const declared_ms = Date.now() - killed_at;
  assert.ok(declared_ms <= limit_ms, `B was declared dead and its runs released ${declared_ms} ms after the kill (limit ${limit_ms})`);
  assert.ok(holding.leases_held >= 20);

  const attempts = await check_completed(a, ids);
  const moved = [...attempts.values()].filter((n) => n === 2).length;
  assert.ok(moved >= 20, `at least the 20 runs B held ran a second attempt on A: ${moved}`);
  assert.ok([...attempts.values()].every((n) => n <= 2), `no run ran more than twice: ${JSON.stringify([...attempts])}`);

  const after = await cluster_view(a);
  assert.equal(after.data.find((n) => n.node_id === a_id).state, 'alive');
  assert.equal((await a.request('GET', '/v1/cluster/health')).status, 200);
}, { timeout: 180_000 });

scenario('a node frozen past its expiry fences itself when it wakes, writes nothing more of its runs, and rejoins under a new node id (CJ-14, CJ-21)', async (s) => {
  const { a, b } = await two_nodes(s);
  const b_id = (await b.request('GET', '/v1/cluster/health')).json.node_id;
  const ids = await post_alternately([a, b], 20, 'freeze');
  await until(async () => (await cluster_view(a)).data.find((n) => n.node_id === b_id).leases_held >= 5,
    { timeout_ms: 20_000, interval_ms: 20, message: 'node B to hold runs' });

  // SIGSTOP: B's clocks stop with it; A declares it dead and takes its runs over.
  b.signal('SIGSTOP');
  try {
    await until(async () => (await cluster_view(a)).data.find((n) => n.node_id === b_id).state === 'dead',
      { timeout_ms: 10_000, interval_ms: 20, message: 'B to be declared dead while frozen' });
  } finally {
    b.signal('SIGCONT');
  }

  // B wakes past its deadline: it fences, finds its row dead and rejoins under a fresh id.
  const rejoined = await until(async () => {
    const health = await b.request('GET', '/v1/cluster/health');
    return health.status === 200 && health.json.node_id !== b_id && health.json;
  }, { timeout_ms: 10_000, interval_ms: 20, message: 'B to rejoin under a new node id' });
  assert.match(rejoined.node_id, /^node-[0-9a-f]{16}$/);
  await until(() => b.stderr.includes('node_declared_dead'), { timeout_ms: 5_000, message: 'B to log node_declared_dead' });
  // The data dir names the node B is now, which B's next process declares dead at its start.
  await until(() => fs.readFileSync(path.join(b.data_dir, 'node_id'), 'utf8').trim() === rejoined.node_id,
    { timeout_ms: 5_000, message: "B's data dir to name its new node id" });

  // Whatever B's stopped attempts tried after A took their runs was refused: each log is one attempt
  // after another, and each run completed once.
  await check_completed(a, ids);
  const view = await cluster_view(a);
  assert.equal(view.data.find((n) => n.node_id === b_id).state, 'dead');
  assert.equal(view.data.find((n) => n.node_id === rejoined.node_id).state, 'alive');
  assert.equal(await metric(b, 'troupe_cluster_rejoins_total'), 1); // CJ-17
}, { timeout: 180_000 });

scenario('a node cut off from PostgreSQL stops its runs before the other may claim them, nothing of it lands afterwards, and it rejoins under a new id (CJ-14, CJ-50)', async (s) => {
  const long_runs = { script: [{ content: 'Thinking for a while.', delay_ms: 4000 }, { content: 'unused' }] };
  const ids = [];
  let b_id;
  const { a, b, proxy } = await two_nodes_b_behind_proxy(s, {
    model: long_runs,
    before_a: async (b) => {
      b_id = (await b.request('GET', '/v1/cluster/health')).json.node_id;
      for (let i = 0; i < 10; i++) {
        const id = `cut-${i}`;
        await post_run(b, { messages: [user(`run ${i}`)], metadata: { run_id: id } });
        ids.push(id);
      }
      await until(async () => (await cluster_view(b)).data.find((n) => n.node_id === b_id).leases_held === 10,
        { timeout_ms: 20_000, interval_ms: 20, message: 'node B to hold the 10 runs' });
    },
  });

  await proxy.stall();
  const stalled_at = Date.now();
  // B fences within expiry - margin (+ a heartbeat's lateness and this poll's): its health turns 503.
  const fence_limit_ms = (timings.node_expiry_seconds - timings.fence_margin_seconds + 0.25) * 1000;
  await until(async () => (await b.request('GET', '/v1/cluster/health')).status === 503,
    { timeout_ms: 5_000, interval_ms: 10, message: 'B to fence itself' });
  const fenced_ms = Date.now() - stalled_at;
  assert.ok(fenced_ms <= fence_limit_ms, `B fenced ${fenced_ms} ms after the stall (limit ${fence_limit_ms})`);
  // B's log says when each attempt stopped.
  const stopped_at = () => [...b.stderr.matchAll(/^(\S+) \S+ run (\S+): attempt 1 stops: the run's lease is no longer held/gm)]
    .map((m) => Date.parse(m[1]));
  await until(() => stopped_at().length === 10,
    { timeout_ms: 2_000, message: `B to stop its 10 attempts (stopped ${stopped_at().length})` });

  // A declares B dead after the expiry and runs the 10 again.
  await until(async () => (await list_runs_of(a, ids)).every((r) => r.attempts === 2),
    { timeout_ms: 10_000, interval_ms: 20, message: 'A to claim the 10 runs' });

  await proxy.resume();
  const rejoined = await until(async () => {
    const health = await b.request('GET', '/v1/cluster/health');
    return health.status === 200 && health.json.node_id !== b_id && health.json;
  }, { timeout_ms: 15_000, interval_ms: 20, message: 'B to rejoin under a new node id' });
  assert.match(rejoined.node_id, /^node-[0-9a-f]{16}$/);

  // Whatever B held back during the stall was refused: each log is attempt 1 (when B stored any of
  // it before the stall) then attempt 2.
  const attempts = await check_completed(a, ids);
  assert.ok([...attempts.values()].every((n) => n === 2), JSON.stringify([...attempts]));
  // Every attempt of B stopped before A started any second attempt, and A waited for B's expiry.
  const second_starts = [];
  for (const id of ids) {
    const second = (await all_events(a, id)).find((e) => e.type === 'session_start' && e.metadata.attempt === 2);
    assert.ok(second, `${id}: attempt 2 started`);
    second_starts.push(Date.parse(second.timestamp));
  }
  const last_stop = Math.max(...stopped_at());
  const first_claim = Math.min(...second_starts);
  assert.ok(last_stop < first_claim, `B's last stop (${new Date(last_stop).toISOString()}) precedes A's first claim (${new Date(first_claim).toISOString()})`);
  assert.ok(first_claim - stalled_at >= (timings.node_expiry_seconds - timings.heartbeat_seconds) * 1000,
    `A claimed ${first_claim - stalled_at} ms after the stall, not before B could have expired`);
}, { timeout: 180_000 });

async function list_runs_of(node, ids) {
  const runs = [];
  for (const id of ids) {
    const res = await node.request('GET', `/v1/runs/${id}`);
    assert.equal(res.status, 200, res.text);
    runs.push(res.json);
  }
  return runs;
}

// B's count of attempts that ended with `outcome` (GET /metrics).
async function attempts_ended(node, outcome) {
  const res = await node.request('GET', '/metrics');
  assert.equal(res.status, 200, res.text);
  const m = res.text.match(new RegExp(`^troupe_run_attempts_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm'));
  return m ? Number(m[1]) : 0;
}

// A long run on `node`, seen from `viewer` as that node's lease.
async function hold_run(viewer, node, run_id) {
  const node_id = (await node.request('GET', '/v1/cluster/health')).json.node_id;
  await post_run(node, { messages: [user('long')], metadata: { run_id } });
  await until(async () => (await cluster_view(viewer)).data.find((n) => n.node_id === node_id).leases_held === 1,
    { timeout_ms: 20_000, interval_ms: 20, message: `node ${node_id} to run ${run_id}` });
  return node_id;
}

const long_think = { script: [{ content: 'A long think.', delay_ms: 8000 }] };

async function run_held_by_b(s, run_id, { b_config } = {}) {
  const nodes = await two_nodes(s, { model: long_think, b_config });
  nodes.b_id = await hold_run(nodes.a, nodes.b, run_id);
  return nodes;
}

async function cancel_through(node, run_id) {
  const sent = Date.now();
  const res = await node.request('POST', `/v1/runs/${run_id}/cancel`);
  const answered_ms = Date.now() - sent;
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.status, 'cancelled', res.text);
  return answered_ms;
}

async function check_cancelled_log(node, run_id) {
  const events = await all_events(node, run_id);
  const last = events[events.length - 1];
  assert.equal(last.type, 'error', types(events));
  assert.equal(last.content, 'Run cancelled');
  assert.equal(events.filter((e) => e.type === 'error').length, 1, `one terminal event: ${types(events)}`);
  const run = (await node.request('GET', `/v1/runs/${run_id}`)).json;
  assert.equal(run.status, 'cancelled');
  assert.equal(run.event_count, events.length, 'nothing was written after the cancel');
}

scenario('a run held by one node is cancelled through the other over CAF remoting: the holder stops it at once and stores its own end, answered well within a second (CJ-22, CJ-23, CJ-25, AS-52)', async (s) => {
  const { a, b } = await run_held_by_b(s, 'near-cancel');
  const answered_ms = await cancel_through(a, 'near-cancel');
  assert.ok(answered_ms < 1000, `answered in ${answered_ms} ms (CJ-25's goal is 200 ms; bench/ measures it)`);
  // B's attempt ended as a cancel, not fenced by the store, before A answered.
  assert.equal(await attempts_ended(b, 'cancelled'), 1, b.stderr);
  assert.equal(await attempts_ended(b, 'fenced'), 0);
  assert.doesNotMatch(a.stderr, /ending it through the store/);
  await check_cancelled_log(a, 'near-cancel');

  // A second cancel finds the run terminal and answers it unchanged.
  assert.equal((await a.request('POST', '/v1/runs/near-cancel/cancel')).json.status, 'cancelled');
}, { timeout: 120_000 });

scenario('a run held by a node that cannot be reached is cancelled through the database: answered at once, and the holder stops at its next write or renewal without another event (CJ-25 fallback, AS-52)', async (s) => {
  // B publishes no node actor, so A's connection to B's endpoint is refused.
  const { a, b } = await run_held_by_b(s, 'far-cancel', { b_config: { cluster: { remoting: false } } });
  const answered_ms = await cancel_through(a, 'far-cancel');
  assert.ok(answered_ms < 1000, `answered in ${answered_ms} ms`);
  assert.match(a.stderr, /did not stop run far-cancel .*ending it through the store/);

  // B learns of it when its lease renewal (every lease/3 = 2 s) or its next write is refused.
  await until(() => /run far-cancel: attempt 1 stops/.test(b.stderr),
    { timeout_ms: 3_500, interval_ms: 20, message: 'B to stop the cancelled attempt' });
  assert.equal(await attempts_ended(b, 'fenced'), 1);
  await check_cancelled_log(a, 'far-cancel');
}, { timeout: 120_000 });

scenario('a cluster secret rotates without a node losing the others: mid-rotation the node that proves the new secret and the one that proves the old accept each other, and cancels cross over CAF both ways (CJ-23)', async (s) => {
  const fresh = `troupe-test-rotated-secret-${crypto.randomBytes(16).toString('hex')}`;
  // A has taken step 1 (accept the new secret, still prove the old); B step 2 (prove the new one,
  // still accept the old).
  const { a, b } = await two_nodes(s, {
    model: long_think,
    a_config: { cluster: { secret_previous: fresh } },
    b_config: { cluster: { secret: fresh, secret_previous: cluster_secret } },
  });
  await hold_run(a, b, 'held-by-b');
  await cancel_through(a, 'held-by-b');
  await hold_run(b, a, 'held-by-a');
  await cancel_through(b, 'held-by-a');
  for (const [node, other] of [[a, b], [b, a]]) {
    assert.equal(await attempts_ended(node, 'cancelled'), 1, `the holder stopped the run itself, asked over CAF\n${other.stderr}`);
    assert.equal(await attempts_ended(node, 'fenced'), 0);
    assert.doesNotMatch(other.stderr, /ending it through the store/);
  }
  await check_cancelled_log(a, 'held-by-b');
  await check_cancelled_log(a, 'held-by-a');
}, { timeout: 120_000 });

// A CA and certificates signed by it, made with the openssl command in `dir`: {ca, <name>: {certificate,
// key}} for each name.
function make_certificates(dir, names, ca_name = 'troupe-test-ca') {
  const openssl = (...args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    assert.equal(r.status, 0, `openssl ${args.join(' ')}: ${r.stderr}`);
  };
  const ca = path.join(dir, `${ca_name}.crt`);
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${ca_name}`,
    '-keyout', `${ca_name}.key`, '-out', ca);
  const out = { ca };
  for (const name of names) {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
    openssl('x509', '-req', '-days', '2', '-in', `${name}.csr`, '-CA', ca, '-CAkey', `${ca_name}.key`,
      '-CAcreateserial', '-out', `${name}.crt`);
    out[name] = { certificate: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`) };
  }
  return out;
}

const tls_of = (certs, name) => ({ cluster: { tls: { ...certs[name], ca_file: certs.ca } } });

scenario('nodes with cluster.tls talk over mutual TLS: a cancel crosses over CAF, a node whose certificate another CA signed is refused and its run is cancelled through the database, and bad TLS files stop a node at start (CJ-24)', async (s) => {
  const ours = make_certificates(s.tmpdir(), ['node-a', 'node-b']);
  const theirs = make_certificates(s.tmpdir(), ['node-c'], 'other-ca');
  const { a, b, config } = await two_nodes(s, {
    model: long_think, a_config: tls_of(ours, 'node-a'), b_config: tls_of(ours, 'node-b'),
  });
  await hold_run(a, b, 'over-tls');
  await cancel_through(a, 'over-tls');
  assert.equal(await attempts_ended(b, 'cancelled'), 1, `B stopped it, asked over TLS\n${a.stderr}`);
  assert.doesNotMatch(a.stderr, /ending it through the store/);
  await check_cancelled_log(a, 'over-tls');

  // C proves the right secret, but over TLS its certificate does not chain to A's CA.
  const c = await s.troupe({ config: deep_merge(config, { cluster: { tls: { ...theirs['node-c'], ca_file: theirs.ca } } }) });
  await hold_run(a, c, 'other-ca');
  await cancel_through(a, 'other-ca');
  assert.match(a.stderr, /did not stop run other-ca .*ending it through the store/);
  await check_cancelled_log(a, 'other-ca');

  // A key that is not the certificate's, and a missing CA file: the node exits 2 naming the key.
  for (const [tls, said] of [
    [{ ...ours['node-a'], key: ours['node-b'].key, ca_file: ours.ca }, /cluster\.tls\.key: .* is not the key of cluster\.tls\.certificate/],
    [{ ...ours['node-a'], ca_file: path.join(s.tmpdir(), 'missing.crt') }, /cluster\.tls\.ca_file: cannot load PEM CA certificates/],
  ]) {
    const bad = await s.troupe({ config: deep_merge(config, { cluster: { tls } }), wait: false });
    const exit = await bad.wait_exit(10_000);
    assert.equal(exit?.code, 2, bad.describe());
    assert.match(bad.stderr, said);
  }
}, { timeout: 120_000 });

scenario('a CAF peer without the cluster secret reaches nothing: its cancels are refused, its third wrong proof mutes it, no actor type is spawnable, and a node with another secret is not trusted (CJ-23, CJ-24, CJ-52 c)', async (s) => {
  const { a, b, b_id, database, config } = await run_held_by_b(s, 'guarded');
  const a_id = (await a.request('GET', '/v1/cluster/health')).json.node_id;
  const endpoint = (await cluster_view(a)).data.find((n) => n.node_id === b_id).endpoint;
  const [host, port] = endpoint.split(':');
  const cluster_id = spawnSync('psql', [database, '-tAc', 'SELECT cluster_id FROM cluster'], { encoding: 'utf8' }).stdout.trim();
  assert.match(cluster_id, /^[0-9a-f]{32}$/);

  // The intruder knows the endpoint, the cluster id and a live node's id; not the secret.
  const intruder = spawnSync(process.env.TROUPE_CLUSTER_INTRUDER, [host, port, cluster_id, a_id, 'guarded'],
    { encoding: 'utf8', timeout: 60_000 });
  assert.equal(intruder.status, 0, intruder.stderr);
  const said = intruder.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(said.map((x) => `${x.step} ${x.outcome}`), [
    'connect connected',
    'cancel cluster_unauthenticated', 'cancel cluster_unauthenticated', 'cancel cluster_unauthenticated',
    'ping cluster_unauthenticated',
    'proof bad_proof', 'proof bad_proof', 'proof bad_proof',
    'proof hello:peer_muted',
    'cancel cluster_unauthenticated',
    'spawn refused', 'spawn refused', 'spawn refused',
  ]);
  const run = (await a.request('GET', '/v1/runs/guarded')).json;
  assert.equal(run.status, 'running', 'the intruder stopped nothing');
  assert.equal(await attempts_ended(b, 'cancelled'), 0);
  assert.match(b.stderr, /a peer's proof was refused/);

  // The nodes themselves still prove themselves to each other.
  await cancel_through(a, 'guarded');
  assert.equal(await attempts_ended(b, 'cancelled'), 1, b.stderr);

  // A node with another secret: A does not trust it, and cancels its run through the database.
  const c = await s.troupe({ config: deep_merge(config, { model: long_think, cluster: { secret: 'x'.repeat(40) } }) });
  await hold_run(a, c, 'untrusted');
  await cancel_through(a, 'untrusted');
  assert.match(a.stderr, /cannot reach node node-[0-9a-f]{16}: it did not prove the cluster secret/);
  assert.match(a.stderr, /did not stop run untrusted .*ending it through the store/);
}, { timeout: 120_000 });

// A run's stream through `node` from its start: every stored event once, in order, then done.
async function stream_whole_run(node, run_id) {
  const stream = await open_sse(`${node.url}/v1/runs/${run_id}/stream`, { method: 'GET' });
  assert.equal(stream.status, 200);
  return stream;
}

async function check_streamed(stream, node, run_id) {
  const { frames } = await stream.finished;
  const events = frames.filter((f) => f.event !== undefined);
  assert.equal(events[events.length - 1].event, 'done', 'the stream ends with done');
  const streamed = events.slice(0, -1).map((f) => f.json);
  const stored = await all_events(node, run_id);
  assert.deepEqual(streamed.map((e) => e.sequence), stored.map((e) => e.sequence), 'no gap or repeat');
  assert.deepEqual(streamed.map((e) => e.type), stored.map((e) => e.type), types(stored));
  return stored;
}

scenario('a run held by one node streams through the other from its start to done, also across a kill -9 of its holder, without gap or repeat (CJ-27, AS-74)', async (s) => {
  const { a, b } = await two_nodes(s);
  // B runs it to its end; A's stream reads it all from the store.
  await hold_run(a, b, 'elsewhere');
  await check_streamed(await stream_whole_run(a, 'elsewhere'), a, 'elsewhere');
  assert.equal((await a.request('GET', '/v1/runs/elsewhere')).json.attempts, 1);

  const b_id = await hold_run(a, b, 'followed');
  assert.equal(await metric(b, 'troupe_cluster_leases_held'), 1); // CJ-17
  const whole = await stream_whole_run(a, 'followed');
  await whole.wait_for((f) => f.event === 'tool_call', 20_000); // B's attempt, read by A from the store
  const late = await stream_whole_run(a, 'followed'); // a second follower, joining later

  // B dies mid-run; A declares it dead and runs the next attempt itself: the streams go on.
  await kill9(b);
  const stored = await check_streamed(whole, a, 'followed');
  await check_streamed(late, a, 'followed');
  const run = (await a.request('GET', '/v1/runs/followed')).json;
  assert.equal(run.status, 'completed', JSON.stringify(run));
  check_recovered_log(run, stored);
  assert.ok((await cluster_view(a)).data.some((n) => n.node_id === b_id && n.state === 'dead'));
}, { timeout: 120_000 });

scenario('a stream through one node of a run the other holds gets its events live over CAF as they are stored, not from the store tail, and ends with the run (CJ-27, AS-74)', async (s) => {
  // A's store tail is 30 s: only B's feed can bring B's events to A's client within the run.
  const { a, b } = await two_nodes(s, { a_config: { cluster: { tail_poll_seconds: 30 } } });
  await hold_run(a, b, 'live');
  const stream = await stream_whole_run(a, 'live');
  const end = await stream.wait_for((f) => f.event === 'session_end', 15_000);
  const lag_ms = Date.now() - Date.parse(end.json.timestamp);
  console.log(`B's session_end reached A's client ${lag_ms} ms after B stamped it (A's store tail: 30 s)`);
  assert.ok(lag_ms < 1000, `session_end arrived ${lag_ms} ms after it was stamped`);
  await check_streamed(stream, a, 'live');
}, { timeout: 60_000 });

scenario('a background response left unfinished by a node killed with SIGKILL is failed by the node that declares it dead, and a stream of it through the live node follows it to response.failed; the live node\'s own responses are left alone (RS-55, RS-6, CJ-16, CJ-27)', async (s) => {
  const { a, b } = await two_nodes(s, { model: long_think });
  const create = async (node) => {
    const res = await node.request('POST', '/v1/responses', { body: { model: 'scripted', input: 'think', background: true } });
    assert.equal(res.status, 200, res.text);
    return res.json.id;
  };
  const status_on = async (node, id) => (await node.request('GET', `/v1/responses/${id}`)).json;
  const orphan = await create(b);
  const kept = await create(a);
  assert.ok(['queued', 'in_progress'].includes((await status_on(a, orphan)).status), 'stored unfinished before the answer');
  // A client follows it through A, which reads what B stores (CJ-27).
  const followed = await open_sse(`${a.url}/v1/responses/${orphan}?stream=true`, { method: 'GET' });
  assert.equal(followed.status, 200);
  await followed.wait_for((f) => f.json?.type === 'response.in_progress', 10_000);

  await kill9(b);
  const limit_ms = (timings.node_expiry_seconds + timings.heartbeat_seconds + 1) * 1000;
  const failed = await until(async () => {
    const r = await status_on(a, orphan);
    return r.status === 'failed' && r;
  }, { timeout_ms: limit_ms + 2000, interval_ms: 50, message: "B's response to be failed by A" });
  assert.deepEqual(failed.error, { code: 'server_error', message: 'The node running the response stopped before it finished.' });
  const live = (await followed.finished).frames.filter((f) => f.json).map((f) => f.json);
  const last = live[live.length - 1];
  assert.equal(last.type, 'response.failed', live.map((e) => e.type).join(', '));
  assert.equal(last.response.error.message, failed.error.message);
  const replay = await open_sse(`${a.url}/v1/responses/${orphan}?stream=true`, { method: 'GET' });
  const stored = (await replay.finished).frames.filter((f) => f.json).map((f) => f.json);
  assert.deepEqual(live.map((e) => e.sequence_number), stored.map((e) => e.sequence_number), 'no gap or repeat');

  // A's own response runs on, and completes.
  assert.notEqual((await status_on(a, kept)).status, 'failed');
  await until(async () => (await status_on(a, kept)).status === 'completed',
    { timeout_ms: 20_000, interval_ms: 50, message: "A's own response to complete" });
}, { timeout: 120_000 });

scenario('a stream through one node of a background response the other runs gets its events live over CAF, not from the store tail, to response.completed without gap or repeat (CJ-27, RS-6)', async (s) => {
  // A's store tail is 30 s: only B's feed can bring the response's end to A's client within 10 s.
  const { a, b } = await two_nodes(s, {
    model: { script: [{ content: 'A short think.', delay_ms: 1500 }] },
    a_config: { cluster: { tail_poll_seconds: 30 } },
  });
  const created = await b.request('POST', '/v1/responses', { body: { model: 'scripted', input: 'think', background: true } });
  assert.equal(created.status, 200, created.text);
  const followed = await open_sse(`${a.url}/v1/responses/${created.json.id}?stream=true`, { method: 'GET' });
  assert.equal(followed.status, 200);
  const started = Date.now();
  await followed.wait_for((f) => f.json?.type === 'response.completed', 10_000);
  console.log(`the response's end reached A's client ${Date.now() - started} ms after A's stream opened (B's model takes 1500 ms; A's store tail: 30 s)`);
  const live = (await followed.finished).frames.filter((f) => f.json).map((f) => f.json);
  const replay = await open_sse(`${a.url}/v1/responses/${created.json.id}?stream=true`, { method: 'GET' });
  const stored = (await replay.finished).frames.filter((f) => f.json).map((f) => f.json);
  assert.deepEqual(live.map((e) => e.sequence_number), stored.map((e) => e.sequence_number), 'no gap or repeat');
  assert.deepEqual(live, stored, 'the live events are the stored ones, byte for byte as JSON');
}, { timeout: 60_000 });

scenario('a background response of a node cut off from PostgreSQL is failed by the other node, and nothing the cut-off node writes of it afterwards lands (CJ-16, CJ-50, RS-55)', async (s) => {
  const { a, b, proxy } = await two_nodes_b_behind_proxy(s, { model: long_think });
  const created = await b.request('POST', '/v1/responses', { body: { model: 'scripted', input: 'think', background: true } });
  assert.equal(created.status, 200, created.text);
  const id = created.json.id;
  const followed = await open_sse(`${a.url}/v1/responses/${id}?stream=true`, { method: 'GET' });
  await followed.wait_for((f) => f.json?.type === 'response.in_progress', 10_000); // B started it

  await proxy.stall();
  const failed = await until(async () => {
    const r = (await a.request('GET', `/v1/responses/${id}`)).json;
    return r.status === 'failed' && r;
  }, { timeout_ms: 15_000, interval_ms: 50, message: "A to fail B's response" });
  await proxy.resume();
  // B's think ends after 8 s; its final commit comes after A's and keeps nothing.
  await until(() => /responses: resp_\w+ could not be stored: Response '\w+' already ended/.test(b.stderr),
    { timeout_ms: 30_000, interval_ms: 50, message: "B's late commit to be refused" });
  const after = (await a.request('GET', `/v1/responses/${id}`)).json;
  assert.equal(after.status, 'failed', JSON.stringify(after));
  assert.deepEqual(after.error, failed.error);
  const replay = await open_sse(`${a.url}/v1/responses/${id}?stream=true`, { method: 'GET' });
  const stored = (await replay.finished).frames.filter((f) => f.json).map((f) => f.json);
  assert.equal(stored[stored.length - 1].type, 'response.failed', stored.map((e) => e.type).join(', '));
  assert.equal(stored.filter((e) => e.type === 'response.completed').length, 0);
}, { timeout: 120_000 });

// How long a run waited to be claimed, by the store's own timestamps.
async function claimed_after_ms(node, run_id) {
  const run = await until(async () => {
    const r = (await node.request('GET', `/v1/runs/${run_id}`)).json;
    return r.started_at && r;
  }, { timeout_ms: 20_000, interval_ms: 10, message: `${run_id} to be claimed` });
  return { ms: Date.parse(run.started_at) - Date.parse(run.created_at), worker_id: run.worker_id };
}

const listeners = (database) => Number(spawnSync('psql', [database, '-tAc',
  "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'troupe-listen'"], { encoding: 'utf8' }).stdout.trim());

scenario('a run queued on a full node is claimed by the idle one on its NOTIFY at once, and within the poll interval + 0.5 s while its LISTEN connection is killed (CJ-10, CJ-52 d)', async (s) => {
  const poll = 4;
  const database = postgres_database('cluster_' + crypto.randomBytes(6).toString('hex'));
  // Neither node sweeps within the measurements, and each polls every 4 s.
  const config = deep_merge(cluster_config(database), {
    service: { run_recovery_interval_seconds: 60 },
    cluster: { poll_interval_seconds: poll, drain_grace_seconds: 1 },
    model: { script: [{ content: 'quick' }], scripts: { hold: [{ content: 'A long think.', delay_ms: 60_000 }] } },
  });
  // A's one slot is taken before B starts.
  const a = await s.troupe({ config: deep_merge(config, { service: { run_concurrency: 1 } }) });
  await post_run(a, { messages: [user('long')], model: 'scripted:hold', metadata: { run_id: 'holding' } });
  await until(async () => (await a.request('GET', '/v1/runs/holding')).json.status === 'running',
    { timeout_ms: 10_000, interval_ms: 20, message: 'A to run the long run' });
  const b = await s.troupe({ config });
  const b_id = (await b.request('GET', '/v1/cluster/health')).json.node_id;
  const b_worker = `worker-${b_id.slice(5)}`;
  const quick = (id) => post_run(a, { messages: [user('go')], metadata: { run_id: id } });

  await until(() => listeners(database) === 2, { timeout_ms: 5_000, message: 'both nodes to listen' });
  await quick('woken-1');
  const first = await claimed_after_ms(a, 'woken-1');
  assert.equal(first.worker_id, b_worker);
  assert.ok(first.ms < 1000, `claimed ${first.ms} ms after it was queued, on the NOTIFY (poll every ${poll} s)`);

  // CJ-52 d: the LISTEN backends are terminated, then a run is queued.
  const killed = spawnSync('psql', [database, '-tAc',
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'troupe-listen'"], { encoding: 'utf8' });
  assert.equal(killed.stdout.trim(), '2', killed.stderr);
  await quick('woken-2');
  const second = await claimed_after_ms(a, 'woken-2');
  assert.equal(second.worker_id, b_worker);
  assert.ok(second.ms <= (poll + 0.5) * 1000, `claimed ${second.ms} ms after it was queued (limit ${(poll + 0.5) * 1000})`);
  await until(() => /the LISTEN connection (closed|failed)/.test(b.stderr), { timeout_ms: 5_000, message: 'B to notice' });

  // Listening again, B is woken at once again.
  await until(() => listeners(database) === 2, { timeout_ms: 10_000, message: 'both nodes to listen again' });
  await quick('woken-3');
  const third = await claimed_after_ms(a, 'woken-3');
  assert.ok(third.ms < 1000, `claimed ${third.ms} ms after it was queued`);
}, { timeout: 120_000 });

// A run that asks to run a dangerous command, waits for its approval, then answers.
const gated_call = {
  script: [
    { content: 'Removing it.', tool_calls: [{ name: 'exec', arguments: { command: 'rm -f gone.txt' } }] },
    { content: 'Saw: {{last_tool_result}}' },
  ],
};

async function pending_approval(node, run_id) {
  return until(async () => {
    const res = await node.request('GET', `/v1/approvals?run_id=${run_id}&status=pending`);
    assert.equal(res.status, 200, res.text);
    return res.json.count === 1 && res.json.approvals[0];
  }, { timeout_ms: 20_000, interval_ms: 20, message: `the approval of ${run_id}` });
}

function resolve(node, id, verb) {
  return node.request('POST', `/v1/approvals/${id}/${verb}`, { body: {} });
}

async function run_ended(node, run_id, timeout_ms) {
  return until(async () => {
    const run = (await node.request('GET', `/v1/runs/${run_id}`)).json;
    return terminal.has(run.status) && run;
  }, { timeout_ms, interval_ms: 20, message: `${run_id} to end within ${timeout_ms} ms` });
}

scenario('an approval resolved on one node wakes the run waiting on the other at once, and of two resolutions racing on both nodes exactly one wins (CJ-26, CJ-49, AS-48)', async (s) => {
  // The poll is slow here, so a run that goes on at once heard of its approval over CAF.
  const { a, b } = await two_nodes(s, { model: gated_call, b_config: { cluster: { approval_poll_seconds: 60 } } });
  await post_run(b, { messages: [user('remove it')], metadata: { run_id: 'gated-a' } });
  const approval = await pending_approval(a, 'gated-a');
  const approved = await resolve(a, approval.request_id, 'approve');
  assert.equal(approved.status, 200, approved.text);
  const run = await run_ended(a, 'gated-a', 5_000);
  assert.equal(run.status, 'completed', JSON.stringify(run));
  const events = await all_events(a, 'gated-a');
  const result = events.find((e) => e.type === 'tool_result');
  assert.ok(result && !/SAFETY_DENIED/.test(result.content), `the approved call ran: ${types(events)}`);

  // Both nodes resolve the next one at once: one answer is 200, the other AS-48's 404.
  await post_run(b, { messages: [user('remove it')], metadata: { run_id: 'gated-b' } });
  const raced = await pending_approval(b, 'gated-b');
  const answers = await Promise.all([resolve(a, raced.request_id, 'approve'), resolve(b, raced.request_id, 'deny')]);
  assert.deepEqual(answers.map((r) => r.status).sort(), [200, 404], answers.map((r) => r.text).join('\n'));
  const winner = answers.find((r) => r.status === 200).json.status;
  const stored = (await a.request('GET', `/v1/approvals/${raced.request_id}`)).json.approval;
  assert.equal(stored.status, winner, 'the store keeps the winning resolution');
  const raced_run = await run_ended(a, 'gated-b', 5_000);
  assert.equal(raced_run.status, 'completed');
  const raced_result = (await all_events(a, 'gated-b')).find((e) => e.type === 'tool_result');
  assert.equal(/SAFETY_DENIED/.test(raced_result.content), winner === 'denied', `the run followed ${winner}`);
}, { timeout: 120_000 });

scenario('an approval resolved on a node that cannot reach the waiting one over CAF wakes that node through troupe_approval at once, without waiting for its poll (CJ-26, CJ-10)', async (s) => {
  const { a, b } = await two_nodes(s, {
    model: gated_call, b_config: { cluster: { remoting: false, approval_poll_seconds: 60 } },
  });
  await post_run(b, { messages: [user('remove it')], metadata: { run_id: 'gated-notify' } });
  const approval = await pending_approval(a, 'gated-notify');
  const resolved_at = Date.now();
  assert.equal((await resolve(a, approval.request_id, 'approve')).status, 200);
  assert.equal((await run_ended(a, 'gated-notify', 5_000)).status, 'completed');
  console.log(`B's run, woken by troupe_approval, completed ${Date.now() - resolved_at} ms after the resolution on A (B's poll: 60 s)`);
}, { timeout: 120_000 });

scenario('an approval resolved on a node that cannot reach the waiting one is found by that node through troupe_approval or its poll (CJ-26 fallbacks)', async (s) => {
  const { a, b } = await two_nodes(s, {
    model: gated_call, b_config: { cluster: { remoting: false, approval_poll_seconds: 0.5 } },
  });
  await post_run(b, { messages: [user('remove it')], metadata: { run_id: 'gated-poll' } });
  const approval = await pending_approval(a, 'gated-poll');
  assert.equal((await resolve(a, approval.request_id, 'approve')).status, 200);
  assert.equal((await run_ended(a, 'gated-poll', 5_000)).status, 'completed');
  assert.match(a.stderr, /did not hear of approval-[0-9a-f]+ .*reads it at its next poll/);
}, { timeout: 120_000 });

scenario('a node stopped with SIGTERM hands a run waiting on an approval back at once, lets its short runs finish, hands its long ones back uncharged to the other node and leaves (CJ-15, CJ-16, CJ-52 b)', async (s) => {
  const database = postgres_database('cluster_' + crypto.randomBytes(6).toString('hex'));
  const config = cluster_config(database);
  // One attempt allowed: a handback that counted as an attempt would fail the long runs.
  config.service.run_max_attempts = 1;
  config.cluster.drain_grace_seconds = 6;
  config.model = { script: [{ content: 'short' }], scripts: { short: [{ content: 'short and done', delay_ms: 2000 }], long: [{ content: 'long and done', delay_ms: 15000 }], gated: gated_call.script } };
  // B takes all the runs before A starts.
  const b = await s.troupe({ config });
  const b_id = (await b.request('GET', '/v1/cluster/health')).json.node_id;
  const short = [], long = [];
  for (let i = 0; i < 10; i++) {
    short.push(`drain-short-${i}`);
    await post_run(b, { messages: [user('short')], model: 'scripted:short', metadata: { run_id: short[i] } });
  }
  for (let i = 0; i < 5; i++) {
    long.push(`drain-long-${i}`);
    await post_run(b, { messages: [user('long')], model: 'scripted:long', metadata: { run_id: long[i] } });
  }
  await post_run(b, { messages: [user('remove it')], model: 'scripted:gated', metadata: { run_id: 'drain-gated' } });
  const approval = await pending_approval(b, 'drain-gated');
  await until(async () => (await cluster_view(b)).data.find((n) => n.node_id === b_id).leases_held === 16,
    { timeout_ms: 20_000, interval_ms: 20, message: 'node B to hold the 16 runs' });
  const a = await s.troupe({ config });

  b.signal('SIGTERM');
  await until(async () => (await cluster_view(a)).data.find((n) => n.node_id === b_id).state === 'draining',
    { timeout_ms: 5_000, interval_ms: 20, message: 'B to say it drains' });
  const ready = (await b.request('GET', '/ready')).json;
  assert.equal(ready.status, 'degraded', JSON.stringify(ready));
  assert.deepEqual(ready.node, { node_id: b_id, state: 'draining' });
  // The run waiting on a person moves to A at once, long before the 6 s grace ends, and waits there on
  // the same approval.
  await until(async () => {
    const run = (await a.request('GET', '/v1/runs/drain-gated')).json;
    return run.status === 'running' && run.attempts === 2 && run.worker_id !== `worker-${b_id.slice(5)}`;
  }, { timeout_ms: 3_000, interval_ms: 20, message: 'the run waiting on an approval to move to A' });
  const resolved = await resolve(a, approval.request_id, 'approve');
  assert.equal(resolved.status, 200, resolved.text);
  const exit = await b.wait_exit(30_000);
  assert.equal(exit?.code, 0, `B exits 0 after its drain: ${JSON.stringify(exit)}`);
  assert.equal((await cluster_view(a)).data.find((n) => n.node_id === b_id).state, 'left');

  const attempts = await check_completed(a, [...short, ...long, 'drain-gated']);
  assert.equal(attempts.get('drain-gated'), 2);
  const approvals = (await a.request('GET', '/v1/approvals?run_id=drain-gated')).json;
  assert.equal(approvals.count, 1, `one approval, adopted by the second attempt: ${JSON.stringify(approvals)}`);
  for (const id of short) assert.equal(attempts.get(id), 1, `${id} finished on B within the grace`);
  for (const id of long) {
    assert.equal(attempts.get(id), 2, `${id} ran again on A`);
    const events = await all_events(a, id);
    const handed = events.find((e) => e.type === 'error');
    assert.equal(handed.content, `Handed back by draining node ${b_id}`, types(events));
    assert.equal(handed.metadata.error_type, 'handed_back');
    assert.equal(events[events.length - 1].content, 'long and done');
  }
}, { timeout: 180_000 });

// A node whose wall clock runs `offset` ahead (libfaketime; its monotonic clock is left alone, so its
// heartbeats and fencing keep their pace), or null where libfaketime is not installed.
function clock_ahead_env(offset) {
  const lib = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
  if (!fs.existsSync(lib)) return null;
  return {
    LD_PRELOAD: lib, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1', FAKETIME_DONT_RESET: '1',
    // A sanitizer build wants its runtime first; the preloaded clock does not touch memory.
    ASAN_OPTIONS: `${process.env.ASAN_OPTIONS ?? ''}:verify_asan_link_order=0`,
  };
}

scenario('a node whose clock runs 30 s ahead neither takes the runs others hold nor gives its own longer leases: leases are timed by the database clock (CJ-20)', async (s) => {
  const ahead = clock_ahead_env('+30s');
  assert.ok(ahead, 'libfaketime is installed (scripts/setup.sh installs faketime)');
  const database = postgres_database('cluster_' + crypto.randomBytes(6).toString('hex'));
  // B sweeps for lapsed leases every second; runs take 5 s against leases of 6 s.
  const config = deep_merge(cluster_config(database), {
    model: { script: [{ content: 'Thinking.', delay_ms: 5000 }] },
  });
  const a = await s.troupe({ config });
  const a_id = (await a.request('GET', '/v1/cluster/health')).json.node_id;
  await post_run(a, { messages: [user('long')], metadata: { run_id: 'held-by-a' } });
  await until(async () => (await a.request('GET', '/v1/runs/held-by-a')).json.status === 'running',
    { timeout_ms: 10_000, message: 'A to run it' });
  const b = await s.troupe({ config, env: ahead });
  const b_id = (await b.request('GET', '/v1/cluster/health')).json.node_id;
  assert.notEqual(a_id, b_id);

  await post_run(b, { messages: [user('long')], metadata: { run_id: 'held-by-b' } });
  const held = await until(async () => {
    const run = (await b.request('GET', '/v1/runs/held-by-b')).json;
    return run.status === 'running' && run.lease_expires_at ? run : null;
  }, { timeout_ms: 10_000, message: 'B to run its run' });
  const db_now = spawnSync('psql', [database, '-tAc', 'SELECT EXTRACT(EPOCH FROM clock_timestamp())'], { encoding: 'utf8' });
  const lease_left = Date.parse(held.lease_expires_at) / 1000 - Number(db_now.stdout.trim());
  assert.ok(lease_left > 0 && lease_left <= config.service.run_lease_seconds + 1,
    `B's lease ends ${lease_left.toFixed(1)} s after the database's now, not 30 s later: ${held.lease_expires_at}`);

  for (const id of ['held-by-a', 'held-by-b']) {
    const run = await until(async () => {
      const r = (await a.request('GET', `/v1/runs/${id}`)).json;
      return r.status === 'completed' ? r : null;
    }, { timeout_ms: 30_000, message: `${id} to complete` });
    assert.equal(run.attempts, 1, `${id} ran once: no node found its lease lapsed (${JSON.stringify(run)})`);
  }
  assert.doesNotMatch(b.stderr, /lapsed lease re-queued/);
}, { timeout: 120_000 });

// A jobs API worker in its own process (tests/integration/job_worker.mjs) against `troupe`; its
// stdout lines are kept, and the scenario's cleanup kills it.
function job_worker(s, troupe, worker_id, env = {}) {
  const proc = spawn(process.execPath, [path.join(path.dirname(new URL(import.meta.url).pathname), 'job_worker.mjs')], {
    env: { ...process.env, TROUPE_URL: troupe.url, TROUPE_WORKER_ID: worker_id, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const w = { proc, lines: [], exited: new Promise((r) => proc.on('exit', r)) };
  let rest = '';
  proc.stdout.on('data', (d) => {
    const parts = (rest + d).split('\n');
    rest = parts.pop();
    w.lines.push(...parts);
  });
  s.children.push({ stop: async () => { proc.kill('SIGKILL'); await w.exited; }, describe: () => `--- worker ${worker_id}: ${w.lines.length} lines` });
  return w;
}

scenario('2,000 jobs to two workers on two nodes: a worker and then a node killed with -9, every job completes once with its final epoch\'s result, and stale completions get 409 (CJ-48 jobs, CJ-37, CJ-38)', async (s) => {
  const { a, b } = await two_nodes(s, { a_config: { jobs: { sweep_interval_seconds: 0.25, retry_base_seconds: 0 } },
    b_config: { jobs: { sweep_interval_seconds: 0.25, retry_base_seconds: 0 } } });
  for (let batch = 0; batch < 2; ++batch) {
    const jobs = Array.from({ length: 1000 }, (_, i) => ({ type: 'load.test', payload: { n: batch * 1000 + i } }));
    const res = await a.request('POST', '/v1/jobs', { body: { jobs } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.created, 1000);
  }
  // W1 hangs on the leases it took and is killed holding them; W2 works through B until B dies.
  const w1 = job_worker(s, b, 'w-1', { TROUPE_WORKER_HOLD: '1' });
  const w2 = job_worker(s, b, 'w-2');
  await until(() => w1.lines.length >= 20 && w2.lines.some((l) => l.startsWith('completed')),
    { timeout_ms: 30_000, message: 'w-1 holding leases, w-2 completing' });
  w1.proc.kill('SIGKILL');
  await w1.exited;
  await kill9(b);
  const held = w1.lines.filter((l) => l.startsWith('leased')).map((l) => l.split(' '));
  // A fresh worker on the surviving node drains what is left, the killed worker's leases once swept.
  w2.proc.kill('SIGKILL');
  const w3 = job_worker(s, a, 'w-3');
  const stats = async () => (await a.request('GET', '/v1/jobs/stats')).json.types['load.test'];
  await until(async () => (await stats())?.completed === 2000, { timeout_ms: 90_000, interval_ms: 250, message: 'all 2,000 jobs completed' });
  const counts = await stats();
  assert.deepEqual({ queued: counts.queued, leased: counts.leased, dead: counts.dead }, { queued: 0, leased: 0, dead: 0 });
  // Every job holds the result of its final epoch's worker, and each payload was done once.
  const seen = new Set();
  for (let after = ''; ;) {
    const page = (await a.request('GET', `/v1/jobs?type=load.test&limit=200&order=oldest${after ? `&after=${after}` : ''}`)).json;
    for (const j of page.jobs) {
      assert.equal(j.status, 'completed');
      assert.equal(j.result.epoch, j.lease_epoch, `job ${j.id} keeps its final epoch's result`);
      assert.ok(!seen.has(j.payload.n));
      seen.add(j.payload.n);
    }
    if (!page.has_more) break;
    after = page.next_after;
  }
  assert.equal(seen.size, 2000);
  assert.ok(held.length > 0, 'w-1 died holding leases');
  const stale = await a.request('POST', '/v1/jobs/complete',
    { body: { completions: held.map(([, id, token]) => ({ id, lease_token: token, result: 'late' })) } });
  let refused = 0;
  for (const r of stale.json.results) {
    assert.equal(r.status, 409, JSON.stringify(r));
    assert.equal(r.reason, 'stale_lease');
    ++refused;
  }
  assert.equal(refused, held.length, 'a held lease never completed is refused once swept');
});
