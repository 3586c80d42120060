// The SDK-built HTTP MCP server (http_mcp_server.mjs) as a child of a conformance scenario: the
// scenario stops it, and a failure shows its output (one stderr line per HTTP request it served).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fake_upstream } from '../integration/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

// The harness's process wrapper (output capture, describe(), stop()) is its exported classes' base.
const harness_child = Object.getPrototypeOf(fake_upstream);

class http_mcp_server extends harness_child {
  constructor(args) {
    super('http mcp server', process.execPath, [path.join(here, 'http_mcp_server.mjs'), '--port', '0', ...args], { env: process.env });
    this.url = null;
  }

  async ready() {
    const m = await this.line(/^mcp http listening on (http:\/\/\S+)$/);
    this.url = m[1];
    return this;
  }
}

export async function start_http_mcp_server(s, args = []) {
  const server = new http_mcp_server(args);
  s.children.push(server);
  return server.ready();
}
