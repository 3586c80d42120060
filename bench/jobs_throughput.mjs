// Jobs API throughput against two baselines on the same server (docs/performance.md, "Jobs API";
// cluster-and-jobs.md CJ-53), run by bench/run as section `jobs` under scripts/pg-throwaway. Prints
// one JSON object on stdout, progress on stderr; exits 77 with a line `SKIP: <why>` when PostgreSQL,
// psql, pgbench or the graphile-worker package (bench/package.json) is missing.
//
//   node bench/jobs_throughput.mjs --troupe BUILD/troupe --work-dir DIR [--jobs 20000] [--clients 8]
//     [--batch 100] [--rounds 3] [--warmup-jobs 2000] [--probe-rate 200] [--probe-seconds 30]
//     [--probe-warmup-seconds 2] [--probe-segments 3] [--probe-max-jobs 10,1] [--gw-concurrency 8] [--gw-local-queue 100,500]
//
// Each round, in this order, each contender on a fresh database of the one throwaway server (fsync on):
//   troupe    a fresh `troupe serve` on PostgreSQL (its default config); `jobs` no-op jobs enqueued
//             over HTTP in batches of 1000 (not timed); `clients` HTTP clients with kept-alive sockets
//             each loop POST /v1/jobs/lease (max_jobs `batch`) -> POST /v1/jobs/complete of what they
//             got, until a lease comes back empty. Timed from the first lease sent to the last
//             completion answered. `warmup-jobs` jobs of another type go through the same loop first.
//             Checked: GET /v1/jobs/stats says `jobs` completed, none queued or leased; no job was
//             leased twice; the database holds `jobs` completed rows, each with one attempt.
//   pgbench   on the same database once troupe has stopped: a `CREATE TABLE ... (LIKE jobs INCLUDING
//             ALL)` copy holding the same jobs, queued again; `pgbench -n -c clients -j 2` runs the
//             claim of `batch` rows (the SKIP LOCKED selection troupe's claim makes within a tenant,
//             leasing them) and then the completing UPDATE of those rows by id and token (the shape
//             of troupe's complete_jobs), as two autocommit statements, until every job is taken.
//             Timed by pgbench (transactions / tps, without connection set-up).
//   graphile  graphile-worker (the version bench/package-lock.json pins) in a database of its own:
//             `jobs` jobs of a no-op task added with addJobs (not timed), then a runner with
//             concurrency `gw-concurrency` in its default mode and, each on another fresh database,
//             in its batched mode with each localQueue.size of `gw-local-queue` (100: troupe's lease
//             size; 500: the size graphile-worker's own performance page runs), completeJobBatchDelay
//             0 and failJobBatchDelay 0. Timed from the first task started to the moment its jobs table is
//             empty (completions are written back, polled every 5 ms). Each runner first works
//             `warmup-jobs` jobs. Checked: every job ran exactly once.
// The figures are medians over the rounds; the ratios are troupe's median over each baseline's. The
// target against "graphile batched" is taken against the faster of its batched modes.
//
// Then claim latency: a fresh troupe with enough jobs queued, POST /v1/jobs/lease (max_jobs from
// `probe-max-jobs`, each value in turn) sent open-loop at `probe-rate` per second; each lease's time
// runs from the moment it was due to its answer (a late send counts), and what it leased is completed
// (not timed). The baseline: pgbench -R at the same rate (`clients` connections) running the same
// claim alone (no completion) with as many rows on a copy of troupe's queued probe jobs in the same
// database, timed from each claim's scheduled start as well. The two alternate in `probe-segments`
// segments of probe-seconds / probe-segments each, after probe-warmup-seconds not counted; p50/p99/max
// of the measured parts, against CJ-53's 10 ms.
//
// Where the time goes: for each timed phase, the CPU time of troupe, of the PostgreSQL server (the
// postmaster and its children) and of the load driver (this process, pgbench), per 1,000 jobs, from
// /proc, and how busy the machine was overall (others share it).
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const log = (m) => process.stderr.write(`[jobs] ${m}\n`);
const skip = (why) => {
  process.stderr.write(`SKIP: ${why}\n`);
  process.exit(77);
};

// --- prerequisites: SKIP (77) when one is missing ----------------------------------------------------
if (!process.env.TROUPE_POSTGRES_URL) skip('TROUPE_POSTGRES_URL is not set (run through scripts/pg-throwaway)');
for (const tool of ['psql', 'pgbench']) {
  const r = spawnSync(tool, ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) skip(`${tool} is not installed (apt-get install postgresql-client-15)`);
}
let gw;
let gw_version;
try {
  gw = await import('graphile-worker');
  const main = createRequire(import.meta.url).resolve('graphile-worker');
  gw_version = JSON.parse(fs.readFileSync(path.join(path.dirname(main), '..', 'package.json'), 'utf8')).version;
} catch (err) {
  skip(`graphile-worker is not installed (npm ci in bench/): ${String(err.message ?? err).split('\n')[0]}`);
}

const { flags, fresh_database, percentile, query_value, request, start_node, stop_node } = await import('./cluster_nodes.mjs');

const f = flags();
const list = (s) => String(s).split(',').map(Number).filter((x) => x > 0);
const opt = {
  troupe: f.troupe,
  work_dir: f.work_dir,
  jobs: Number(f.jobs ?? 20000),
  clients: Number(f.clients ?? 8),
  batch: Number(f.batch ?? 100),
  rounds: Number(f.rounds ?? 3),
  warmup_jobs: Number(f.warmup_jobs ?? 2000),
  probe_rate: Number(f.probe_rate ?? 200),
  probe_seconds: Number(f.probe_seconds ?? 30),
  probe_warmup_seconds: Number(f.probe_warmup_seconds ?? 2),
  probe_segments: Number(f.probe_segments ?? 3),
  probe_max_jobs: list(f.probe_max_jobs ?? '10,1'),
  gw_concurrency: Number(f.gw_concurrency ?? 8),
  gw_local_queue: list(f.gw_local_queue ?? '100,500'),
};
if (!opt.troupe || !opt.work_dir) throw new Error('usage: jobs_throughput.mjs --troupe BIN --work-dir DIR [options]');
if (opt.batch < 1 || opt.batch > 100) throw new Error('--batch must be 1..100 (max_jobs, CJ-32)');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const round3 = (x) => Math.round(x * 1000) / 1000;
const round1 = (x) => Math.round(x * 10) / 10;
const server = process.env.TROUPE_POSTGRES_URL;
const drop_database = (url) => {
  const name = url.slice(url.lastIndexOf('/') + 1);
  execFileSync('psql', [server, '-qc', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`]);
};
// troupe's own config: the defaults, on its database, nothing from the environment.
const troupe_config = { service: { host: '127.0.0.1', port: 0, shutdown_grace_seconds: 1 } };

// --- CPU time from /proc ---------------------------------------------------------------------------
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
// [utime + stime, cutime + cstime] of a process in ms, or null once it is gone.
function proc_cpu(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const v = s.slice(s.lastIndexOf(')') + 2).split(' ').map(Number);
    return { ppid: v[1], own: ((v[11] + v[12]) * 1000) / CLK_TCK, children: ((v[13] + v[14]) * 1000) / CLK_TCK };
  } catch {
    return null;
  }
}
let postmaster_pid = 0;
function find_postmaster() {
  const pid = Number(query_value(server, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"));
  postmaster_pid = proc_cpu(pid)?.ppid ?? 0;
}
// The PostgreSQL server's CPU so far: the postmaster, its live children and the children it reaped.
function postgres_cpu_ms() {
  if (!postmaster_pid) return 0;
  const pm = proc_cpu(postmaster_pid);
  let total = pm ? pm.own + pm.children : 0;
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const c = proc_cpu(d);
    if (c && c.ppid === postmaster_pid) total += c.own;
  }
  return total;
}
function machine_jiffies() {
  const v = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = v[3] + (v[4] ?? 0);
  return { total: v.reduce((a, b) => a + b, 0), idle };
}
// A snapshot of everything measured; `cpu_split(a, b, jobs)` turns two into ms per 1,000 jobs.
function cpu_snapshot(troupe_pid) {
  const self = proc_cpu(process.pid);
  const usage = process.cpuUsage();
  return {
    troupe: troupe_pid ? proc_cpu(troupe_pid)?.own ?? 0 : 0,
    postgres: postgres_cpu_ms(),
    driver: (usage.user + usage.system) / 1000,
    driver_children: self ? self.children : 0,
    machine: machine_jiffies(),
    t: now(),
  };
}
function cpu_split(a, b, jobs) {
  const per_k = (ms) => round1((ms * 1000) / Math.max(jobs, 1));
  const wall = b.t - a.t;
  const total = b.machine.total - a.machine.total;
  const busy = total > 0 ? 1 - (b.machine.idle - a.machine.idle) / total : 0;
  const troupe = b.troupe - a.troupe;
  const postgres = b.postgres - a.postgres;
  const driver = b.driver - a.driver + (b.driver_children - a.driver_children);
  const cores_ms = wall * 2 * busy; // what the machine's CPUs spent in this phase, all processes
  return {
    troupe_ms_per_1k_jobs: per_k(troupe),
    postgres_ms_per_1k_jobs: per_k(postgres),
    driver_ms_per_1k_jobs: per_k(driver),
    machine_busy_pct: round1(busy * 100),
    others_ms_per_1k_jobs: per_k(Math.max(0, cores_ms - troupe - postgres - driver)),
  };
}

// --- troupe ----------------------------------------------------------------------------------------
async function post(port, url, body) {
  const r = await request(port, 'POST', url, body);
  if (r.status !== 200) throw new Error(`POST ${url}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.json;
}

async function enqueue(port, type, n, first = 0) {
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let k = i; k < Math.min(n, i + 1000); k++) jobs.push({ type, payload: { i: first + k } });
    const r = await post(port, '/v1/jobs', { jobs });
    if (r.created !== jobs.length) throw new Error(`enqueue: ${r.created} of ${jobs.length} created`);
  }
}

// `clients` loops of lease -> complete until a lease comes back empty; answers what they saw.
async function drain(port, label) {
  const seen = new Set();
  const out = { leases: 0, leased: 0, twice: 0, completed: 0, refused: 0, first_sent: 0, last_done: 0 };
  const client = async (c) => {
    for (;;) {
      if (!out.first_sent) out.first_sent = now();
      const got = await post(port, '/v1/jobs/lease', {
        worker_id: `${label}-${c}`, max_jobs: opt.batch, lease_seconds: 60, wait_seconds: 0,
      });
      const jobs = got.jobs ?? [];
      if (jobs.length === 0) return;
      out.leases++;
      out.leased += jobs.length;
      for (const j of jobs) {
        if (seen.has(j.id)) out.twice++;
        seen.add(j.id);
      }
      const done = await post(port, '/v1/jobs/complete', {
        completions: jobs.map((j) => ({ id: j.id, lease_token: j.lease_token, result: {} })),
      });
      for (const r of done.results ?? []) r.status === 200 ? out.completed++ : out.refused++;
      out.last_done = now();
    }
  };
  await Promise.all([...Array(opt.clients).keys()].map(client));
  return out;
}

async function troupe_round(r) {
  const database = fresh_database(`bench_jobs_r${r}`);
  const node = await start_node(opt.troupe, opt.work_dir, `troupe-r${r}`, database, troupe_config);
  await enqueue(node.port, 'bench.warmup', opt.warmup_jobs);
  await drain(node.port, 'warm');
  await enqueue(node.port, 'bench.noop', opt.jobs);
  query_value(database, 'ANALYZE jobs');
  const c0 = cpu_snapshot(node.proc.pid);
  const d = await drain(node.port, 'w');
  const c1 = cpu_snapshot(node.proc.pid);
  const seconds = (d.last_done - d.first_sent) / 1000;
  const stats = (await request(node.port, 'GET', '/v1/jobs/stats')).json?.types?.['bench.noop'] ?? {};
  const once = Number(query_value(database,
    "SELECT count(*) FROM jobs WHERE type = 'bench.noop' AND status = 'completed' AND attempts = 1"));
  await stop_node(node);
  const problems = [];
  if ((stats.completed ?? 0) !== opt.jobs) problems.push(`stats say ${stats.completed} completed`);
  if (stats.queued || stats.leased) problems.push(`stats say ${stats.queued} queued, ${stats.leased} leased`);
  if (d.twice) problems.push(`${d.twice} jobs leased twice`);
  if (d.refused) problems.push(`${d.refused} completions refused`);
  if (d.completed !== opt.jobs) problems.push(`${d.completed} completions answered 200`);
  if (once !== opt.jobs) problems.push(`${once} rows completed with one attempt`);
  const jobs_per_s = opt.jobs / seconds;
  log(`round ${r} troupe: ${opt.jobs} jobs in ${seconds.toFixed(2)} s = ${jobs_per_s.toFixed(0)} jobs/s, ` +
    `${d.leases} leases (${(d.leased / Math.max(d.leases, 1)).toFixed(1)} jobs each)` +
    (problems.length ? `; PROBLEMS: ${problems.join(', ')}` : '; every job completed once'));
  return { database, jobs_per_s, seconds, leases: d.leases, cpu: cpu_split(c0, c1, opt.jobs), problems };
}

// --- pgbench on a copy of troupe's table -------------------------------------------------------------
// The claim: the SKIP LOCKED selection claim_ready_jobs makes within one tenant (its `ready` part, on
// the jobs_claim_order index) and TROUPE_PG_LEASE_DEALT's update (io/job_store_statements.hpp), without
// the turns between tenants and the type filters; the completion: complete_jobs' update by id and lease
// token from a JSON list. Two autocommit statements per transaction. Every job has the one tenant.
// With `complete` false, the claim alone (the claim latency's baseline).
function pgbench_script(tenant, batch, complete = true) {
  const t = "extract(epoch FROM clock_timestamp())";
  const claim = [
    `WITH dealt AS (SELECT job_id FROM bench_jobs WHERE status = 'queued' AND tenant_key = '${tenant}' AND ready_at <= ${t}`,
    `  ORDER BY priority DESC, ready_at, row_order LIMIT ${batch} FOR UPDATE SKIP LOCKED),`,
    ` started AS (UPDATE bench_jobs SET status = 'leased', attempts = attempts + 1, lease_epoch = bench_jobs.lease_epoch + 1,`,
    `  worker_id = 'pgbench-' || :client_id, lease_token = 'lt_' || (bench_jobs.lease_epoch + 1) || '_' || md5(random()::text),`,
    `  started_at = ${t}, attempt_deadline = ${t} + timeout_seconds, lease_seconds = 60,`,
    `  lease_expires_at = ${t} + LEAST(60, timeout_seconds), updated_at = ${t}`,
    `  FROM dealt WHERE bench_jobs.job_id = dealt.job_id RETURNING bench_jobs.job_id, bench_jobs.lease_token)`,
    `SELECT quote_literal(coalesce(json_agg(json_build_object('id', job_id, 'token', lease_token, 'result', '{}')), '[]')::text) AS done`,
  ];
  if (!complete) return [...claim, ' FROM started;', ''].join('\n');
  return [
    ...claim,
    ` FROM started \\gset`,
    `UPDATE bench_jobs SET status = 'completed', result = x.result, completed_at = ${t}, updated_at = ${t}, lease_expires_at = NULL`,
    ` FROM json_to_recordset(:done::json) AS x(id text, token text, result text)`,
    ` WHERE bench_jobs.job_id = x.id AND bench_jobs.status = 'leased' AND bench_jobs.lease_token = x.token;`,
    '',
  ].join('\n');
}

// bench_jobs: a copy of troupe's jobs table holding its jobs of `type`, queued again.
function copy_jobs(database, type) {
  query_value(database, 'CREATE TABLE bench_jobs (LIKE jobs INCLUDING ALL)');
  query_value(database,
    'INSERT INTO bench_jobs (job_id, type, tenant_key, user_key, status, priority, payload, idempotency_key, ' +
    'max_attempts, timeout_seconds, run_after, ready_at, created_at, updated_at) ' +
    "SELECT job_id, type, tenant_key, user_key, 'queued', priority, payload, idempotency_key, max_attempts, " +
    `timeout_seconds, run_after, ready_at, created_at, created_at FROM jobs WHERE type = '${type}' ORDER BY row_order`);
  query_value(database, 'ANALYZE bench_jobs');
  const tenants = query_value(database, 'SELECT DISTINCT tenant_key FROM bench_jobs').split('\n');
  if (tenants.length !== 1 || /'/.test(tenants[0])) throw new Error(`the jobs have tenants ${tenants.join(', ')}: one expected`);
  return tenants[0];
}

function pgbench_round(r, database) {
  const tenant = copy_jobs(database, 'bench.noop');
  const script = path.join(opt.work_dir, 'pgbench-claim.sql');
  fs.writeFileSync(script, pgbench_script(tenant, opt.batch));
  const per_client = Math.ceil(opt.jobs / opt.batch / opt.clients) + 2; // the last ones find the table empty
  const c0 = cpu_snapshot(0);
  const run = spawnSync('pgbench', ['-n', '-c', String(opt.clients), '-j', '2', '-t', String(per_client), '-f', script, database],
    { encoding: 'utf8' });
  const c1 = cpu_snapshot(0);
  if (run.status !== 0) throw new Error(`pgbench failed (${run.status}): ${run.stderr}\n${run.stdout}`);
  const tps = Number(/tps = ([0-9.]+) \(without initial connection time\)/.exec(run.stdout)?.[1]);
  const processed = Number(/number of transactions actually processed: (\d+)/.exec(run.stdout)?.[1]);
  const failed = Number(/number of failed transactions: (\d+)/.exec(run.stdout)?.[1] ?? 0);
  if (!tps || !processed) throw new Error(`pgbench printed no tps: ${run.stdout}`);
  const seconds = processed / tps;
  const once = Number(query_value(database, "SELECT count(*) FROM bench_jobs WHERE status = 'completed' AND attempts = 1"));
  const problems = [];
  if (once !== opt.jobs) problems.push(`${once} rows completed once`);
  if (failed) problems.push(`${failed} failed transactions`);
  const jobs_per_s = once / seconds;
  log(`round ${r} pgbench: ${once} jobs in ${seconds.toFixed(2)} s = ${jobs_per_s.toFixed(0)} jobs/s ` +
    `(${processed} transactions, tps ${tps.toFixed(1)})` + (problems.length ? `; PROBLEMS: ${problems.join(', ')}` : ''));
  return { jobs_per_s, seconds, cpu: cpu_split(c0, c1, opt.jobs), problems };
}

// --- graphile-worker -------------------------------------------------------------------------------
const quiet = new gw.Logger(() => () => {});

// local_queue 0: the default mode; n > 0: batched, n jobs fetched at once.
async function gw_round(r, local_queue) {
  const batched = local_queue > 0;
  const mode = batched ? `batched_q${local_queue}` : 'default';
  const database = fresh_database(`bench_gw_${mode}_r${r}`);
  const utils = await gw.makeWorkerUtils({ connectionString: database, logger: quiet });
  try {
    await utils.migrate();
    const preset = batched
      ? { worker: { localQueue: { size: local_queue }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } }
      : undefined;
    const add = async (task, n) => {
      for (let i = 0; i < n; i += 1000) {
        const specs = [];
        for (let k = i; k < Math.min(n, i + 1000); k++) specs.push({ identifier: task, payload: { i: k } });
        await utils.addJobs(specs);
      }
    };
    // Through the worker's own pool: a psql per poll would stall this process's event loop.
    const remaining = () => utils.withPgClient(async (c) =>
      Number((await c.query('SELECT count(*) AS n FROM graphile_worker._private_jobs')).rows[0].n));
    // Runs a runner over what is queued of `task`; answers when the jobs table is empty.
    const work = async (task, n) => {
      const runs = new Uint8Array(n);
      let done = 0;
      let first = 0;
      let all;
      const finished = new Promise((resolve) => { all = resolve; });
      const noop = async (payload) => {
        if (!first) first = now();
        runs[payload.i]++;
        if (++done === n) all();
      };
      const runner = await gw.run({
        connectionString: database, concurrency: opt.gw_concurrency, noHandleSignals: true, logger: quiet,
        taskList: { [task]: noop }, preset,
      });
      await finished;
      while ((await remaining()) > 0) await sleep(5);
      const last = now();
      await runner.stop();
      let twice = 0;
      let never = 0;
      for (const c of runs) c === 0 ? never++ : c > 1 ? twice++ : 0;
      return { seconds: (last - first) / 1000, twice, never };
    };
    await add('warmup', opt.warmup_jobs);
    await work('warmup', opt.warmup_jobs);
    await add('noop', opt.jobs);
    query_value(database, 'ANALYZE graphile_worker._private_jobs');
    const c0 = cpu_snapshot(0);
    const w = await work('noop', opt.jobs);
    const c1 = cpu_snapshot(0);
    const problems = [];
    if (w.twice) problems.push(`${w.twice} jobs ran twice`);
    if (w.never) problems.push(`${w.never} jobs never ran`);
    const jobs_per_s = opt.jobs / w.seconds;
    log(`round ${r} graphile-worker ${mode}: ${opt.jobs} jobs in ${w.seconds.toFixed(2)} s = ${jobs_per_s.toFixed(0)} jobs/s` +
      (problems.length ? `; PROBLEMS: ${problems.join(', ')}` : ''));
    return { jobs_per_s, seconds: w.seconds, cpu: cpu_split(c0, c1, opt.jobs), problems };
  } finally {
    await utils.release();
    drop_database(database);
  }
}

// --- claim latency, open loop ------------------------------------------------------------------------
// `count` leases of max_jobs sent open-loop at `probe_rate`/s; answers the latencies (ms from each
// lease's due time to its answer) past the first `skip` and how many of those came back short.
async function troupe_probe(port, max_jobs, count, skip) {
  const interval = 1000 / opt.probe_rate;
  const lat = [];
  let short = 0;
  const pending = [];
  const start = now();
  for (let k = 0; k < count; k++) {
    const due = start + k * interval;
    const wait = due - now();
    if (wait > 0) await sleep(wait);
    pending.push((async () => {
      const got = await post(port, '/v1/jobs/lease', { worker_id: `probe-${k % 8}`, max_jobs, lease_seconds: 60, wait_seconds: 0 });
      const ms = now() - due;
      const jobs = got.jobs ?? [];
      if (k >= skip) {
        lat.push(ms);
        if (jobs.length !== max_jobs) short++;
      }
      if (jobs.length) {
        await post(port, '/v1/jobs/complete', {
          completions: jobs.map((j) => ({ id: j.id, lease_token: j.lease_token, result: {} })),
        });
      }
    })());
  }
  await Promise.all(pending);
  return { lat, short };
}

// pgbench -R at the same rate for `seconds`, running the claim of max_jobs alone; answers the
// latencies (ms from each claim's scheduled start to its end) past the first `skip_seconds`.
function pgbench_probe(database, tenant, max_jobs, seconds, skip_seconds) {
  const script = path.join(opt.work_dir, `pgbench-claim-${max_jobs}.sql`);
  fs.writeFileSync(script, pgbench_script(tenant, max_jobs, false));
  const dir = fs.mkdtempSync(path.join(opt.work_dir, 'pgbench-log-'));
  const run = spawnSync('pgbench', ['-n', '-c', String(opt.clients), '-j', '2', '-R', String(opt.probe_rate),
    '-T', String(seconds), '-f', script, '--log', `--log-prefix=${path.join(dir, 'tx')}`, database],
  { encoding: 'utf8', cwd: dir });
  if (run.status !== 0) throw new Error(`pgbench -R failed (${run.status}): ${run.stderr}\n${run.stdout}`);
  // Lines: client transaction time_us script epoch_s epoch_us schedule_lag_us.
  const rows = fs.readdirSync(dir).flatMap((f) => fs.readFileSync(path.join(dir, f), 'utf8').trim().split('\n'))
    .filter(Boolean).map((l) => l.split(' ').map(Number));
  fs.rmSync(dir, { recursive: true, force: true });
  const first = Math.min(...rows.map((v) => v[4] + v[5] / 1e6));
  return rows.filter((v) => v[4] + v[5] / 1e6 >= first + skip_seconds).map((v) => (v[2] + (v[6] || 0)) / 1000);
}

// Claim latency, troupe against pgbench running the same claim at the same rate, in alternating
// segments (the order flips each segment) on one database: troupe's jobs table, and a copy of its
// queued probe jobs for pgbench. Each segment sends for probe-warmup-seconds (not counted) and then
// probe-seconds / probe-segments.
async function claim_latency() {
  const database = fresh_database('bench_jobs_probe');
  const node = await start_node(opt.troupe, opt.work_dir, 'troupe-probe', database, troupe_config);
  const segments = opt.probe_segments;
  const seg_seconds = opt.probe_seconds / segments;
  const skip = Math.ceil(opt.probe_rate * opt.probe_warmup_seconds);
  const per_seg = skip + Math.ceil(opt.probe_rate * seg_seconds);
  await enqueue(node.port, 'bench.probe', per_seg * segments * opt.probe_max_jobs.reduce((a, b) => a + b, 0));
  const tenant = copy_jobs(database, 'bench.probe');
  query_value(database, 'ANALYZE jobs');
  const lat = {};
  const short = {};
  for (let seg = 0; seg < segments; seg++) {
    for (const max_jobs of opt.probe_max_jobs) {
      const t_key = `max_jobs_${max_jobs}`;
      const p_key = `pgbench_max_jobs_${max_jobs}`;
      const troupe_side = async () => {
        const r = await troupe_probe(node.port, max_jobs, per_seg, skip);
        (lat[t_key] ??= []).push(...r.lat);
        short[t_key] = (short[t_key] ?? 0) + r.short;
      };
      const pgbench_side = () => {
        (lat[p_key] ??= []).push(...pgbench_probe(database, tenant, max_jobs, opt.probe_warmup_seconds + seg_seconds,
          opt.probe_warmup_seconds));
      };
      if (seg % 2 === 0) {
        await troupe_side();
        pgbench_side();
      } else {
        pgbench_side();
        await troupe_side();
      }
    }
  }
  await stop_node(node);
  drop_database(database);
  const out = {};
  const summary = (v) => ({ leases: v.length, p50: round3(percentile(v, 50)), p99: round3(percentile(v, 99)),
    max: round3(Math.max(...v)), over_10_ms: v.filter((x) => x >= 10).length });
  for (const max_jobs of opt.probe_max_jobs) {
    const t = { ...summary(lat[`max_jobs_${max_jobs}`]), short_leases: short[`max_jobs_${max_jobs}`] };
    const p = summary(lat[`pgbench_max_jobs_${max_jobs}`]);
    out[`max_jobs_${max_jobs}`] = t;
    out[`pgbench_max_jobs_${max_jobs}`] = p;
    out[`ratio_p99_max_jobs_${max_jobs}`] = round3(t.p99 / Math.max(p.p99, 1e-3));
    log(`claim latency at ${opt.probe_rate}/s, ${segments} alternating segments, max_jobs ${max_jobs}: troupe p50/p99/max ` +
      `${t.p50}/${t.p99}/${t.max} ms (${t.leases} leases, ${t.short_leases} short); pgbench -R, the same claim: ` +
      `${p.p50}/${p.p99}/${p.max} ms (${p.leases} claims); p99 troupe/pgbench ${out[`ratio_p99_max_jobs_${max_jobs}`]}`);
  }
  return out;
}

// --- main ------------------------------------------------------------------------------------------
async function main() {
  fs.mkdirSync(opt.work_dir, { recursive: true });
  find_postmaster();
  const server_version = query_value(server, 'SHOW server_version');
  const fsync = query_value(server, 'SHOW fsync');
  const sync_commit = query_value(server, 'SHOW synchronous_commit');
  log(`PostgreSQL ${server_version} (fsync ${fsync}, synchronous_commit ${sync_commit}), graphile-worker ${gw_version}, ` +
    `node ${process.version}; ${opt.jobs} jobs, ${opt.clients} clients, batches of ${opt.batch}, ${opt.rounds} rounds`);
  const gw_modes = [0, ...opt.gw_local_queue];
  const gw_name = (q) => (q ? `graphile_batched_q${q}` : 'graphile_default');
  const rounds = { troupe: [], pgbench: [] };
  for (const q of gw_modes) rounds[gw_name(q)] = [];
  for (let r = 1; r <= opt.rounds; r++) {
    const t = await troupe_round(r);
    rounds.troupe.push(t);
    rounds.pgbench.push(pgbench_round(r, t.database));
    drop_database(t.database);
    for (const q of gw_modes) rounds[gw_name(q)].push(await gw_round(r, q));
  }
  const latency = await claim_latency();

  const rates = (k) => rounds[k].map((x) => Math.round(x.jobs_per_s));
  const med = (k) => Math.round(median(rounds[k].map((x) => x.jobs_per_s)));
  const cpu_med = (k) => {
    const o = {};
    for (const key of Object.keys(rounds[k][0].cpu)) o[key] = round1(median(rounds[k].map((x) => x.cpu[key])));
    return o;
  };
  const t = med('troupe');
  const p = med('pgbench');
  const gd = med('graphile_default');
  const per_round = (k) => rounds.troupe.map((x, i) => round3(x.jobs_per_s / rounds[k][i].jobs_per_s));
  const batched = opt.gw_local_queue.map(gw_name);
  const best = batched.reduce((a, b) => (med(b) > med(a) ? b : a), batched[0]);
  const gb = best ? med(best) : 0;
  const per_gw = {};
  for (const k of Object.keys(rounds).filter((k) => k.startsWith('graphile_'))) {
    per_gw[`${k}_jobs_per_s`] = rates(k);
    per_gw[`${k}_median`] = med(k);
    per_gw[`ratio_troupe_over_${k}`] = round3(t / med(k));
    per_gw[`per_round_troupe_over_${k}`] = per_round(k);
  }
  const claim_p99 = latency[`max_jobs_${opt.probe_max_jobs[0]}`]?.p99 ?? null;
  const problems = Object.entries(rounds).flatMap(([k, v]) => v.flatMap((x, i) => x.problems.map((m) => `${k} round ${i + 1}: ${m}`)));
  const ratio_pg = round3(t / p);
  const ratio_gb = round3(t / gb);
  const met = {
    troupe_over_pgbench: ratio_pg >= 0.5,
    troupe_jobs_per_s: t >= 5000,
    troupe_over_graphile_batched: ratio_gb >= 1.0,
    claim_p99: claim_p99 !== null && claim_p99 < 10,
  };
  const result = {
    server_version, fsync, synchronous_commit: sync_commit, graphile_worker_version: gw_version, node_version: process.version,
    jobs: opt.jobs, clients: opt.clients, batch: opt.batch, rounds: opt.rounds, warmup_jobs: opt.warmup_jobs,
    graphile_concurrency: opt.gw_concurrency, graphile_local_queue: opt.gw_local_queue,
    troupe_jobs_per_s: rates('troupe'), pgbench_jobs_per_s: rates('pgbench'),
    troupe_leases: rounds.troupe.map((x) => x.leases),
    troupe_median: t, pgbench_median: p,
    ratio_troupe_over_pgbench: ratio_pg,
    per_round_troupe_over_pgbench: per_round('pgbench'),
    ...per_gw,
    graphile_batched_best: best, graphile_batched_median: gb, ratio_troupe_over_graphile_batched: ratio_gb,
    claim_rate_per_s: opt.probe_rate, claim_seconds: opt.probe_seconds, claim_p99_ms: claim_p99,
    claim_latency_ms: latency,
    cpu_ms_per_1k_jobs: Object.fromEntries(Object.keys(rounds).map((k) => [k, cpu_med(k)])),
    targets: { troupe_over_pgbench: 0.5, troupe_jobs_per_s: 5000, troupe_over_graphile_batched: 1.0, claim_p99_ms: 10 },
    targets_met: met,
    target_met: Object.values(met).every(Boolean),
    problems,
  };
  process.stdout.write(JSON.stringify(result) + '\n');
  if (problems.length) {
    log(`jobs lost, doubled or refused: ${problems.join('; ')}`);
    process.exit(1);
  }
}

main().catch((err) => {
  log(err.stack ?? String(err));
  process.exit(1);
});
