// Three prefixd nodes as a Redis Cluster under the npm cluster clients: ioredis' Cluster (which
// routes our commands by their first key or follows MOVED) and node-redis' createCluster (which
// needs sendCommand's firstKey). Every key must land on the node serving its slot. Skips when
// the packages are missing (fails under CI=true).
// Run: PREFIXD_SERVER=build/prefixd-server node --test tests/integration/
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Server, freePort, loadNpmClients } from './node_server.mjs';

const { IORedis, nodeRedis, skipReason } = await loadNpmClients();

const ids = ['1', '2', '3'].map((d) => d.padStart(40, '0'));
const ranges = ['0-5460', '5461-10922', '10923-16383'];
const nodes = ids.map(() => new Server());

describe('npm cluster clients against three prefixd nodes', { skip: skipReason }, () => {
  let direct = [];
  before(async () => {
    const ports = [];
    for (let i = 0; i < 3; i++) ports.push(await freePort());
    for (let i = 0; i < 3; i++) {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), 'prefixd-node-cluster-'));
      fs.mkdirSync(path.join(root, 'data'));
      const lines = ids.map((id, j) => `${id} 127.0.0.1:${ports[j]}@0 ` +
        `${i === j ? 'myself,master' : 'master'} - 0 0 ${j + 1} connected ${ranges[j]}\n`);
      fs.writeFileSync(path.join(root, 'data', 'nodes.conf'),
        lines.join('') + 'vars currentEpoch 3 lastVoteEpoch 0\n');
      await nodes[i].start({ port: ports[i], root, args: ['--cluster-enabled', 'yes'] });
    }
    direct = nodes.map((n) => new IORedis({ host: '127.0.0.1', port: n.port, lazyConnect: true }));
    for (const d of direct) await d.connect();
  });
  after(async () => {
    for (const d of direct) d.disconnect();
    for (const n of nodes) {
      const { code } = await n.stop();
      const log = n.log();
      n.cleanup();
      assert.equal(code, 0, log);
    }
  });

  // The direct connection to the node that serves `key`, by the cluster's own slot map.
  async function owner(key) {
    const slot = await direct[0].call('CLUSTER', 'KEYSLOT', key);
    const slots = await direct[0].call('CLUSTER', 'SLOTS');
    const [, , [, port]] = slots.find(([start, end]) => start <= slot && slot <= end);
    return direct[nodes.findIndex((n) => n.port === port)];
  }

  test('ioredis Cluster routes SSM.PREFIX and strings by their first key', async () => {
    const cluster = new IORedis.Cluster([{ host: '127.0.0.1', port: nodes[0].port }]);
    const blobs = new Map();
    for (let i = 0; i < 30; i++) {
      const sid = `io-sess-${i}`;
      blobs.set(sid, crypto.randomBytes(2000 + i));
      assert.equal(await cluster.call('SSM.PREFIX.STORE', sid, '0', blobs.get(sid)), 'OK');
      assert.equal(await cluster.set(`io-str-${i}`, `v${i}`), 'OK');
    }
    const seen = new Set();
    for (const [sid, blob] of blobs) {
      assert.deepEqual(await cluster.callBuffer('SSM.PREFIX.FETCH', sid, '0'), blob);
      const node = await owner(sid);
      assert.deepEqual(await node.callBuffer('SSM.PREFIX.FETCH', sid, '0'), blob);
      seen.add(node);
    }
    assert.equal(seen.size, 3);
    for (let i = 0; i < 30; i++) {
      assert.equal(await (await owner(`io-str-${i}`)).get(`io-str-${i}`), `v${i}`);
    }
    cluster.disconnect();
  });

  test('node-redis createCluster routes sendCommand by firstKey', async () => {
    const cluster = nodeRedis.createCluster({
      rootNodes: [{ url: `redis://127.0.0.1:${nodes[1].port}` }],
    });
    cluster.on('error', () => {});
    await cluster.connect();
    const buffers = cluster.withTypeMapping({ [nodeRedis.RESP_TYPES.BLOB_STRING]: Buffer });
    for (let i = 0; i < 30; i++) {
      const sid = `nr-sess-${i}`;
      const blob = crypto.randomBytes(1500 + i);
      assert.equal(await cluster.sendCommand(sid, false,
        ['SSM.PREFIX.STORE', sid, '0', blob]), 'OK');
      const back = await buffers.sendCommand(sid, true, ['SSM.PREFIX.FETCH', sid, '0']);
      assert.deepEqual(back, blob);
      assert.deepEqual(await (await owner(sid)).callBuffer('SSM.PREFIX.FETCH', sid, '0'), blob);
      await cluster.set(`nr-str-${i}`, `w${i}`);
      assert.equal(await cluster.get(`nr-str-${i}`), `w${i}`);
    }
    await cluster.disconnect();
  });
});
