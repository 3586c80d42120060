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
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

function args() {
  const out = {};
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) out[a[i].replace(/^--/, '').replace(/-/g, '_')] = a[i + 1];
  return {
    troupe: out.troupe,
    work_dir: out.work_dir,
    pairs: Number(out.pairs ?? 100),
    warmup: Number(out.warmup ?? 5),
  };
}

const opt = args();
if (!opt.troupe || !opt.work_dir) throw new Error('usage: cluster_cancel.mjs --troupe BIN --work-dir DIR');
const server = process.env.TROUPE_POSTGRES_URL;
if (!server) throw new Error('TROUPE_POSTGRES_URL is not set: run through scripts/pg-throwaway');
const log = (m) => process.stderr.write(`[cluster] ${m}\n`);
const shared_secret = crypto.randomBytes(32).toString('hex'); // both nodes prove the same one

function percentile(values, p) {
  const v = [...values].sort((x, y) => x - y);
  return v.length ? v[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)] : null;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
function request(port, method, url, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, method, path: url, agent,
      headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {} },
    (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, json: text ? JSON.parse(text) : null, text }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

const nodes = [];
function stop_all() {
  for (const n of nodes) if (n.proc.exitCode === null) n.proc.kill('SIGKILL');
}
process.on('exit', stop_all);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stop_all(); process.exit(1); });

async function start_node(name, database) {
  const dir = path.join(opt.work_dir, name);
  fs.mkdirSync(dir, { recursive: true });
  const config = {
    store: { postgres_url: database },
    cluster: { port: 0, secret: shared_secret },
    service: { run_concurrency: 0, run_lease_seconds: 30 },
    model: { script: [{ content: 'A long think.', delay_ms: 60_000 }] },
  };
  fs.writeFileSync(path.join(dir, 'troupe.json'), JSON.stringify(config));
  const err = fs.openSync(path.join(dir, 'troupe.err'), 'w');
  const proc = spawn(opt.troupe, ['serve', '--config', path.join(dir, 'troupe.json'), '--port', '0', '--data-dir',
    path.join(dir, 'data')], { stdio: ['ignore', 'pipe', err] });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (code) => reject(new Error(`${name} exited with ${code}: ${fs.readFileSync(path.join(dir, 'troupe.err'), 'utf8')}`)));
  });
  const node = { name, proc, port, err_file: path.join(dir, 'troupe.err') };
  nodes.push(node);
  return node;
}

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
  const name = `bench_cluster_${crypto.randomBytes(4).toString('hex')}`;
  execFileSync('psql', [server, '-qc', `CREATE DATABASE ${name}`]);
  const database = server.slice(0, server.lastIndexOf('/') + 1) + name;
  const start = (n) => start_node(n, database);
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
  for (const n of nodes) n.proc.kill('SIGTERM');
}

main().catch((err) => {
  log(err.stack ?? String(err));
  stop_all();
  process.exit(1);
});
