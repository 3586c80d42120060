// The Responses gateway's streaming benchmark (docs/performance.md, "Responses gateway streaming"),
// run by bench/run as section `responses`. bench/run starts the fake upstream
// (tests/fake_upstream/fake_upstream.mjs) and one troupe per upstream protocol, each serving
// /v1/responses from that same fake; this client drives them and prints one JSON object on stdout
// (progress on stderr).
//
//   node bench/responses_stream.mjs --fake-url http://127.0.0.1:P --fake-pid PID
//       --troupe chat_completions=http://127.0.0.1:T1@PID1 [--troupe responses=http://127.0.0.1:T2@PID2]
//       [--deltas 2000] [--chunk-size 4] [--reps 15] [--cpu-streams 30] [--paced-ms 1] [--paced-reps 3]
//       [--concurrency 500] [--short-deltas 20] [--conc-rounds 3] [--timeout-s 120] [--target 1.1]
//       [--table-out FILE]
//
// Per protocol, in the same run and against the same fake upstream process:
//  1. Long stream, time to last byte. The fake's reply is `deltas` text chunks of `chunk-size`
//     characters with no delay. `reps` pairs, interleaved (direct first on even pairs, troupe first
//     on odd ones), of (a) the fake's own streaming endpoint read directly (/v1/chat/completions
//     with stream_options.include_usage, as troupe asks, or /v1/responses with store:false) and
//     (b) troupe's POST /v1/responses stream:true (store defaults to true), each on a fresh
//     connection. Each stream is read to its last byte and fully parsed (every SSE frame split and
//     its JSON parsed, both sides alike); troupe's must carry exactly `deltas`
//     response.output_text.delta events whose text is the scripted content, then
//     response.completed. The figure is median(troupe) / median(direct). Then `paced-reps` pairs of
//     the same reply with the fake pausing `paced-ms` after every chunk (1b).
//  2. CPU per event. `cpu-streams` troupe streams back to back; utime+stime of troupe and of the
//     fake (/proc/<pid>/stat, in clock ticks: CLK_TCK from the environment or getconf) and of this client
//     (process.cpuUsage) before and after, divided by the SSE events troupe wrote (troupe, client)
//     or the upstream events the fake wrote (fake).
//  3. Concurrency. `concurrency` connections opened first, then every request written in one loop
//     (a raw HTTP/1.1 client, lighter than node:http), with a reply of `short-deltas` chunks: per
//     request, from just before its write, the time to the first body byte, to the first text
//     delta and to the last byte. `conc-rounds` rounds alternate direct / troupe; every stream must
//     be complete and right. The client's own CPU and event-loop delay during each round are
//     reported, to show it is not the bottleneck.
// Any wrong or failed stream is counted in `errors`, which bench/run turns into a failure.
import http from 'node:http';
import net from 'node:net';
import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { execFileSync } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';

// ---- arguments --------------------------------------------------------------------------------
function args() {
  const out = { troupes: [] };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    const k = a[i].replace(/^--/, '').replace(/-/g, '_');
    const v = a[i + 1];
    if (v === undefined) throw new Error(`${a[i]} needs a value`);
    if (k === 'troupe') {
      const m = v.match(/^(chat_completions|responses)=(http:\/\/[^@]+)@(\d+)$/);
      if (!m) throw new Error(`--troupe expects <protocol>=http://host:port@pid, got ${v}`);
      out.troupes.push({ protocol: m[1], url: m[2], pid: Number(m[3]) });
    } else out[k] = v;
  }
  const num = (k, d) => (out[k] === undefined ? d : Number(out[k]));
  return {
    fake_url: out.fake_url,
    fake_pid: num('fake_pid', 0),
    troupes: out.troupes,
    deltas: num('deltas', 2000),
    chunk_size: num('chunk_size', 4),
    reps: num('reps', 15),
    cpu_streams: num('cpu_streams', 30),
    concurrency: num('concurrency', 500),
    short_deltas: num('short_deltas', 20),
    conc_rounds: num('conc_rounds', 3),
    timeout_ms: num('timeout_s', 120) * 1000,
    target: num('target', 1.1),
    paced_ms: num('paced_ms', 1),
    paced_reps: num('paced_reps', 3),
    table_out: out.table_out,
    model: out.model ?? 'fake-model',
  };
}
const opt = args();
if (!opt.fake_url || opt.troupes.length === 0) {
  process.stderr.write('usage: see the head of bench/responses_stream.mjs\n');
  process.exit(2);
}
const log = (s) => process.stderr.write(`  [responses] ${s}\n`);

// ---- statistics (as bench/bench_stats.hpp) ----------------------------------------------------
function percentile(v, p) {
  if (!v.length) return -1;
  const s = [...v].sort((x, y) => x - y);
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[Math.min(rank, s.length) - 1];
}
function median(v) {
  if (!v.length) return 0;
  const s = [...v].sort((x, y) => x - y);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}
const r2 = (x) => Math.round(x * 100) / 100;
const r3 = (x) => Math.round(x * 1000) / 1000;
const summary = (v) => ({ p50: r2(percentile(v, 50)), p99: r2(percentile(v, 99)), max: r2(percentile(v, 100)), mean: r2(v.reduce((a, b) => a + b, 0) / (v.length || 1)) });

// ---- CPU time -----------------------------------------------------------------------------------
// utime + stime of a process (all its threads, including exited ones), in clock ticks.
function cpu_ticks(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]); // fields 14 and 15 of proc(5)
}
const clk_tck = Number(process.env.CLK_TCK || execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
const client_cpu_us = () => { const u = process.cpuUsage(); return u.user + u.system; };

// ---- SSE client ---------------------------------------------------------------------------------
// A streaming SSE reader: splits frames, parses every data line as JSON (an SDK would), and hands
// each frame to on_frame(event, json|undefined, data).
class sse_reader {
  constructor(on_frame) {
    this.buf = '';
    this.on_frame = on_frame;
    this.frames = 0;
  }
  push(chunk) {
    const buf = this.buf + chunk;
    let start = 0;
    let end;
    while ((end = buf.indexOf('\n\n', start)) >= 0) {
      const block = buf.slice(start, end);
      start = end + 2;
      let event;
      let data;
      let pos = 0;
      while (pos < block.length) {
        let eol = block.indexOf('\n', pos);
        if (eol < 0) eol = block.length;
        if (block.startsWith('event: ', pos)) event = block.slice(pos + 7, eol);
        else if (block.startsWith('data: ', pos)) {
          const d = block.slice(pos + 6, eol);
          data = data === undefined ? d : `${data}\n${d}`;
        }
        pos = eol + 1;
      }
      if (data === undefined && event === undefined) continue; // comment / heartbeat
      let json;
      if (data !== undefined && data !== '[DONE]') {
        try { json = JSON.parse(data); } catch { json = undefined; }
      }
      this.frames += 1;
      this.on_frame(event, json, data);
    }
    this.buf = start === 0 ? buf : buf.slice(start);
  }
}

// One agent for every request: a fresh connection each (no keep-alive), no socket limit.
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity, maxTotalSockets: Infinity });

// POST url with a JSON body on a fresh connection; reads the SSE body to its end.
// Resolves {status, ttfb_ms, ttlb_ms, bytes, frames, ...check state}; never rejects.
function stream_request(url, body, { kind, timeout_ms = opt.timeout_ms } = {}) {
  const u = new URL(url);
  const payload = JSON.stringify(body);
  return new Promise((resolve) => {
    const st = { kind, status: 0, ttfb_ms: -1, ttfd_ms: -1, ttlb_ms: -1, bytes: 0, frames: 0, text: '', deltas: 0, terminal: null, error: null, done_marker: false };
    const t0 = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
    let settled = false;
    const finish = (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err && !st.error) st.error = String(err.message ?? err);
      if (st.ttlb_ms < 0) st.ttlb_ms = ms();
      resolve(st);
    };
    const on_frame = (event, json, data) => {
      if (kind === 'chat') {
        if (data === '[DONE]') st.done_marker = true;
        const c = json?.choices?.[0];
        if (typeof c?.delta?.content === 'string' && c.delta.content !== '') {
          if (st.deltas === 0) st.ttfd_ms = ms();
          st.deltas += 1;
          st.text += c.delta.content;
        }
        if (c?.finish_reason) st.terminal = c.finish_reason;
        if (json?.error) st.terminal = 'error';
      } else {
        const type = json?.type ?? event;
        if (type === 'response.output_text.delta') {
          if (st.deltas === 0) st.ttfd_ms = ms();
          st.deltas += 1;
          st.text += json?.delta ?? '';
        }
        if (type === 'response.completed' || type === 'response.failed' || type === 'response.incomplete') st.terminal = type;
      }
    };
    const reader = new sse_reader(on_frame);
    const req = http.request({
      method: 'POST', hostname: u.hostname, port: u.port, path: u.pathname, agent,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': Buffer.byteLength(payload) },
    });
    const timer = setTimeout(() => { req.destroy(new Error(`timeout after ${timeout_ms} ms`)); }, timeout_ms);
    req.on('error', finish);
    req.on('response', (res) => {
      st.status = res.statusCode;
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        if (st.ttfb_ms < 0) st.ttfb_ms = ms();
        st.bytes += Buffer.byteLength(chunk);
        reader.push(chunk);
      });
      res.on('end', () => { st.ttlb_ms = ms(); st.frames = reader.frames; finish(); });
      res.on('error', finish);
      res.on('close', () => { st.frames = reader.frames; if (!res.complete) finish(new Error('connection closed before the end of the body')); else finish(); });
    });
    req.end(payload);
  });
}

// ---- a raw HTTP/1.1 client for the concurrent bursts ----------------------------------------------
// connect_raw opens the TCP connection; fire() then writes the whole request in one write and reads
// the answer itself (status line, headers, a chunked or Content-Length body) into the same SSE
// reader. Splitting the two lets a burst connect every socket first and then send every request
// within a few milliseconds, and it costs the client far less than node:http per request.
function connect_raw(url) {
  const u = new URL(url);
  return new Promise((resolve) => {
    const sock = net.connect({ host: u.hostname, port: Number(u.port) });
    sock.once('connect', () => { sock.setNoDelay(true); resolve({ sock, u }); });
    sock.once('error', (err) => resolve({ sock: null, u, error: err }));
  });
}

function fire(conn, body, kind, timeout_ms = opt.timeout_ms) {
  const st = { kind, status: 0, ttfb_ms: -1, ttfd_ms: -1, ttlb_ms: -1, bytes: 0, frames: 0, text: '', deltas: 0, terminal: null, error: null, done_marker: false };
  if (!conn.sock) {
    st.error = `connect: ${conn.error?.message}`;
    return Promise.resolve(st);
  }
  const { sock, u } = conn;
  const payload = Buffer.from(JSON.stringify(body));
  const head = `POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n` +
    `Accept: text/event-stream\r\nConnection: close\r\nContent-Length: ${payload.length}\r\n\r\n`;
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
    const on_frame = (event, json, data) => {
      const type = kind === 'chat' ? null : json?.type ?? event;
      if (kind === 'chat') {
        if (data === '[DONE]') st.done_marker = true;
        const c = json?.choices?.[0];
        if (typeof c?.delta?.content === 'string' && c.delta.content !== '') {
          if (st.deltas === 0) st.ttfd_ms = ms();
          st.deltas += 1;
          st.text += c.delta.content;
        }
        if (c?.finish_reason) st.terminal = c.finish_reason;
        if (json?.error) st.terminal = 'error';
      } else {
        if (type === 'response.output_text.delta') {
          if (st.deltas === 0) st.ttfd_ms = ms();
          st.deltas += 1;
          st.text += json?.delta ?? '';
        }
        if (type === 'response.completed' || type === 'response.failed' || type === 'response.incomplete') st.terminal = type;
      }
    };
    const reader = new sse_reader(on_frame);
    const decoder = new StringDecoder('utf8');
    let header = Buffer.alloc(0);
    let in_body = false;
    let chunked = false;
    let remaining = -1; // Content-Length body bytes left, or chunk bytes left
    let size_line = '';
    let state = 'size'; // chunked: size | data | data_crlf | trailer
    let settled = false;
    const finish = (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err && !st.error) st.error = String(err.message ?? err);
      if (st.ttlb_ms < 0) st.ttlb_ms = ms();
      st.frames = reader.frames;
      sock.destroy();
      resolve(st);
    };
    const body_bytes = (buf) => {
      if (buf.length === 0) return;
      if (st.ttfb_ms < 0) st.ttfb_ms = ms();
      st.bytes += buf.length;
      reader.push(decoder.write(buf));
    };
    const feed_chunked = (buf) => {
      let i = 0;
      while (i < buf.length) {
        if (state === 'size' || state === 'trailer') {
          const nl = buf.indexOf(10, i);
          if (nl < 0) { size_line += buf.toString('latin1', i); return; }
          size_line += buf.toString('latin1', i, nl);
          i = nl + 1;
          const line = size_line.replace(/\r$/, '');
          size_line = '';
          if (state === 'trailer') {
            if (line === '') { st.ttlb_ms = ms(); return finish(); }
            continue;
          }
          const n = parseInt(line, 16);
          if (Number.isNaN(n)) return finish(new Error(`bad chunk size line '${line}'`));
          if (n === 0) { state = 'trailer'; continue; }
          remaining = n;
          state = 'data';
        } else if (state === 'data') {
          const take = Math.min(remaining, buf.length - i);
          body_bytes(buf.subarray(i, i + take));
          i += take;
          remaining -= take;
          if (remaining === 0) state = 'data_crlf';
        } else { // data_crlf: the CRLF after a chunk's data
          const nl = buf.indexOf(10, i);
          if (nl < 0) return;
          i = nl + 1;
          state = 'size';
        }
      }
    };
    sock.on('data', (buf) => {
      if (!in_body) {
        header = Buffer.concat([header, buf]);
        const end = header.indexOf('\r\n\r\n');
        if (end < 0) return;
        const text = header.toString('latin1', 0, end);
        st.status = Number(text.slice(9, 12));
        chunked = /\r\ntransfer-encoding:\s*chunked/i.test(text);
        const cl = text.match(/\r\ncontent-length:\s*(\d+)/i);
        remaining = cl ? Number(cl[1]) : -1;
        in_body = true;
        buf = header.subarray(end + 4);
        header = null;
      }
      if (chunked) return feed_chunked(buf);
      body_bytes(buf);
      if (remaining >= 0) {
        remaining -= buf.length;
        if (remaining <= 0) { st.ttlb_ms = ms(); finish(); }
      }
    });
    sock.on('end', () => finish(chunked || remaining > 0 ? new Error('connection closed before the end of the body') : null));
    sock.on('error', finish);
    const timer = setTimeout(() => finish(new Error(`timeout after ${timeout_ms} ms`)), timeout_ms);
    sock.write(Buffer.concat([Buffer.from(head, 'latin1'), payload]));
  });
}

// ---- the fake upstream --------------------------------------------------------------------------
async function control(route, body) {
  const res = await fetch(opt.fake_url + route, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body ?? {}) });
  if (res.status !== 200) throw new Error(`fake upstream ${route}: ${res.status} ${await res.text()}`);
  return res.json();
}
// Every request gets `reply` (the queue empty, the default set), and the request log is cleared.
async function script_default(reply) {
  await control('/__reset');
  await control('/__script', { replies: [], default: reply });
}
function content_of(deltas, size) {
  const phrase = 'The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. ';
  let s = '';
  while (s.length < deltas * size) s += phrase;
  return s.slice(0, deltas * size);
}

// The direct request for a protocol, with what troupe itself sends upstream for it (RS-45, RS-47).
function direct(protocol) {
  if (protocol === 'chat_completions') {
    return {
      url: `${opt.fake_url}/v1/chat/completions`, kind: 'chat',
      body: { model: opt.model, messages: [{ role: 'user', content: 'Write the text.' }], stream: true, stream_options: { include_usage: true } },
    };
  }
  return { url: `${opt.fake_url}/v1/responses`, kind: 'responses', body: { model: opt.model, input: 'Write the text.', stream: true, store: false } };
}
const via_troupe = (t) => ({ url: `${t.url}/v1/responses`, kind: 'responses', body: { model: opt.model, input: 'Write the text.', stream: true } });

// A stream's problems against the scripted reply (empty when it is right).
function check(st, want_deltas, want_text, is_troupe) {
  const p = [];
  if (st.error) p.push(st.error);
  if (st.status !== 200) p.push(`status ${st.status}`);
  if (st.deltas !== want_deltas) p.push(`${st.deltas} text deltas, expected ${want_deltas}`);
  if (st.text !== want_text) p.push(`delta text differs from the script (${st.text.length} chars, expected ${want_text.length})`);
  if (is_troupe || st.kind === 'responses') {
    if (st.terminal !== 'response.completed') p.push(`terminal ${st.terminal}`);
  } else if (st.terminal !== 'stop' || !st.done_marker) p.push(`finish ${st.terminal}, [DONE] ${st.done_marker}`);
  return p;
}

// ---- 1 and 2: the long stream -------------------------------------------------------------------
// `reps` interleaved pairs of the same scripted reply, direct and through troupe: time to last byte.
// Also troupe's CPU over its own streams of the pairs (ticks read around each troupe stream).
async function pairs(t, reply, want_text, reps, label) {
  await script_default(reply);
  const d = direct(t.protocol);
  const g = via_troupe(t);
  const problems = [];
  const run = async (which) => {
    const r = which === 'direct' ? d : g;
    const st = await stream_request(r.url, r.body, { kind: r.kind });
    const p = check(st, opt.deltas, want_text, which === 'troupe');
    if (p.length) problems.push(`${which}: ${p.join('; ')}`);
    return st;
  };
  const s = { direct: [], troupe: [] };
  let troupe_ticks = 0;
  let troupe_events = 0;
  for (let i = 0; i < reps; i += 1) {
    const order = i % 2 === 0 ? ['direct', 'troupe'] : ['troupe', 'direct'];
    for (const which of order) {
      const c0 = which === 'troupe' ? cpu_ticks(t.pid) : 0;
      const st = await run(which);
      if (which === 'troupe') { troupe_ticks += cpu_ticks(t.pid) - c0; troupe_events += st.frames; }
      s[which].push(st);
    }
  }
  const col = (which, k) => s[which].map((st) => st[k]);
  const direct_ms = col('direct', 'ttlb_ms');
  const troupe_ms = col('troupe', 'ttlb_ms');
  const per_pair = direct_ms.map((x, i) => r3(troupe_ms[i] / x));
  const out = {
    reps,
    direct_ttlb_ms: direct_ms.map(r2),
    troupe_ttlb_ms: troupe_ms.map(r2),
    direct_ttlb_median_ms: r2(median(direct_ms)),
    troupe_ttlb_median_ms: r2(median(troupe_ms)),
    ratio_troupe_over_direct: r3(median(troupe_ms) / median(direct_ms)),
    per_pair_ratio: per_pair,
    per_pair_ratio_median: r3(median(per_pair)),
    direct_ttfb_median_ms: r2(median(col('direct', 'ttfb_ms'))),
    troupe_ttfb_median_ms: r2(median(col('troupe', 'ttfb_ms'))),
    direct_first_delta_median_ms: r2(median(col('direct', 'ttfd_ms'))),
    troupe_first_delta_median_ms: r2(median(col('troupe', 'ttfd_ms'))),
    direct_frames_per_stream: s.direct.at(-1)?.frames ?? 0,
    direct_bytes_per_stream: s.direct.at(-1)?.bytes ?? 0,
    troupe_frames_per_stream: s.troupe.at(-1)?.frames ?? 0,
    troupe_bytes_per_stream: s.troupe.at(-1)?.bytes ?? 0,
    troupe_text_deltas_per_stream: [...new Set(col('troupe', 'deltas'))],
    troupe_cpu_us_per_event: r3(((troupe_ticks * 1e6) / clk_tck) / (troupe_events || 1)),
    problems: problems.slice(0, 5),
    problem_count: problems.length,
  };
  log(`${t.protocol}${label}: ${opt.deltas} deltas, time to last byte median direct ${out.direct_ttlb_median_ms} ms, troupe ${out.troupe_ttlb_median_ms} ms, ratio ${out.ratio_troupe_over_direct}${problems.length ? `; PROBLEMS: ${problems.slice(0, 3).join(' | ')}` : ''}`);
  return out;
}

async function long_stream(t) {
  const text = content_of(opt.deltas, opt.chunk_size);
  const reply = { content: text, chunk_size: opt.chunk_size };
  const warm = await pairs(t, reply, text, 2, ' (warm-up)');
  const out = { deltas: opt.deltas, chunk_size: opt.chunk_size, ...(await pairs(t, reply, text, opt.reps, '')) };
  out.warmup_problem_count = warm.problem_count; // a wrong warm-up stream is as wrong as any other
  out.problem_count += warm.problem_count;
  out.problems.push(...warm.problems.map((p) => `warm-up ${p}`));

  // 2: CPU per event, troupe streams back to back.
  await script_default(reply);
  const g = via_troupe(t);
  const cpu0 = { troupe: cpu_ticks(t.pid), fake: opt.fake_pid ? cpu_ticks(opt.fake_pid) : 0, client: client_cpu_us() };
  const w0 = process.hrtime.bigint();
  let events = 0;
  let deltas = 0;
  for (let i = 0; i < opt.cpu_streams; i += 1) {
    const st = await stream_request(g.url, g.body, { kind: g.kind });
    const p = check(st, opt.deltas, text, true);
    if (p.length) { out.problem_count += 1; out.problems.push(`cpu phase: ${p.join('; ')}`); }
    events += st.frames;
    deltas += st.deltas;
  }
  const wall_ms = Number(process.hrtime.bigint() - w0) / 1e6;
  const cpu1 = { troupe: cpu_ticks(t.pid), fake: opt.fake_pid ? cpu_ticks(opt.fake_pid) : 0, client: client_cpu_us() };
  const troupe_cpu_ms = ((cpu1.troupe - cpu0.troupe) * 1000) / clk_tck;
  const fake_cpu_ms = ((cpu1.fake - cpu0.fake) * 1000) / clk_tck;
  const client_cpu_ms = (cpu1.client - cpu0.client) / 1000;
  const upstream_events = opt.cpu_streams * out.direct_frames_per_stream; // what the fake wrote for these streams
  out.cpu = {
    streams: opt.cpu_streams,
    troupe_events: events,
    troupe_deltas: deltas,
    upstream_events_per_stream: out.direct_frames_per_stream,
    wall_ms: r2(wall_ms),
    troupe_cpu_ms: r2(troupe_cpu_ms),
    fake_cpu_ms: r2(fake_cpu_ms),
    client_cpu_ms: r2(client_cpu_ms),
    troupe_cpu_us_per_event: r3((troupe_cpu_ms * 1000) / (events || 1)),
    fake_cpu_us_per_upstream_event: r3((fake_cpu_ms * 1000) / (upstream_events || 1)),
    client_cpu_us_per_event: r3((client_cpu_ms * 1000) / (events || 1)),
    troupe_cpu_share_of_wall: r3(troupe_cpu_ms / wall_ms),
    tick_ms: r2(1000 / clk_tck),
  };
  const c = out.cpu;
  log(`${t.protocol}: troupe CPU ${c.troupe_cpu_us_per_event} us/event over ${events} events (${opt.cpu_streams} streams, ${c.troupe_cpu_ms} ms CPU in ${c.wall_ms} ms), fake ${c.fake_cpu_us_per_upstream_event} us/upstream event, client ${c.client_cpu_us_per_event} us/event`);

  // 1b: the same stream paced by the fake (chunk_delay_ms after every chunk/event), fewer pairs.
  if (opt.paced_ms > 0 && opt.paced_reps > 0) {
    out.paced = { chunk_delay_ms: opt.paced_ms, ...(await pairs(t, { ...reply, chunk_delay_ms: opt.paced_ms }, text, opt.paced_reps, ` paced ${opt.paced_ms} ms`)) };
    out.problem_count += out.paced.problem_count;
  }
  return out;
}

// ---- 3: concurrency ---------------------------------------------------------------------------
async function burst(r, n, want_deltas, want_text, is_troupe) {
  // Every connection first; then every request written in one tight loop, so the n requests really
  // are simultaneous (each one's clock starts just before its write).
  const conns = await Promise.all(Array.from({ length: n }, () => connect_raw(r.url)));
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  const c0 = client_cpu_us();
  const w0 = process.hrtime.bigint();
  const all = conns.map((c) => fire(c, r.body, r.kind));
  const launched_ms = Number(process.hrtime.bigint() - w0) / 1e6;
  const res = await Promise.all(all);
  const wall_ms = Number(process.hrtime.bigint() - w0) / 1e6;
  const client_ms = (client_cpu_us() - c0) / 1000;
  lag.disable();
  const errors = {};
  let sample = '';
  for (const st of res) {
    const p = check(st, want_deltas, want_text, is_troupe);
    if (p.length) {
      const k = p[0].replace(/\d+/g, 'N');
      errors[k] = (errors[k] ?? 0) + 1;
      sample ||= p.join('; ');
    }
  }
  const ok = res.filter((st) => st.status === 200 && st.ttfb_ms >= 0);
  return {
    requests: n,
    ok: n - Object.values(errors).reduce((a, b) => a + b, 0),
    errors,
    error_sample: sample,
    wall_ms: r2(wall_ms),
    launch_ms: r2(launched_ms),
    ttfb_ms: summary(ok.map((s) => s.ttfb_ms)),
    ttfd_ms: summary(ok.filter((s) => s.ttfd_ms >= 0).map((s) => s.ttfd_ms)),
    ttlb_ms: summary(ok.map((s) => s.ttlb_ms)),
    client_cpu_ms: r2(client_ms),
    client_cpu_share_of_wall: r3(client_ms / wall_ms),
    client_loop_delay_ms: { p50: r2(lag.percentile(50) / 1e6), p99: r2(lag.percentile(99) / 1e6), max: r2(lag.max / 1e6) },
  };
}

async function concurrency(t) {
  const text = content_of(opt.short_deltas, opt.chunk_size);
  await script_default({ content: text, chunk_size: opt.chunk_size });
  const d = direct(t.protocol);
  const g = via_troupe(t);
  // Warm-up at a tenth of the concurrency; its wrong streams count too.
  const warm = Math.max(1, Math.round(opt.concurrency / 10));
  const warm_errors = [await burst(d, warm, opt.short_deltas, text, false), await burst(g, warm, opt.short_deltas, text, true)]
    .reduce((a, b) => a + (b.requests - b.ok), 0);
  const rounds = [];
  for (let i = 0; i < opt.conc_rounds; i += 1) {
    const order = i % 2 === 0 ? ['direct', 'troupe'] : ['troupe', 'direct'];
    const round = {};
    for (const which of order) {
      await control('/__reset');
      await control('/__script', { replies: [], default: { content: text, chunk_size: opt.chunk_size } });
      const c0 = cpu_ticks(t.pid);
      round[which] = await burst(which === 'direct' ? d : g, opt.concurrency, opt.short_deltas, text, which === 'troupe');
      if (which === 'troupe') round[which].troupe_cpu_ms = r2(((cpu_ticks(t.pid) - c0) * 1000) / clk_tck);
      await new Promise((r) => setTimeout(r, 300)); // let the stores' tails settle
    }
    log(`${t.protocol}: ${opt.concurrency} concurrent, round ${i + 1}: ttfb p50/p99 direct ${round.direct.ttfb_ms.p50}/${round.direct.ttfb_ms.p99} ms, troupe ${round.troupe.ttfb_ms.p50}/${round.troupe.ttfb_ms.p99} ms; first delta p50/p99 direct ${round.direct.ttfd_ms.p50}/${round.direct.ttfd_ms.p99} ms, troupe ${round.troupe.ttfd_ms.p50}/${round.troupe.ttfd_ms.p99} ms; wall direct ${round.direct.wall_ms} ms, troupe ${round.troupe.wall_ms} ms; ok ${round.direct.ok}/${round.troupe.ok}${Object.keys(round.troupe.errors).length ? ` troupe errors ${JSON.stringify(round.troupe.errors)}: ${round.troupe.error_sample}` : ''}${Object.keys(round.direct.errors).length ? ` direct errors ${JSON.stringify(round.direct.errors)}: ${round.direct.error_sample}` : ''}`);
    rounds.push(round);
  }
  const med = (which, f) => r2(median(rounds.map((r) => f(r[which]))));
  const out = {
    concurrency: opt.concurrency,
    deltas: opt.short_deltas,
    rounds,
    median: {},
  };
  for (const which of ['direct', 'troupe']) {
    out.median[which] = {
      ttfb_p50_ms: med(which, (x) => x.ttfb_ms.p50),
      ttfb_p99_ms: med(which, (x) => x.ttfb_ms.p99),
      ttfd_p50_ms: med(which, (x) => x.ttfd_ms.p50),
      ttfd_p99_ms: med(which, (x) => x.ttfd_ms.p99),
      ttlb_p50_ms: med(which, (x) => x.ttlb_ms.p50),
      ttlb_p99_ms: med(which, (x) => x.ttlb_ms.p99),
      wall_ms: med(which, (x) => x.wall_ms),
      client_cpu_ms: med(which, (x) => x.client_cpu_ms),
    };
  }
  out.median.troupe.troupe_cpu_ms = med('troupe', (x) => x.troupe_cpu_ms);
  out.ttfb_p99_ratio_troupe_over_direct = r3(out.median.troupe.ttfb_p99_ms / out.median.direct.ttfb_p99_ms);
  out.ttfb_p50_ratio_troupe_over_direct = r3(out.median.troupe.ttfb_p50_ms / out.median.direct.ttfb_p50_ms);
  out.ttfd_p99_ratio_troupe_over_direct = r3(out.median.troupe.ttfd_p99_ms / out.median.direct.ttfd_p99_ms);
  out.wall_ratio_troupe_over_direct = r3(out.median.troupe.wall_ms / out.median.direct.wall_ms);
  out.warmup_errors = warm_errors;
  out.errors = warm_errors + rounds.reduce((a, r) => a + (r.troupe.requests - r.troupe.ok) + (r.direct.requests - r.direct.ok), 0);
  return out;
}

// ---- main -------------------------------------------------------------------------------------
const result = { clk_tck, node: process.version, target_ratio: opt.target, protocols: {} };
const table = [];
for (const t of opt.troupes) {
  const long = await long_stream(t);
  long.target_met = long.ratio_troupe_over_direct <= opt.target;
  const conc = await concurrency(t);
  result.protocols[t.protocol] = { long_stream: long, concurrent: conc };
  const c = long.cpu;
  const m = conc.median;
  const lag_p99 = median(conc.rounds.map((r) => Math.max(r.direct.client_loop_delay_ms.p99, r.troupe.client_loop_delay_ms.p99)));
  const share = median(conc.rounds.map((r) => r.troupe.client_cpu_share_of_wall));
  const paced = long.paced
    ? [`  paced ${long.paced.chunk_delay_ms} ms   direct ${long.paced.direct_ttlb_median_ms} ms, troupe ${long.paced.troupe_ttlb_median_ms} ms (medians of ${long.paced.reps} pairs) -> ratio ${long.paced.ratio_troupe_over_direct}; ` +
      `first delta direct ${long.paced.direct_first_delta_median_ms} ms, troupe ${long.paced.troupe_first_delta_median_ms} ms; troupe CPU ${long.paced.troupe_cpu_us_per_event} us/event`]
    : [];
  table.push(
    `upstream protocol ${t.protocol}: ${long.deltas} deltas of ${long.chunk_size} chars, ${long.reps} interleaved pairs`,
    `  time to last byte   direct ${long.direct_ttlb_median_ms} ms, troupe ${long.troupe_ttlb_median_ms} ms (medians) -> ratio ${long.ratio_troupe_over_direct} ` +
      `(per-pair median ${long.per_pair_ratio_median}; target <= ${opt.target}: ${long.target_met ? 'met' : 'NOT met'})`,
    `  first byte / delta  direct ${long.direct_ttfb_median_ms} / ${long.direct_first_delta_median_ms} ms, troupe ${long.troupe_ttfb_median_ms} / ${long.troupe_first_delta_median_ms} ms`,
    `  per stream          troupe ${long.troupe_frames_per_stream} events (${long.troupe_text_deltas_per_stream.join('/')} output_text.delta), ${long.troupe_bytes_per_stream} B; ` +
      `upstream ${long.direct_frames_per_stream} events, ${long.direct_bytes_per_stream} B; wrong streams ${long.problem_count}`,
    `  CPU per event       troupe ${c.troupe_cpu_us_per_event} us (${c.troupe_cpu_ms} ms over ${c.troupe_events} events, ${c.streams} streams, ${c.tick_ms} ms ticks), ` +
      `fake ${c.fake_cpu_us_per_upstream_event} us per upstream event, client ${c.client_cpu_us_per_event} us`,
    ...paced,
    `  ${conc.concurrency} concurrent (${conc.deltas} deltas), medians of ${conc.rounds.length} rounds:`,
    `    first byte p50/p99    direct ${m.direct.ttfb_p50_ms}/${m.direct.ttfb_p99_ms} ms, troupe ${m.troupe.ttfb_p50_ms}/${m.troupe.ttfb_p99_ms} ms (p99 troupe/direct ${conc.ttfb_p99_ratio_troupe_over_direct})`,
    `    first delta p50/p99   direct ${m.direct.ttfd_p50_ms}/${m.direct.ttfd_p99_ms} ms, troupe ${m.troupe.ttfd_p50_ms}/${m.troupe.ttfd_p99_ms} ms (p99 troupe/direct ${conc.ttfd_p99_ratio_troupe_over_direct})`,
    `    last byte p50/p99     direct ${m.direct.ttlb_p50_ms}/${m.direct.ttlb_p99_ms} ms, troupe ${m.troupe.ttlb_p50_ms}/${m.troupe.ttlb_p99_ms} ms`,
    `    wall                  direct ${m.direct.wall_ms} ms, troupe ${m.troupe.wall_ms} ms (troupe/direct ${conc.wall_ratio_troupe_over_direct}); troupe CPU ${m.troupe.troupe_cpu_ms} ms; errors ${conc.errors}`,
    `    client                CPU ${m.troupe.client_cpu_ms} ms per troupe round (${share} of the wall), event-loop delay p99 ${lag_p99} ms`,
  );
}
await control('/__reset');
result.errors = Object.values(result.protocols).reduce((a, p) => a + p.long_stream.problem_count + p.concurrent.errors, 0);
if (opt.table_out) fs.writeFileSync(opt.table_out, `${table.join('\n')}\n`);
else process.stderr.write(`${table.join('\n')}\n`);
process.stdout.write(`${JSON.stringify(result)}\n`);
