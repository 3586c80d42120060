// Two nodes against one on the same machine (docs/performance.md, "Cluster"; cluster-and-jobs.md
// CJ-53), run by bench/run as section `clusterload` under scripts/pg-throwaway. Prints one JSON object
// on stdout (progress on stderr).
//
//   node bench/cluster_throughput.mjs --troupe BUILD/troupe --work-dir DIR [--seconds 10] [--warmup 2]
//     [--clients 8] [--probes 200]
//
// Throughput: `clients` HTTP clients post background runs (the scripted model answers at once: four
// events a run) as fast as their answers come, spread over the nodes; after `warmup` seconds the runs
// the cluster completes in the next `seconds` are counted in the database, by the node that ran them.
// The baseline is one node on a fresh database, then two nodes on another; the ratio is two over
// one (CJ-53: at least 0.8, each node 35-65% of the claims). PostgreSQL, the nodes and the clients
// share the machine's cores, as CJ-53 asks.
//
// Claim latency: with both nodes idle, `probes` runs are posted one at a time, alternately to each
// node, and each run's `started_at - created_at` (both stored by the database path, microseconds) is
// how long it waited to be claimed: p50/p99 against CJ-53's 10 ms.
import fs from 'node:fs';
import { flags, fresh_database, log, percentile, query_value, request, start_node, stop_node } from './cluster_nodes.mjs';

const f = flags();
const opt = {
  troupe: f.troupe,
  work_dir: f.work_dir,
  seconds: Number(f.seconds ?? 10),
  warmup: Number(f.warmup ?? 2),
  clients: Number(f.clients ?? 8),
  probes: Number(f.probes ?? 200),
};
if (!opt.troupe || !opt.work_dir) throw new Error('usage: cluster_throughput.mjs --troupe BIN --work-dir DIR');

const config = {
  service: { run_concurrency: 16, run_lease_seconds: 30 },
  model: { script: [{ content: 'Done at once.' }] },
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function post(node, run_id) {
  const r = await request(node.port, 'POST', '/v1/runs', { messages: [{ role: 'user', content: 'go' }], metadata: { run_id } });
  if (r.status !== 200) throw new Error(`POST /v1/runs on ${node.name}: ${r.status} ${r.text}`);
}

// Completed runs per worker between two instants of the database's clock.
function completions(database, from, to) {
  const rows = query_value(database, `SELECT worker_id || ' ' || count(*) FROM runs WHERE status = 'completed' ` +
    `AND completed_at > '${from}' AND completed_at <= '${to}' GROUP BY worker_id ORDER BY worker_id`);
  return rows ? rows.split('\n').map((l) => Number(l.split(' ')[1])) : [];
}

const db_now = (database) => query_value(database, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')`);

// Runs the closed-loop load on `nodes` (one fresh database); answers runs/s and each node's share.
async function load(label, n_nodes) {
  const database = fresh_database(`bench_load${n_nodes}`);
  const nodes = [];
  for (let i = 0; i < n_nodes; i++) nodes.push(await start_node(opt.troupe, opt.work_dir, `${label}-${i}`, database, config));
  let stop = false;
  let posted = 0;
  const clients = [...Array(opt.clients).keys()].map(async (c) => {
    for (let i = 0; !stop; i++) {
      await post(nodes[(c + i) % nodes.length], `${label}-c${c}-${i}`);
      posted++;
    }
  });
  await sleep(opt.warmup * 1000);
  const from = db_now(database);
  await sleep(opt.seconds * 1000);
  const to = db_now(database);
  stop = true;
  await Promise.all(clients);
  const per_node = completions(database, from, to);
  const total = per_node.reduce((x, y) => x + y, 0);
  log(`${label}: ${total} runs completed in ${opt.seconds} s by ${n_nodes} node(s): ${per_node.join(' + ')}; ${posted} posted`);
  const result = { runs_per_second: total / opt.seconds, shares: per_node.map((n) => n / Math.max(total, 1)) };
  if (n_nodes === 2) result.claim_latency_ms = await claim_latency(database, nodes);
  for (const n of nodes) await stop_node(n);
  return result;
}

// Once the queue is empty: single runs posted alternately, each waited for.
async function claim_latency(database, nodes) {
  for (let deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(100))
    if (query_value(database, "SELECT count(*) FROM runs WHERE status IN ('queued', 'running')") === '0') break;
  const ids = [];
  for (let i = 0; i < opt.probes; i++) {
    const id = `probe-${i}`;
    await post(nodes[i % nodes.length], id);
    for (let deadline = Date.now() + 10_000; ; await sleep(2)) {
      const r = await request(nodes[0].port, 'GET', `/v1/runs/${id}`);
      if (r.json?.status === 'completed') break;
      if (Date.now() > deadline) throw new Error(`${id} did not complete`);
    }
    ids.push(id);
  }
  const waits = query_value(database, 'SELECT string_agg((EXTRACT(EPOCH FROM started_at::timestamptz - created_at::timestamptz) * 1000)::text, \' \') ' +
    "FROM runs WHERE run_id LIKE 'probe-%'").split(' ').map(Number);
  return { probes: waits.length, p50: percentile(waits, 50), p99: percentile(waits, 99), max: Math.max(...waits) };
}

async function main() {
  fs.mkdirSync(opt.work_dir, { recursive: true });
  const one = await load('one', 1);
  const two = await load('two', 2);
  const ratio = two.runs_per_second / Math.max(one.runs_per_second, 1e-9);
  const balanced = two.shares.length === 2 && two.shares.every((s) => s >= 0.35 && s <= 0.65);
  const result = {
    seconds: opt.seconds,
    clients: opt.clients,
    one_node_runs_per_second: one.runs_per_second,
    two_nodes_runs_per_second: two.runs_per_second,
    two_over_one: ratio,
    two_node_shares: two.shares,
    claim_latency_ms: two.claim_latency_ms,
    target_ratio: 0.8,
    target_claim_p99_ms: 10,
    target_met: ratio >= 0.8 && balanced && two.claim_latency_ms.p99 < 10,
  };
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((err) => {
  log(err.stack ?? String(err));
  process.exit(1);
});
