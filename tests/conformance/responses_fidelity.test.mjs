// Conformance: the field sets of what troupe's Responses gateway writes, compared with recorded real
// traffic (tests/conformance/fixtures/responses/, OpenAI and vLLM recordings; see its README).
//
// Each recording is replayed through troupe: an upstream of this file answers troupe's rounds with the
// recorded answers, in order (the recorded SSE lines, or the recorded JSON body with `model.stream`
// false), while the recorded client requests go to troupe, their ids swapped for the ones troupe
// minted. Every object and event that troupe writes and every one the recording holds is reduced to
// its set of field paths, grouped by what it is (an event type, a response object, an item or part of
// a type, a conversation or list object), and the two sets are compared. A difference fails the test
// unless docs/responses-fidelity.md lists it, with its reason, in its allow-list table; an entry that
// no longer matches any difference fails too, so the list stays true.
//
// Needs `npm ci` in tests/conformance and TROUPE_BIN (see the integration harness).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { scenario, parse_sse, source_dir, upstream_config } from '../integration/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture_dir = path.join(here, 'fixtures', 'responses');

// ---------------------------------------------------------------------------------------------
// The allow-list: the table of docs/responses-fidelity.md whose header is
// | Recordings | Where | Field | Side | Reason |

function read_allow_list() {
  const text = fs.readFileSync(path.join(source_dir, 'docs', 'responses-fidelity.md'), 'utf8');
  const rows = [];
  let in_table = false;
  for (const line of text.split('\n')) {
    const cells = line.trim().startsWith('|') ? line.trim().slice(1, -1).split('|').map((c) => c.trim()) : null;
    if (!cells) {
      in_table = false;
      continue;
    }
    if (cells[0] === 'Recordings' && cells[1] === 'Where') {
      in_table = true;
      continue;
    }
    if (!in_table || /^-+$/.test(cells[0])) continue;
    const unquote = (c) => c.replace(/^`|`$/g, '');
    const [recordings, where, field, side, reason] = cells;
    assert.ok(['recording only', 'troupe only'].includes(side), `allow-list side: ${line}`);
    assert.ok(reason && reason.length > 10, `every allow-list entry has a reason: ${line}`);
    rows.push({ recordings: unquote(recordings), where: unquote(where), field: unquote(field), side, reason, used: 0 });
  }
  assert.ok(rows.length > 0, 'docs/responses-fidelity.md has its allow-list table');
  return rows;
}

// `*` matches any run of characters; anything else is literal.
const glob = (pattern) => new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);

function allowed(allow_list, recording, where, field, side) {
  const entry = allow_list.find((e) => e.side === side && glob(e.recordings).test(recording)
    && glob(e.where).test(where) && glob(e.field).test(field));
  if (entry) entry.used += 1;
  return Boolean(entry);
}

// ---------------------------------------------------------------------------------------------
// Field paths, grouped by what carries them.
//
// Groups: `event <type>` (an event's own members), `response` (a response object, wherever it is:
// a body, an event's `response`), `item <type>` (an output item, an event's `item`, a list's `data`),
// `part <type>` (an event's `part`), and `<object>` for other bodies (`conversation`, `list`).
// Paths: `a.b`; an array's elements `a[]`, or `a[<type>]` for elements with a string `type`.

function add(groups, group, p) {
  if (!groups.has(group)) groups.set(group, new Set());
  if (p !== undefined) groups.get(group).add(p);
}

function walk(groups, group, value, prefix) {
  if (Array.isArray(value)) {
    for (const v of value) {
      const at = `${prefix}[${v && typeof v === 'object' && typeof v.type === 'string' ? v.type : ''}]`;
      add(groups, group, at);
      walk(groups, group, v, at);
    }
    return;
  }
  if (!value || typeof value !== 'object') return;
  for (const [k, v] of Object.entries(value)) {
    const at = prefix ? `${prefix}.${k}` : k;
    add(groups, group, at);
    if (!prefix && k === 'response' && group.startsWith('event ') && v && typeof v === 'object') {
      collect_object(groups, 'response', v);
    } else if (!prefix && k === 'item' && v && typeof v === 'object') {
      collect_object(groups, `item ${v.type}`, v);
    } else if (!prefix && k === 'part' && v && typeof v === 'object') {
      collect_object(groups, `part ${v.type}`, v);
    } else if (!prefix && (group === 'response' && k === 'output' || group === 'list' && k === 'data') && Array.isArray(v)) {
      for (const it of v) collect_object(groups, `item ${it.type}`, it);
    } else {
      walk(groups, group, v, at);
    }
  }
}

function collect_object(groups, group, value) {
  add(groups, group);
  walk(groups, group, value, '');
}

function collect_body(groups, body) {
  if (body && typeof body === 'object' && typeof body.object === 'string') collect_object(groups, body.object, body);
}

function collect_event(groups, event) {
  collect_object(groups, `event ${event.type}`, event);
}

// The differences between two group maps, as {where, field, side}; a group one side lacks is the
// difference `field` '(all)'.
function differences(recorded, troupe) {
  const out = [];
  for (const where of new Set([...recorded.keys(), ...troupe.keys()])) {
    const r = recorded.get(where);
    const t = troupe.get(where);
    if (!r || !t) {
      out.push({ where, field: '(all)', side: r ? 'recording only' : 'troupe only' });
      continue;
    }
    for (const f of r) if (!t.has(f)) out.push({ where, field: f, side: 'recording only' });
    for (const f of t) if (!r.has(f)) out.push({ where, field: f, side: 'troupe only' });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Recordings as turns: {request: {method, path, query, body}, response: {status, body?, sse?: [payload]}}

function load_recording(file) {
  const doc = YAML.parse(fs.readFileSync(path.join(fixture_dir, file), 'utf8'));
  if (Array.isArray(doc.turns)) {
    return doc.turns.map((t) => ({
      request: { method: t.request.method, path: t.request.path, query: t.request.query_params ?? {}, body: t.request.body },
      response: {
        status: t.response.status_code,
        body: t.response.body,
        sse_lines: t.response.sse,
        events: t.response.sse ? sse_payloads(t.response.sse.join('')) : undefined,
      },
    }));
  }
  // The short format (function-call-vllm-gemma4.yaml): request body fields, data: payloads only.
  const lines = doc.sse.flatMap((l) => [`${l}\n`, '\n']);
  return [{
    request: { method: 'POST', path: '/v1/responses', query: {}, body: { model: doc.model, ...doc.request } },
    response: { status: 200, sse_lines: lines, events: sse_payloads(lines.join('')) },
  }];
}

function sse_payloads(text) {
  const [frames] = parse_sse(text.endsWith('\n\n') ? text : `${text}\n\n`);
  return frames.filter((f) => f.json).map((f) => f.json);
}

// An upstream that answers each model request with the next recorded answer.
async function replay_upstream(answers) {
  const queue = [...answers];
  const received = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      received.push({ path: req.url, body });
      const next = queue.shift();
      if (!next) {
        res.writeHead(500, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: 'the recording has no more answers', type: 'server_error' } }));
      }
      if (next.sse_lines) {
        res.writeHead(next.status, { 'content-type': 'text/event-stream' });
        return res.end(next.sse_lines.join(''));
      }
      res.writeHead(next.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(next.body));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, base_url: `${url}/v1`, received, close: () => new Promise((r) => server.close(r)) };
}

// Every string in `value` that names a recorded id, swapped for troupe's.
function swap_ids(value, ids) {
  if (typeof value === 'string') {
    let s = value;
    for (const [recorded, ours] of ids) s = s.split(recorded).join(ours);
    return s;
  }
  if (Array.isArray(value)) return value.map((v) => swap_ids(v, ids));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, swap_ids(v, ids)]));
  return value;
}

// The id a turn's answer names: a body's `id`, or the response of a stream's first event.
function answer_id(response) {
  if (response.body?.id) return response.body.id;
  return response.events?.[0]?.response?.id;
}

async function troupe_turn(troupe, request) {
  const query = new URLSearchParams(request.query).toString();
  const url = `${troupe.url}${request.path}${query ? `?${query}` : ''}`;
  const init = { method: request.method, headers: {} };
  if (request.method !== 'GET') {
    init.body = JSON.stringify(request.body ?? {});
    init.headers['content-type'] = 'application/json';
  }
  const res = await fetch(url, init);
  const text = await res.text();
  if (request.body?.stream) {
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/, `${request.path}: ${text}`);
    return { status: res.status, events: sse_payloads(text) };
  }
  return { status: res.status, body: JSON.parse(text) };
}

// ---------------------------------------------------------------------------------------------

const allow_list = read_allow_list();

const recordings = fs.readdirSync(fixture_dir).filter((f) => f.endsWith('.yaml')).sort();

test('the recordings are all here, each with at least one turn (fixture self-check)', () => {
  assert.equal(recordings.length, 7, `seven recordings: ${recordings.join(', ')}`);
  for (const file of recordings) assert.ok(load_recording(file).length > 0, file);
});

for (const file of recordings) {
  scenario(`troupe's objects and events replaying ${file} have the recording's field sets, but for the documented departures (RS-15, RS-17, RS-36)`, async (s) => {
    const turns = load_recording(file);
    const streaming = turns.some((t) => t.request.body?.stream);
    const up = await replay_upstream(turns.filter((t) => t.request.path === '/v1/responses').map((t) => t.response));
    try {
      const troupe = await s.troupe({ config: upstream_config(up, { protocol: 'responses', stream: streaming }) });
      const recorded = new Map();
      const ours = new Map();
      const ids = new Map();
      for (const turn of turns) {
        const request = swap_ids(turn.request, ids);
        const answer = await troupe_turn(troupe, request);
        assert.equal(answer.status, turn.response.status, `${request.method} ${request.path}: ${JSON.stringify(answer.body ?? answer.events)}`);
        if (turn.response.events) {
          assert.ok(answer.events, `${request.path} streams as the recording did`);
          for (const e of turn.response.events) collect_event(recorded, e);
          for (const e of answer.events) collect_event(ours, e);
        } else {
          collect_body(recorded, turn.response.body);
          collect_body(ours, answer.body);
        }
        const recorded_id = answer_id(turn.response);
        const our_id = answer_id(answer);
        if (recorded_id && our_id) ids.set(recorded_id, our_id);
      }
      const unexplained = differences(recorded, ours)
        .filter((d) => !allowed(allow_list, file, d.where, d.field, d.side))
        .map((d) => `${d.side}: ${d.where} › ${d.field}`);
      assert.deepEqual(unexplained, [], `differences from ${file} not listed in docs/responses-fidelity.md`);
    } finally {
      await up.close();
    }
  });
}

test('every allow-list entry of docs/responses-fidelity.md still explains a difference', () => {
  const stale = allow_list.filter((e) => e.used === 0).map((e) => `${e.recordings} | ${e.where} | ${e.field} | ${e.side}`);
  assert.deepEqual(stale, [], 'entries that match no difference any more: remove them');
});
