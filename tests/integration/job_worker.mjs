// A jobs API worker as a test runs it in its own process (CJ-48): leases from TROUPE_URL, completes
// each job with {worker, epoch} in one batch, and prints what it holds and settles, one line each:
//   leased <id> <lease_token>
//   completed <id> <http status of the item>
// Stops when TROUPE_WORKER_IDLE_POLLS polls in a row came back empty (0: never). With
// TROUPE_WORKER_HOLD=1 it leases once and holds what it got, completing nothing, until it is killed.
const url = process.env.TROUPE_URL;
const worker_id = process.env.TROUPE_WORKER_ID ?? `w-${process.pid}`;
const token = process.env.TROUPE_SERVICE_TOKEN;
const idle_limit = Number(process.env.TROUPE_WORKER_IDLE_POLLS ?? 0);
const hold = process.env.TROUPE_WORKER_HOLD === '1';
const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };

async function post(path, body) {
  const res = await fetch(url + path, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json().catch(() => undefined) };
}

let idle = 0;
for (;;) {
  let leased;
  try {
    leased = await post('/v1/jobs/lease', { worker_id, max_jobs: 20, lease_seconds: 5, wait_seconds: 1 });
  } catch {
    continue; // the node is restarting or gone: try again
  }
  const jobs = leased.json?.jobs ?? [];
  if (jobs.length === 0) {
    if (idle_limit && ++idle >= idle_limit) break;
    continue;
  }
  idle = 0;
  for (const j of jobs) console.log(`leased ${j.id} ${j.lease_token}`);
  if (hold) await new Promise(() => {});
  const completions = jobs.map((j) => ({ id: j.id, lease_token: j.lease_token, result: { worker: worker_id, epoch: j.lease_epoch } }));
  try {
    const done = await post('/v1/jobs/complete', { completions });
    for (const r of done.json?.results ?? []) console.log(`completed ${r.id} ${r.status}`);
  } catch {
    /* the answer was lost: the leases expire and the jobs are leased again */
  }
}
