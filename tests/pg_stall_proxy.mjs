// A TCP relay in front of PostgreSQL that stalls traffic on command with every connection left open,
// as a network partition does (CJ-50). Prints `stall proxy on <port>, control on <port>` once ready.
// Control: POST /stall holds every byte in both directions (and new connections) until POST /resume.
//   node tests/pg_stall_proxy.mjs --target 127.0.0.1:5432
import http from 'node:http';
import net from 'node:net';

const target = process.argv[process.argv.indexOf('--target') + 1];
if (!target || !target.includes(':')) {
  console.error('usage: pg_stall_proxy.mjs --target HOST:PORT');
  process.exit(2);
}
const [target_host, target_port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];

let stalled = false;
const pairs = new Set(); // {client, server, held: [[to, chunk], ...]}

// While stalled nothing is written on: what arrives is held (and its source paused), and written in
// order on resume. Without pipe(), whose drain handling would resume a paused source.
function relay_from(pair, from, to) {
  from.on('data', (chunk) => {
    if (stalled) {
      pair.held.push([to, chunk]);
      from.pause();
    } else {
      to.write(chunk);
    }
  });
}

function resume(pair) {
  for (const [to, chunk] of pair.held) to.write(chunk);
  pair.held = [];
  pair.client.resume();
  pair.server.resume();
}

const relay = net.createServer((client) => {
  const server = net.connect(target_port, target_host);
  const pair = { client, server, held: [] };
  pairs.add(pair);
  relay_from(pair, client, server);
  relay_from(pair, server, client);
  const close = () => {
    pairs.delete(pair);
    client.destroy();
    server.destroy();
  };
  client.on('error', close).on('close', close);
  server.on('error', close).on('close', close);
});

const control = http.createServer((req, res) => {
  if (req.method === 'POST' && (req.url === '/stall' || req.url === '/resume')) {
    stalled = req.url === '/stall';
    if (!stalled) for (const pair of pairs) resume(pair);
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ stalled, connections: pairs.size }));
  }
  res.writeHead(404);
  res.end();
});

relay.listen(0, '127.0.0.1', () => {
  control.listen(0, '127.0.0.1', () => {
    console.log(`stall proxy on ${relay.address().port}, control on ${control.address().port}`);
  });
});
