// Hostile input against the real binary (issue 15): every case ends with troupe still answering
// /health and its resident memory back near where it started.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { scenario, until } from './harness.mjs';

const token = 'hostile-service-token';
const json = { 'content-type': 'application/json' };
const auth = { authorization: `Bearer ${token}`, ...json };

// Under AddressSanitizer memory is the sanitizer's (redzones, a quarantine of freed blocks), so the
// bounds on troupe's own memory are checked only on an uninstrumented binary.
function sanitized(pid) {
  return fs.readFileSync(`/proc/${pid}/maps`, 'utf8').includes('libasan');
}

// Resident memory once troupe has answered a request (what start-up allocates is not growth).
async function baseline_kib(troupe) {
  await troupe.request('GET', '/health');
  return rss_kib(troupe.pid);
}

function rss_kib(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]);
}

function cpu_ticks(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime + stime
}

// Sends `chunks` (strings or Buffers, written in order) on one connection and resolves with all that
// came back once troupe closes it (or `timeout_ms` passes: then `timed_out`). `half_close` ends the
// sending side after the last chunk.
function raw(port, chunks, { half_close = false, timeout_ms = 10_000 } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const got = [];
    let done = false;
    const finish = (extra) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text: Buffer.concat(got).toString('latin1'), ...extra });
    };
    const timer = setTimeout(() => finish({ timed_out: true }), timeout_ms);
    socket.on('data', (d) => got.push(d));
    socket.on('end', () => finish({}));
    socket.on('close', () => finish({}));
    socket.on('error', (e) => finish({ error: e.code }));
    socket.on('connect', () => {
      for (const c of chunks) socket.write(c);
      if (half_close) socket.end();
    });
  });
}

// The final status of a raw answer; interim 1xx answers before it are skipped.
function status_of(text) {
  const m = text.replace(/^(HTTP\/1\.1 1\d\d [^\r]*\r\n\r\n)+/, '').match(/^HTTP\/1\.1 (\d{3})/);
  return m ? Number(m[1]) : null;
}

function post_head(path, length, extra = '') {
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}` +
         `Content-Length: ${length}\r\nConnection: close\r\n\r\n`;
}

async function healthy(troupe, baseline_kib) {
  const res = await troupe.request('GET', '/health');
  assert.equal(res.status, 200, 'troupe still answers /health');
  if (baseline_kib !== undefined && !sanitized(troupe.pid)) {
    // Freed memory may take a moment to reach the allocator's top; it never grows on.
    await until(() => rss_kib(troupe.pid) - baseline_kib < 20 * 1024,
                { timeout_ms: 5000, message: `RSS within 20 MiB of its start (${baseline_kib} KiB)` });
  }
}

const deep = (n) => '['.repeat(n) + ']'.repeat(n);

scenario('bodies nested 10^5 deep are refused before auth and with it, on every JSON surface', async (s) => {
  const troupe = await s.troupe({ config: { service: { service_token: token } } });
  const start = await baseline_kib(troupe);
  const chat = `{"messages":[{"role":"user","content":"hi"}],"metadata":{"x":${deep(100_000)}}}`;
  for (const route of ['/v1/chat/completions', '/v1/runs']) {
    const anonymous = await troupe.request('POST', route, { raw: chat, headers: json });
    assert.equal(anonymous.status, 401, `${route} without a token is refused first`);
    const admitted = await troupe.request('POST', route, { raw: chat, headers: auth });
    assert.equal(admitted.status, 400, `${route}: ${admitted.text}`);
    assert.match(admitted.json.detail, /deeper than 64 levels/);
  }
  const responses = await troupe.request('POST', '/v1/responses', { raw: `{"model":"m","input":${deep(100_000)}}`, headers: auth });
  assert.equal(responses.status, 400, responses.text);
  const check = await troupe.request('POST', '/v1/policy/check', { raw: `{"tool_name":"exec","tool_args":${deep(100_000)}}`, headers: auth });
  assert.ok(check.status === 400 || check.status === 422, check.text);
  const events = await troupe.request('POST', '/v1/workspaces/ops/events', { raw: `{"events":${deep(100_000)}}`, headers: auth });
  assert.ok(events.status >= 400 && events.status < 500, events.text);
  await healthy(troupe, start);
});

scenario('a chunked trailer over 64 KiB is a 400, not an abort', async (s) => {
  const troupe = await s.troupe();
  const body = '{"messages":[{"role":"user","content":"hi"}]}';
  const res = await raw(troupe.port, [
    'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    'Transfer-Encoding: chunked\r\nTrailer: X-Big\r\n\r\n' +
    `${body.length.toString(16)}\r\n${body}\r\n0\r\nX-Big: ${'a'.repeat(70_000)}\r\n\r\n`]);
  assert.equal(status_of(res.text), 400, res.text.slice(0, 200));
  await healthy(troupe);
});

scenario('huge and many headers, truncated, pipelined and garbage requests leave troupe serving', async (s) => {
  const troupe = await s.troupe({ config: { service: { read_timeout_seconds: 1 } } });
  const start = await baseline_kib(troupe);
  const huge = await raw(troupe.port, [`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`]);
  assert.ok([400, 431].includes(status_of(huge.text)) || huge.error, huge.text.slice(0, 200));
  let many = 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n';
  for (let i = 0; i < 10000; ++i) many += `X-H${i}: v\r\n`; // past the 64 KiB head limit
  const lots = await raw(troupe.port, [many + '\r\n']);
  assert.ok(status_of(lots.text) === 400 || lots.error, lots.text.slice(0, 200));
  // Truncated: the head promises a body that never comes; the read timeout ends it.
  const truncated = await raw(troupe.port, [post_head('/v1/chat/completions', 1000) + '{"messages":'], { timeout_ms: 5000 });
  assert.ok(!truncated.timed_out, 'a truncated request is ended by the read timeout');
  // Pipelined: two requests in one write are answered in order.
  const two = await raw(troupe.port, ['GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n']);
  assert.equal((two.text.match(/HTTP\/1\.1 200/g) ?? []).length, 2);
  // Slow headers: one byte at a time past the read timeout.
  const slow = await raw(troupe.port, ['GET /health HTTP/1.1\r\n'], { timeout_ms: 5000 });
  assert.ok(!slow.timed_out, 'a client that never finishes its head is dropped');
  const garbage = await raw(troupe.port, [Buffer.from([0, 255, 13, 10, 13, 10, 1, 2, 3]), '\r\n\r\n']);
  assert.ok(status_of(garbage.text) === 400 || garbage.text === '' || garbage.error, garbage.text.slice(0, 100));
  // WebSocket garbage after a valid upgrade.
  const key = Buffer.from('0123456789abcdef').toString('base64');
  const ws = await raw(troupe.port, [
    `GET /v1/workspaces/ops/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: reflexr.v1\r\n\r\n`,
    Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])]);
  assert.match(ws.text, /^HTTP\/1\.1 101/);
  await healthy(troupe, start);
});

scenario('invalid UTF-8, repeated names and CR/LF/NUL in ids are refused at admission', async (s) => {
  const troupe = await s.troupe();
  const bad_utf8 = Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]}')]);
  const res = await troupe.request('POST', '/v1/chat/completions', { raw: bad_utf8, headers: json });
  assert.equal(res.status, 400, res.text);
  assert.match(res.json.detail, /UTF-8/);
  const repeated = await troupe.request('POST', '/v1/chat/completions',
    { raw: '{"messages":[{"role":"user","content":"hi"}],"stream":false,"stream":true}', headers: json });
  assert.equal(repeated.status, 422, repeated.text);
  assert.deepEqual(repeated.json.detail[0].loc, ['body', 'stream']);
  for (const [field, body] of [
    ['session_id', { session_id: 'a\r\nX-Injected: yes' }],
    ['session_id', { session_id: 'a\u0000b' }],
    ['run_id', { metadata: { run_id: 'r\nX-Injected: yes' } }],
  ]) {
    const r = await troupe.request('POST', '/v1/chat/completions',
      { body: { messages: [{ role: 'user', content: 'hi' }], ...body } });
    assert.equal(r.status, 422, `${field}: ${r.text}`);
    assert.equal(r.headers.get('x-injected'), null);
    assert.equal(r.json.detail[0].loc.at(-1), field);
  }
  await healthy(troupe);
});

scenario('an unadmitted caller is refused from the head of a 10 MiB request, before its body is read', async (s) => {
  const troupe = await s.troupe({ config: { service: { service_token: token } } });
  const start = await baseline_kib(troupe);
  // Only the head is sent: the answer must not wait for the body.
  const res = await raw(troupe.port, [post_head('/v1/chat/completions', 10 * 1024 * 1024 - 1)], { timeout_ms: 5000 });
  assert.ok(!res.timed_out, 'answered without the body');
  assert.equal(status_of(res.text), 401, res.text);
  const too_big = await raw(troupe.port, [post_head('/v1/chat/completions', 11 * 1024 * 1024, `Authorization: Bearer ${token}\r\n`)], { timeout_ms: 5000 });
  assert.equal(status_of(too_big.text), 413, too_big.text);
  // Three admitted 10 MiB bodies of 300,000 tiny messages at once: each is refused (too many
  // messages) and memory stays bounded.
  let body = '{"messages":[';
  while (body.length < 10 * 1024 * 1024 - 64) body += '{"role":"user","content":"x"},';
  body = body.slice(0, -1) + ']}';
  let peak = 0;
  const sampler = setInterval(() => { peak = Math.max(peak, rss_kib(troupe.pid)); }, 5);
  const answers = await Promise.all([1, 2, 3].map(() =>
    troupe.request('POST', '/v1/chat/completions', { raw: body, headers: auth })));
  clearInterval(sampler);
  for (const a of answers) assert.equal(a.status, 422, a.text.slice(0, 200));
  const growth_mib = (peak - start) / 1024;
  s.t.diagnostic(`peak RSS growth ${growth_mib.toFixed(0)} MiB for three 10 MiB bodies`);
  if (!sanitized(troupe.pid))
    assert.ok(growth_mib < 3 * 10 * 10, `peak RSS growth ${growth_mib.toFixed(0)} MiB for three 10 MiB bodies`);
  await healthy(troupe, start);
});

scenario('past service.max_connections connections get 503 and close, accepts do not spin, and it recovers', async (s) => {
  const troupe = await s.troupe({ config: { service: { max_connections: 20 } } });
  const held = [];
  for (let i = 0; i < 20; ++i) {
    const c = net.connect(troupe.port, '127.0.0.1');
    await new Promise((r) => c.on('connect', r));
    held.push(c);
  }
  await until(async () => status_of((await raw(troupe.port, ['GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'], { timeout_ms: 2000 })).text) === 503,
              { message: 'a connection over the cap is answered 503' });
  const before = cpu_ticks(troupe.pid);
  const extra = [];
  for (let i = 0; i < 50; ++i) extra.push(raw(troupe.port, ['GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'], { timeout_ms: 3000 }));
  const answered = await Promise.all(extra);
  assert.ok(answered.every((a) => status_of(a.text) === 503 || a.error), 'every extra connection is refused');
  await new Promise((r) => setTimeout(r, 500)); // a quiet half second: CPU must stay near idle
  const ticks = cpu_ticks(troupe.pid) - before;
  assert.ok(ticks < 50, `troupe used ${ticks} ticks while at the cap`);
  for (const c of held) c.destroy();
  await until(async () => (await troupe.request('GET', '/health')).status === 200, { message: '/health after the cap' });
});

scenario('a client that half-closes after its request still gets the answer', async (s) => {
  const troupe = await s.troupe();
  const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: false });
  const res = await raw(troupe.port, [post_head('/v1/chat/completions', Buffer.byteLength(body)) + body], { half_close: true });
  assert.equal(status_of(res.text), 200, res.text.slice(0, 300));
  assert.match(res.text, /"session_end"|"content"/);
  const streamed = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: true });
  const sse = await raw(troupe.port, [post_head('/v1/chat/completions', Buffer.byteLength(streamed)) + streamed], { half_close: true });
  assert.equal(status_of(sse.text), 200);
  assert.match(sse.text, /event: done/);
});

scenario('a page cannot reach troupe: text/plain bodies, foreign origins and foreign Host names are refused', async (s) => {
  const troupe = await s.troupe();
  const body = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: false });
  const plain = await troupe.request('POST', '/v1/chat/completions', { raw: body, headers: { 'content-type': 'text/plain' } });
  assert.equal(plain.status, 415, plain.text);
  const cross = await troupe.request('POST', '/v1/runs', { raw: body, headers: { 'content-type': 'application/json', origin: 'http://evil.example' } });
  assert.equal(cross.status, 403);
  assert.equal(cross.json.detail, 'Cross-origin request refused');
  const cross_openai = await troupe.request('POST', '/v1/responses', { raw: '{"model":"m","input":"x"}', headers: { 'content-type': 'application/json', origin: 'null' } });
  assert.equal(cross_openai.status, 403);
  assert.equal(cross_openai.json.error.message, 'Cross-origin request refused');
  const rebound = await raw(troupe.port, ['GET /v1/runs HTTP/1.1\r\nHost: attacker.example:18741\r\nConnection: close\r\n\r\n']);
  assert.equal(status_of(rebound.text), 421, rebound.text);
  const same = await troupe.request('POST', '/v1/chat/completions', { raw: body, headers: { 'content-type': 'application/json', origin: troupe.url } });
  assert.equal(same.status, 200, same.text);
});
