// Workspace fan-out (docs/performance.md, "Workspace logs"; workspace-stream.md WS-133), run by
// bench/run as part of section `workspaces`. It starts troupe itself, prints one JSON object on
// stdout (progress on stderr) and stops every troupe it started, also when it is interrupted.
//
//   node bench/workspace_fanout.mjs --troupe BUILD/troupe --work-dir DIR [--subscribers 1000]
//       [--rates 20,100] [--seconds 5] [--rounds 2] [--connect-concurrency 50] [--timeout-s 60]
//       [--table-out FILE]
//
// Per round and rate, a fresh troupe (`troupe serve --port 0 --data-dir DIR/<round>-<rate>`, the
// embedded default config: ops:deploy.finished is declared, `workspaces.stream.outbox_frames` is its
// default; its log in DIR/<round>-<rate>.err) serves two phases, each on a workspace of its own:
//   single  1 WebSocket subscriber: the baseline;
//   many    `subscribers` WebSocket subscribers.
// A phase opens its connections (`GET /v1/workspaces/{ws}/stream`, subprotocol reflexr.v1, first
// frame `{"type":"hello","protocol":"reflexr.v1","from_head":true}`), waits until every one has its
// `welcome` and `replay_complete`, then publishes rate x seconds events at `rate` per second over
// REST (`POST /v1/workspaces/{ws}/events`, open loop on keep-alive connections), each event carrying
// its send time (`process.hrtime.bigint()` in ns) as its `service` string. Every subscriber stamps
// each frame on receipt; delivery latency = receipt - send, over all (subscriber, event) pairs. Each
// subscriber must get seqs 1..events exactly, in order; anything else (a gap, a repeat, a close, an
// event missing at the deadline, a failed publish) is counted in `errors`. Troupe's VmRSS is read
// from /proc/<pid>/status before connecting, after every welcome, after the last event arrived and
// after the connections closed; VmHWM is reset (clear_refs 5) before each phase. The figures to read
// are many/single ratios at the same rate in the same troupe: delivery p99, and the publish (POST)
// round trip p99 (WS-133: publish p99 <= 2x its subscriber-free value); and RSS per connection
// (the many phase's growth over its connections, in a troupe that has served one connection before).
// Afterwards troupe gets SIGTERM and must exit within 5 s (it is killed otherwise, and that is
// reported as `stop_s: -1`).
//
// The client runs on the same machine as troupe: with 1,000 subscribers it parses
// subscribers x rate frames/s on one Node thread, so its CPU and event-loop delay are reported with
// every phase; a delivery latency is an upper bound on troupe's part.
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';

// `ws` is installed (pinned) for the conformance tier: resolve it from there.
const require = createRequire(new URL('../tests/conformance/package.json', import.meta.url));
const WebSocket = require('ws');

// ---- arguments --------------------------------------------------------------------------------
function args() {
  const out = {};
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    const k = a[i].replace(/^--/, '').replace(/-/g, '_');
    if (a[i + 1] === undefined) throw new Error(`${a[i]} needs a value`);
    out[k] = a[i + 1];
  }
  const num = (k, d) => (out[k] === undefined ? d : Number(out[k]));
  return {
    troupe: out.troupe,
    work_dir: out.work_dir,
    subscribers: num('subscribers', 1000),
    rates: (out.rates ?? '20,100').split(/[ ,]+/).filter(Boolean).map(Number),
    seconds: num('seconds', 5),
    rounds: num('rounds', 2),
    connect_concurrency: num('connect_concurrency', 50),
    timeout_ms: num('timeout_s', 60) * 1000,
    table_out: out.table_out,
  };
}
const opt = args();
if (!opt.troupe || !opt.work_dir || opt.rates.some((r) => !(r > 0))) {
  process.stderr.write('usage: see the head of bench/workspace_fanout.mjs\n');
  process.exit(2);
}
const log = (s) => process.stderr.write(`  [fanout] ${s}\n`);
// The troupe being measured: its pid, HTTP and WebSocket bases.
const target = { pid: 0, http_host: '', http_port: 0, ws_base: '', agent: null };

// ---- statistics (as bench/bench_stats.hpp) ----------------------------------------------------
function percentile(v, p) {
  if (!v.length) return -1;
  const s = Float64Array.from(v).sort();
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[Math.min(rank, s.length) - 1];
}
const r2 = (x) => Math.round(x * 100) / 100;
const r3 = (x) => Math.round(x * 1000) / 1000;
const summary = (v) => ({ p50: r3(percentile(v, 50)), p90: r3(percentile(v, 90)), p99: r3(percentile(v, 99)), max: r3(percentile(v, 100)), samples: v.length });
const median = (v) => {
  if (!v.length) return 0;
  const s = [...v].sort((x, y) => x - y);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

// ---- troupe's process ---------------------------------------------------------------------------
function proc_kb(key) {
  const status = fs.readFileSync(`/proc/${target.pid}/status`, 'utf8');
  const m = status.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'));
  return m ? Number(m[1]) : -1;
}
function reset_hwm() {
  try { fs.writeFileSync(`/proc/${target.pid}/clear_refs`, '5'); return true; } catch { return false; }
}
const clk_tck = Number(process.env.CLK_TCK || execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
// utime and stime of a process (all its threads), in clock ticks: fields 14 and 15 of proc(5).
function cpu_ticks(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]), sys: Number(f[12]) };
}
const client_cpu_us = () => { const u = process.cpuUsage(); return u.user + u.system; };
const alive = () => { try { process.kill(target.pid, 0); return true; } catch { return false; } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- starting and stopping troupe ---------------------------------------------------------------
let child = null; // the running troupe, killed if this process ends early
const kill_child = () => { if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL'); };
process.on('exit', kill_child);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { kill_child(); process.exit(128 + (sig === 'SIGINT' ? 2 : 15)); });

async function start_troupe(name) {
  const data = path.join(opt.work_dir, name);
  fs.mkdirSync(data, { recursive: true });
  const out = fs.openSync(`${data}.out`, 'w');
  const err_file = `${data}.err`;
  const err = fs.openSync(err_file, 'w');
  child = spawn(opt.troupe, ['serve', '--port', '0', '--data-dir', data, '--set', 'service.shutdown_grace_seconds=1'], { stdio: ['ignore', out, err] });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  child.exited = exited;
  for (let i = 0; i < 200; i += 1) {
    const m = fs.readFileSync(`${data}.out`, 'utf8').match(/listening on http:\/\/([^:\s]+):(\d+)/);
    if (m) {
      Object.assign(target, { pid: child.pid, http_host: m[1], http_port: Number(m[2]), ws_base: `ws://${m[1]}:${m[2]}`,
        agent: new http.Agent({ keepAlive: true, maxSockets: 8 }) });
      return err_file;
    }
    if (child.exitCode !== null) throw new Error(`troupe exited during start-up: ${fs.readFileSync(err_file, 'utf8').slice(-500)}`);
    await sleep(50);
  }
  throw new Error('troupe did not start within 10 s');
}

// SIGTERM, then up to 5 s for troupe to exit: the seconds it took (-1: it did not, and was killed),
// and its exit status or the signal that ended it.
async function stop_troupe() {
  target.agent.destroy(); // no idle keep-alive connection holds the drain
  await sleep(100);
  const t0 = performance.now();
  child.kill('SIGTERM');
  const stopped = await Promise.race([child.exited.then(() => true), sleep(5000).then(() => false)]);
  const seconds = stopped ? r2((performance.now() - t0) / 1000) : -1;
  if (!stopped) child.kill('SIGKILL');
  const { code, signal } = await child.exited;
  child = null;
  return { seconds, exit: signal ? `signal ${signal}` : `status ${code}` };
}

// Warning and error lines troupe logged, but for the open-service notices of a config without
// credentials.
function logged_problems(err_file) {
  const lines = fs.readFileSync(err_file, 'utf8').split('\n')
    .filter((l) => / (warning|error|critical) /.test(l) && !/no service token configured|no credentials configured/.test(l));
  return { count: lines.length, sample: lines.slice(0, 3).join(' | ').slice(0, 600) };
}

// ---- subscribers --------------------------------------------------------------------------------
// One connection: hello from the head, then every event frame checked and stamped.
class subscriber {
  constructor(phase, workspace) {
    this.phase = phase;
    this.expect = 1;
    this.got = 0;
    this.closed = null; // {code, reason} once closed
    this.problem = null;
    this.ready = new Promise((resolve, reject) => {
      const ws = new WebSocket(`${target.ws_base}/v1/workspaces/${workspace}/stream`, 'reflexr.v1', { perMessageDeflate: false });
      this.ws = ws;
      ws.on('open', () => ws.send('{"type":"hello","protocol":"reflexr.v1","from_head":true}'));
      ws.on('message', (data) => {
        const t = process.hrtime.bigint();
        let f;
        try { f = JSON.parse(data); } catch { this.fail(`not JSON: ${String(data).slice(0, 80)}`); return; }
        if (f.type === 'event') {
          if (f.seq !== this.expect) this.fail(`seq ${f.seq} where ${this.expect} was due`);
          this.expect = f.seq + 1;
          this.got += 1;
          this.phase.record(Number(t - BigInt(f.event.service)) / 1e6, f.seq, t);
        } else if (f.type === 'welcome') {
          if (f.head_seq !== 0) this.fail(`welcome at head ${f.head_seq} of a new workspace`);
        } else if (f.type === 'replay_complete') {
          resolve();
        } else {
          this.fail(`unexpected ${String(data).slice(0, 120)}`);
        }
      });
      ws.on('close', (code, reason) => {
        this.closed = { code, reason: String(reason) };
        this.phase.on_close(this);
        reject(new Error(`closed ${code} ${reason}`));
      });
      ws.on('error', (err) => { this.fail(`socket error: ${err.message}`); reject(err); });
    });
    this.ready.catch(() => {});
  }
  fail(why) {
    if (!this.problem) this.problem = why;
    this.phase.problems += 1;
  }
}

class phase_run {
  constructor(name, workspace, n, rate) {
    this.name = name;
    this.workspace = workspace;
    this.n = n;
    this.rate = rate;
    this.events = Math.round(rate * opt.seconds);
    this.latency = [];
    this.problems = 0;
    this.closes = {};
    this.closing = false;
    this.received = 0;
    this.last_receipt = new Map(); // seq -> ns of its last receipt
    this.sent_at = new Map(); // seq -> ns of its publish
  }
  record(ms, seq, t) {
    this.latency.push(ms);
    this.received += 1;
    this.last_receipt.set(seq, t);
    if (this.waiter && this.received >= this.waiter.target) this.waiter.resolve();
  }
  on_close(s) {
    if (this.closing) return;
    const key = `${s.closed.code} ${s.closed.reason}`;
    this.closes[key] = (this.closes[key] || 0) + 1;
    this.problems += 1;
  }
  all_received(target, ms) {
    if (this.received >= target) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.waiter = null; resolve(false); }, ms);
      this.waiter = { target, resolve: () => { clearTimeout(timer); this.waiter = null; resolve(true); } };
    });
  }
}

async function connect_all(phase) {
  const subs = [];
  let next = 0;
  const t0 = process.hrtime.bigint();
  async function worker() {
    while (next < phase.n) {
      next += 1;
      const s = new subscriber(phase, phase.workspace);
      subs.push(s);
      await s.ready.catch((e) => s.fail(`no welcome: ${e.message}`));
    }
  }
  await Promise.all(Array.from({ length: Math.min(opt.connect_concurrency, phase.n) }, worker));
  return { subs, connect_s: Number(process.hrtime.bigint() - t0) / 1e9 };
}

// ---- publishing ---------------------------------------------------------------------------------
function publish(workspace) {
  return new Promise((resolve) => {
    const sent = process.hrtime.bigint();
    const body = `{"event":{"type":"ops:deploy.finished","service":"${sent}"}}`;
    const req = http.request({ host: target.http_host, port: target.http_port, path: `/v1/workspaces/${workspace}/events`, method: 'POST', agent: target.agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { text += c; });
      res.on('end', () => {
        const rtt = Number(process.hrtime.bigint() - sent) / 1e6;
        let seq = 0;
        try { seq = JSON.parse(text)[0].seq; } catch { /* counted below */ }
        resolve({ status: res.statusCode, seq, sent, rtt, text });
      });
    });
    req.on('error', (err) => resolve({ status: 0, seq: 0, sent, rtt: -1, text: err.message }));
    req.end(body);
  });
}

// `events` publishes at `rate`/s, each scheduled against the start so a late one does not delay
// the rest.
async function publish_all(phase) {
  const interval_ms = 1000 / phase.rate;
  const t0 = performance.now();
  const pending = [];
  for (let k = 0; k < phase.events; k += 1) {
    const due = t0 + k * interval_ms;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(publish(phase.workspace));
  }
  const results = await Promise.all(pending);
  const wall_s = (performance.now() - t0) / 1000;
  const rtt = [];
  let failed = 0;
  let sample = '';
  for (const r of results) {
    if (r.status !== 200 || !r.seq) {
      failed += 1;
      sample ||= `${r.status} ${r.text.slice(0, 200)}`;
    } else {
      rtt.push(r.rtt);
      phase.sent_at.set(r.seq, r.sent);
    }
  }
  return { rtt, failed, sample, wall_s, achieved_rate: r2(phase.events / wall_s) };
}

async function run_phase(name, workspace, n, rate) {
  const phase = new phase_run(name, workspace, n, rate);
  if (!alive()) throw new Error('troupe is not running');
  const hwm_reset = reset_hwm();
  await sleep(300);
  const rss_before = proc_kb('VmRSS');
  const { subs, connect_s } = await connect_all(phase);
  const welcomed = subs.filter((s) => !s.closed && !s.problem).length;
  await sleep(300);
  const rss_connected = proc_kb('VmRSS');
  log(`${name}: ${welcomed}/${n} subscribers welcomed in ${r2(connect_s)} s; RSS ${rss_before} -> ${rss_connected} kB`);

  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const cpu0 = client_cpu_us();
  const troupe0 = cpu_ticks(target.pid);
  const w0 = performance.now();
  const pub = await publish_all(phase);
  const expected_pairs = welcomed * (phase.events - pub.failed);
  const complete = await phase.all_received(expected_pairs, opt.timeout_ms);
  const wall_ms = performance.now() - w0;
  const client_us = client_cpu_us() - cpu0;
  const troupe1 = cpu_ticks(target.pid);
  const troupe_user_ms = ((troupe1.user - troupe0.user) / clk_tck) * 1000;
  const troupe_sys_ms = ((troupe1.sys - troupe0.sys) / clk_tck) * 1000;
  const troupe_ms = troupe_user_ms + troupe_sys_ms;
  const client_share = client_us / 1000 / wall_ms;
  const troupe_share = troupe_ms / wall_ms;
  loop.disable();
  await sleep(200);
  const rss_published = proc_kb('VmRSS');
  const hwm = proc_kb('VmHWM');

  // Every subscriber must have every seq, in order (the order is checked frame by frame).
  let short = 0;
  for (const s of subs) if (!s.closed && s.got !== phase.events) short += 1;
  // Fan-out completion per event: from its publish to its last subscriber's receipt.
  const spread = [];
  for (const [seq, last] of phase.last_receipt) {
    const sent = phase.sent_at.get(seq);
    if (sent !== undefined) spread.push(Number(last - sent) / 1e6);
  }
  phase.closing = true;
  const closes = subs.filter((s) => !s.closed).map((s) => new Promise((resolve) => { s.ws.once('close', resolve); s.ws.close(1000); }));
  await Promise.race([Promise.all(closes), sleep(10000)]);
  for (const s of subs) if (!s.closed) s.ws.terminate();
  await sleep(1000);
  const rss_closed = proc_kb('VmRSS');
  const problems_sample = subs.find((s) => s.problem)?.problem ?? '';
  const errors = pub.failed + short + phase.problems + (complete ? 0 : 1) + (welcomed === n ? 0 : n - welcomed);
  const out = {
    phase: name,
    subscribers: n,
    welcomed,
    connect_s: r2(connect_s),
    rate,
    events: phase.events,
    publish_failed: pub.failed,
    publish_error_sample: pub.sample,
    achieved_rate: pub.achieved_rate,
    complete,
    subscribers_short: short,
    protocol_problems: phase.problems,
    problem_sample: problems_sample,
    closes: phase.closes,
    delivery_ms: summary(phase.latency),
    last_subscriber_ms: summary(spread),
    publish_rtt_ms: summary(pub.rtt),
    rss_kb: { before: rss_before, connected: rss_connected, published: rss_published, closed: rss_closed, vmhwm: hwm, hwm_reset },
    rss_per_connection_kb: r2((rss_connected - rss_before) / n),
    hwm_per_connection_kb: r2((hwm - rss_before) / n),
    client_cpu_share: r3(client_share),
    troupe_cpu_share: r3(troupe_share),
    troupe_cpu_sys_fraction: r3(troupe_sys_ms / Math.max(1, troupe_ms)),
    // CPU per event frame delivered, the publishes included: what one more subscriber costs.
    troupe_cpu_us_per_frame: r2((troupe_ms * 1000) / Math.max(1, phase.latency.length)),
    client_cpu_us_per_frame: r2(client_us / Math.max(1, phase.latency.length)),
    client_loop_delay_ms: { p50: r2(loop.percentile(50) / 1e6), p99: r2(loop.percentile(99) / 1e6), max: r2(loop.max / 1e6) },
    errors,
  };
  log(`${name}: delivery p50/p99 ${out.delivery_ms.p50}/${out.delivery_ms.p99} ms over ${out.delivery_ms.samples} pairs, publish rtt p50/p99 ${out.publish_rtt_ms.p50}/${out.publish_rtt_ms.p99} ms, ` +
      `client CPU ${out.client_cpu_share}, troupe CPU ${out.troupe_cpu_share}, RSS ${rss_connected} -> ${rss_published} (HWM ${hwm}) -> ${rss_closed} kB after close, errors ${errors}` +
      (problems_sample ? ` (e.g. ${problems_sample})` : '') + (pub.sample ? ` (publish: ${pub.sample})` : ''));
  return out;
}

// ---- main ---------------------------------------------------------------------------------------
const rounds = [];
for (let r = 1; r <= opt.rounds; r += 1) {
  for (const rate of opt.rates) {
    const name = `${r}-${rate}`;
    const err_file = await start_troupe(name);
    log(`round ${r}/${opt.rounds}, ${rate} events/s: troupe pid ${target.pid} port ${target.http_port}; 1 subscriber, then ${opt.subscribers}`);
    const single = await run_phase('single', `fanout-${r}-${rate}-single`, 1, rate);
    const many = await run_phase('many', `fanout-${r}-${rate}-many`, opt.subscribers, rate);
    const still_running = alive();
    const stop = still_running ? await stop_troupe() : { seconds: -2, exit: 'died during the round' };
    const stop_s = stop.seconds;
    const problems = logged_problems(err_file);
    if (!still_running) log(`troupe died during the round: ${fs.readFileSync(err_file, 'utf8').slice(-400)}`);
    if (stop_s === -1) log('troupe did not exit within 5 s of SIGTERM; killed');
    else if (stop.exit !== 'status 0') log(`troupe ended with ${stop.exit} after SIGTERM`);
    if (problems.count) log(`troupe logged ${problems.count} warning/error lines, e.g. ${problems.sample}`);
    rounds.push({
      round: r,
      rate,
      single,
      many,
      troupe_stop_s: stop_s,
      troupe_exit: stop.exit,
      troupe_logged_problems: problems.count,
      troupe_logged_sample: problems.sample,
      ratio_delivery_p99: r3(many.delivery_ms.p99 / single.delivery_ms.p99),
      ratio_delivery_p50: r3(many.delivery_ms.p50 / single.delivery_ms.p50),
      ratio_publish_rtt_p99: r3(many.publish_rtt_ms.p99 / single.publish_rtt_ms.p99),
      errors: single.errors + many.errors + (still_running ? 0 : 1),
    });
  }
}
const errors = rounds.reduce((a, r) => a + r.errors, 0);
const by_rate = {};
for (const rate of opt.rates) {
  const rs = rounds.filter((r) => r.rate === rate);
  by_rate[rate] = {
    events: Math.round(rate * opt.seconds),
    ratio_delivery_p99_median: r3(median(rs.map((r) => r.ratio_delivery_p99))),
    ratio_delivery_p50_median: r3(median(rs.map((r) => r.ratio_delivery_p50))),
    ratio_publish_rtt_p99_median: r3(median(rs.map((r) => r.ratio_publish_rtt_p99))),
    many_delivery_p99_ms_median: r3(median(rs.map((r) => r.many.delivery_ms.p99))),
    single_delivery_p99_ms_median: r3(median(rs.map((r) => r.single.delivery_ms.p99))),
    rss_per_connection_kb_median: r2(median(rs.map((r) => r.many.rss_per_connection_kb))),
    troupe_cpu_us_per_frame_median: r2(median(rs.map((r) => r.many.troupe_cpu_us_per_frame))),
  };
}
const result = {
  subscribers: opt.subscribers,
  rates: opt.rates,
  seconds: opt.seconds,
  rounds: opt.rounds,
  by_rate,
  troupe_stop_s: rounds.map((r) => r.troupe_stop_s),
  troupe_exit: rounds.map((r) => r.troupe_exit),
  per_round: rounds,
  errors,
};
const table = [];
const row = (label, p) => `${label.padEnd(22)} delivery p50/p99 ${p.delivery_ms.p50}/${p.delivery_ms.p99} ms, last subscriber p50/p99 ${p.last_subscriber_ms.p50}/${p.last_subscriber_ms.p99} ms, publish rtt p50/p99 ${p.publish_rtt_ms.p50}/${p.publish_rtt_ms.p99} ms, ${p.achieved_rate}/s, CPU client ${p.client_cpu_share} troupe ${p.troupe_cpu_share} (${p.troupe_cpu_us_per_frame} us/frame, ${Math.round(p.troupe_cpu_sys_fraction * 100)}% system), errors ${p.errors}`;
for (const r of rounds) {
  table.push(row(`round ${r.round}, ${r.rate}/s, 1 sub`, r.single));
  table.push(row(`round ${r.round}, ${r.rate}/s, ${r.many.subscribers}`, r.many));
  table.push(`${''.padEnd(22)} RSS ${r.many.rss_kb.before} kB -> ${r.many.rss_kb.connected} connected -> ${r.many.rss_kb.published} published (HWM ${r.many.rss_kb.vmhwm}) -> ${r.many.rss_kb.closed} closed: ${r.many.rss_per_connection_kb} kB/connection (${r.many.hwm_per_connection_kb} at the peak); many/single: delivery p99 ${r.ratio_delivery_p99}, p50 ${r.ratio_delivery_p50}, publish rtt p99 ${r.ratio_publish_rtt_p99}; troupe stopped ${r.troupe_stop_s < 0 ? 'NOT within 5 s of SIGTERM' : `${r.troupe_stop_s} s after SIGTERM`} (${r.troupe_exit}), logged ${r.troupe_logged_problems} problems`);
  const c = Object.entries(r.many.closes);
  if (c.length) table.push(`${''.padEnd(22)} closes: ${c.map(([k, v]) => `${v} x ${k}`).join(', ')}`);
}
for (const rate of opt.rates) {
  const b = by_rate[rate];
  table.push(`medians at ${rate}/s: delivery p99 ${opt.subscribers}/1 = ${b.ratio_delivery_p99_median} (${b.many_delivery_p99_ms_median} / ${b.single_delivery_p99_ms_median} ms), p50 ${b.ratio_delivery_p50_median}; publish rtt p99 ${opt.subscribers}/1 = ${b.ratio_publish_rtt_p99_median}; ${b.rss_per_connection_kb_median} kB RSS per connection; troupe ${b.troupe_cpu_us_per_frame_median} us CPU per frame`);
}
if (opt.table_out) fs.writeFileSync(opt.table_out, `${table.join('\n')}\n`);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
