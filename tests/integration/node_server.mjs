// Starts prefixd-server ($PREFIXD_SERVER) for the node.js integration tests: one server on a
// free loopback port with a private temporary directory.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

// The reason a test file's tests skip when a dependency is missing; under CI=true it throws
// instead, which fails the file, so a CI run cannot pass without having run its tests.
export function skipUnlessCi(reason) {
  if (process.env.CI === 'true') throw new Error(`${reason} (CI=true needs it)`);
  console.log(`# SKIP: ${reason}`);
  return reason;
}

// ioredis and node-redis from tests/integration/node_modules, or the reason a test file skips.
export async function loadNpmClients() {
  try {
    return { IORedis: (await import('ioredis')).default, nodeRedis: await import('redis'),
      skipReason: false };
  } catch (err) {
    const skipReason = skipUnlessCi(`ioredis/redis npm packages are not installed (run ` +
      `"npm install --no-audit --no-fund" in tests/integration): ${err.message}`);
    return { IORedis: null, nodeRedis: null, skipReason };
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A free loopback port below the kernel's ephemeral range (32768 and up by default), where no
// client connection's own port lands; random, so parallel tests rarely pick the same one. A port
// taken anyway shows when the server's bind fails (Server.start tries another).
export async function freePort() {
  for (let attempt = 0; attempt < 64; attempt++) {
    const port = 10000 + Math.floor(Math.random() * 22000);
    const free = await new Promise((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error('no free loopback port in 10000-31999');
}

// Whether the server logging to `logPath` wrote that it is ready after byte `since`. Until it
// has, whatever answers on its port is someone else's: the port was taken between picking and
// binding it, and this server is about to fail its bind.
function saidReady(logPath, since) {
  try {
    return fs.readFileSync(logPath).subarray(since).includes('Ready to accept connections');
  } catch {
    return false;
  }
}

// Resolves with the first bytes the server sends back to `request`, or null.
export function exchange(port, request, timeoutMs) {
  return new Promise((resolve) => {
    const sock = net.createConnection({ host: '127.0.0.1', port });
    const timer = setTimeout(() => { sock.destroy(); resolve(null); }, timeoutMs);
    sock.once('error', () => { clearTimeout(timer); resolve(null); });
    sock.once('connect', () => sock.write(request));
    sock.once('data', (data) => { clearTimeout(timer); sock.destroy(); resolve(data); });
  });
}

// One prefixd-server on a free loopback port with a private temporary directory.
export class Server {
  // `port`: listen there (a cluster node's is in its peers' nodes.conf), else on a free one;
  // `args`: extra flags; `root`: the directory to use (its data in root/data).
  async start({ port = 0, args = [], root = null } = {}) {
    const binary = process.env.PREFIXD_SERVER;
    if (!binary) throw new Error('set PREFIXD_SERVER to the prefixd-server binary');
    this.root = root || fs.mkdtempSync(path.join(os.tmpdir(), 'prefixd-node-'));
    this.logPath = path.join(this.root, 'server.log');
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = port || await freePort();
      const since = fs.existsSync(this.logPath) ? fs.statSync(this.logPath).size : 0;
      const log = fs.openSync(this.logPath, 'a');
      this.proc = spawn(binary, ['--bind', '127.0.0.1', '--port', String(this.port),
        '--dir', path.join(this.root, 'data'), ...args], { stdio: ['ignore', log, log] });
      fs.closeSync(log);
      this.exit = new Promise((resolve) => this.proc.once('exit', (code, signal) =>
        resolve({ code, signal })));
      let exited = false;
      this.exit.then(() => { exited = true; });
      const deadline = Date.now() + 10000;
      while (Date.now() < deadline && !exited) {
        if (!saidReady(this.logPath, since)) {
          await sleep(20);
          continue;
        }
        const reply = await exchange(this.port, 'PING\r\n', 1000);
        if (reply && reply.toString().startsWith('+PONG')) return;
        await sleep(20);
      }
      if (!exited) {
        await this.stop();
        throw new Error(`prefixd-server did not answer PING in 10 s:\n${this.log()}`);
      }
      if (!this.log().includes('in use')) {
        throw new Error(`prefixd-server exited during startup:\n${this.log()}`);
      }
    }
    throw new Error('no free port for prefixd-server in 5 attempts');
  }

  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8').slice(-4000);
    } catch {
      return '';
    }
  }

  // Stops with SIGTERM (SIGKILL after 10 s); resolves with the exit code or signal.
  async stop() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) {
      return this.exit ? this.exit : { code: 0 };
    }
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 10000);
    const result = await this.exit;
    clearTimeout(timer);
    return result;
  }

  cleanup() {
    if (this.root) fs.rmSync(this.root, { recursive: true, force: true });
  }
}

