// SPDX-License-Identifier: Apache-2.0
/*
 * alions_test.js - sprocket against a real RocketMQ 4.x client: ali-ons 3.12.0
 * (node, open-source mode: a NameServer address, no Aliyun keys), and
 * libsprocket across the two protocols (sp_xtool).
 *
 * It starts a real sprocket-namesrv and sprocket-broker (binaries from
 * SP_NAMESRV_BIN and SP_BROKER_BIN, sp_xtool from SP_XTOOL_BIN, all set by
 * meson) in a private /tmp dir on free ports, with the topics pre-created in
 * the broker's topics.json (ali-ons does not auto-create topics), and runs:
 *
 *   a  10,000 messages with tags TagA/TagB alternating and unique keys; a
 *      clustering consumer subscribed to TagA gets exactly the TagA ones,
 *      every key once, and its offsets are committed at the broker
 *   b  the broker is stopped (SIGTERM, must exit 0) and started on the same
 *      store; the committed offsets are still there; more messages are sent
 *      (before and while a new consumer of the group runs); that consumer
 *      gets the new TagA ones and none of the old ones
 *   c  two consumers of one group share the topic's queues (heartbeats +
 *      GET_CONSUMER_LIST_BY_GROUP): each queue is consumed by exactly one of
 *      them, as AllocateMessageQueueAveragely says; when one leaves
 *      (UNREGISTER_CLIENT) the other takes every queue
 *   d  libsprocket (sp_xtool produce, dataplane) -> ali-ons consumer, and
 *      ali-ons producer -> sp_xtool consume (pull and push): bodies byte-equal
 *      (a body ali-ons compressed is compared inflated), tags, keys, user
 *      properties, queue ids and offsets equal
 *   e  replication (docs/replication.md): the broker restarts as SYNC_MASTER
 *      and a slave (brokerId 1, its own store and ports) follows it; an
 *      ali-ons group consumes part; ali-ons sends while the master is
 *      SIGKILLed mid-load; a fresh ali-ons group reads every message that
 *      got SEND_OK from the slave while the master is down; the master
 *      restarts on its store and the first group goes on with nothing
 *      skipped
 *   f  delayTimeLevel 1: SEND_OK, consumed not before 1 s, DELAY gone;
 *      setStartDeliverTime 2 s ahead: SEND_OK, consumed not before its time,
 *      once
 *
 * A SEND_MESSAGE_V2 that fails (no answer within ali-ons' sendMsgTimeout,
 * 5 s here, say) fails the test even when ali-ons' own retry on another queue
 * then succeeds: the broker usually holds such a message twice.
 *
 * Everything prints as "ok - ..." or "FAIL: ..." lines with the details a
 * failure needs (counts, first missing keys, broker answers, the tails of the
 * daemons' logs and of ali-ons' warnings). Exits 1 on any failure, 0 when all
 * passed. Nothing here asserts a duration: the waits are generous upper
 * bounds and the whole run is capped (SP_COMPAT_BUDGET_S, default 150 s,
 * plus at most 20 s per daemon to stop).
 * Every process it starts is stopped, on failure too; the daemons also get
 * SIGKILL from the kernel if this process dies (setpriv --pdeathsig).
 *
 * Without tests/compat/node_modules (scripts/bootstrap.sh runs npm ci) it
 * fails: this test is never skipped. SP_COMPAT_KEEP=1 keeps the temp dir
 * (logs, store); SP_COMPAT_VERBOSE=1 logs ali-ons' info lines too;
 * SP_COMPAT_PHASES=a,b picks phases.
 */
'use strict';

const childProcess = require('child_process');
const dgram = require('dgram');
const events = require('events');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const util = require('util');

/* ---- ali-ons, or a clear failure ---- */

const ALIONS_VERSION = '3.12.0';
let ons;
{
  const modDir = path.join(__dirname, 'node_modules', 'ali-ons');
  let version = null;
  try {
    version = JSON.parse(fs.readFileSync(path.join(modDir, 'package.json'), 'utf8')).version;
  } catch (err) {
    console.log(`FAIL: ${modDir} is missing (${err.code || err.message}): ` +
      'run scripts/bootstrap.sh, which runs npm ci in tests/compat');
    process.exit(1);
  }
  if (version !== ALIONS_VERSION) {
    console.log(`FAIL: tests/compat/node_modules has ali-ons ${version}, package-lock.json ` +
      `pins ${ALIONS_VERSION}: run scripts/bootstrap.sh (npm ci in tests/compat)`);
    process.exit(1);
  }
  ons = require(modDir);
}
const { Producer, Consumer, Message } = ons;
// ali-ons adds a 'close' listener to its connection per request in flight; sendAll() keeps
// 32 in flight, over node's default warning threshold (10), which only makes noise.
events.defaultMaxListeners = 64;

/* ---- configuration ---- */

const BIN = {};
for (const [k, env] of [
  ['namesrv', 'SP_NAMESRV_BIN'], ['broker', 'SP_BROKER_BIN'], ['xtool', 'SP_XTOOL_BIN'],
  ['cli', 'SP_CLI_BIN'],
]) {
  BIN[k] = process.env[env];
  if (!BIN[k] || !fs.existsSync(BIN[k])) {
    console.log(`FAIL: ${env} must name the built binary (got ${JSON.stringify(BIN[k])}); ` +
      'run this through meson test');
    process.exit(1);
  }
}
const BUDGET_MS = 1000 * Number(process.env.SP_COMPAT_BUDGET_S || 150);
const VERBOSE = !!process.env.SP_COMPAT_VERBOSE;
const N_A = 10000; // phase a messages (half TagA)
const N_B = 200; // phase b messages per batch (two batches)
const N_C = 400; // phase c messages
const N_C2 = 80; // phase c messages after one consumer left
const N_D = 100; // phase d messages each way
const N_E = 3000; // phase e: sent at most (the master dies on the way)
const N_E_KILL = 400; // phase e: SEND_OKs before the master is killed

const T_TAG = 'CompatTagTopic';
const T_SHARE = 'CompatShareTopic';
const T_SP2ALI = 'CompatSpToAli';
const T_ALI2SP = 'CompatAliToSp';
const T_REPL = 'CompatReplTopic';
const T_TYPES = 'CompatTypesTopic';
const T_RESET = 'CompatResetTopic';
const N_G = 40; // phase g messages
const TOPICS = {
  [T_TAG]: 4, [T_SHARE]: 8, [T_SP2ALI]: 4, [T_ALI2SP]: 4, [T_REPL]: 4, [T_TYPES]: 4,
};

const BROKER_NAME = 'broker-compat';
const t0 = Date.now();
let phase = 'setup';
let failures = 0;
let tmpDir = null;

/* ---- reporting ---- */

function elapsed() {
  return ((Date.now() - t0) / 1000).toFixed(1) + 's';
}

function note(msg) {
  console.log(`# [${elapsed()}] ${msg}`);
}

function ok(msg) {
  console.log(`ok - ${phase}: ${msg}`);
}

class TestFailure extends Error {}

/* A failed check: reported, counted, and the phase stops. */
function fail(msg) {
  throw new TestFailure(`${phase}: ${msg}`);
}

function check(cond, msg) {
  if (!cond) {
    fail(msg);
  }
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/*
 * Poll @cond (may be async) every 50 ms until it is truthy. On timeout fail
 * with @what and, when given, the state @describe() reports.
 */
async function waitFor(cond, timeoutMs, what, describe) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) {
      return;
    }
    if (Date.now() >= end) {
      fail(`gave up after ${timeoutMs / 1000} s waiting for ${what}` +
        (describe ? `: ${await describe()}` : ''));
    }
    await sleep(50);
  }
}

/* ---- ali-ons' log: warnings and errors kept for the report ---- */

const aliLog = [];
let aliLogFd = null;
const aliLogger = {
  write(level, args) {
    const line = `${new Date().toISOString()} ${level} ${util.format(...args)}`;
    if (aliLogFd !== null) {
      fs.writeSync(aliLogFd, line + '\n');
    }
    if (level !== 'info' && level !== 'debug') {
      aliLog.push(line);
    }
  },
  info(...args) { if (VERBOSE) this.write('info', args); },
  debug() {},
  warn(...args) { this.write('warn', args); },
  error(...args) { this.write('error', args); },
};
const aliErrors = []; // 'error' events of producers and consumers

function onAliError(who) {
  return err => {
    const line = `${who}: ${err && err.name}: ${err && err.message}`;
    aliErrors.push(line);
    aliLogger.write('error-event', [line]);
  };
}

/* ---- processes ---- */

const procs = new Set(); // running children: {name, child, logPath, exit}
const hasSetpriv = fs.existsSync('/usr/bin/setpriv') || fs.existsSync('/bin/setpriv');

function spawnTracked(name, bin, args, stdio) {
  const argv = hasSetpriv ? ['--pdeathsig', 'KILL', '--', bin, ...args] : args;
  const child = childProcess.spawn(hasSetpriv ? 'setpriv' : bin, argv, { stdio });
  const p = { name, child, exit: null };
  p.exited = new Promise(resolve => {
    child.on('exit', (code, signal) => {
      p.exit = { code, signal };
      procs.delete(p);
      resolve(p.exit);
    });
    child.on('error', err => {
      p.exit = { code: null, signal: null, error: err };
      procs.delete(p);
      resolve(p.exit);
    });
  });
  procs.add(p);
  return p;
}

function logTail(file, lines) {
  try {
    const all = fs.readFileSync(file, 'utf8').split('\n');
    return all.slice(-lines - 1).join('\n');
  } catch (err) {
    return `(no log: ${err.message})`;
  }
}

/* A daemon with its output appended to @logPath; resolves once @readyLine is logged. */
async function startDaemon(name, bin, args, logPath, readyLine) {
  const start = fs.existsSync(logPath) ? fs.statSync(logPath).size : 0;
  const fd = fs.openSync(logPath, 'a');
  const p = spawnTracked(name, bin, args, ['ignore', fd, fd]);
  fs.closeSync(fd);
  p.logPath = logPath;
  let line = null;
  await waitFor(() => {
    if (p.exit) {
      fail(`${name} exited (${JSON.stringify(p.exit)}) before logging "${readyLine.trim()}"; ` +
        `its log:\n${logTail(logPath, 30)}`);
    }
    const text = fs.readFileSync(logPath, 'utf8').slice(start);
    const at = text.indexOf(readyLine);
    if (at < 0) {
      return false;
    }
    const eol = text.indexOf('\n', at);
    line = text.slice(text.lastIndexOf('\n', at) + 1, eol < 0 ? undefined : eol);
    return true;
  }, 30000, `${name} to log "${readyLine.trim()}"`, () => `its log:\n${logTail(logPath, 30)}`);
  return { proc: p, line };
}

/* SIGTERM, wait up to 20 s, then SIGKILL. Resolves to the exit {code, signal}. */
async function stopProc(p) {
  if (p.exit) {
    return p.exit;
  }
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => { if (!p.exit) p.child.kill('SIGKILL'); }, 20000);
  const exit = await p.exited;
  clearTimeout(timer);
  return exit;
}

/* Run @bin to completion (killed after @timeoutMs). Resolves {code, signal, stdout, stderr}. */
async function runTool(name, bin, args, timeoutMs) {
  const p = spawnTracked(name, bin, args, ['ignore', 'pipe', 'pipe']);
  let stdout = '';
  let stderr = '';
  p.child.stdout.on('data', d => { stdout += d; });
  p.child.stderr.on('data', d => { stderr += d; });
  const timer = setTimeout(() => { if (!p.exit) p.child.kill('SIGKILL'); }, timeoutMs);
  const exit = await p.exited;
  clearTimeout(timer);
  if (exit.error) {
    fail(`${name} could not run: ${exit.error.message}`);
  }
  return { ...exit, stdout, stderr };
}

function killAllSync() {
  for (const p of procs) {
    try {
      p.child.kill('SIGKILL');
    } catch (err) {
      // already gone
    }
  }
}

/* ---- ports ---- */

function canBind(kind, port) {
  return new Promise(resolve => {
    if (kind === 'tcp') {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    } else {
      const s = dgram.createSocket('udp4');
      s.once('error', () => { s.close(); resolve(false); });
      s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
    }
  });
}

/*
 * @n consecutive ports free for @kind, below the kernel's ephemeral range
 * (32768..) so that no outgoing connection takes them meanwhile.
 */
async function freePorts(kind, n) {
  for (let t = 0; t < 200; t++) {
    const base = 21000 + Math.floor(Math.random() * 11000);
    let free = true;
    for (let k = 0; k < n && free; k++) {
      free = await canBind(kind, base + k);
    }
    if (free) {
      return base;
    }
  }
  fail(`no ${n} free consecutive ${kind} ports found`);
}

/* ---- a minimal RocketMQ remoting client (JSON header) for checks ---- */

let remOpaque = 1;

/*
 * One request on a fresh connection to @addr ("ip:port"). Resolves
 * {code, remark, ext, body} or rejects with the socket error.
 */
function remCall(addr, code, extFields, timeoutMs = 5000) {
  const [host, port] = addr.split(':');
  const opaque = remOpaque++;
  const header = Buffer.from(JSON.stringify({
    code, language: 'JAVA', version: 121, opaque, flag: 0, remark: null,
    extFields: extFields || {}, serializeTypeCurrentRPC: 'JSON',
  }));
  const frame = Buffer.alloc(8);
  frame.writeInt32BE(4 + header.length, 0);
  frame.writeInt32BE(header.length, 4); // serialize type 0 (JSON) in the top byte
  return withTimeout(new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), host);
    let buf = Buffer.alloc(0);
    sock.on('connect', () => sock.write(Buffer.concat([frame, header])));
    sock.on('error', reject);
    sock.on('close', () => reject(
      new Error(`${addr} closed the connection without answering code ${code}`)));
    sock.on('data', d => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readInt32BE(0)) {
        const len = buf.readInt32BE(0);
        const f = buf.subarray(4, 4 + len);
        buf = buf.subarray(4 + len);
        const hlen = f.readInt32BE(0) & 0xffffff;
        const h = JSON.parse(f.subarray(4, 4 + hlen).toString('utf8'));
        if (h.opaque === opaque && (h.flag & 1)) {
          sock.removeAllListeners('close');
          sock.destroy();
          resolve({
            code: h.code, remark: h.remark, ext: h.extFields || {}, body: f.subarray(4 + hlen),
          });
          return;
        }
      }
    });
  }), timeoutMs, `remoting request ${code} to ${addr}`);
}

/* JSON, also with the bare integer keys RocketMQ's fastjson writes ({0:"addr"}). */
function parseRocketJson(body) {
  const text = body.toString('utf8');
  try {
    return JSON.parse(text);
  } catch (err) {
    return JSON.parse(text.replace(/([{,])(-?\d+):/g, '$1"$2":'));
  }
}

const REQ = {
  GET_ROUTEINFO_BY_TOPIC: 105,
  QUERY_CONSUMER_OFFSET: 14,
  GET_MAX_OFFSET: 30,
  GET_CONSUMER_LIST_BY_GROUP: 38,
};

/* ---- the environment: NameServer + broker ---- */

const env = {
  nsAddr: null,
  nsProc: null,
  brokerProc: null,
  brokerAddr: null,
  propsPath: null,
  brokerLog: null,
};

function topicsJson() {
  const table = {};
  for (const [name, q] of Object.entries(TOPICS)) {
    table[name] = {
      topicName: name, readQueueNums: q, writeQueueNums: q, perm: 6,
      topicFilterType: 'SINGLE_TAG', topicSysFlag: 0, order: false,
    };
  }
  return JSON.stringify({ dataVersion: { counter: 0, timestamp: 0 }, topicConfigTable: table },
    null, 2);
}

async function startNamesrv() {
  const nsLog = path.join(tmpDir, 'namesrv.log');
  const { proc, line } = await startDaemon('sprocket-namesrv', BIN.namesrv, [
    '--listenPort=0', '--bindAddress=127.0.0.1',
    `--kvConfigPath=${path.join(tmpDir, 'namesrv', 'kvConfig.json')}`,
  ], nsLog, 'listening on ');
  const m = /listening on ([\d.]+):(\d+)/.exec(line);
  check(m, `cannot read the NameServer's port from "${line}"`);
  env.nsProc = proc;
  env.nsAddr = `127.0.0.1:${m[2]}`;
  note(`sprocket-namesrv at ${env.nsAddr}`);
}

async function writeBrokerConfig() {
  const listenPort = await freePorts('tcp', 1);
  const dpPort = await freePorts('udp', 2);
  const store = path.join(tmpDir, 'store');
  fs.mkdirSync(path.join(store, 'config'), { recursive: true });
  fs.writeFileSync(path.join(store, 'config', 'topics.json'), topicsJson());
  env.propsPath = path.join(tmpDir, 'broker.properties');
  fs.writeFileSync(env.propsPath, [
    '# written by tests/compat/alions_test.js',
    'brokerClusterName=CompatCluster',
    `brokerName=${BROKER_NAME}`,
    'brokerId=0',
    `namesrvAddr=${env.nsAddr}`,
    'brokerIP1=127.0.0.1',
    `listenPort=${listenPort}`,
    `storePathRootDir=${store}`,
    'flushDiskType=ASYNC_FLUSH',
    'autoCreateTopicEnable=true',
    'defaultTopicQueueNums=4',
    'mapedFileSizeCommitLog=67108864',
    'mapedFileSizeConsumeQueue=600000',
    'flushConsumerOffsetInterval=1000',
    'dataplaneBackend=udp',
    'dataplaneIp=127.0.0.1',
    `dataplanePort=${dpPort}`,
    'dataplaneCores=2',
    '',
  ].join('\n'));
  env.brokerAddr = `127.0.0.1:${listenPort}`;
  env.brokerLog = path.join(tmpDir, 'broker.log');
}

async function startBroker() {
  const { proc } = await startDaemon('sprocket-broker', BIN.broker, ['-c', env.propsPath],
    env.brokerLog, ' ready: ');
  env.brokerProc = proc;
  // The broker must serve RocketMQ remoting on the listenPort it advertises.
  let lastErr = null;
  await waitFor(async () => {
    try {
      await withTimeout(new Promise((resolve, reject) => {
        const s = net.connect(Number(env.brokerAddr.split(':')[1]), '127.0.0.1');
        s.on('connect', () => { s.destroy(); resolve(); });
        s.on('error', reject);
      }), 2000, 'connect');
      return true;
    } catch (err) {
      lastErr = err;
      return false;
    }
  }, 10000, `a TCP connection to the broker's remoting port ${env.brokerAddr} (listenPort)`,
  () => `${lastErr && lastErr.message}: sprocket-broker does not serve RocketMQ remoting ` +
    'on its listenPort (the remoting server of issue 7 is missing or failed to start)');
  // Every topic's route names this broker at its remoting address.
  for (const topic of Object.keys(TOPICS)) {
    let last = null;
    await waitFor(async () => {
      try {
        last = await remCall(env.nsAddr, REQ.GET_ROUTEINFO_BY_TOPIC, { topic });
      } catch (err) {
        last = { error: err.message };
        return false;
      }
      if (last.code !== 0) {
        return false;
      }
      const route = parseRocketJson(last.body);
      return (route.brokerDatas || []).some(b => b.brokerName === BROKER_NAME &&
        Object.values(b.brokerAddrs || {}).includes(env.brokerAddr));
    }, 15000, `the NameServer's route of ${topic} to list ${BROKER_NAME} at ${env.brokerAddr}`,
    () => (last && last.error) || `code ${last && last.code} remark ${last && last.remark} ` +
      `body ${last && last.body && last.body.toString('utf8').slice(0, 400)}`);
  }
  note(`sprocket-broker ${BROKER_NAME} ready, remoting at ${env.brokerAddr}`);
}

function brokerLogTail() {
  if (env.brokerLog) {
    console.log(`# sprocket-broker log, last 40 lines:\n${logTail(env.brokerLog, 40)}`);
  }
}

async function stopBroker() {
  const exit = await stopProc(env.brokerProc);
  env.brokerProc = null;
  check(exit.code === 0, `sprocket-broker exited with ${JSON.stringify(exit)} on SIGTERM ` +
    `(want 0); its log:\n${logTail(env.brokerLog, 30)}`);
}

/* ---- ali-ons helpers ---- */

const common = () => ({
  nameSrv: env.nsAddr,
  httpclient: {}, // asserted truthy by ali-ons, unused with nameSrv
  logger: aliLogger,
  heartbeatBrokerInterval: 5000,
  pollNameServerInteval: 5000,
  rebalanceInterval: 1000,
  persistConsumerOffsetInterval: 1000,
});

const sendAttemptErrors = new Map(); // message keys -> errors of single attempts

async function newProducer(group, instanceName) {
  const p = new Producer({ ...common(), producerGroup: group, instanceName, sendMsgTimeout: 5000 });
  p.on('error', onAliError(`producer ${group}`));
  // ali-ons' send() retries and then reports only "Send [n] times, still failed": keep
  // what each attempt (one SEND_MESSAGE_V2) got, for the report.
  const kernel = p.sendKernelImpl.bind(p);
  p.sendKernelImpl = async (msg, mq) => {
    const t = Date.now();
    try {
      return await kernel(msg, mq);
    } catch (err) {
      const k = msg.keys;
      if (!sendAttemptErrors.has(k)) sendAttemptErrors.set(k, []);
      sendAttemptErrors.get(k).push(`queue ${mq.queueId} after ${Date.now() - t} ms: ` +
        `${err.name}${err.code !== undefined ? ` code ${err.code}` : ''}: ${err.message}`);
      throw err;
    }
  };
  // close() ends in removeAllListeners(), but an error its client queued with
  // setImmediate (a reconnect to a killed broker) can still be emitted after it:
  // with no listener node throws it. Listen again once close() is done.
  const close = p.close.bind(p);
  p.close = async () => {
    try {
      return await close();
    } finally {
      p.on('error', onAliError(`producer ${group} (closed)`));
    }
  };
  await withTimeout(p.ready(), 30000, `ali-ons producer ${group} ready()`);
  return p;
}

const openConsumers = new Set();

/*
 * A clustering consumer of @group subscribed to @topic/@expr; @onMsg(msg, mq)
 * sees every message delivered.
 */
async function newConsumer(group, instanceName, topic, expr, onMsg) {
  const c = new Consumer({
    ...common(),
    consumerGroup: group,
    instanceName,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    pullBatchSize: 32,
    parallelConsumeLimit: 32,
  });
  c.on('error', onAliError(`consumer ${group}/${instanceName}`));
  openConsumers.add(c);
  c.subscribe(topic, expr, async (msg, mq) => { onMsg(msg, mq); });
  await withTimeout(c.ready(), 30000, `ali-ons consumer ${group}/${instanceName} ready()`);
  return c;
}

async function closeConsumer(c) {
  openConsumers.delete(c);
  await withTimeout(c.close(), 15000, `closing consumer ${c.consumerGroup}/${c.instanceName}`);
}

/*
 * The queue ids of @topic this consumer pulls now (ali-ons' process queue
 * table: internal to the pinned 3.12.0, read-only here).
 */
function ownedQueues(c, topic) {
  const ids = [];
  for (const { messageQueue } of c.processQueueTable.values()) {
    if (messageQueue.topic === topic) {
      ids.push(Number(messageQueue.queueId));
    }
  }
  return ids.sort((x, y) => x - y);
}

/* Send @msgs (ali-ons Messages) with @window in flight. */
async function sendAll(producer, msgs, window = 32) {
  const results = new Array(msgs.length);
  const errors = [];
  let next = 0;
  async function worker() {
    while (next < msgs.length) {
      const i = next++;
      try {
        results[i] = await producer.send(msgs[i]);
        if (results[i].sendStatus !== 'SEND_OK') {
          errors.push(`#${i}: sendStatus ${results[i].sendStatus}`);
        }
      } catch (err) {
        const tries = sendAttemptErrors.get(msgs[i].keys) || [];
        errors.push(`#${i} (keys ${msgs[i].keys}): ${err.name}: ${err.message}; ` +
          `its attempts: ${tries.join(' | ') || 'none recorded'}`);
      }
    }
  }
  await Promise.all(Array.from({ length: window }, worker));
  // An attempt that failed (no answer within sendMsgTimeout, say) is a broker problem even
  // when ali-ons' own retry then stored the message (often a second time: the broker had
  // stored the first try too).
  const attempts = [];
  for (const m of msgs) {
    for (const e of sendAttemptErrors.get(m.keys) || []) {
      attempts.push(`${m.keys}: ${e}`);
    }
  }
  return { results, errors, attempts };
}

/* Fail unless every message of @sent was stored at the first SEND_MESSAGE_V2 attempt. */
function checkSent(sent, n) {
  check(sent.errors.length === 0, `${sent.errors.length} of ${n} ali-ons sends failed: ` +
    firstFew(sent.errors, 3));
  check(sent.attempts.length === 0, `${sent.attempts.length} of the ${n} SEND_MESSAGE_V2 ` +
    `requests failed (ali-ons then retried them on another queue, so the broker may hold ` +
    `those messages twice): ${firstFew(sent.attempts, 4)}`);
}

/* Committed offsets of @group on every queue of @topic (QUERY_CONSUMER_OFFSET). */
async function committedOffsets(group, topic) {
  const out = [];
  for (let q = 0; q < TOPICS[topic]; q++) {
    const r = await remCall(env.brokerAddr, REQ.QUERY_CONSUMER_OFFSET,
      { consumerGroup: group, topic, queueId: q });
    out.push(r.code === 0 ? Number(r.ext.offset) : `code ${r.code} (${r.remark})`);
  }
  return out;
}

async function maxOffsets(topic) {
  const out = [];
  for (let q = 0; q < TOPICS[topic]; q++) {
    const r = await remCall(env.brokerAddr, REQ.GET_MAX_OFFSET, { topic, queueId: q });
    check(r.code === 0, `GET_MAX_OFFSET ${topic}/${q}: code ${r.code} remark ${r.remark}`);
    out.push(Number(r.ext.offset));
  }
  return out;
}

async function consumerIds(group) {
  const r = await remCall(env.brokerAddr, REQ.GET_CONSUMER_LIST_BY_GROUP, { consumerGroup: group });
  if (r.code !== 0) {
    return { code: r.code, remark: r.remark, ids: [] };
  }
  return { code: 0, ids: (parseRocketJson(r.body).consumerIdList || []).slice().sort() };
}

/* Per-consumer bookkeeping of what arrived. */
class Received {
  constructor(name) {
    this.name = name;
    this.byKey = new Map(); // key -> [msg...]
    this.byQueue = new Map(); // queueId -> count
    this.total = 0;
  }

  add(msg, mq) {
    this.total++;
    const key = msg.keys || '';
    if (!this.byKey.has(key)) {
      this.byKey.set(key, []);
    }
    this.byKey.get(key).push(msg);
    const q = Number(mq ? mq.queueId : msg.queueId);
    this.byQueue.set(q, (this.byQueue.get(q) || 0) + 1);
  }

  get unique() {
    return this.byKey.size;
  }

  duplicates() {
    return [...this.byKey].filter(([, l]) => l.length > 1).map(([k, l]) => `${k} x${l.length}`);
  }
}

/* Distinct ali-ons error events, numbers and names folded, with counts. */
function errorKinds() {
  const kinds = new Map();
  for (const e of aliErrors) {
    const k = e.replace(/\d+/g, 'N').replace(/topic: [^,]+/, 'topic: T').replace(/\/[a-z0-9]+:/, ':');
    kinds.set(k, (kinds.get(k) || 0) + 1);
  }
  return [...kinds].map(([k, n]) => `${n} x ${k}`);
}

function firstFew(list, n = 5) {
  return list.length <= n ? list.join(', ') : `${list.slice(0, n).join(', ')} ... (${list.length})`;
}

/* ---- bodies ---- */

/* A body with every kind of byte (NUL, high half); not UTF-8 on purpose. */
function binaryBody(seed, len) {
  const b = Buffer.alloc(len);
  for (let k = 0; k < len; k++) {
    b[k] = (seed * 131 + k * 17 + (k >> 8)) & 0xff;
  }
  return b;
}

/* ---- phases ---- */

const GROUP_TAG = 'GID_COMPAT_TAG';
const tagState = { lastTagAOffset: new Map(), committed: null, keysA: new Set() };

async function phaseA(producer) {
  phase = 'a (tag filter, 10,000 messages)';
  const msgs = [];
  // Alternating, with the phase flipped every 4 messages: the producer's round robin over the
  // 4 queues then still puts TagA and TagB alternately into every queue.
  const tagOf = i => ((i + Math.floor(i / 4)) % 2 === 0 ? 'TagA' : 'TagB');
  for (let i = 0; i < N_A; i++) {
    const body = Buffer.concat([Buffer.from(`a:${i}:`), binaryBody(i, 24)]);
    const m = new Message(T_TAG, tagOf(i), body);
    m.keys = [`ka-${i}`];
    msgs.push(m);
  }
  const sent = await sendAll(producer, msgs);
  checkSent(sent, N_A);
  // The broker's answers: each (queue, offset) once, offsets dense per queue from 0.
  const perQueue = new Map();
  for (let i = 0; i < N_A; i++) {
    const r = sent.results[i];
    const q = Number(r.messageQueue.queueId); // extFields: a string on the wire
    if (!perQueue.has(q)) perQueue.set(q, []);
    perQueue.get(q).push(Number(r.queueOffset));
    if (tagOf(i) === 'TagA') {
      tagState.keysA.add(`ka-${i}`);
      const last = tagState.lastTagAOffset.get(q) ?? -1;
      tagState.lastTagAOffset.set(q, Math.max(last, Number(r.queueOffset)));
    }
  }
  for (const [q, offs] of perQueue) {
    offs.sort((x, y) => x - y);
    const bad = offs.findIndex((o, k) => o !== k);
    check(bad < 0, `SEND_MESSAGE_V2 answers for queue ${q}: queueOffset ${offs[bad]} where ` +
      `${bad} was due (offsets must be 0..n-1, each once)`);
  }
  ok(`${N_A} sends SEND_OK over queues ${[...perQueue.keys()].sort().join(',')}, ` +
    'queue offsets dense');
  const maxOff = await maxOffsets(T_TAG);
  for (const [q, offs] of perQueue) {
    check(maxOff[q] === offs.length, `GET_MAX_OFFSET ${T_TAG}/${q} = ${maxOff[q]}, ` +
      `${offs.length} messages were stored there`);
  }

  const rx = new Received('a1');
  const wrong = [];
  const badBody = [];
  const c = await newConsumer(GROUP_TAG, 'a1', T_TAG, 'TagA', msg => {
    rx.add(msg);
    const i = Number((msg.keys || '').slice(3));
    if (msg.tags !== 'TagA' || !tagState.keysA.has(msg.keys)) {
      wrong.push(`${msg.keys}/${msg.tags}`);
    } else if (!msg.body.equals(msgs[i].body)) {
      badBody.push(msg.keys);
    }
  });
  const wantA = N_A / 2;
  await waitFor(() => rx.unique >= wantA || wrong.length > 0, 90000,
    `${wantA} TagA messages at consumer ${GROUP_TAG}`,
    () => `got ${rx.unique} distinct keys (${rx.total} deliveries); per queue ` +
      JSON.stringify([...rx.byQueue]) + `; missing e.g. ` +
      firstFew([...tagState.keysA].filter(k => !rx.byKey.has(k))) +
      `; ali-ons errors: ${firstFew(aliErrors, 3) || 'none'}`);
  await sleep(2000); // any duplicate or late extra shows up meanwhile
  check(wrong.length === 0, `the TagA subscription got other messages: ${firstFew(wrong)}`);
  check(badBody.length === 0, `bodies differ from what was sent: ${firstFew(badBody)}`);
  check(rx.duplicates().length === 0, `duplicates: ${firstFew(rx.duplicates())}`);
  check(rx.unique === wantA, `${rx.unique} distinct TagA keys, want ${wantA}`);
  ok(`consumer got exactly the ${wantA} TagA messages, each once, bodies equal, none of TagB`);

  // Offsets: committed by pulls and UPDATE_CONSUMER_OFFSET (and by close()).
  await closeConsumer(c);
  let committed = null;
  await waitFor(async () => {
    committed = await committedOffsets(GROUP_TAG, T_TAG);
    return committed.every((o, q) => typeof o === 'number' &&
      o > (tagState.lastTagAOffset.get(q) ?? -1) && o <= maxOff[q]);
  }, 15000, `committed offsets of ${GROUP_TAG} past the last TagA message of each queue`,
  () => `QUERY_CONSUMER_OFFSET gives ${JSON.stringify(committed)}; last TagA offsets ` +
    `${JSON.stringify([...tagState.lastTagAOffset].sort())}, max offsets ${JSON.stringify(maxOff)}`);
  tagState.committed = committed;
  ok(`offsets committed at the broker: ${JSON.stringify(committed)} (max ${JSON.stringify(maxOff)})`);
}

async function phaseB(producer) {
  phase = 'b (broker restart, resume from committed offsets)';
  await stopBroker();
  ok('broker stopped by SIGTERM, exit 0');
  await startBroker();
  let after = null;
  let lastErr = null;
  await waitFor(async () => {
    try {
      after = await committedOffsets(GROUP_TAG, T_TAG);
      return true;
    } catch (err) {
      lastErr = err;
      return false;
    }
  }, 10000, `QUERY_CONSUMER_OFFSET answers after the restart`, () => lastErr && lastErr.message);
  check(JSON.stringify(after) === JSON.stringify(tagState.committed),
    `committed offsets of ${GROUP_TAG} changed across the restart (QUERY_CONSUMER_OFFSET per ` +
    `queue): before ${JSON.stringify(tagState.committed)}, after ${JSON.stringify(after)}`);
  ok(`committed offsets survived the restart: ${JSON.stringify(after)}`);

  const mk = (i) => {
    const m = new Message(T_TAG, i % 2 === 0 ? 'TagA' : 'TagB',
      Buffer.concat([Buffer.from(`b:${i}:`), binaryBody(i, 40)]));
    m.keys = [`kb-${i}`];
    return m;
  };
  const batch1 = Array.from({ length: N_B }, (_, i) => mk(i));
  const batch2 = Array.from({ length: N_B }, (_, i) => mk(N_B + i));
  let sent = await sendAll(producer, batch1, 8);
  checkSent(sent, N_B);
  ok(`${N_B} more sends SEND_OK after the restart`);

  const rx = new Received('b1');
  const old = [];
  const wrong = [];
  const c = await newConsumer(GROUP_TAG, 'b1', T_TAG, 'TagA', msg => {
    rx.add(msg);
    if (!(msg.keys || '').startsWith('kb-')) {
      old.push(msg.keys);
    } else if (msg.tags !== 'TagA') {
      wrong.push(`${msg.keys}/${msg.tags}`);
    }
  });
  // The second batch goes out while the consumer long-polls.
  await waitFor(() => ownedQueues(c, T_TAG).length === TOPICS[T_TAG], 20000,
    `consumer b1 to pull all ${TOPICS[T_TAG]} queues of ${T_TAG}`,
    () => `it pulls ${JSON.stringify(ownedQueues(c, T_TAG))}`);
  sent = await sendAll(producer, batch2, 8);
  checkSent(sent, N_B);
  const want = new Set();
  for (let i = 0; i < 2 * N_B; i += 2) want.add(`kb-${i}`);
  await waitFor(() => [...want].every(k => rx.byKey.has(k)) || old.length > 0, 45000,
    `the ${want.size} new TagA messages at consumer b1`,
    () => `got ${rx.unique} keys; missing ${firstFew([...want].filter(k => !rx.byKey.has(k)))}`);
  await sleep(2000);
  check(old.length === 0, `the resumed consumer got ${old.length} messages it had consumed ` +
    `before the restart (committed offsets not honoured), e.g. ${firstFew(old)}`);
  check(wrong.length === 0, `the TagA subscription got ${firstFew(wrong)}`);
  check(rx.duplicates().length === 0, `duplicates: ${firstFew(rx.duplicates())}`);
  check(rx.unique === want.size, `${rx.unique} distinct keys, want ${want.size}`);
  ok(`resumed consumer got exactly the ${want.size} new TagA messages (half sent while it ` +
    'long-polled), none of the old ones');
  await closeConsumer(c);
}

async function phaseC(producer) {
  phase = 'c (two consumers share the queues)';
  const group = 'GID_COMPAT_SHARE';
  const nq = TOPICS[T_SHARE];
  const rx = { cx: new Received('cx'), cy: new Received('cy') };
  const queueOwners = new Map(); // queueId -> Set(consumer name)
  const onMsg = name => (msg, mq) => {
    rx[name].add(msg, mq);
    const q = Number(mq.queueId);
    if (!queueOwners.has(q)) queueOwners.set(q, new Set());
    queueOwners.get(q).add(name);
  };
  const cx = await newConsumer(group, 'cx', T_SHARE, '*', onMsg('cx'));
  await waitFor(() => ownedQueues(cx, T_SHARE).length === nq, 20000,
    `the first consumer to take all ${nq} queues`, () => JSON.stringify(ownedQueues(cx, T_SHARE)));
  const cy = await newConsumer(group, 'cy', T_SHARE, '*', onMsg('cy'));
  const ids = [cx.clientId, cy.clientId].sort();
  let list = null;
  await waitFor(async () => {
    list = await consumerIds(group);
    return JSON.stringify(list.ids) === JSON.stringify(ids);
  }, 20000, `GET_CONSUMER_LIST_BY_GROUP ${group} to list both consumers ${JSON.stringify(ids)}`,
  () => JSON.stringify(list));
  ok(`GET_CONSUMER_LIST_BY_GROUP lists both: ${JSON.stringify(list.ids)}`);
  // AllocateMessageQueueAveragely over the sorted ids: the first takes the lower half.
  const half = [...Array(nq / 2).keys()];
  const want = {
    [ids[0] === cx.clientId ? 'cx' : 'cy']: half,
    [ids[0] === cx.clientId ? 'cy' : 'cx']: half.map(q => q + nq / 2),
  };
  await waitFor(() => JSON.stringify(ownedQueues(cx, T_SHARE)) === JSON.stringify(want.cx) &&
      JSON.stringify(ownedQueues(cy, T_SHARE)) === JSON.stringify(want.cy), 30000,
  `the rebalance to settle at cx=${JSON.stringify(want.cx)} cy=${JSON.stringify(want.cy)}`,
  () => `cx pulls ${JSON.stringify(ownedQueues(cx, T_SHARE))}, ` +
    `cy ${JSON.stringify(ownedQueues(cy, T_SHARE))}`);
  ok(`rebalanced: cx pulls ${JSON.stringify(want.cx)}, cy ${JSON.stringify(want.cy)}`);

  const msgs = Array.from({ length: N_C }, (_, i) => {
    const m = new Message(T_SHARE, 'TagC', Buffer.from(`c:${i}`));
    m.keys = [`kc-${i}`];
    return m;
  });
  const sent = await sendAll(producer, msgs, 16);
  checkSent(sent, N_C);
  const sentQueues = new Set(sent.results.map(r => Number(r.messageQueue.queueId)));
  check(sentQueues.size === nq, `the producer used queues ${[...sentQueues]}, want all ${nq}`);
  const total = () => rx.cx.unique + rx.cy.unique;
  await waitFor(() => total() >= N_C, 45000, `${N_C} messages across the two consumers`,
    () => `cx ${rx.cx.unique}, cy ${rx.cy.unique}`);
  await sleep(2000);
  const both = [...rx.cx.byKey.keys()].filter(k => rx.cy.byKey.has(k));
  check(both.length === 0, `${both.length} messages went to both consumers, e.g. ${firstFew(both)}`);
  const dups = [...rx.cx.duplicates(), ...rx.cy.duplicates()];
  check(dups.length === 0, `duplicates: ${firstFew(dups)}`);
  check(total() === N_C, `${total()} distinct messages, want ${N_C}`);
  for (const [q, who] of queueOwners) {
    check(who.size === 1, `queue ${q} was consumed by ${[...who].join(' and ')}`);
    const name = [...who][0];
    check(want[name].includes(q), `queue ${q} was consumed by ${name}, which does not own it`);
  }
  check(rx.cx.total > 0 && rx.cy.total > 0,
    `one consumer got nothing: cx ${rx.cx.total}, cy ${rx.cy.total}`);
  ok(`${N_C} messages, each once; every queue consumed by exactly one consumer ` +
    `(cx ${rx.cx.total}, cy ${rx.cy.total})`);

  // cy leaves (UNREGISTER_CLIENT): cx takes every queue.
  await closeConsumer(cy);
  await waitFor(async () => {
    list = await consumerIds(group);
    return JSON.stringify(list.ids) === JSON.stringify([cx.clientId]);
  }, 20000, `GET_CONSUMER_LIST_BY_GROUP to list only ${cx.clientId} after the other closed`,
  () => JSON.stringify(list));
  await waitFor(() => ownedQueues(cx, T_SHARE).length === nq, 30000,
    `the remaining consumer to take all ${nq} queues`, () => JSON.stringify(ownedQueues(cx, T_SHARE)));
  const before = rx.cx.unique;
  const msgs2 = Array.from({ length: N_C2 }, (_, i) => {
    const m = new Message(T_SHARE, 'TagC', Buffer.from(`c2:${i}`));
    m.keys = [`kc2-${i}`];
    return m;
  });
  const sent2 = await sendAll(producer, msgs2, 8);
  checkSent(sent2, N_C2);
  await waitFor(() => msgs2.every(m => rx.cx.byKey.has(m.keys)), 45000,
    `the ${N_C2} messages sent after cy left at cx`,
    () => `cx has ${rx.cx.unique - before} of them`);
  ok(`after one consumer left (UNREGISTER_CLIENT) the other took all ${nq} queues and got all ` +
    `${N_C2} new messages`);
  await closeConsumer(cx);
}

function parseLines(out, what) {
  const lines = out.split('\n').filter(l => l.trim());
  return lines.map((l, k) => {
    try {
      return JSON.parse(l);
    } catch (err) {
      fail(`${what}: line ${k + 1} is not JSON: ${l.slice(0, 200)}`);
    }
    return null;
  });
}

async function phaseD(producer) {
  phase = 'd1 (libsprocket -> ali-ons)';
  const x = await runTool('sp_xtool produce', BIN.xtool, [
    'produce', `--namesrv=${env.nsAddr}`, `--topic=${T_SP2ALI}`, `--count=${N_D}`,
    '--tag=TagX', '--keys=xs-{i}', '--prop=sprocket_seq={i}', '--prop=origin=libsprocket',
  ], 60000);
  const sentSp = parseLines(x.stdout, 'sp_xtool produce');
  const badSp = sentSp.filter(r => !r.ok);
  check(x.code === 0 && sentSp.length === N_D && badSp.length === 0,
    `sp_xtool produce exited ${x.code}/${x.signal}, ${sentSp.length} results, failures: ` +
    `${firstFew(badSp.map(r => `#${r.i} ${r.error}`), 3)}; stderr: ${x.stderr.slice(-600)}`);
  ok(`libsprocket sent ${N_D} messages on the dataplane`);
  const bySpKey = new Map(sentSp.map(r => [r.keys, r]));
  const rx = new Received('d1');
  const c = await newConsumer('GID_COMPAT_SP2ALI', 'd1', T_SP2ALI, '*', msg => rx.add(msg));
  await waitFor(() => rx.unique >= N_D, 45000, `${N_D} libsprocket messages at the ali-ons consumer`,
    () => `got ${rx.unique}; ali-ons errors: ${firstFew(aliErrors, 3) || 'none'}`);
  await sleep(1000);
  await closeConsumer(c);
  const diffs = [];
  for (const [key, list] of rx.byKey) {
    const s = bySpKey.get(key);
    const m = list[0];
    if (!s) {
      diffs.push(`unexpected message keys=${key}`);
      continue;
    }
    const props = m.properties || {};
    if (m.body.toString('hex') !== s.bodyHex) {
      diffs.push(`${key}: body ${m.body.toString('hex')} != ${s.bodyHex}`);
    }
    if (m.tags !== 'TagX') diffs.push(`${key}: tags ${m.tags}`);
    if (props.sprocket_seq !== s.props.sprocket_seq) {
      diffs.push(`${key}: sprocket_seq ${props.sprocket_seq} != ${s.props.sprocket_seq}`);
    }
    if (props.origin !== 'libsprocket') diffs.push(`${key}: origin ${props.origin}`);
    if (m.queueId !== s.queueId || Number(m.queueOffset) !== s.queueOffset) {
      diffs.push(`${key}: queue ${m.queueId}@${m.queueOffset} != sent ${s.queueId}@${s.queueOffset}`);
    }
    if (props.UNIQ_KEY !== s.msgId) diffs.push(`${key}: UNIQ_KEY ${props.UNIQ_KEY} != ${s.msgId}`);
    if (list.length > 1) diffs.push(`${key}: delivered ${list.length} times`);
  }
  check(diffs.length === 0, `${diffs.length} differences: ${firstFew(diffs, 4)}`);
  check(rx.unique === N_D, `${rx.unique} messages, want ${N_D}`);
  const big = sentSp.filter(r => r.bodyHex.length / 2 >= 4096).map(r => r.keys);
  const flagged = [...rx.byKey].filter(([, list]) => list[0].sysFlag & 1).map(([k]) => k);
  check(big.length === 1 && flagged.length === 1 && flagged[0] === big[0],
    `libsprocket bodies over 4 KiB ${big}, stored compressed (sysFlag bit 0) ${flagged}: want one, the same`);
  ok(`ali-ons got all ${N_D}: bodies byte-equal (binary; one compressed by libsprocket, ` +
    'inflated by ali-ons), tags, keys, user properties, UNIQ_KEY, queue ids and offsets equal');

  phase = 'd2 (ali-ons -> libsprocket)';
  const msgs = Array.from({ length: N_D }, (_, i) => {
    // #0 is over compressMsgBodyOverHowmuch (4 KiB): ali-ons zlib-compresses it (sysFlag bit 0)
    const m = new Message(T_ALI2SP, 'TagY', binaryBody(i, i === 0 ? 6000 : 1 + (i * 37) % 3000));
    m.keys = [`xa-${i}`];
    m.properties.ali_seq = String(i);
    m.properties.origin = 'ali-ons';
    return m;
  });
  // ali-ons replaces msg.body with the compressed bytes when it compresses: keep the originals.
  const bodies = msgs.map(m => Buffer.from(m.body));
  const sent = await sendAll(producer, msgs, 8);
  checkSent(sent, N_D);
  ok(`ali-ons sent ${N_D} messages (one compressed)`);
  for (const mode of ['pull', 'push']) {
    const y = await runTool(`sp_xtool consume (${mode})`, BIN.xtool, [
      'consume', `--namesrv=${env.nsAddr}`, `--topic=${T_ALI2SP}`, `--group=GID_COMPAT_ALI2SP_${mode}`,
      `--mode=${mode}`, '--from=first', `--count=${N_D}`, '--linger-ms=1000', '--timeout-ms=45000',
    ], 60000);
    const got = parseLines(y.stdout, `sp_xtool consume (${mode})`);
    check(y.code === 0, `sp_xtool consume (${mode}) exited ${y.code}/${y.signal} with ${got.length} ` +
      `of ${N_D} messages; stderr: ${y.stderr.slice(-600)}`);
    const seen = new Map();
    const problems = [];
    for (const g of got) {
      seen.set(g.keys, (seen.get(g.keys) || 0) + 1);
      const i = Number((g.keys || '').replace('xa-', ''));
      const m = msgs[i];
      if (!(g.keys || '').startsWith('xa-') || !m) {
        problems.push(`unexpected keys=${g.keys}`);
        continue;
      }
      // libsprocket hands a compressed body over inflated (sysFlag still says compressed)
      const body = Buffer.from(g.bodyHex, 'hex');
      if (!body.equals(bodies[i])) {
        problems.push(`${g.keys}: body differs (${body.length} bytes, sysFlag ${g.sysFlag}; ` +
          `sent ${bodies[i].length})`);
      }
      if (g.tags !== 'TagY') problems.push(`${g.keys}: tags ${g.tags}`);
      if (g.props.ali_seq !== String(i)) problems.push(`${g.keys}: ali_seq ${g.props.ali_seq}`);
      if (g.props.origin !== 'ali-ons') problems.push(`${g.keys}: origin ${g.props.origin}`);
      const r = sent.results[i];
      if (g.queueId !== Number(r.messageQueue.queueId) || g.queueOffset !== Number(r.queueOffset)) {
        problems.push(`${g.keys}: queue ${g.queueId}@${g.queueOffset} != sent ` +
          `${r.messageQueue.queueId}@${r.queueOffset}`);
      }
    }
    for (const [k, n] of seen) if (n > 1) problems.push(`${k}: ${n} times`);
    const missing = msgs.filter(m => !seen.has(m.keys)).map(m => m.keys);
    check(problems.length === 0 && missing.length === 0, `libsprocket ${mode} consumer: ` +
      `${problems.length} differences (${firstFew(problems, 4) || 'none'}), ` +
      `missing ${firstFew(missing) || 'none'}`);
    const compressed = got.filter(g => g.sysFlag & 1).length;
    check(compressed === 1, `libsprocket ${mode} consumer: ${compressed} messages flagged ` +
      'compressed, want the one ali-ons compressed');
    ok(`libsprocket ${mode} consumer got all ${N_D}: bodies byte-equal (the compressed ` +
      'one inflated by libsprocket), tags, keys, user properties, queue ids and offsets equal');
  }
}

/* ---- main ---- */

async function cleanup() {
  for (const c of openConsumers) {
    try {
      await withTimeout(c.close(), 5000, 'consumer close');
    } catch (err) {
      // reported below if it matters; the daemons go anyway
    }
  }
  openConsumers.clear();
  const daemons = [env.slaveProc, env.brokerProc, env.nsProc].filter(Boolean);
  for (const p of daemons) {
    const exit = await stopProc(p);
    if (exit.code !== 0) {
      console.log(`FAIL: cleanup: ${p.name} exited with ${JSON.stringify(exit)} on SIGTERM (want 0); ` +
        `its log:\n${logTail(p.logPath, 30)}`);
      failures++;
    }
  }
  env.brokerProc = null;
  env.slaveProc = null;
  env.nsProc = null;
  killAllSync();
}

async function main() {
  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sp-compat-'));
  aliLogFd = fs.openSync(path.join(tmpDir, 'ali-ons.log'), 'a');
  note(`ali-ons ${ALIONS_VERSION}, node ${process.version}, dir ${tmpDir}`);
  let producer = null;
  // SP_COMPAT_PHASES=a,c picks phases (b needs a) when chasing one failure.
  const pick = (process.env.SP_COMPAT_PHASES || 'a,b,c,d,f,g,e').split(',');
  const phases = [['a', phaseA], ['b', phaseB], ['c', phaseC], ['d', phaseD], ['f', phaseF],
    ['g', phaseG], ['e', phaseE]].filter(([n]) => pick.includes(n)).map(([, f]) => f);
  try {
    await startNamesrv();
    await writeBrokerConfig();
    await startBroker();
    phase = 'setup';
    producer = await newProducer('PID_COMPAT', 'prod');
    for (const run of phases) {
      const t = Date.now();
      await run(producer);
      note(`${phase} done in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    }
  } catch (err) {
    failures++;
    if (err instanceof TestFailure) {
      console.log(`FAIL: ${err.message}`);
    } else {
      console.log(`FAIL: ${phase}: unexpected ${err && err.stack}`);
    }
  }
  if (producer) {
    try {
      await withTimeout(producer.close(), 5000, 'producer close');
    } catch (err) {
      // the broker goes next anyway
    }
  }
  if (sendAttemptErrors.size) {
    const all = [...sendAttemptErrors].map(([k, l]) => `${k}: ${l.join(' | ')}`);
    console.log(`# ${failures ? '' : '(not failures) '}SEND_MESSAGE_V2 attempts that failed, ` +
      `for ${all.length} messages (ali-ons retries them, on another queue):\n#   ` +
      `${all.slice(0, 20).join('\n#   ')}${all.length > 20 ? '\n#   ...' : ''}`);
  }
  if (failures) {
    console.log(`# ali-ons error events (${aliErrors.length}):\n#   ` +
      `${errorKinds().join('\n#   ') || 'none'}`);
    console.log(`# ali-ons warnings/errors, last 15 of ${aliLog.length}:\n` +
      aliLog.slice(-15).join('\n'));
    brokerLogTail();
    console.log('# sprocket-namesrv log, last 10 lines:\n' +
      logTail(path.join(tmpDir, 'namesrv.log'), 10));
  } else if (aliErrors.length) {
    note(`ali-ons error events (not failures; QUERY_NOT_FOUND on a group's first start is ` +
      `expected):\n#   ${errorKinds().join('\n#   ')}`);
  }
  await cleanup();
  fs.closeSync(aliLogFd);
  if (process.env.SP_COMPAT_KEEP) {
    note(`kept ${tmpDir}`);
  }
  removeTmpDir();
  console.log(failures ? `alions: FAILED (${failures}) in ${elapsed()}`
    : `alions: all passed in ${elapsed()}`);
  return failures ? 1 : 0;
}

async function phaseF(producer) {
  phase = 'f (a delay level delivered after its delay; a delivery time honoured)';
  // delayTimeLevel 1 (1 s in RocketMQ's default table): SEND_OK now, delivered not before
  const delayed = new Message(T_TYPES, 'TagF', Buffer.from('delayed 1 s'));
  delayed.keys = ['kf-delay'];
  delayed.delayTimeLevel = 1;
  const sentAt = Date.now();
  const res = await producer.send(delayed);
  check(res.sendStatus === 'SEND_OK', `delayTimeLevel 1: ${res.sendStatus}`);
  const got = [];
  const c = await newConsumer('GID_COMPAT_F', 'f1', T_TYPES, '*', msg => {
    got.push({ at: Date.now(), msg });
  });
  await waitFor(() => got.length > 0, 20000, 'the delayed message delivered');
  const m = got[0].msg;
  const waited = m.storeTimestamp - m.bornTimestamp;
  check(m.body.toString() === 'delayed 1 s', `delivered body ${m.body.toString()}`);
  check(waited >= 1000, `delivered ${waited} ms after it was sent: before its 1 s`);
  check(m.properties.DELAY === undefined, `the delivered copy still has DELAY=${m.properties.DELAY}`);
  check(m.properties.REAL_TOPIC === T_TYPES, `REAL_TOPIC ${m.properties.REAL_TOPIC}`);
  ok(`delayTimeLevel 1: SEND_OK, stored ${waited} ms after it was born, consumed ` +
    `${got[0].at - sentAt} ms after the send`);
  await closeConsumer(c);
  // A delivery time (Aliyun ONS' __STARTDELIVERTIME): stored now, delivered at that time.
  const timed = new Message(T_TYPES, 'TagF', Buffer.from('timed'));
  timed.keys = ['kf-timed'];
  const deliverAt = Date.now() + 2000;
  timed.setStartDeliverTime(deliverAt);
  const tres = await producer.send(timed);
  check(tres.sendStatus === 'SEND_OK', `setStartDeliverTime: ${tres.sendStatus}`);
  const got2 = [];
  const c2 = await newConsumer('GID_COMPAT_F2', 'f2', T_TYPES, '*', msg => {
    if (msg.body.toString() === 'timed') {
      got2.push({ at: Date.now(), msg });
    }
  });
  await waitFor(() => got2.length > 0, 20000, 'the timed message delivered');
  await sleep(500);
  const tm = got2[0].msg;
  check(got2.length === 1, `the timed message was consumed ${got2.length} times`);
  check(tm.storeTimestamp >= deliverAt, `stored at ${tm.storeTimestamp}, ` +
    `${deliverAt - tm.storeTimestamp} ms before its delivery time`);
  check(got2[0].at >= deliverAt, `consumed ${deliverAt - got2[0].at} ms before its time`);
  ok(`setStartDeliverTime +2 s: SEND_OK, stored ${tm.storeTimestamp - deliverAt} ms after ` +
    `its time, consumed ${got2[0].at - deliverAt} ms after it, once`);
  await closeConsumer(c2);
  const offs = await maxOffsets(T_TYPES);
  check(offs.reduce((a, b) => a + b, 0) === 2, `${T_TYPES} max offsets ${offs}: the ` +
    `delayed and the timed message should be there`);
  ok(`${T_TYPES} holds the delayed and the timed message (max offsets ${offs})`);
}

/* `sprocket` (the CLI) against this cluster: one JSON document or line per result. */
async function cli(args, timeoutMs = 20000) {
  const r = await runTool('sprocket', BIN.cli, [`--namesrv=${env.nsAddr}`, '--json', ...args],
    timeoutMs);
  return { ...r, json: r.stdout.split('\n').filter(l => l.startsWith('{') || l.startsWith('['))
    .map(l => JSON.parse(l)) };
}

async function phaseG(producer) {
  phase = 'g (sprocket group reset --to-time moves a live ali-ons consumer)';
  const made = await cli(['topic', 'create', T_RESET, '--queues=4']);
  check(made.code === 0, `sprocket topic create: rc ${made.code} ${made.stderr}`);
  await waitFor(async () => (await remCall(env.nsAddr, REQ.GET_ROUTEINFO_BY_TOPIC,
    { topic: T_RESET })).code === 0, 10000, `a route for ${T_RESET}`);
  const before = Date.now();
  await sleep(20);
  const msgs = [];
  for (let i = 0; i < N_G; i++) {
    msgs.push(new Message(T_RESET, 'TagG', Buffer.from(`g:${i}`)));
  }
  checkSent(await sendAll(producer, msgs), N_G);
  const seen = new Map();
  const c = await newConsumer('GID_COMPAT_G', 'g1', T_RESET, '*', msg => {
    const b = msg.body.toString();
    seen.set(b, (seen.get(b) || 0) + 1);
  });
  await waitFor(() => seen.size === N_G, 30000, `the ${N_G} messages consumed`);
  // ali-ons commits every 5 s: the group's lag reaches 0 at the broker
  let lag = -1;
  await waitFor(async () => {
    const d = await cli(['group', 'describe', 'GID_COMPAT_G', `--topic=${T_RESET}`]);
    lag = d.json.length ? d.json[0].lag : -1;
    return lag === 0;
  }, 20000, 'the group\'s committed lag to reach 0', () => `lag ${lag}`);
  ok(`${N_G} consumed, committed lag 0 (sprocket group describe)`);
  const reset = await cli(['group', 'reset', 'GID_COMPAT_G', `--topic=${T_RESET}`,
    `--to-time=${before}`]);
  check(reset.code === 0, `sprocket group reset: rc ${reset.code} ${reset.stderr}`);
  const targets = reset.json.map(l => l.offset);
  check(targets.length === 4 && targets.every(o => o === 0),
    `reset offsets ${JSON.stringify(reset.json)}: every queue back to 0`);
  // ali-ons ignores RESET_CONSUMER_CLIENT_OFFSET: the broker moves its next pull of each queue
  await waitFor(() => [...seen.values()].every(n => n >= 2), 45000,
    `the ${N_G} messages consumed again after the reset`,
    () => `${[...seen.values()].filter(n => n >= 2).length} of ${N_G} again`);
  ok(`group reset to ${before} (before the first send): every message consumed again`);
  await waitFor(async () => {
    const d = await cli(['group', 'describe', 'GID_COMPAT_G', `--topic=${T_RESET}`]);
    lag = d.json.length ? d.json[0].lag : -1;
    return lag === 0;
  }, 20000, 'the group\'s committed lag to reach 0 again', () => `lag ${lag}`);
  await closeConsumer(c);
  ok('the live consumer committed its new progress (lag 0 again)');
}

async function phaseE(producer) {
  phase = 'e (SYNC_MASTER and a slave; the master SIGKILLed mid-load, its tail lost)';
  await stopBroker();
  // the master's write-behind buffers in a directory of their own: the test wipes them
  const mbuf = path.join(tmpDir, 'mbuf');
  fs.mkdirSync(mbuf, { recursive: true });
  fs.writeFileSync(env.propsPath, fs.readFileSync(env.propsPath, 'utf8')
    .replace('flushDiskType=ASYNC_FLUSH',
      `flushDiskType=ASYNC_FLUSH\nbrokerRole=SYNC_MASTER\nstoreBufferDir=${mbuf}`));
  await startBroker();
  const sListen = await freePorts('tcp', 1);
  const sDp = await freePorts('udp', 2);
  const slaveProps = path.join(tmpDir, 'slave.properties');
  const slaveLog = path.join(tmpDir, 'slave.log');
  fs.writeFileSync(slaveProps, fs.readFileSync(env.propsPath, 'utf8')
    .replace('brokerId=0', 'brokerId=1')
    .replace('brokerRole=SYNC_MASTER', 'brokerRole=SLAVE')
    .replace(/listenPort=\d+/, `listenPort=${sListen}`)
    .replace(/dataplanePort=\d+/, `dataplanePort=${sDp}`)
    .replace(/storePathRootDir=.*/, `storePathRootDir=${path.join(tmpDir, 'slave-store')}`)
    .replace(/storeBufferDir=.*/, `storeBufferDir=${path.join(tmpDir, 'sbuf')}`));
  env.slaveProc = (await startDaemon('sprocket-broker (slave)', BIN.broker, ['-c', slaveProps],
    slaveLog, ' ready: ')).proc;
  await waitFor(() => ['shard 0: session to master', 'shard 1: session to master']
    .every(l => fs.readFileSync(slaveLog, 'utf8').includes(l)),
  15000, 'the slave to follow both shards', () => logTail(slaveLog, 20));
  await sleep(200); // its first REPL request reaches each master core
  ok('SYNC_MASTER with a slave following it');

  const mk = (i) => {
    const m = new Message(T_REPL, 'TagR', Buffer.from(`e:${i}`));
    m.keys = [`ke-${i}`];
    return m;
  };
  const acked = new Set();
  const notOk = [];
  // A group that consumes before the kill and after the master's return.
  const first = Array.from({ length: 300 }, (_, i) => mk(i));
  const sent = await sendAll(producer, first, 8);
  checkSent(sent, first.length);
  first.forEach((m, i) => {
    if (sent.results[i] && sent.results[i].sendStatus === 'SEND_OK') acked.add(`ke-${i}`);
  });
  const early = new Set();
  let c = await newConsumer('GID_COMPAT_REPL', 'e1', T_REPL, '*', msg => early.add(msg.keys));
  await waitFor(() => early.size >= 100, 15000, 'the first group to consume some',
    () => `${early.size} consumed`);
  await closeConsumer(c); // commits its offsets to the master
  await sleep(3500); // the slave's sync (3 s) takes them
  let next = first.length;
  let killed = false;
  async function worker() {
    while (next < N_E && !killed) {
      const i = next++;
      try {
        const r = await producer.send(mk(i));
        if (r.sendStatus === 'SEND_OK') {
          acked.add(`ke-${i}`);
        } else {
          notOk.push(r.sendStatus);
        }
      } catch (err) {
        // the master is dead: expected after the kill
      }
    }
  }
  const workers = Promise.all(Array.from({ length: 8 }, worker));
  await waitFor(() => acked.size >= first.length + N_E_KILL, 30000,
    `${N_E_KILL} more SEND_OKs from the SYNC_MASTER`,
    () => `${acked.size} so far; other statuses ${firstFew(notOk)}`);
  env.brokerProc.child.kill('SIGKILL');
  killed = true;
  await env.brokerProc.exited;
  await workers;
  env.brokerProc = null;
  check(next < N_E, `the master was killed mid-load (${next} of ${N_E} sends started)`);
  ok(`master SIGKILLed after ${acked.size} SEND_OK (all stored on the slave too: SYNC_MASTER)`);
  check(notOk.every(st => st === 'SLAVE_NOT_AVAILABLE' || st === 'FLUSH_SLAVE_TIMEOUT'),
    `sendStatus other than SEND_OK before the kill: ${firstFew(notOk)}`);

  // The NameServer drops the master from the route when its connection closes; a
  // consumer started before that is sent to the dead address, and ali-ons' ready()
  // fails with ECONNREFUSED (it did, once in many runs).
  let addrs = [];
  await waitFor(async () => {
    const r = await remCall(env.nsAddr, REQ.GET_ROUTEINFO_BY_TOPIC, { topic: T_REPL });
    addrs = r.code === 0 ? parseRocketJson(r.body).brokerDatas.map(bd => bd.brokerAddrs) : [];
    return r.code === 0 && addrs.every(a => !('0' in a));
  }, 15000, 'the NameServer to drop the killed master from the route',
  () => `route ${JSON.stringify(addrs)}`);
  const fresh = new Set();
  c = await newConsumer('GID_COMPAT_REPL_FRESH', 'e2', T_REPL, '*', msg => fresh.add(msg.keys));
  await waitFor(() => [...acked].every(k => fresh.has(k)), 60000,
    `a fresh ali-ons group to read every SEND_OK message from the slave`,
    () => `${fresh.size} read, missing ${JSON.stringify([...acked].filter(k => !fresh.has(k)).slice(0, 8))} of ${acked.size}; read e.g. ${JSON.stringify([...fresh].slice(0, 3))}`);
  await closeConsumer(c);
  ok(`a fresh group read all ${acked.size} SEND_OK messages from the slave while the master was down`);

  // The master's disk lost what it held last: its write-behind buffers are gone and the
  // newest written segment of each shard loses its last 40,000 bytes of records. The
  // slave holds them (SYNC_MASTER): the master takes them back before it says ready.
  const lost = loseTail(path.join(tmpDir, 'store'), mbuf, 40000);
  check(Object.keys(lost).length === 2, `the master's tail lost on both shards: ${JSON.stringify(lost)}`);
  await startBroker();
  const took = fs.readFileSync(env.brokerLog, 'utf8').split('\n')
    .filter(l => l.includes('took back ') && l.includes('bytes of acknowledged'));
  check(took.length === 1, `the master took its lost tail back from the slave: ${took[0]}`);
  ok(`the master lost its tail (${JSON.stringify(lost)} bytes per shard) and took it back: ` +
    took[0].split(': ').slice(1).join(': '));
  const late = new Set();
  c = await newConsumer('GID_COMPAT_REPL', 'e3', T_REPL, '*', msg => late.add(msg.keys));
  await waitFor(() => [...acked].every(k => early.has(k) || late.has(k)), 60000,
    'the first group to go on with nothing skipped',
    () => `missing ${firstFew([...acked].filter(k => !early.has(k) && !late.has(k)))}`);
  await closeConsumer(c);
  ok(`the first group went on after the master's return: ${early.size} before, ${late.size} ` +
    'after, none skipped');
}

/* Where the records of a CommitLog segment end (TOTALSIZE + MAGIC, as the store reads). */
function logEnd(buf) {
  let off = 0;
  while (off + 8 <= buf.length) {
    const size = buf.readUInt32BE(off);
    const magic = buf.readUInt32BE(off + 4);
    if (size < 8 || off + size > buf.length || (magic !== 0xDAA320A7 && magic !== 0xCBD43194)) {
      break;
    }
    off += size;
  }
  return off;
}

/*
 * A disk that lost what it held last: @bufDir (the write-behind buffers) emptied and the
 * newest written segment of each shard of @store's CommitLog zeroed over its last @n bytes
 * of records. Return: {shard: bytes zeroed}.
 */
function loseTail(store, bufDir, n) {
  fs.rmSync(bufDir, { recursive: true, force: true });
  fs.mkdirSync(bufDir, { recursive: true });
  const lost = {};
  const root = path.join(store, 'commitlog');
  for (const shard of fs.readdirSync(root).sort()) {
    const segs = fs.readdirSync(path.join(root, shard)).filter(f => /^\d{20}$/.test(f)).sort();
    for (const seg of segs.reverse()) {
      const file = path.join(root, shard, seg);
      const end = logEnd(fs.readFileSync(file));
      if (end === 0) {
        continue;
      }
      const from = Math.max(0, end - n);
      const fd = fs.openSync(file, 'r+');
      fs.writeSync(fd, Buffer.alloc(end - from), 0, end - from, from);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      lost[shard] = end - from;
      break;
    }
  }
  return lost;
}

function removeTmpDir() {
  if (tmpDir && !process.env.SP_COMPAT_KEEP) {
    try {
      fs.rmSync(tmpDir, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      console.log(`# could not remove ${tmpDir}: ${err.message}`);
    }
  }
}

/* The daemons die with this process: on any exit, and by the overall cap. */
process.on('exit', killAllSync);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    console.log(`FAIL: ${phase}: got ${sig}; stopping everything`);
    killAllSync();
    removeTmpDir();
    process.exit(1);
  });
}
const watchdog = setTimeout(() => {
  console.log(`FAIL: ${phase}: the whole run exceeded ${BUDGET_MS / 1000} s (SP_COMPAT_BUDGET_S); ` +
    'stopping everything');
  brokerLogTail();
  console.log(`# ali-ons warnings/errors, last 15:\n${aliLog.slice(-15).join('\n')}`);
  killAllSync();
  removeTmpDir();
  process.exit(1);
}, BUDGET_MS);

main().then(code => {
  clearTimeout(watchdog);
  process.exit(code);
}, err => {
  console.log(`FAIL: internal: ${err && err.stack}`);
  killAllSync();
  process.exit(1);
});
