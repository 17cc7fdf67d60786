// SPDX-License-Identifier: Apache-2.0
/*
 * acl_client.js - one ali-ons 3.12.0 producer or consumer with or without
 * credentials, for tests/integration/acl.py (RocketMQ's plain ACL).
 *
 *   node acl_client.js produce NS TOPIC N [AK SK]   -> {"ok": n, "errors": [...]}
 *   node acl_client.js consume NS TOPIC GROUP N SECS [AK SK]
 *                                                   -> {"got": n, "errors": [...]}
 *
 * One JSON line on stdout; ali-ons' own errors are collected, not thrown.
 * SP_TLS_PORT/SP_TLS_CA: the broker's port speaks TLS (below).
 */
'use strict';

const net = require('net');
const path = require('path');
const tls = require('tls');

/*
 * SP_TLS_PORT=P SP_TLS_CA=FILE: connections to port P speak TLS (node's tls module under
 * ali-ons' own socket code), trusting the CA in FILE.
 */
if (process.env.SP_TLS_PORT) {
  const fs = require('fs');
  const port = Number(process.env.SP_TLS_PORT);
  const ca = fs.readFileSync(process.env.SP_TLS_CA);
  const plain = net.connect;
  net.connect = net.createConnection = function (...args) {
    const o = typeof args[0] === 'object' ? args[0] : { port: args[0], host: args[1] };
    if (Number(o.port) !== port) return plain.apply(net, args);
    return tls.connect({ host: o.host, port, ca, servername: undefined, checkServerIdentity: () => undefined });
  };
}

const { Producer, Consumer, Message } = require(path.join(__dirname, 'node_modules', 'ali-ons'));

const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const errors = [];

function opts(ns, ak, sk) {
  const o = {
    nameSrv: ns,
    httpclient: {},
    logger: quiet,
    heartbeatBrokerInterval: 2000,
    pollNameServerInteval: 2000,
    rebalanceInterval: 500,
    persistConsumerOffsetInterval: 500,
  };
  if (ak) {
    o.accessKey = ak;
    o.secretKey = sk;
  }
  return o;
}

function timeout(ms, what) {
  return new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: timeout`)), ms));
}

async function produce(ns, topic, n, ak, sk) {
  const p = new Producer({ ...opts(ns, ak, sk), producerGroup: 'acl_pg', sendMsgTimeout: 3000,
    retryTimesWhenSendFailed: 0 });
  p.on('error', e => errors.push(`producer: ${e.message}`));
  let ok = 0;
  try {
    await Promise.race([p.ready(), timeout(20000, 'ready')]);
    for (let i = 0; i < n; i++) {
      try {
        const r = await p.send(new Message(topic, 'TagA', `acl-${i}`));
        if (r.sendStatus === 'SEND_OK') ok++;
      } catch (e) {
        errors.push(`send ${i}: ${e.name}: ${e.message}`);
      }
    }
  } catch (e) {
    errors.push(`producer: ${e.message}`);
  }
  console.log(JSON.stringify({ ok, errors: errors.slice(0, 20) }));
  p.close().catch(() => {});
  setTimeout(() => process.exit(0), 200);
}

async function consume(ns, topic, group, n, secs, ak, sk) {
  const c = new Consumer({ ...opts(ns, ak, sk), consumerGroup: group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  c.on('error', e => errors.push(`consumer: ${e.message}`));
  let got = 0;
  c.subscribe(topic, '*', async () => { got++; });
  const end = Date.now() + secs * 1000;
  try {
    await Promise.race([c.ready(), timeout(20000, 'ready')]);
  } catch (e) {
    errors.push(`consumer: ${e.message}`);
  }
  while (got < n && Date.now() < end) await new Promise(r => setTimeout(r, 100));
  console.log(JSON.stringify({ got, errors: errors.slice(0, 20) }));
  c.close().catch(() => {});
  setTimeout(() => process.exit(0), 200);
}

const a = process.argv.slice(2);
if (a[0] === 'produce') produce(a[1], a[2], Number(a[3]), a[4], a[5]);
else if (a[0] === 'consume') consume(a[1], a[2], a[3], Number(a[4]), Number(a[5]), a[6], a[7]);
else {
  console.error('usage: acl_client.js produce|consume ...');
  process.exit(2);
}
