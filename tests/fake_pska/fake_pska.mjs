// A fake PSKA for driving troupe's PSKA digest worker end to end (AS-66–AS-72, AS-86, CJ-42–CJ-46).
// Node 20, built-ins only.
//
//   node tests/fake_pska/fake_pska.mjs [--port 0] [--service-token T]
//
// Port and token may also come from $FAKE_PSKA_PORT and $FAKE_PSKA_SERVICE_TOKEN. Prints
// `fake pska listening on http://127.0.0.1:<port>` once ready.
//
// PSKA API (what the worker sees; errors are `{"detail": "..."}`):
//   GET  /jobs                      {"jobs":[…]}: the caller's tenant's jobs, in seed order (the worker
//                                   must filter and order them itself); ?status= and ?job_type= filter
//   POST /jobs/{id}/lease           {"worker_id","lease_seconds"} → 200 {"job"}; the holder may re-lease
//                                   (renewal); 409 while another worker holds an unexpired lease, when
//                                   the job is completed/failed, or when its run_after is still ahead
//   POST /jobs/{id}/heartbeat       {"worker_id","lease_seconds"} → 200 {"job"} while that worker holds
//                                   it, else 409; answers the status set by /_control/config instead
//   POST /jobs/{id}/complete        {"result":{…}} → 200 {"job"}; 409 unless leased
//   POST /jobs/{id}/fail            {"error","retryable"} → 200 {"job"} (status failed); 409 unless leased
//   GET  /digest/batches/{id}?cursor=<n>&limit=<n>
//                                   {cursor, next_cursor, has_more, job, source_items, documents,
//                                   passage_windows, chunks}; one source item per cursor step
// Every API request needs X-PSKA-Caller: agent_service, X-PSKA-Tenant-Id, X-PSKA-User-Id and
// X-PSKA-Represented-User-Id (else 400 naming the missing ones), and X-PSKA-Service-Token when a
// token is configured (else 401). A job of another tenant is 404. POST bodies must be JSON (415, 400).
//
// Control API (no auth, JSON): see README.md. POST /_control/mcp_calls is how fake_pska_mcp.mjs
// executes its tools, so every tool call is recorded here too.
import http from 'node:http';

const max_body_bytes = 8 * 1024 * 1024;
const candidate_keys = ['knowledge_claims', 'digest_notes', 'entities', 'memory_candidates', 'review_items', 'hyperedges', 'summaries'];
const page_keys = ['source_items', 'documents', 'passage_windows', 'chunks'];
const identity_headers = ['X-PSKA-Caller', 'X-PSKA-Tenant-Id', 'X-PSKA-User-Id', 'X-PSKA-Represented-User-Id'];
const failure_routes = new Set(['*', 'jobs', 'lease', 'heartbeat', 'complete', 'fail', 'batches', 'pska_job_context', 'pska_write_candidates']);

function arg(name, otherwise) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : otherwise;
}

const startup_token = arg('--service-token', process.env.FAKE_PSKA_SERVICE_TOKEN ?? '') || null;

let state = fresh_state();

function fresh_state() {
  return {
    jobs: new Map(), // id → {job, batches (custom page content per cursor step, or null), candidates}
    requests: [],
    mcp_calls: [],
    failures: [],
    service_token: startup_token,
    heartbeat_status: null,
    next_seq: 1,
    next_job: 1,
    last_created_ms: 0,
  };
}

// Python-style UTC timestamps with microseconds, as PSKA and troupe (AS-78) write them.
const iso = (ms) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
const is_object = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class http_error extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// ---- jobs ------------------------------------------------------------------------------------------

// Strictly increasing, so seed order is also created_at order unless a seed says otherwise.
function next_created_at() {
  state.last_created_ms = Math.max(Date.now(), state.last_created_ms + 1);
  return iso(state.last_created_ms);
}

function seed_job(seed) {
  if (!is_object(seed)) throw new http_error(400, 'a job seed must be an object');
  const { batches = null, batch_count, run_after_seconds, omit = [], ...fields } = seed;
  const id = String(fields.id ?? `job_${state.next_job++}`);
  if (state.jobs.has(id)) throw new http_error(409, `job ${id} already exists`);
  if (batches !== null && !Array.isArray(batches)) throw new http_error(400, 'batches must be an array');
  const count = batches ? batches.length : batch_count ?? 3;
  if (!Number.isInteger(count) || count < 0) throw new http_error(400, 'batch_count must be a non-negative integer');
  const now = Date.now();
  const job = {
    id,
    job_type: 'digest_via_fastreact',
    status: 'queued',
    priority: 0,
    run_after: run_after_seconds === undefined ? null : iso(now + run_after_seconds * 1000),
    created_at: next_created_at(),
    updated_at: iso(now),
    tenant_id: 'tenant_default',
    represented_user_id: 'user_primary',
    payload: {},
    attempt: 0,
    worker_id: null,
    lease_seconds: null,
    lease_expires_at: null,
    result: null,
    error: null,
    retryable: null,
    ...fields,
    id,
    batch_count: count,
  };
  if (job.status === 'leased' && !job.lease_expires_at) job.lease_expires_at = iso(now + (job.lease_seconds ?? 300) * 1000);
  const entry = { job, batches, candidates: [], omit: Array.isArray(omit) ? omit.map(String) : [] };
  state.jobs.set(id, entry);
  return entry;
}

// The job as PSKA shows it; a seed's `omit` drops keys, to test absent fields (AS-67's absent run_after).
function public_job(entry) {
  const out = { ...entry.job };
  for (const k of entry.omit) delete out[k];
  return out;
}

function find_job(id, tenant) {
  const entry = state.jobs.get(id);
  if (!entry || (tenant !== undefined && entry.job.tenant_id !== tenant)) throw new http_error(404, `Job not found: ${id}`);
  return entry;
}

function lease_args(body) {
  const { worker_id, lease_seconds } = body;
  if (typeof worker_id !== 'string' || !worker_id) throw new http_error(400, 'worker_id must be a non-empty string');
  if (typeof lease_seconds !== 'number' || !(lease_seconds > 0)) throw new http_error(400, 'lease_seconds must be a positive number');
  return { worker_id, lease_seconds };
}

function hold(job, worker_id, lease_seconds, now) {
  Object.assign(job, {
    status: 'leased', worker_id, lease_seconds, lease_expires_at: iso(now + lease_seconds * 1000), updated_at: iso(now),
  });
}

const expired = (job, now) => !job.lease_expires_at || Date.parse(job.lease_expires_at) <= now;

function lease({ id, tenant, body }) {
  const entry = find_job(id, tenant);
  const { worker_id, lease_seconds } = lease_args(body);
  const job = entry.job;
  const now = Date.now();
  if (job.status === 'completed' || job.status === 'failed') throw new http_error(409, `Job is ${job.status}`);
  const renewal = job.status === 'leased' && job.worker_id === worker_id;
  if (!renewal) {
    if (job.status === 'leased' && !expired(job, now)) throw new http_error(409, 'Job is leased by another worker');
    if (job.run_after && Date.parse(job.run_after) > now) throw new http_error(409, `Job is not ready before ${job.run_after}`);
    job.attempt += 1;
    job.leased_at = iso(now);
  }
  hold(job, worker_id, lease_seconds, now);
  return [200, { job: public_job(entry) }];
}

function heartbeat({ id, tenant, body }) {
  // A PSKA without the heartbeat route: the worker must fall back to re-leasing (AS-86).
  if (state.heartbeat_status !== null) throw new http_error(state.heartbeat_status, `heartbeat answers ${state.heartbeat_status} (switched by the test)`);
  const entry = find_job(id, tenant);
  const { worker_id, lease_seconds } = lease_args(body);
  const job = entry.job;
  if (job.status !== 'leased' || job.worker_id !== worker_id) throw new http_error(409, 'Job lease is no longer held');
  hold(job, worker_id, lease_seconds, Date.now());
  return [200, { job: public_job(entry) }];
}

// complete and fail carry no worker_id in the contract; one that is sent must be the holder's.
function settle(entry, body) {
  const job = entry.job;
  if (job.status !== 'leased') throw new http_error(409, `Job is not leased (status ${job.status})`);
  if (body.worker_id !== undefined && body.worker_id !== job.worker_id) throw new http_error(409, 'Job lease is no longer held');
}

function complete({ id, tenant, body }) {
  const entry = find_job(id, tenant);
  if (!is_object(body.result)) throw new http_error(400, 'result must be an object');
  settle(entry, body);
  const now = iso(Date.now());
  Object.assign(entry.job, { status: 'completed', result: body.result, completed_at: now, updated_at: now });
  return [200, { job: public_job(entry) }];
}

function fail({ id, tenant, body }) {
  const entry = find_job(id, tenant);
  if (typeof body.error !== 'string' || !body.error) throw new http_error(400, 'error must be a non-empty string');
  if (typeof body.retryable !== 'boolean') throw new http_error(400, 'retryable must be a boolean');
  settle(entry, body);
  const now = iso(Date.now());
  Object.assign(entry.job, { status: 'failed', error: body.error, retryable: body.retryable, failed_at: now, updated_at: now });
  return [200, { job: public_job(entry) }];
}

function list_jobs({ tenant, query }) {
  const status = query.get('status');
  const type = query.get('job_type');
  const jobs = [...state.jobs.values()]
    .filter(({ job }) => job.tenant_id === tenant && (status === null || job.status === status) && (type === null || job.job_type === type))
    .map(public_job);
  return [200, { jobs }];
}

// ---- digest batches --------------------------------------------------------------------------------

function generated_step(job, i) {
  const src = `src_${job.id}_${i}`;
  const doc = `doc_${job.id}_${i}`;
  const text = `Passage ${i} of job ${job.id}: the fake PSKA says fact ${i} holds for tenant ${job.tenant_id}.`;
  return {
    source_items: [{ id: src, source_item_id: src, title: `Source ${i} of ${job.id}`, kind: 'note', knowledge_base_id: 'kb_fake', created_at: job.created_at }],
    documents: [{ id: doc, source_item_id: src, title: `Document ${i}`, text }],
    passage_windows: [{ id: `pw_${job.id}_${i}_0`, source_item_id: src, document_id: doc, start: 0, end: text.length, text }],
    chunks: [{ id: `chk_${job.id}_${i}_0`, source_item_id: src, document_id: doc, ordinal: 0, text }],
  };
}

function non_negative_int(text, name, otherwise) {
  if (text === null) return otherwise;
  if (!/^\d{1,9}$/.test(text)) throw new http_error(400, `${name} must be a non-negative integer`);
  return Number(text);
}

function page(entry, cursor, limit) {
  const { job } = entry;
  const end = Math.min(cursor + limit, job.batch_count);
  const out = { cursor: String(cursor), next_cursor: null, has_more: end < job.batch_count, job: public_job(entry) };
  for (const k of page_keys) out[k] = [];
  for (let i = cursor; i < end; i++) {
    const step = entry.batches ? entry.batches[i] : generated_step(job, i);
    for (const k of page_keys) if (Array.isArray(step?.[k])) out[k].push(...step[k]);
  }
  if (out.has_more) out.next_cursor = String(end);
  return out;
}

function batches({ id, tenant, query }) {
  const entry = find_job(id, tenant);
  const cursor = non_negative_int(query.get('cursor'), 'cursor', 0);
  const limit = non_negative_int(query.get('limit'), 'limit', 1);
  if (limit < 1 || limit > 1000) throw new http_error(400, 'limit must be between 1 and 1000');
  return [200, page(entry, cursor, limit)];
}

// ---- MCP tools (run here on behalf of fake_pska_mcp.mjs) -----------------------------------------

function job_context(args) {
  const entry = find_job(String(args.job_id ?? ''));
  const refs = [];
  for (let i = 0; i < entry.job.batch_count; i++) {
    const step = entry.batches ? entry.batches[i] : generated_step(entry.job, i);
    for (const s of Array.isArray(step?.source_items) ? step.source_items : []) refs.push({ source_item_id: s.source_item_id ?? s.id, title: s.title ?? null });
  }
  const context = { job: public_job(entry), batch_count: entry.job.batch_count, source_refs: refs, candidates_written: entry.candidates.length };
  if (args.cursor !== undefined) context.page = page(entry, non_negative_int(String(args.cursor), 'cursor', 0), 1);
  return context;
}

function write_candidates(args) {
  const entry = find_job(String(args.job_id ?? ''));
  const accepted = Object.fromEntries(candidate_keys.map((k) => [k, Array.isArray(args[k]) ? args[k].length : 0]));
  const total = Object.values(accepted).reduce((a, b) => a + b, 0);
  if (total === 0) throw new http_error(400, `no candidates: every one of ${candidate_keys.join(', ')} is missing or empty`);
  entry.candidates.push({ at: iso(Date.now()), arguments: args });
  return { ok: true, job_id: entry.job.id, write: entry.candidates.length, accepted, candidate_count: total };
}

const tools = { pska_job_context: job_context, pska_write_candidates: write_candidates };

// ---- failure injection -----------------------------------------------------------------------------

// The first armed failure for this route (and job), consumed; null when none applies.
function take_failure(route, id) {
  const i = state.failures.findIndex((f) => (f.route === '*' || f.route === route) && (f.job_id === undefined || f.job_id === id));
  if (i < 0) return null;
  const f = state.failures[i];
  if (--f.count <= 0) state.failures.splice(i, 1);
  return f;
}

function arm_failure(body) {
  const { route, count = 1, status, retry_after, delay_ms = 0, job_id, detail } = body;
  if (!failure_routes.has(route)) throw new http_error(400, `route must be one of ${[...failure_routes].join(', ')}`);
  if (!Number.isInteger(count) || count < 1) throw new http_error(400, 'count must be a positive integer');
  if (status !== undefined && !(Number.isInteger(status) && status >= 400 && status <= 599)) throw new http_error(400, 'status must be an HTTP error status');
  if (status === undefined && !delay_ms) throw new http_error(400, 'a failure needs a status, a delay_ms or both');
  const f = { route, count, status, retry_after, delay_ms, job_id: job_id === undefined ? undefined : String(job_id), detail };
  state.failures.push(f);
  return f;
}

// ---- HTTP ------------------------------------------------------------------------------------------

const api_routes = [
  ['GET', /^\/jobs$/, 'jobs', list_jobs],
  ['POST', /^\/jobs\/([^/]+)\/lease$/, 'lease', lease],
  ['POST', /^\/jobs\/([^/]+)\/heartbeat$/, 'heartbeat', heartbeat],
  ['POST', /^\/jobs\/([^/]+)\/complete$/, 'complete', complete],
  ['POST', /^\/jobs\/([^/]+)\/fail$/, 'fail', fail],
  ['GET', /^\/digest\/batches\/([^/]+)$/, 'batches', batches],
];

function decode_id(text = '') {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new http_error(400, 'malformed job id');
  }
}

function check_identity(headers) {
  const missing = identity_headers.filter((h) => !headers[h.toLowerCase()]);
  if (missing.length) throw new http_error(400, `missing header${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
  if (headers['x-pska-caller'] !== 'agent_service') throw new http_error(400, 'X-PSKA-Caller must be agent_service');
  if (state.service_token === null) return;
  const token = headers['x-pska-service-token'];
  if (!token) throw new http_error(401, 'missing header X-PSKA-Service-Token');
  if (token !== state.service_token) throw new http_error(401, 'invalid X-PSKA-Service-Token');
}

function json_body(req, text) {
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) throw new http_error(415, 'Content-Type must be application/json');
  const body = parse(text);
  if (!is_object(body)) throw new http_error(400, 'body must be a JSON object');
  return body;
}

async function serve_api(req, url, text) {
  const path = url.pathname;
  const record = {
    seq: state.next_seq++, at: iso(Date.now()), method: req.method, path, route: null,
    query: Object.fromEntries(url.searchParams), headers: { ...req.headers }, body: text === '' ? null : parse(text) ?? text,
    status: null, response: null,
  };
  state.requests.push(record);
  const answer = (status, value, headers = {}) => {
    record.status = status;
    record.response = value;
    return [status, value, headers];
  };
  try {
    const found = api_routes.find(([, re]) => re.test(path));
    if (!found) return answer(404, { detail: `no route for ${path}` });
    const [method, re, route, handler] = found;
    record.route = route;
    if (req.method !== method) return answer(405, { detail: `${req.method} is not allowed on ${path}` });
    const id = decode_id(path.match(re)[1]);
    const failure = take_failure(route, id);
    if (failure?.delay_ms) await sleep(failure.delay_ms);
    if (failure?.status) {
      const headers = failure.retry_after === undefined ? {} : { 'retry-after': String(failure.retry_after) };
      return answer(failure.status, { detail: failure.detail ?? `injected failure ${failure.status}` }, headers);
    }
    check_identity(req.headers);
    const body = req.method === 'POST' ? json_body(req, text) : {};
    return answer(...handler({ id, tenant: req.headers['x-pska-tenant-id'], query: url.searchParams, body }));
  } catch (err) {
    if (err instanceof http_error) return answer(err.status, { detail: err.message });
    return answer(500, { detail: String(err?.stack ?? err) });
  }
}

async function run_tool(body) {
  const call = { seq: state.mcp_calls.length + 1, at: iso(Date.now()), tool: body.tool, arguments: body.arguments, pid: body.pid ?? null, result: null, is_error: false };
  state.mcp_calls.push(call);
  try {
    const tool = tools[body.tool];
    if (!tool) throw new http_error(400, `unknown tool ${body.tool}`);
    if (!is_object(body.arguments)) throw new http_error(400, 'arguments must be an object');
    const failure = take_failure(body.tool, String(body.arguments.job_id ?? ''));
    if (failure?.delay_ms) await sleep(failure.delay_ms);
    if (failure?.status) throw new http_error(failure.status, failure.detail ?? `injected failure ${failure.status}`);
    call.result = tool(body.arguments);
  } catch (err) {
    call.is_error = true;
    call.result = err instanceof http_error ? err.message : String(err?.stack ?? err);
  }
  return { result: call.result, is_error: call.is_error };
}

async function serve_control(req, url, text) {
  const path = url.pathname;
  const body = req.method === 'POST' ? parse(text || '{}') : undefined;
  if (req.method === 'POST' && !is_object(body)) return [400, { detail: 'body must be a JSON object' }];
  const q = url.searchParams;
  const route = `${req.method} ${path}`;
  const job_match = path.match(/^\/_control\/jobs\/([^/]+)$/);
  if (req.method === 'GET' && job_match) {
    const entry = find_job(decode_id(job_match[1]));
    return [200, { job: public_job(entry), candidates: entry.candidates }];
  }
  switch (route) {
    case 'POST /_control/reset':
      state = fresh_state();
      return [200, { ok: true }];
    case 'POST /_control/jobs': {
      const seeds = Array.isArray(body.jobs) ? body.jobs : [body];
      return [200, { jobs: seeds.map((s) => public_job(seed_job(s))) }];
    }
    case 'GET /_control/jobs':
      return [200, { jobs: [...state.jobs.values()].map(public_job) }];
    case 'GET /_control/requests': {
      const keep = (r) => (!q.has('method') || r.method === q.get('method')) && (!q.has('route') || r.route === q.get('route')) &&
        (!q.has('path_prefix') || r.path.startsWith(q.get('path_prefix')));
      return [200, { requests: state.requests.filter(keep) }];
    }
    case 'GET /_control/mcp_calls':
      return [200, { calls: state.mcp_calls.filter((c) => !q.has('tool') || c.tool === q.get('tool')) }];
    case 'POST /_control/mcp_calls':
      return [200, await run_tool(body)];
    case 'POST /_control/lose_lease': {
      const entry = find_job(String(body.job_id ?? ''));
      const now = Date.now();
      entry.job.attempt += 1;
      entry.job.leased_at = iso(now);
      hold(entry.job, String(body.worker_id ?? 'rival-worker'), body.lease_seconds ?? entry.job.lease_seconds ?? 300, now);
      return [200, { job: public_job(entry) }];
    }
    case 'GET /_control/config':
    case 'POST /_control/config': {
      if (body && 'service_token' in body) state.service_token = body.service_token || null;
      if (body && 'heartbeat_status' in body) {
        const s = body.heartbeat_status;
        if (s !== null && !(Number.isInteger(s) && s >= 400 && s <= 599)) return [400, { detail: 'heartbeat_status must be null or an HTTP error status' }];
        state.heartbeat_status = s;
      }
      return [200, { service_token: state.service_token, heartbeat_status: state.heartbeat_status }];
    }
    case 'POST /_control/failures':
      return [200, { failure: arm_failure(body), failures: state.failures }];
    case 'GET /_control/failures':
      return [200, { failures: state.failures }];
    default:
      return [404, { detail: `no control route ${route}` }];
  }
}

function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// An oversized body is drained, not cut off, so the client still reads the 413.
function read_body(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on('data', (d) => {
      size += d.length;
      if (size <= max_body_bytes) parts.push(d);
    });
    req.on('end', () => {
      if (size > max_body_bytes) reject(new http_error(413, `body over ${max_body_bytes} bytes`));
      else resolve(Buffer.concat(parts).toString('utf8'));
    });
    req.on('error', reject);
  });
}

function send_json(res, status, value, headers = {}) {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://x');
    const text = await read_body(req);
    const answer = url.pathname.startsWith('/_control/') ? serve_control(req, url, text) : serve_api(req, url, text);
    send_json(res, ...(await answer));
  } catch (err) {
    if (err instanceof http_error) send_json(res, err.status, { detail: err.message });
    else send_json(res, 500, { detail: String(err?.stack ?? err) });
  }
});

server.listen(Number(arg('--port', process.env.FAKE_PSKA_PORT ?? '0')), '127.0.0.1', () => {
  process.stdout.write(`fake pska listening on http://127.0.0.1:${server.address().port}\n`);
});

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections(); // a delayed answer would otherwise keep close() waiting
  setTimeout(() => process.exit(0), 1000).unref();
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
