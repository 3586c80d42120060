// What the suites that kill troupe check of background runs: their list, their logs and the kill
// itself (AS-83, AS-51, CJ-48).
import assert from 'node:assert/strict';
import { timestamp_re, until } from './harness.mjs';

export const terminal = new Set(['completed', 'failed', 'cancelled']);
export const recovered_error = 'Recovered stale running lease';

export const types = (events) => events.map((e) => e.type).join(', ');

export async function post_run(troupe, body) {
  const res = await troupe.request('POST', '/v1/runs', { body });
  assert.equal(res.status, 200, `POST /v1/runs: ${res.text}`);
  assert.equal(res.json.status, 'queued', res.text);
  return res.json;
}

// Every run (the list is newest first; `limit` covers them all).
export async function list_runs(troupe, limit = 200) {
  const res = await troupe.request('GET', `/v1/runs?limit=${limit}`);
  assert.equal(res.status, 200, `GET /v1/runs: ${res.text}`);
  assert.equal(res.json.has_more, false, `one page holds every run: ${res.json.total_count}`);
  return res.json.runs;
}

export async function all_events(troupe, run_id) {
  const res = await troupe.request('GET', `/v1/runs/${encodeURIComponent(run_id)}/events?limit=0`);
  assert.equal(res.status, 200, `GET /v1/runs/${run_id}/events: ${res.text}`);
  return res.json.events;
}

// Polls the list until pred holds for every listed run of `ids`; returns the runs by id.
export async function wait_all(troupe, ids, pred, { timeout_ms, message }) {
  let last = [];
  try {
    return await until(async () => {
      const runs = await list_runs(troupe);
      const by_id = new Map(runs.map((r) => [r.run_id, r]));
      last = ids.map((id) => by_id.get(id) ?? { run_id: id, missing: true });
      return last.every((r) => !r.missing && pred(r)) && by_id;
    }, { timeout_ms, interval_ms: 100, message });
  } catch (err) {
    const bad = last.filter((r) => r.missing || !pred(r));
    err.message += `\n${bad.length} runs not there yet, e.g. ${JSON.stringify(bad.slice(0, 3))}`;
    throw err;
  }
}

// SIGKILL: no drain, no cleanup, locks and leases left as they were.
export async function kill9(troupe) {
  troupe.signal('SIGKILL');
  const exit = await troupe.wait_exit(10_000);
  assert.ok(exit, 'the killed process exited');
  assert.equal(exit.signal, 'SIGKILL', JSON.stringify(exit));
}

// A run's log: sequences 0..n-1 without gap or repeat, chained parents; every attempt in it starts
// with a session_start whose metadata.attempt rises (an attempt that died before its session_start
// leaves nothing, AS-14); only the last attempt may end the run. Returns the attempts (the log split
// at each session_start).
export function check_recovered_log(run, events) {
  const where = `${run.run_id} (${types(events)})`;
  events.forEach((e, i) => {
    assert.equal(e.sequence, i, `${where}: sequence ${i} is present exactly once: ${events.map((x) => x.sequence)}`);
    assert.equal(e.event_id, `${run.run_id}:${i}`);
    assert.equal(e.parent_event_id, i === 0 ? null : `${run.run_id}:${i - 1}`, `${where}: parents chain`);
    assert.equal(e.run_id, run.run_id);
    assert.match(e.timestamp, timestamp_re);
  });
  const parts = [];
  for (const e of events) {
    if (e.type === 'session_start') parts.push([]);
    assert.ok(parts.length > 0, `${where}: the log starts with session_start`);
    parts[parts.length - 1].push(e);
  }
  parts.forEach((p, k) => {
    const attempt = p[0].metadata?.attempt;
    const before = k === 0 ? 0 : parts[k - 1][0].metadata.attempt;
    assert.ok(Number.isInteger(attempt) && attempt > before && attempt <= run.attempts,
      `${where}: metadata.attempt ${attempt} follows ${before} and is at most the run's ${run.attempts} attempts`);
    const ends = p.filter((e) => e.type === 'session_end');
    if (k < parts.length - 1) assert.equal(ends.length, 0, `${where}: an interrupted attempt has no session_end`);
  });
  assert.ok(events.filter((e) => e.type === 'session_end').length <= 1, `${where}: at most one session_end`);
  return parts;
}
