// SPDX-License-Identifier: Apache-2.0
/*
 * failover_client.js - ali-ons 3.12.0 as tests/integration/failover.py uses it
 * while the master of a broker group is killed again and again.
 *
 *   node failover_client.js produce NS TOPIC OUT STOPFILE
 *       sends one message at a time (body and key "fo-<n>") until STOPFILE
 *       exists; every SEND_OK appends {"k": key, "s": ms sent, "t": ms answered,
 *       "q": queue, "b": brokerName, "id": offsetMsgId (its store host)} to OUT (one line each, flushed before the next send). Prints
 *       {"ok": n, "failed": n, "errors": [...]} at the end.
 *   node failover_client.js consume NS TOPIC GROUP KEYSFILE SECS
 *       a fresh group from the first offset until every key of KEYSFILE
 *       (one per line) came or SECS passed; prints {"got": n, "missing": [...]}.
 *
 * Routes are refreshed every second (pollNameServerInteval, ali-ons' spelling):
 * a client follows a new master within one refresh (docs/failover.md).
 */
'use strict';

const fs = require('fs');
const path = require('path');

const { Producer, Consumer, Message } = require(path.join(__dirname, 'node_modules', 'ali-ons'));

const quiet = { info() {}, warn() {}, debug() {}, error() {} };
const errors = [];

function opts(ns) {
  return {
    nameSrv: ns,
    httpclient: {},
    logger: quiet,
    heartbeatBrokerInterval: 2000,
    pollNameServerInteval: 1000,
    rebalanceInterval: 500,
    persistConsumerOffsetInterval: 500,
  };
}

function sleep(ms) {
  return new Promise(r => setTimeout(r, ms));
}

async function produce(ns, topic, out, stop) {
  const p = new Producer({ ...opts(ns), producerGroup: 'fo_pg', sendMsgTimeout: 1500,
    retryTimesWhenSendFailed: 0 });
  p.on('error', e => errors.push(`producer: ${e.message}`));
  const fd = fs.openSync(out, 'a');
  let ok = 0;
  let failed = 0;
  let n = 0;
  try {
    await p.ready();
  } catch (e) {
    errors.push(`ready: ${e.message}`);
  }
  while (!fs.existsSync(stop)) {
    const key = `fo-${n++}`;
    const m = new Message(topic, 'TagA', key);
    m.keys = [key];
    const sent = Date.now();
    try {
      const r = await p.send(m);
      if (r.sendStatus === 'SEND_OK') {
        ok++;
        const b = r.messageQueue ? r.messageQueue.brokerName : '';
        fs.writeSync(fd, JSON.stringify({ k: key, s: sent, t: Date.now(),
          q: r.messageQueue ? r.messageQueue.queueId : -1, b, id: r.msgId }) + '\n');
      } else {
        failed++;
      }
    } catch (e) {
      failed++;
      if (errors.length < 20) errors.push(`${key}: ${e.message}`.slice(0, 200));
      await sleep(50);
    }
  }
  fs.closeSync(fd);
  console.log(JSON.stringify({ ok, failed, errors }));
  p.close().catch(() => {});
  setTimeout(() => process.exit(0), 200);
}

async function consume(ns, topic, group, keysFile, secs) {
  const want = new Set(fs.readFileSync(keysFile, 'utf8').split('\n').filter(Boolean));
  const got = new Set();
  const c = new Consumer({ ...opts(ns), consumerGroup: group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET' });
  c.on('error', e => errors.push(`consumer: ${e.message}`));
  c.subscribe(topic, '*', async msg => { got.add(msg.body.toString()); });
  const end = Date.now() + secs * 1000;
  try {
    await c.ready();
  } catch (e) {
    errors.push(`ready: ${e.message}`);
  }
  const missing = () => [...want].filter(k => !got.has(k));
  while (missing().length > 0 && Date.now() < end) await sleep(200);
  console.log(JSON.stringify({ got: got.size, missing: missing().slice(0, 50),
    nmissing: missing().length, errors: errors.slice(0, 10) }));
  c.close().catch(() => {});
  setTimeout(() => process.exit(0), 200);
}

const a = process.argv.slice(2);
if (a[0] === 'produce') produce(a[1], a[2], a[3], a[4]);
else if (a[0] === 'consume') consume(a[1], a[2], a[3], a[4], Number(a[5]));
else {
  console.error('usage: failover_client.js produce|consume ...');
  process.exit(2);
}
