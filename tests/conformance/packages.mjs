// The conformance tier's npm packages (tests/conformance/package.json), found in its node_modules.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const node_modules = path.join(here, 'node_modules');

// The file a package's bin entry names, e.g. @modelcontextprotocol/server-everything → …/dist/index.js.
export function package_bin(pkg) {
  const dir = path.join(node_modules, pkg);
  const manifest_file = path.join(dir, 'package.json');
  if (!fs.existsSync(manifest_file))
    throw new Error(`${pkg} is not installed: run \`npm ci\` in ${here}`);
  const { bin } = JSON.parse(fs.readFileSync(manifest_file, 'utf8'));
  const rel = typeof bin === 'string' ? bin : Object.values(bin ?? {})[0];
  if (!rel) throw new Error(`${pkg} declares no bin entry`);
  return path.join(dir, rel);
}
