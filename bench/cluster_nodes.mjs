// What the cluster benchmarks share (bench/cluster_cancel.mjs, bench/cluster_throughput.mjs): a fresh
// database on the throwaway server, troupe nodes started on it and stopped on exit, HTTP requests
// over kept-alive sockets, percentiles.
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

export const log = (m) => process.stderr.write(`[cluster] ${m}\n`);

// `--some-flag value` pairs as { some_flag: value }.
export function flags() {
  const out = {};
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) out[a[i].replace(/^--/, '').replace(/-/g, '_')] = a[i + 1];
  return out;
}

export function percentile(values, p) {
  const v = [...values].sort((x, y) => x - y);
  return v.length ? v[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)] : null;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
export function request(port, method, url, body) {
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

export function server_url() {
  const server = process.env.TROUPE_POSTGRES_URL;
  if (!server) throw new Error('TROUPE_POSTGRES_URL is not set: run through scripts/pg-throwaway');
  return server;
}

// A fresh database on the throwaway server; answers its URL.
export function fresh_database(prefix) {
  const server = server_url();
  const name = `${prefix}_${crypto.randomBytes(4).toString('hex')}`;
  execFileSync('psql', [server, '-qc', `CREATE DATABASE ${name}`]);
  return server.slice(0, server.lastIndexOf('/') + 1) + name;
}

// One value (the first column of the first row) of a query.
export function query_value(database, sql) {
  return execFileSync('psql', [database, '-tAc', sql], { encoding: 'utf8' }).trim();
}

const shared_secret = crypto.randomBytes(32).toString('hex'); // every node proves the same one
const started = [];
export function stop_all() {
  for (const n of started) if (n.proc.exitCode === null) n.proc.kill('SIGKILL');
}
process.on('exit', stop_all);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stop_all(); process.exit(1); });

// Starts `troupe serve` in work_dir/name on `database` with `config` merged over the cluster basics;
// answers { name, proc, port, err_file } once it listens.
export async function start_node(troupe, work_dir, name, database, config) {
  const dir = path.join(work_dir, name);
  fs.mkdirSync(dir, { recursive: true });
  const full = { store: { postgres_url: database }, cluster: { port: 0, secret: shared_secret }, ...config };
  fs.writeFileSync(path.join(dir, 'troupe.json'), JSON.stringify(full));
  const err = fs.openSync(path.join(dir, 'troupe.err'), 'w');
  const env = { ...process.env };
  delete env.TROUPE_POSTGRES_URL; // it would win over the config's database
  const proc = spawn(troupe, ['serve', '--config', path.join(dir, 'troupe.json'), '--port', '0', '--data-dir',
    path.join(dir, 'data')], { stdio: ['ignore', 'pipe', err], env });
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
  started.push(node);
  return node;
}

// Stops a node with SIGTERM and waits for it to exit.
export async function stop_node(node) {
  if (node.proc.exitCode !== null) return;
  const exited = new Promise((resolve) => node.proc.once('exit', resolve));
  node.proc.kill('SIGTERM');
  await exited;
}
