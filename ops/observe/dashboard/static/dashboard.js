// The dashboard page: polls api/stats and draws its `charts` (already in uPlot's columnar layout, computed by
// ops/observe/dashboard/series.py) with the vendored uPlot. Time axes get seconds since the epoch and print local
// wall-clock times. Test hooks: <body data-rendered="N"> (charts drawn with data), data-fetches, on each
// chart figure data-empty (no data yet), data-x-ticks (the x-axis labels uPlot drew last), and on the replicas
// table's section data-count (replicas listed) and data-stale (how many of them are stale).
"use strict";

const POLL_MS = 3000;
const HEIGHT = 230;
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
const queueHistory = { x: [], ys: {} };  // Redis holds only the current depth: the page keeps the history

const pad = n => String(n).padStart(2, "0");
function clock(sec, withSeconds) {
  const d = new Date(sec * 1000);
  return pad(d.getHours()) + ":" + pad(d.getMinutes()) + (withSeconds ? ":" + pad(d.getSeconds()) : "");
}
function num(v, digits) {
  if (v === null || v === undefined) return "-";
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(digits);
}

// How each chart looks; `key` names its series in the JSON `charts` (queue: built here).
const SPECS = [
  { id: "chart-reward", key: "reward_by_version", time: false, y: [0, 1], points: true,
    xValue: (s, v, i) => v === null || v === undefined ? "-" : "v" + v + (s.extra.n ? ` (n=${s.extra.n[i]})` : "") },
  { id: "chart-probe", key: "probe", time: false, y: [0, 1], points: true, headline: true,
    band: ["95% high", "95% low"], xLabel: "served policy version (median over the round)", xValue: probeRound },
  { id: "chart-turns", key: "tool_turns", y: [0, null], dots: ["per episode"] },
  { id: "chart-zerovar", key: "zero_variance", y: [0, 1], points: true },
  { id: "chart-staleness", key: "staleness", y: [0, null], dots: ["staleness"] },
  { id: "chart-queue", key: null, y: [0, null], stepped: true, points: true },
  { id: "chart-versions", key: "versions", y: [0, null], stepped: true, spanGaps: true },
  { id: "chart-throughput", key: "throughput", y: [0, null], bars: true },
  { id: "chart-learner", key: "learner", y: [null, null], rightScale: "kl" },
  { id: "chart-gate", key: "gate", y: [0, 1], points: true, spanGaps: true },
  { id: "chart-roles", key: "scored_success", y: [0, 1], spanGaps: true },
];
const plots = {};  // chart id → {plot, labels}

const signed = v => (v >= 0 ? "+" : "") + v.toFixed(3);

// a probe round's legend label: its median version, the versions it spanned (a swap can land mid-round), its
// held-out size and its paired difference from v0 with the bootstrap 95% interval
function probeRound(s, v, i) {
  if (v === null || v === undefined) return "-";
  const e = s.extra, at = k => e[k]?.[i];
  const span = at("version_min") !== undefined && at("version_min") !== at("version_max")
    ? `v${at("version_min")}–v${at("version_max")}, ` : "";
  const n = at("n") === null || at("n") === undefined ? "" : `n=${at("n")}`;
  const base = s.meta?.baseline_version;
  const diff = at("diff") === null || at("diff") === undefined || v === base ? ""
    : `, vs v${base} ${signed(at("diff"))} [${signed(at("diff_low"))}, ${signed(at("diff_high"))}]`;
  return "v" + v + (span || n || diff ? ` (${span}${n}${diff})` : "");
}

// the probe's headline: the latest round's success against v0's, paired per item, per suite
const SUITE_LABELS = { held_out: "held-out", test: "test", novel: "novel", train_probe: "train-probe", bfcl: "BFCL" };
function headlineText(series) {
  const m = series && series.meta;
  if (!m || !m.vs_v0 || !series.x.length) return "";
  if (m.version === m.baseline_version) return `— v${m.version} is the baseline (${m.mode}, ${m.items} items)`;
  const cells = Object.entries(m.vs_v0).map(([name, d]) =>
    `${SUITE_LABELS[name] || name} ${d.a.toFixed(3)} → ${d.b.toFixed(3)}, ${signed(d.diff)} ` +
    `[${signed(d.ci_low)}, ${signed(d.ci_high)}] p=${d.mcnemar_p.toPrecision(2)} (n=${d.n})`);
  return `— v${m.baseline_version} → v${m.version}, paired (bootstrap 95%, McNemar p): ` + cells.join("; ");
}

function xAxis(spec, fig) {
  if (spec.time === false) {  // versions are integers: no ticks between them
    return { label: spec.xLabel || "served policy version", labelSize: 20,
             incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500],
             values: (u, splits) => {
               const labels = splits.map(v => "v" + v);
               fig.dataset.xTicks = labels.join(" ");
               return labels;
             } };
  }
  return {
    values: (u, splits) => {
      const span = u.scales.x.max - u.scales.x.min;
      const labels = splits.map(v => clock(v, span < 180));
      fig.dataset.xTicks = labels.join(" ");
      return labels;
    },
  };
}

// lines that share a time column have gaps where the other line has a row: the legend shows the value held then
function held(u, si, i) {
  const ys = u.data[si];
  for (let j = Math.min(i ?? ys.length - 1, ys.length - 1); j >= 0; j--) if (ys[j] !== null) return ys[j];
  return null;
}

function seriesOpts(spec, label, i) {
  const color = COLORS[i % COLORS.length];
  const s = { label, stroke: color, width: 2, spanGaps: !!spec.spanGaps,
              value: (u, v, si, idx) => num(v ?? held(u, si, idx), 3) };
  if (spec.dots && spec.dots.includes(label)) {  // single episodes: points, no line
    Object.assign(s, { width: 0, paths: () => null, points: { show: true, size: 4, fill: color } });
  }
  if (spec.points) s.points = { show: true, size: spec.stepped ? 5 : 7, fill: color };
  if (spec.stepped) s.paths = uPlot.paths.stepped({ align: 1 });
  if (spec.bars) {
    Object.assign(s, { paths: uPlot.paths.bars({ size: [0.8, 40] }), fill: color + "99", points: { show: false } });
  }
  if (spec.rightScale === label) s.scale = label;
  if (spec.band && spec.band.includes(label)) {  // an interval's edges: thin, dashed, no points
    Object.assign(s, { stroke: COLORS[0], width: 1, dash: [4, 4], points: { show: false } });
  }
  return s;
}

function makePlot(spec, fig, series) {
  const labels = Object.keys(series.ys);
  const opts = {
    width: fig.clientWidth - 16, height: HEIGHT,
    scales: { x: { time: spec.time !== false, range: spec.time === false ? undefined : timeRange },
              y: { range: (u, lo, hi) => yRange(spec, lo, hi) } },
    axes: [xAxis(spec, fig), { size: 50 }],
    series: [spec.time === false
               ? { label: "version", value: (u, v, si, idx) => spec.xValue(u._series || series, v, idx) }
               : { label: "time", value: (u, v) => v === null ? "-" : clock(v, true) },
             ...labels.map((label, i) => seriesOpts(spec, label, i))],
    legend: { live: true },
  };
  if (spec.band && spec.band.every(l => labels.includes(l))) {  // fill between the interval's edges
    opts.bands = [{ series: spec.band.map(l => labels.indexOf(l) + 1), fill: COLORS[0] + "22" }];
  }
  if (spec.rightScale) {
    opts.scales[spec.rightScale] = { auto: true };
    opts.axes.push({ scale: spec.rightScale, side: 1, size: 60, grid: { show: false } });
  }
  const plot = new uPlot(opts, columns(series, labels), fig);
  plot._series = series;  // the legend's x formatter reads the latest extra columns (trajectory counts)
  return { plot, labels: labels.join("\u0000") };
}

function yRange(spec, lo, hi) {
  let [min, max] = [spec.y[0] ?? lo, spec.y[1] ?? hi];
  // a [0, 1] chart still shows an out-of-range value (the omission guard's -0.5 preference reward)
  if (spec.y[0] !== null && lo < min) min = Math.floor(lo * 10) / 10;
  if (spec.y[1] !== null && hi > max) max = hi;
  if (max <= min) max = min + 1;
  return [min, spec.y[1] === null ? max + (max - min) * 0.05 : max];
}

// at least a minute of x: a few seconds of history would otherwise get sub-second ticks that all read the same
function timeRange(u, lo, hi) { return hi - lo < 60 ? [hi - 60, hi + 1] : [lo, hi]; }

function columns(series, labels) { return [series.x, ...labels.map(l => series.ys[l])]; }

function draw(spec, series) {
  const fig = document.getElementById(spec.id);
  const empty = !series || !series.x.length;
  let cell = plots[spec.id];
  if (empty) {
    fig.dataset.empty = "1";
    if (cell) { cell.plot.destroy(); delete plots[spec.id]; }
    return false;
  }
  delete fig.dataset.empty;
  const labels = Object.keys(series.ys).join("\u0000");
  if (cell && cell.labels !== labels) { cell.plot.destroy(); cell = null; }  // a new channel appeared
  if (!cell) plots[spec.id] = cell = makePlot(spec, fig, series);
  else { cell.plot._series = series; cell.plot.setData(columns(series, Object.keys(series.ys))); }
  // the legend shows the latest point until the cursor picks another one
  cell.plot.setLegend({ idx: series.x.length - 1 });
  return true;
}

function recordQueues(data) {
  const t = data.now || Date.now() / 1000;
  queueHistory.x.push(t);
  for (const q of data.queues || []) {
    const name = q.stream.split(":").pop();
    if (!queueHistory.ys[name]) queueHistory.ys[name] = queueHistory.x.slice(0, -1).map(() => null);
    queueHistory.ys[name].push(q.backlog);
  }
  for (const ys of Object.values(queueHistory.ys)) while (ys.length < queueHistory.x.length) ys.push(null);
  if (queueHistory.x.length > 600) {  // half an hour of polls
    queueHistory.x.shift();
    for (const ys of Object.values(queueHistory.ys)) ys.shift();
  }
}

// one row per serve replica; text only (textContent), never markup: ids, URLs and errors come from Redis
function renderReplicas(replicas) {
  const section = document.getElementById("replicas");
  const body = section.querySelector("tbody");
  const rows = replicas.map(r => {
    const tr = document.createElement("tr");
    if (r.stale) tr.className = "stale";
    const swap = r.last_swap === "none" ? "none yet"
      : `${r.last_swap} (v${r.last_swap_version})` + (r.last_error && r.last_swap !== "ok" ? ": " + r.last_error : "");
    const id = r.role && r.role !== "both" ? `${r.replica} [${r.role}]` : r.replica;  // serve.role
    const cells = [id, "v" + r.policy_version, `${num(r.age_s, 1)} s ago` + (r.stale ? " — STALE" : ""),
                   swap, r.url || "-"];
    for (const text of cells) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    return tr;
  });
  if (!rows.length) {
    const tr = document.createElement("tr");
    tr.className = "none";
    tr.innerHTML = '<td colspan="5">none announced</td>';
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  section.dataset.count = String(replicas.length);
  section.dataset.stale = String(replicas.filter(r => r.stale).length);
}

// the gate's decisions and the scored-success rollbacks, newest first; text only (textContent), as the replicas
const GATE_ROWS = 12;
function gateRows(versions) {
  const interval = (d, lo, hi) => d === null || d === undefined ? "-"
    : `${signed(d)} [${lo === null || lo === undefined ? "-" : signed(lo)}, ${hi === null || hi === undefined ? "-" : signed(hi)}]`;
  const decisions = (versions.decisions || []).map(d => ({
    at: d.at, cells: ["v" + d.candidate, "v" + d.promoted, d.outcome, interval(d.diff, d.ci_low, d.ci_high), String(d.n), d.why],
    rollback: false }));
  const rollbacks = (versions.rollbacks || []).map(r => ({
    at: r.at, cells: ["-", `v${r.version} → v${r.previous}`, r.outcome + " (scored success)",
                      interval(r.diff, null, r.ci_high), `${r.n} / ${r.previous_n}`, r.why],
    rollback: true }));
  return [...decisions, ...rollbacks].sort((a, b) => b.at - a.at).slice(0, GATE_ROWS);
}

function renderRoles(versions) {
  const v = versions || {};
  document.getElementById("promoted").textContent = v.promoted === null || v.promoted === undefined ? "-" : "v" + v.promoted;
  document.getElementById("candidate").textContent = v.candidate === null || v.candidate === undefined ? "-" : "v" + v.candidate;
  const record = v.record;
  document.getElementById("record").textContent = record
    ? `— v${record.promoted} promoted (${record.reason}); rolled back: ${record.rolled_back.length ? record.rolled_back.map(x => "v" + x).join(", ") : "none"}`
    : "";
  const section = document.getElementById("gate");
  const rows = gateRows(v).map(r => {
    const tr = document.createElement("tr");
    if (r.rollback) tr.className = "rollback";
    for (const text of [clock(r.at, true), ...r.cells]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    return tr;
  });
  if (!rows.length) {
    const tr = document.createElement("tr");
    tr.className = "none";
    tr.innerHTML = '<td colspan="7">no decision yet</td>';
    rows.push(tr);
  }
  section.querySelector("tbody").replaceChildren(...rows);
  section.dataset.count = String(rows.filter(r => r.className !== "none").length);
}

// the warm start `slca up` trains beside serving (api/stats `warm_start`: ops/experiments/warmstart/progress.py)
function warmStartText(w) {
  const mmss = s => `${Math.floor(s / 60)}:${String(Math.floor(s % 60)).padStart(2, "0")}`;
  if (w.phase === "training") {
    const left = w.seconds_left === null ? "-" : mmss(w.seconds_left);
    return `training ${Math.round(100 * w.progress)}%, step ${w.step}, ${left} left`;
  }
  if (w.phase === "served" || w.phase === "announced") return `v${w.version} ${w.phase}`;
  return w.phase + (w.error ? ": " + w.error : "");
}

function renderWarmStart(w) {
  document.getElementById("warmstart-kv").hidden = !w;
  if (w) document.getElementById("warmstart").textContent = warmStartText(w);
}

function render(data) {
  recordQueues(data);
  renderReplicas(data.replicas || []);
  renderRoles(data.versions);
  renderWarmStart(data.warm_start || null);
  // an idle system reads all-zero depths: that is "no data yet", not a chart of zeros
  const active = (data.rewards || []).length || (data.queues || []).some(q => q.length > 0);
  let rendered = 0;
  for (const spec of SPECS) {
    const queues = active ? { x: queueHistory.x, ys: queueHistory.ys, extra: {} } : null;
    const series = spec.key ? data.charts[spec.key] : queues;
    if (draw(spec, series)) rendered += 1;
    if (spec.headline) document.querySelector(`#${spec.id} .headline`).textContent = headlineText(series);
  }
  document.body.dataset.rendered = String(rendered);
  const rewards = data.rewards || [], learner = data.learner || [];
  const served = rewards.filter(r => r.policy_version !== null).pop();
  const published = data.published_version;
  document.getElementById("published").textContent = published === null ? "-" : "v" + published;
  document.getElementById("served").textContent = served ? "v" + served.policy_version : "-";
  document.getElementById("scored").textContent = String(rewards.length);
  const last = learner[learner.length - 1];
  document.getElementById("step").textContent = last ? String(last.step) : "-";
  document.getElementById("updated").textContent = clock(data.now || Date.now() / 1000, true);
}

// api/stats needs a key when the server has keys. The page asks for it in a form and sends it once, in a header, to
// api/login, which answers with a session cookie (HttpOnly: no script reads it; SameSite=Strict): a key is never put
// in a URL (URLs end up in logs and browser history) and never kept by the page. An old link's key is dropped unused.
if (/(?:^#|&)tok/.test(location.hash)) history.replaceState(null, "", location.pathname + location.search);

function apiUrl(path) {
  const base = location.href.split(/[?#]/)[0];
  return new URL(path, base.endsWith("/") ? base : base + "/").toString();
}

const signin = document.getElementById("signin");
signin.addEventListener("submit", async (event) => {
  event.preventDefault();
  const field = signin.elements.namedItem("key");
  const resp = await fetch(apiUrl("api/login"), {
    method: "POST", cache: "no-store", headers: { Authorization: "Bearer " + field.value },
  });
  field.value = "";
  if (resp.ok) {
    signin.hidden = true;
    document.getElementById("error").textContent = "";
  } else {
    document.getElementById("error").textContent = "sign-in failed: unknown key";
  }
});

async function poll() {
  try {
    const resp = await fetch(apiUrl("api/stats?limit=1000"), { cache: "no-store" });
    signin.hidden = resp.status !== 401;
    const data = await resp.json();
    if (!resp.ok) throw new Error(data.error || resp.statusText);
    render(data);
    document.getElementById("error").textContent = "";
    document.body.dataset.fetches = String(Number(document.body.dataset.fetches) + 1);
  } catch (err) {
    document.getElementById("error").textContent = "stats unavailable: " + err.message;
  }
  setTimeout(poll, POLL_MS);
}

for (const spec of SPECS) {  // before the first answer every chart says so
  const fig = document.getElementById(spec.id);
  fig.dataset.empty = "1";
  fig.insertAdjacentHTML("beforeend", '<div class="empty">no data yet</div>');
}
poll();
