// SPDX-License-Identifier: Apache-2.0
// sprocket console: the broker's and the NameServer's pages (docs/observability.md).
// No framework, no network beyond the daemon's own /api/: the page asks every second and
// redraws. Every value reaches the page through textContent, never as HTML.
"use strict";

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

async function api(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

function table(id, head, rows) {
  const t = el("table", { id });
  t.append(el("tr", {}, ...head.map(h => el("th", h.num ? { class: "num" } : {}, h.name || h))));
  for (const r of rows) t.append(r);
  return t;
}

function td(v, num) { return el("td", num ? { class: "num" } : {}, v); }

function replace(id, node) {
  const old = document.getElementById(id);
  old.replaceWith(node);
}

function fmtDur(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 120) return s + " s";
  if (s < 7200) return Math.floor(s / 60) + " min";
  return Math.floor(s / 3600) + " h";
}

function fmtNs(ns) {
  if (ns < 1000) return ns + " ns";
  if (ns < 1e6) return (ns / 1e3).toFixed(ns < 1e4 ? 2 : 1) + " us";
  if (ns < 1e9) return (ns / 1e6).toFixed(ns < 1e7 ? 2 : 1) + " ms";
  return (ns / 1e9).toFixed(2) + " s";
}

// The bucket bound at or below which fraction p of the samples in counts[] fall (+Inf: null).
function percentile(bounds, counts, p) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  let cum = 0;
  for (let i = 0; i < counts.length; i++) {
    cum += counts[i];
    if (cum >= p * total) return i < bounds.length ? bounds[i] : null;
  }
  return null;
}

// ---- the broker ----

const COLORS = ["#1a73e8", "#e8710a", "#188038", "#d01884", "#9334e6", "#12b5cb", "#b3261e", "#5f6368"];
const state = { lastTopics: null, lastAt: 0, lastGroups: null, lastGroupsAt: 0, lastLat: null, series: [], kind: "request_dataplane" };

function brokerHeader(b) {
  document.title = "sprocket " + b.brokerName;
  replace("who", el("div", { id: "who" },
    el("h1", {}, "broker " + b.brokerName),
    el("span", { class: "sub" }, `${b.cluster} · id ${b.brokerId} · ${b.role} · ${b.cores} cores · up ${fmtDur(b.uptimeMs)} · ${b.version}`)));
  replace("health", el("section", { id: "health" },
    el("h2", {}, "Health"),
    el("div", { id: "ready", class: b.ready ? "ok" : "bad", "data-ready": String(b.ready) }, b.ready ? "ready" : "not ready"),
    el("pre", { class: "muted" }, b.health),
    el("div", {}, `messages in ${b.msgsIn}, out ${b.msgsOut}`)));
}

function brokerTopics(topics, now) {
  const prev = state.lastTopics, dt = (now - state.lastAt) / 1000;
  const rows = [];
  for (const t of topics) {
    if (t.system) continue;
    const sum = t.queues.reduce((a, q) => a + q.maxOffset, 0);
    const was = prev && prev.get(t.topic);
    const rate = was !== undefined && dt > 0 ? Math.max(0, (sum - was) / dt) : null;
    rows.push(el("tr", { "data-topic": t.topic },
      td(t.topic), td(`${t.writeQueueNums}/${t.readQueueNums}`), td(t.perm, true), td(sum, true),
      el("td", { class: "num rate" }, rate === null ? "-" : rate.toFixed(1)),
      el("td", { class: "queues" }, t.queues.map(q => `q${q.queueId}@core${q.core}: ${q.minOffset}..${q.maxOffset}`).join("  "))));
  }
  state.lastTopics = new Map(topics.map(t => [t.topic, t.queues.reduce((a, q) => a + q.maxOffset, 0)]));
  state.lastAt = now;
  replace("topics", table("topics", ["topic", "write/read queues", { name: "perm", num: 1 }, { name: "messages", num: 1 }, { name: "msg/s", num: 1 }, "queues: min..max offset"], rows));
}

function brokerGroups(groups, now) {
  const prev = state.lastGroups, dt = (now - state.lastGroupsAt) / 1000;
  const consumed = g => g.queues.reduce((a, q) => a + q.consumerOffset, 0);
  const rows = groups.map(g => {
    const was = prev && prev.get(g.group);
    const rate = was !== undefined && dt > 0 ? Math.max(0, (consumed(g) - was) / dt) : null;
    return el("tr", { "data-group": g.group },
    td(g.group),
    td(g.members.length ? g.members.join(", ") : "none online"),
    el("td", { class: "num lag", "data-lag": String(g.lag) }, g.lag),
    el("td", { class: "num rate" }, rate === null ? "-" : rate.toFixed(1)),
    el("td", { class: "queues" }, g.queues.map(q => `${q.topic} q${q.queueId}: ${q.consumerOffset}/${q.brokerOffset} (lag ${q.lag})`).join("  ")));
  });
  state.lastGroups = new Map(groups.map(g => [g.group, consumed(g)]));
  state.lastGroupsAt = now;
  replace("groups", table("groups", ["group", "members", { name: "lag", num: 1 }, { name: "msg/s", num: 1 }, "per queue: consumer/broker offset"], rows));
}

function brokerLatency(lat) {
  const prev = state.lastLat;
  state.lastLat = lat;
  if (!prev) return;
  const point = { cores: [] };
  for (const c of lat.cores) {
    const was = prev.cores.find(p => p.core === c.core);
    const d = c[state.kind].map((v, i) => v - (was ? was[state.kind][i] : 0));
    point.cores.push({ core: c.core, p50: percentile(lat.boundsNs, d, 0.5), p99: percentile(lat.boundsNs, d, 0.99), n: d.reduce((a, b) => a + b, 0) });
  }
  state.series.push(point);
  if (state.series.length > 60) state.series.shift();
  drawLatency();
}

function drawLatency() {
  const cv = document.getElementById("chart");
  const w = cv.clientWidth, h = cv.clientHeight;
  cv.width = w; cv.height = h;
  const g = cv.getContext("2d");
  g.clearRect(0, 0, w, h);
  const vals = [];
  for (const p of state.series) for (const c of p.cores) for (const v of [c.p50, c.p99]) if (v) vals.push(v);
  const max = Math.max(1000, ...vals);
  const lo = Math.log2(128), hi = Math.log2(max * 2);
  const y = v => h - 20 - (Math.log2(v) - lo) / (hi - lo) * (h - 30);
  g.strokeStyle = "#eef0f4"; g.fillStyle = "#7a8499"; g.font = "11px sans-serif";
  for (let v = 256; v <= max * 2; v *= 4) { g.beginPath(); g.moveTo(50, y(v)); g.lineTo(w, y(v)); g.stroke(); g.fillText(fmtNs(v), 2, y(v) + 4); }
  const ncores = state.series.length ? state.series[state.series.length - 1].cores.length : 0;
  const legend = [];
  for (let c = 0; c < ncores; c++) {
    for (const [k, dash] of [["p50", []], ["p99", [4, 3]]]) {
      const color = COLORS[c % COLORS.length];
      g.strokeStyle = color; g.setLineDash(dash); g.beginPath();
      let started = false;
      state.series.forEach((p, i) => {
        const v = p.cores[c] && p.cores[c][k];
        const x = 50 + i * (w - 60) / 59;
        if (!v) { started = false; return; }
        if (!started) g.moveTo(x, y(v)); else g.lineTo(x, y(v));
        started = true;
      });
      g.stroke();
      const last = state.series[state.series.length - 1].cores[c];
      legend.push(el("span", {}, el("i", { style: `background:${color}` }), `core ${c} ${k} ${last && last[k] ? fmtNs(last[k]) : "-"}`));
    }
  }
  g.setLineDash([]);
  const n = state.series.length ? state.series[state.series.length - 1].cores.reduce((a, c) => a + c.n, 0) : 0;
  replace("legend", el("div", { id: "legend", class: "legend" }, ...legend, el("span", { class: "muted" }, `${n} samples in the last second`)));
}

async function brokerTick() {
  try {
    const [b, topics, groups, lat] = await Promise.all([api("/api/broker"), api("/api/topics"), api("/api/groups"), api("/api/latency")]);
    brokerHeader(b);
    brokerTopics(topics, Date.now());
    brokerGroups(groups, Date.now());
    brokerLatency(lat);
    replace("error", el("div", { id: "error" }));
  } catch (e) {
    replace("error", el("div", { id: "error", class: "err" }, "the broker did not answer: " + e.message));
  }
}

// The form's arguments are the page's own (?topic=&key=&id=): a lookup has an address to share.
async function brokerLookup() {
  const args = new URLSearchParams(location.search);
  const form = document.getElementById("lookup");
  for (const k of ["topic", "key", "id"]) form.elements[k].value = args.get(k) || "";
  if (!args.get("key") && !args.get("id")) return;
  const q = new URLSearchParams();
  for (const k of ["topic", "key", "id"]) if (args.get(k)) q.set(k, args.get(k));
  let r;
  try {
    const resp = await fetch("/api/message?" + q, { cache: "no-store" });
    r = await resp.json();
  } catch (e) {
    replace("found", el("div", { id: "found", class: "err" }, "the lookup failed: " + e.message));
    return;
  }
  if (r.error) {
    replace("found", el("div", { id: "found", class: "err" }, r.error));
    return;
  }
  const rows = r.messages.map(m => el("tr", { "data-msgid": m.msgId },
    td(m.msgId), td(`${m.topic} q${m.queueId}@${m.queueOffset}`),
    td(new Date(m.storeTimestamp).toISOString()),
    td(Object.entries(m.properties).filter(([k]) => ["KEYS", "TAGS", "UNIQ_KEY"].includes(k)).map(([k, v]) => `${k}=${v}`).join(" ")),
    el("td", { class: "body" }, m.body !== undefined ? m.body : "hex " + m.bodyHex, m.bodyTruncated ? ` (${m.bodyLength} bytes, cut)` : ""),
    td(m.consumedBy.length ? m.consumedBy.map(c => `${c.group}: ${c.consumed ? "consumed" : "not yet"}`).join(", ") : "no group")));
  replace("found", el("div", { id: "found", "data-found": String(r.messages.length) },
    el("div", { class: "muted" }, `${r.messages.length} found` + (r.hint ? ": " + r.hint : "")),
    table("messages", ["msgId", "queue@offset", "stored", "keys", "body", "consumer groups"], rows)));
}

function brokerPage() {
  brokerLookup();
  document.getElementById("kind").addEventListener("change", ev => { state.kind = ev.target.value; state.series = []; });
  brokerTick();
  setInterval(brokerTick, 1000);
}

// ---- the NameServer ----

async function namesrvTick() {
  try {
    const c = await api("/api/cluster");
    const brokers = c.brokers.slice().sort((a, b) => (a.cluster + a.brokerName).localeCompare(b.cluster + b.brokerName) || a.brokerId - b.brokerId);
    replace("brokers", table("brokers", ["cluster", "brokerName", "id", "role", "address", "writable", { name: "topics", num: 1 }],
      brokers.map(b => el("tr", { "data-broker": b.brokerName, "data-id": String(b.brokerId) },
        td(b.cluster), td(b.brokerName), td(b.brokerId), td(b.brokerId === 0 ? "master" : "slave"), td(b.addr),
        el("td", { class: b.writable ? "ok" : "bad" }, b.writable ? "yes" : "no (wiped)"), td(b.topics, true)))));
    const byTopic = new Map();
    for (const t of c.topics) {
      if (!byTopic.has(t.topic)) byTopic.set(t.topic, []);
      byTopic.get(t.topic).push(t);
    }
    const names = [...byTopic.keys()].sort();
    replace("topics", table("topics", ["topic", "brokers: write/read queues, perm"],
      names.map(n => el("tr", { "data-topic": n }, td(n),
        el("td", { class: "queues" }, byTopic.get(n).map(t => `${t.brokerName}: ${t.writeQueueNums}/${t.readQueueNums} perm ${t.perm}`).join("  "))))));
    replace("summary", el("div", { id: "summary" }, `${brokers.length} broker addresses, ${names.length} topics`));
    replace("error", el("div", { id: "error" }));
  } catch (e) {
    replace("error", el("div", { id: "error", class: "err" }, "the NameServer did not answer: " + e.message));
  }
}

function namesrvPage() {
  namesrvTick();
  setInterval(namesrvTick, 1000);
}
