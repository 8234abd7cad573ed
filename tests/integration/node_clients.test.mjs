// Black-box test of prefixd with the npm clients ioredis and node-redis, over RESP2 and RESP3:
// their connect handshakes, bit-exact binary blobs through call()/sendCommand(), nil on a miss,
// MFETCH arrays and pipelines. Needs `npm install` in tests/integration; skips when the packages
// are missing (fails under CI=true).
// Run: PREFIXD_SERVER=build/prefixd-server node --test tests/integration/
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';

import { Server, loadNpmClients } from './node_server.mjs';

const { IORedis, nodeRedis, skipReason } = await loadNpmClients();

const server = new Server();
const SIZES = [0, 1, 1024, 1 << 20, 8 << 20];

describe('npm clients against prefixd', { skip: skipReason }, () => {
  before(async () => { await server.start(); });
  after(async () => {
    const { code, signal } = await server.stop();
    const log = server.log();
    server.cleanup();
    assert.equal(code, 0, `prefixd-server exited with code ${code} signal ${signal}:\n${log}`);
  });

  for (const protocol of [2, 3]) {
    describe(`ioredis protocol ${protocol}`, () => {
      let r;
      before(async () => {
        r = new IORedis({
          host: '127.0.0.1', port: server.port, protocol, lazyConnect: true,
          maxRetriesPerRequest: 1, retryStrategy: () => null, connectTimeout: 5000,
        });
        r.on('error', () => {});
        await r.connect();
      });
      after(async () => { await r.quit(); });

      test('handshake leaves a usable connection', async () => {
        assert.equal(await r.ping(), 'PONG');
        const info = await r.call('CLIENT', 'INFO');
        assert.match(String(info), new RegExp(` resp=${protocol}`));
        assert.match(String(info), / lib-name=ioredis /);
      });

      test('store and fetch binary blobs bit-exactly', async () => {
        for (const size of SIZES) {
          const blob = crypto.randomBytes(size);
          assert.equal(await r.call('SSM.PREFIX.STORE', `io${protocol}`, '4', blob), 'OK');
          const got = await r.callBuffer('SSM.PREFIX.FETCH', `io${protocol}`, '4');
          assert.ok(Buffer.isBuffer(got), `size ${size}: expected a Buffer`);
          assert.equal(got.length, size);
          assert.ok(got.equals(blob), `blob of ${size} bytes came back altered`);
        }
        const sid = Buffer.from([0, 0xff, 0x0d, 0x0a, 0x41]);
        const blob = Buffer.alloc(100000, 0xff);
        assert.equal(await r.call('SSM.PREFIX.STORE', sid, '0', blob), 'OK');
        assert.ok((await r.callBuffer('SSM.PREFIX.FETCH', sid, '0')).equals(blob));
      });

      test('nil on a miss, MFETCH array, LAYERS', async () => {
        assert.equal(await r.callBuffer('SSM.PREFIX.FETCH', `io-miss${protocol}`, '0'), null);
        const a = crypto.randomBytes(5000);
        const b = Buffer.alloc(0);
        assert.equal(await r.call('SSM.PREFIX.MSTORE', `iom${protocol}`, '0', a, '2', b), 'OK');
        const got = await r.callBuffer('SSM.PREFIX.MFETCH', `iom${protocol}`, '0', '1', '2');
        assert.equal(got.length, 3);
        assert.ok(got[0].equals(a));
        assert.equal(got[1], null);
        assert.ok(Buffer.isBuffer(got[2]) && got[2].length === 0);
        const layers = await r.call('SSM.PREFIX.LAYERS', `iom${protocol}`);
        assert.deepEqual(layers, [0, 5000, 2, 0]);
      });

      test('pipeline', async () => {
        const blobs = Array.from({ length: 20 }, (_, i) => crypto.randomBytes(i * 3000));
        const p = r.pipeline();
        blobs.forEach((blob, i) => p.call('SSM.PREFIX.STORE', `iop${protocol}`, String(i), blob));
        blobs.forEach((_, i) => p.callBuffer('SSM.PREFIX.FETCH', `iop${protocol}`, String(i)));
        const results = await p.exec();
        results.forEach(([err]) => assert.equal(err, null));
        blobs.forEach((blob, i) => assert.equal(results[i][1], 'OK'));
        blobs.forEach((blob, i) => assert.ok(results[20 + i][1].equals(blob), `layer ${i}`));
      });

      test('errors reject', async () => {
        await assert.rejects(r.call('SSM.PREFIX.FETCH', 's', 'x'),
          /invalid layer 'x': must be an integer from 0 to 2147483647/);
      });
    });
  }

  for (const RESP of [2, 3]) {
    describe(`node-redis RESP${RESP}`, () => {
      let client;
      let buffers;
      before(async () => {
        client = nodeRedis.createClient({
          socket: { host: '127.0.0.1', port: server.port, reconnectStrategy: false,
            connectTimeout: 5000 },
          RESP,
        });
        client.on('error', () => {});
        await client.connect();
        buffers = client.withTypeMapping({ [nodeRedis.RESP_TYPES.BLOB_STRING]: Buffer });
      });
      after(async () => { await client.quit(); });

      test('handshake leaves a usable connection', async () => {
        assert.equal(await client.ping(), 'PONG');
        const info = String(await client.sendCommand(['CLIENT', 'INFO']));
        assert.match(info, new RegExp(` resp=${RESP}`));
        assert.match(info, / lib-name=node-redis/);
      });

      test('store and fetch binary blobs bit-exactly', async () => {
        for (const size of SIZES) {
          const blob = crypto.randomBytes(size);
          assert.equal(await client.sendCommand(['SSM.PREFIX.STORE', `nr${RESP}`, '6', blob]),
            'OK');
          const got = await buffers.sendCommand(['SSM.PREFIX.FETCH', `nr${RESP}`, '6']);
          assert.ok(Buffer.isBuffer(got), `size ${size}: expected a Buffer`);
          assert.equal(got.length, size);
          assert.ok(got.equals(blob), `blob of ${size} bytes came back altered`);
        }
        const sid = Buffer.from([0, 1, 2, 0xfe, 0xff]);
        const blob = Buffer.alloc(70000, 0);
        assert.equal(await client.sendCommand(['SSM.PREFIX.STORE', sid, '0', blob]), 'OK');
        assert.ok((await buffers.sendCommand(['SSM.PREFIX.FETCH', sid, '0'])).equals(blob));
      });

      test('nil on a miss and MFETCH array', async () => {
        assert.equal(await buffers.sendCommand(['SSM.PREFIX.FETCH', `nr-miss${RESP}`, '0']), null);
        const a = crypto.randomBytes(4096);
        assert.equal(await client.sendCommand(['SSM.PREFIX.MSTORE', `nrm${RESP}`, '1', a]), 'OK');
        const got = await buffers.sendCommand(['SSM.PREFIX.MFETCH', `nrm${RESP}`, '0', '1']);
        assert.ok(Array.isArray(got));
        assert.equal(got.length, 2);
        assert.equal(got[0], null);
        assert.ok(got[1].equals(a));
      });

      test('concurrent commands are pipelined on one connection', async () => {
        const blobs = Array.from({ length: 20 }, (_, i) => crypto.randomBytes(i * 2500 + 1));
        await Promise.all(blobs.map((blob, i) =>
          client.sendCommand(['SSM.PREFIX.STORE', `nrp${RESP}`, String(i), blob])));
        const got = await Promise.all(blobs.map((_, i) =>
          buffers.sendCommand(['SSM.PREFIX.FETCH', `nrp${RESP}`, String(i)])));
        blobs.forEach((blob, i) => assert.ok(got[i].equals(blob), `layer ${i}`));
      });

      test('errors reject', async () => {
        await assert.rejects(client.sendCommand(['SSM.PREFIX.FETCH', 's', '-5']),
          /invalid layer '-5'/);
      });
    });
  }
});
