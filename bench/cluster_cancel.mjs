// Cross-node cancel latency (docs/performance.md, "Cluster"; cluster-and-jobs.md CJ-25, CJ-53), run
// by bench/run as section `cluster` under scripts/pg-throwaway (TROUPE_POSTGRES_URL). It starts two
// troupe nodes A and B on one fresh database, prints one JSON object on stdout (progress on stderr)
// and stops both, also when it is interrupted.
//
//   node bench/cluster_cancel.mjs --troupe BUILD/troupe --work-dir DIR [--pairs 100] [--warmup 5]
//
// Per pair, B starts two long runs (the scripted model thinks for 60 s) and, once both attempts
// have stored their session_start, one is cancelled through A (A asks B's node actor over CAF,
// CJ-25) and the other through B itself (the baseline: the same attempt stopped by its own node),
// in alternating order. The latency is the POST /v1/runs/{id}/cancel round trip, every answer must
// be 200 with status `cancelled`, and A must not have fallen back to the store (its log says so when
// it does). The figures to read: the cross-node p99 against CJ-53's 200 ms, and cross/local p99.
import fs from 'node:fs';
import { flags, fresh_database, log, percentile, request, start_node, stop_all } from './cluster_nodes.mjs';

function args() {
  const out = flags();
  return {
    troupe: out.troupe,
    work_dir: out.work_dir,
    pairs: Number(out.pairs ?? 100),
    warmup: Number(out.warmup ?? 5),
  };
}

const opt = args();
if (!opt.troupe || !opt.work_dir) throw new Error('usage: cluster_cancel.mjs --troupe BIN --work-dir DIR');

const config = {
  service: { run_concurrency: 0, run_lease_seconds: 30 },
  model: { script: [{ content: 'A long think.', delay_ms: 60_000 }] },
};

async function running(node, run_id) {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    const r = await request(node.port, 'GET', `/v1/runs/${run_id}`);
    if (r.status === 200 && r.json.status === 'running' && r.json.event_count >= 1) return;
    await new Promise((res) => setTimeout(res, 10));
  }
  throw new Error(`${run_id} did not start on ${node.name}`);
}

async function timed_cancel(node, run_id) {
  const t0 = process.hrtime.bigint();
  const r = await request(node.port, 'POST', `/v1/runs/${run_id}/cancel`);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 200 || r.json.status !== 'cancelled') throw new Error(`cancel of ${run_id}: ${r.status} ${r.text}`);
  return ms;
}

async function main() {
  fs.mkdirSync(opt.work_dir, { recursive: true });
  const database = fresh_database('bench_cluster');
  const start = (n) => start_node(opt.troupe, opt.work_dir, n, database, config);
  const a = await start('a');
  const b = await start('b');
  const cross = [];
  const local = [];
  const total = opt.warmup + opt.pairs;
  for (let i = 0; i < total; ++i) {
    const far = `far-${i}`;
    const near = `near-${i}`;
    for (const id of [far, near]) {
      const r = await request(b.port, 'POST', '/v1/runs', { messages: [{ role: 'user', content: 'think' }], metadata: { run_id: id } });
      if (r.status !== 200) throw new Error(`POST /v1/runs: ${r.status} ${r.text}`);
    }
    await running(b, far);
    await running(b, near);
    const pair = i % 2 === 0
      ? [await timed_cancel(a, far), await timed_cancel(b, near)]
      : [await timed_cancel(b, near), await timed_cancel(a, far)].reverse();
    if (i >= opt.warmup) {
      cross.push(pair[0]);
      local.push(pair[1]);
    }
    if ((i + 1) % 25 === 0) log(`${i + 1}/${total} pairs`);
  }
  const fallbacks = (fs.readFileSync(a.err_file, 'utf8').match(/ending it through the store/g) ?? []).length;
  const figures = (v) => ({ p50_ms: percentile(v, 50), p99_ms: percentile(v, 99), max_ms: Math.max(...v) });
  const result = {
    pairs: opt.pairs,
    cross_node: figures(cross),
    local_baseline: figures(local),
    cross_over_local_p99: percentile(cross, 99) / percentile(local, 99),
    store_fallbacks: fallbacks,
    target_p99_ms: 200,
    target_met: percentile(cross, 99) < 200 && fallbacks === 0,
  };
  process.stdout.write(JSON.stringify(result) + '\n');
  stop_all();
}

main().catch((err) => {
  log(err.stack ?? String(err));
  stop_all();
  process.exit(1);
});
