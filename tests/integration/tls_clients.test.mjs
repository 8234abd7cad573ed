// prefixd over TLS with Node's tls module and ioredis (tls option): client certificate required,
// binary blobs both ways, a plain-text client on the TLS port. Certificates come from
// tls/make_certs.sh. Skips when ioredis is not installed (npm install in tests/integration);
// fails then under CI=true.
// Run: PREFIXD_SERVER=build/prefixd-server node --test tests/integration/tls_clients.test.mjs
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

import { freePort, skipUnlessCi, sleep } from './node_server.mjs';

let IORedis = null;
let skipReason = false;
try {
  IORedis = (await import('ioredis')).default;
} catch (err) {
  skipReason = skipUnlessCi(
    `ioredis is not installed (npm install in tests/integration): ${err.message}`);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const state = {};
const cert = (name) => fs.readFileSync(path.join(state.certs, name));

function tlsOptions(withClientCert) {
  const options = { host: '127.0.0.1', port: state.tlsPort, ca: cert('ca.crt'),
    servername: 'localhost' };
  if (withClientCert) Object.assign(options, { cert: cert('client.crt'), key: cert('client.key') });
  return options;
}

describe('TLS clients', { skip: skipReason }, () => {
  before(async () => {
    const binary = process.env.PREFIXD_SERVER;
    if (!binary) throw new Error('set PREFIXD_SERVER to the prefixd-server binary');
    state.root = fs.mkdtempSync(path.join(os.tmpdir(), 'prefixd-node-tls-'));
    state.certs = path.join(state.root, 'certs');
    execFileSync(path.join(here, 'tls', 'make_certs.sh'), [state.certs]);
    state.port = await freePort();
    state.tlsPort = await freePort();
    const log = fs.openSync(path.join(state.root, 'server.log'), 'a');
    state.proc = spawn(binary, ['--bind', '127.0.0.1', '--port', String(state.port),
      '--tls-port', String(state.tlsPort), '--dir', path.join(state.root, 'data'),
      '--tls-cert-file', path.join(state.certs, 'server.crt'),
      '--tls-key-file', path.join(state.certs, 'server.key'),
      '--tls-ca-cert-file', path.join(state.certs, 'ca.crt')], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    state.exit = new Promise((resolve) => state.proc.once('exit', (code) => resolve(code)));
    for (let i = 0; i < 200; i++) {
      const ok = await new Promise((resolve) => {
        const s = tls.connect(tlsOptions(true), () => { s.end(); resolve(true); });
        s.once('error', () => resolve(false));
      });
      if (ok) return;
      await sleep(25);
    }
    throw new Error('prefixd-server did not accept TLS in 5 s');
  });

  after(async () => {
    state.proc.kill('SIGTERM');
    assert.equal(await state.exit, 0);
    fs.rmSync(state.root, { recursive: true, force: true });
  });

  test('ioredis with a client certificate: binary blobs and a pipeline', async () => {
    const client = new IORedis({ ...tlsOptions(false), tls: tlsOptions(true),
      lazyConnect: true, maxRetriesPerRequest: 0 });
    await client.connect();
    assert.equal(await client.ping(), 'PONG');
    const blob = crypto.randomBytes((2 << 20) + 7);
    assert.equal(await client.call('SSM.PREFIX.STORE', 'node', '0', blob), 'OK');
    const back = await client.callBuffer('SSM.PREFIX.FETCH', 'node', '0');
    assert.ok(blob.equals(back));
    const pipe = client.pipeline();
    for (let i = 0; i < 100; i++) pipe.call('SSM.PREFIX.STORE', 'node', String(i + 1), `v${i}`);
    const results = await pipe.exec();
    assert.ok(results.every(([err, r]) => err === null && r === 'OK'));
    await client.quit();
  });

  test('a connection without a client certificate is refused', async () => {
    const outcome = await new Promise((resolve) => {
      const s = tls.connect(tlsOptions(false), () => {
        s.write('PING\r\n');
      });
      s.once('data', (d) => resolve(`data:${d}`));
      s.once('error', (e) => resolve(`error:${e.code || e.message}`));
      s.once('close', () => resolve('closed'));
    });
    assert.ok(!outcome.includes('PONG'), outcome);
  });

  test('plain text on the TLS port is dropped', async () => {
    const outcome = await new Promise((resolve) => {
      const s = net.createConnection({ host: '127.0.0.1', port: state.tlsPort },
        () => s.write('PING\r\n'));
      let got = '';
      s.on('data', (d) => { got += d; });
      s.once('error', () => resolve(got));
      s.once('close', () => resolve(got));
      setTimeout(() => { s.destroy(); resolve('timeout'); }, 5000);
    });
    assert.ok(!outcome.includes('PONG') && outcome !== 'timeout', outcome);
  });
});
