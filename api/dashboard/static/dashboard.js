// JigSaw dashboard: polls the read-only JSON API with the token from this tab's session storage.
// Every piece of server data is written with textContent (never innerHTML): the CSP forbids
// inline script, and this keeps job names from ever being parsed as markup.
"use strict";

const TOKEN_KEY = "jigsaw.token";
const POLL_MS = 2000;
const ACTIVE_STATES = ["PENDING", "ADMITTED", "RUNNING", "PREEMPTED", "RETRYING"];
const FINISHED_STATES = ["SUCCEEDED", "FAILED", "CANCELLED"];
const LOSS_JOBS = 8;
const UTIL_WINDOW_S = 30 * 60;
const PALETTE = ["#5b9dff", "#3ecf8e", "#f5b544", "#c77dff", "#ff7a8a", "#4fd1c5",
  "#f08c4a", "#a3e635", "#f472b6", "#93c5fd"];

class AuthError extends Error {}

const colorOf = new Map();
const lossByJob = new Map();  // job id -> {name, points: [[iteration, loss]], last}
let utilChart = null;
let lossChart = null;
let lossKey = "";
let timer = null;

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function jobColor(id) {
  if (!colorOf.has(id)) colorOf.set(id, PALETTE[colorOf.size % PALETTE.length]);
  return colorOf.get(id);
}

async function api(path) {
  const token = sessionStorage.getItem(TOKEN_KEY) || "";
  const response = await fetch(path, {
    headers: { Authorization: "Bearer " + token, Accept: "application/json" },
    cache: "no-store",
  });
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  const detail = body && typeof body.detail === "string" ? body.detail : "HTTP " + response.status;
  if (response.status === 401 || response.status === 403) throw new AuthError(detail);
  if (!response.ok) throw new Error(path + ": " + detail);
  return body;
}

function query(states, limit) {
  const params = new URLSearchParams();
  states.forEach((s) => params.append("state", s));
  params.set("limit", String(limit));
  return "/api/v1/jobs?" + params.toString();
}

// ---------------------------------------------------------------- summary cards
function card(label, value, sub) {
  const node = el("div", "card");
  node.append(el("div", "label", label), el("div", "value num", value));
  if (sub) node.append(el("div", "sub", sub));
  return node;
}

function renderSummary(cluster, active, scheduler) {
  const gpus = cluster.gpus || [];
  const busy = gpus.filter((g) => (g.workers || []).length > 0).length;
  const shared = gpus.filter((g) => new Set((g.workers || []).map((w) => w.job_id)).size > 1).length;
  const running = active.filter((j) => j.state === "RUNNING").length;
  const waiting = active.filter((j) => ["PENDING", "PREEMPTED", "RETRYING"].includes(j.state)).length;
  const load = gpus.reduce((sum, g) => sum + Math.min(g.load || 0, 1), 0);
  const cards = [
    card("GPUs busy", busy + " / " + gpus.length, (cluster.nodes || []).length + " nodes"),
    card("Mean GPU load", gpus.length ? Math.round((100 * load) / gpus.length) + "%" : "-", "predicted, capped at 100% per GPU"),
    card("Shared GPUs", String(shared), "hold workers of 2+ jobs"),
    card("Running jobs", String(running), waiting + " waiting"),
  ];
  if (scheduler) {
    const latency = typeof scheduler.last_round_latency_s === "number"
      ? (scheduler.last_round_latency_s * 1000).toFixed(1) + " ms last round" : "";
    cards.push(card("Policy", scheduler.policy || "-", "round " + (scheduler.round ?? "-") + (latency ? " · " + latency : "")));
  }
  $("summary").replaceChildren(...cards);
}

// ---------------------------------------------------------------- jobs table
const COLUMN_LABELS = ["Job", "User / queue", "State", "Progress", "Plan", "η", "Loss", "GPUs"];
const DATA_KINDS = ["data", "spb"];  // "spb": how servers spelled data parallelism before

// A pipeline or hybrid plan, in a few words (its full text is the cell's tooltip).
function typedPlanText(job) {
  const plan = job.plan_detail || {};
  if (job.plan_kind === "pipeline") {
    const stages = (plan.stages || []).length;
    const replicas = plan.replicas > 1 ? " × " + plan.replicas : "";
    return "pipeline · " + stages + " stages" + replicas;
  }
  if (job.plan_kind === "hybrid") return "hybrid · " + (plan.num_workers || "?") + " shards";
  return job.plan_kind;
}

function planCell(job, color) {
  const cell = el("div", "plan");
  const plan = job.plan;
  if (job.plan_kind && !DATA_KINDS.includes(job.plan_kind)) {
    const detail = job.plan_detail || {};
    const parts = job.plan_kind === "pipeline" ? (detail.stages || []) : [];
    const blocks = detail.num_blocks || 1;
    // One bar per pipeline stage, as tall as its share of the blocks.
    parts.forEach((stage, index) => {
      const bar = el("div", "w");
      bar.style.background = color;
      bar.style.height = Math.max(15, (100 * (stage[1] - stage[0] + 1)) / blocks) + "%";
      bar.title = "stage " + (index + 1) + ": blocks " + stage[0] + "-" + stage[1];
      cell.append(bar);
    });
    const text = el("span", "d", typedPlanText(job));
    text.title = job.eta && job.eta.current ? job.eta.current.plan : "";
    cell.append(text);
    return cell;
  }
  if (!plan || plan.length === 0) {
    const chosen = job.plan_types && job.plan_types.chosen;
    const waiting = chosen && !DATA_KINDS.includes(chosen) ? "runs " + chosen + " once started" : "not planned yet";
    cell.append(el("span", "muted", waiting));
    return cell;
  }
  const blocks = Math.max(...plan) + 1;
  plan.forEach((depth, rank) => {
    const bar = el("div", "w");
    bar.style.background = color;
    // Taller bar = deeper backprop: the bar shows the share of blocks this worker trains.
    bar.style.height = Math.max(15, (100 * (blocks - depth)) / blocks) + "%";
    bar.title = "worker " + rank + ": stop depth " + depth;
    cell.append(bar);
  });
  cell.append(el("span", "d", plan.join(",")));
  return cell;
}

// A pipeline or hybrid plan's one eta (no SPB depths), as the server gives it: 2BW's one-step
// weight delay at the job's lr, or 1 (GPipe, hybrid). Its current plan's once it runs, before
// that its one candidate (the plan the planner gives it); null for a data-parallel job.
function typedEta(eta) {
  if (eta.current) return eta.current.depths.length === 0 ? eta.current : null;
  const candidates = eta.candidates || [];
  return candidates.length === 1 && candidates[0].depths.length === 0 ? candidates[0] : null;
}

// eta of the plan the job runs, and where it comes from (online = the job's own gradient noise).
function etaText(eta) {
  const shown = eta && (eta.current || typedEta(eta));
  if (!shown) return "–";
  // A source reads up to its colon as a short label ("no SPB", "2BW's one-step weight
  // delay"); the whole source is the tooltip.
  return shown.eta.toFixed(3) + " · " + shown.source.split(":")[0];
}

function etaTitle(eta) {
  if (!eta) return "";
  const typed = typedEta(eta);
  if (typed) return typed.source;
  const lines = (eta.candidates || []).map((c) => c.plan + ": " + c.eta.toFixed(3) + " (" + c.source + ")");
  lines.push(eta.blocks_measured + " blocks measured, fewest " + eta.fewest_observations + "/" + eta.needed_observations + " observations");
  return lines.join("\n");
}

function renderJobs(active, finished) {
  const rows = [...active, ...finished].map((job) => {
    const tr = el("tr", FINISHED_STATES.includes(job.state) ? "finished" : "");
    tr.dataset.jobId = job.id;
    const name = el("div", "job-name");
    const swatch = el("span", "swatch");
    swatch.style.background = jobColor(job.id);
    name.append(swatch, el("span", "", job.name));
    const first = el("td");
    first.append(name, el("div", "job-id", job.id));
    const who = el("td");
    who.append(el("div", "", job.user), el("div", "muted", job.queue));
    const state = el("td");
    state.append(el("span", "badge state-" + job.state, job.state));
    if (job.reason) state.append(el("div", "reason muted", job.reason));
    const progress = el("td");
    const wrap = el("div", "progress");
    const bar = el("div", "bar");
    const fill = el("div");
    fill.style.width = (100 * (job.progress || 0)).toFixed(1) + "%";
    bar.append(fill);
    const done = Math.floor(job.iterations_done || 0);
    wrap.append(bar, el("div", "nums", done + " / " + job.iterations + " it · " + Math.round(100 * (job.progress || 0)) + "%"));
    progress.append(wrap);
    const plan = el("td");
    plan.append(planCell(job, jobColor(job.id)));
    const eta = el("td", "num eta", etaText(job.eta));
    eta.title = etaTitle(job.eta);
    const loss = el("td", "num", typeof job.last_loss === "number" ? job.last_loss.toFixed(4) : "–");
    const gpus = el("td", "num muted");
    gpus.append(el("div", "", (job.placement || []).map((g) => g[0] + ":" + g[1]).join(" ") || "–"));
    gpus.append(el("div", "size", sizeText(job)));
    const cells = [first, who, state, progress, plan, eta, loss, gpus];
    // The column's name on each cell: a narrow screen shows the row as a labelled card.
    cells.forEach((cell, index) => { cell.dataset.label = COLUMN_LABELS[index]; });
    tr.append(...cells);
    return tr;
  });
  $("jobs").tBodies[0].replaceChildren(...rows);
  $("jobs-empty").hidden = rows.length > 0;
}

// Workers x per-worker batch = global batch, an elastic job's range (its resizes are
// events; the latest one's reason is the job's reason, shown under its state), and the
// optimizer when it is not the default SGD.
function sizeText(job) {
  const spec = job.spec || {};
  const workers = job.current_workers || spec.workers || 0;
  let text = workers + " × " + job.worker_batch + " = " + job.global_batch;
  const low = spec.min_workers ?? spec.workers;
  const high = spec.max_workers ?? spec.workers;
  if (low !== high || spec.batch_policy === "adaptive") {
    text += " · elastic " + low + ".." + high + " (" + spec.batch_policy + ")";
  }
  if (spec.optimizer && spec.optimizer !== "sgd") text += " · " + spec.optimizer;
  return text;
}

// ---------------------------------------------------------------- GPU packing (the jigsaw)
function renderPacking(cluster) {
  const byNode = new Map();
  (cluster.gpus || []).forEach((gpu) => {
    const node = gpu.id[0];
    if (!byNode.has(node)) byNode.set(node, []);
    byNode.get(node).push(gpu);
  });
  const jobsSeen = new Map();
  // How workers that book more than a GPU run on it (JIGSAW_SHARING): in turns, or at once.
  const concurrent = cluster.sharing === "concurrent";
  const nodes = (cluster.nodes || []).map((node) => {
    const box = el("div", "node" + (node.alive === false ? " dead" : ""));
    box.dataset.node = String(node.index);
    const head = el("div", "node-head");
    head.append(el("strong", "", node.name), el("span", "", node.num_gpus + " × " + node.gpu_type + (node.alive === false ? " · DOWN" : "")));
    const gpus = el("div", "gpus");
    (byNode.get(node.index) || []).forEach((gpu) => gpus.append(gpuColumn(gpu, jobsSeen, concurrent)));
    box.append(head, gpus);
    return box;
  });
  $("packing").replaceChildren(...nodes);
  const legend = [...jobsSeen.entries()].map(([id, name]) => {
    const item = el("span");
    const swatch = el("span", "swatch");
    swatch.style.background = jobColor(id);
    item.append(swatch, document.createTextNode(name + " (" + id + ")"));
    return item;
  });
  if (legend.length === 0) legend.push(el("span", "", "No workers placed: every GPU is idle."));
  $("legend").replaceChildren(...legend);
}

function gpuColumn(gpu, jobsSeen, concurrent) {
  const workers = gpu.workers || [];
  const jobs = new Set(workers.map((w) => w.job_id));
  const load = gpu.load || 0;
  const sliced = load > 1.0001;  // the workers book more than the GPU: turns, or at once
  const column = el("div", "gpu" + (jobs.size > 1 ? " shared" : "") + (sliced ? " over" : ""));
  column.dataset.gpu = gpu.id.join(":");
  const stack = el("div", "gpu-box");
  const scale = Math.max(1, load);  // an over-committed GPU is drawn squeezed, and outlined red
  workers.forEach((worker) => {
    jobsSeen.set(worker.job_id, worker.job_name || worker.job_id);
    const block = el("div", "block");
    block.style.background = jobColor(worker.job_id);
    block.style.height = ((100 * (worker.predicted_load || 0)) / scale).toFixed(1) + "%";
    block.title = (worker.job_name || worker.job_id) + " rank " + worker.rank + ", " +
      workerRole(worker) + ", booked load " + Math.round(100 * (worker.predicted_load || 0)) + "%";
    block.dataset.job = worker.job_id;
    block.dataset.role = workerRole(worker);
    if ((worker.predicted_load || 0) / scale >= 0.14) {
      block.append(el("span", "", worker.job_name || worker.job_id), el("small", "", "r" + worker.rank + " · " + workerRole(worker)));
    }
    stack.append(block);
  });
  const label = el("div", "gpu-label");
  // A GPU runs at most all the time: show the load capped, and say how it is over-booked.
  const how = concurrent ? "at once" : "sliced";
  const shown = el("span", "num", sliced ? "100% · " + how : Math.round(100 * load) + "%");
  if (sliced) shown.title = "booked " + Math.round(100 * load) + "%: " + workers.length + " workers " + (concurrent ? "run at once (as under MPS)" : "take turns") + ", each slower than alone";
  label.append(el("strong", "", "GPU " + gpu.id.join(":")), shown);
  const mem = el("div", "mem");
  const used = el("div");
  used.style.width = Math.min(100, (100 * (gpu.memory_used_bytes || 0)) / (gpu.memory_bytes || 1)).toFixed(1) + "%";
  mem.title = "memory " + gib(gpu.memory_used_bytes) + " / " + gib(gpu.memory_bytes);
  mem.append(used);
  column.append(stack, label, mem);
  if (jobs.size > 1) column.append(el("div", "shared-tag", "SHARED × " + jobs.size));
  return column;
}

// What a worker does in its plan: "depth 2" (data parallel), "stage 2/4" or "shard 3/4".
function workerRole(worker) {
  if (worker.role) return worker.role;
  return worker.depth === null || worker.depth === undefined ? "not planned" : "depth " + worker.depth;
}

function gib(bytes) {
  return ((bytes || 0) / 2 ** 30).toFixed(1) + " GiB";
}

// ---------------------------------------------------------------- charts
const AXIS = { stroke: "#8d99b3", grid: { stroke: "#243049", width: 1 }, ticks: { stroke: "#243049" } };

function chartWidth(id) {
  return Math.max(240, $(id).clientWidth - 4);
}

// uPlot draws at a fixed width: follow the window (a phone turned, a window narrowed).
let resizePending = false;
window.addEventListener("resize", () => {
  if (resizePending) return;
  resizePending = true;
  requestAnimationFrame(() => {
    resizePending = false;
    if (utilChart) utilChart.setSize({ width: chartWidth("util-chart"), height: 240 });
    if (lossChart) lossChart.setSize({ width: chartWidth("loss-chart"), height: 240 });
  });
});

function renderUtilization(items) {
  const xs = items.map((p) => Date.parse(p.at) / 1000);
  const ys = items.map((p) => 100 * (p.utilization || 0));
  const data = [xs, ys];
  if (!utilChart) {
    utilChart = new uPlot({
      width: chartWidth("util-chart"), height: 240,
      scales: { y: { range: [0, 100] } },
      axes: [AXIS, { ...AXIS, values: (_u, ticks) => ticks.map((t) => t + "%") }],
      series: [{}, { label: "utilization", stroke: "#3ecf8e", width: 2, fill: "#3ecf8e22",
        points: { show: false },
        value: (_u, v) => (v == null ? "–" : v.toFixed(0) + "%") }],
    }, data, $("util-chart"));
  } else {
    utilChart.setData(data);
  }
}

async function refreshLoss(jobs) {
  const chosen = jobs.slice(0, LOSS_JOBS);
  await Promise.all(chosen.map(async (job) => {
    const entry = lossByJob.get(job.id) || { name: job.name, points: [], last: null };
    const suffix = entry.last === null ? "" : "?after_iteration=" + entry.last;
    const page = await api("/api/v1/jobs/" + encodeURIComponent(job.id) + "/progress" + suffix);
    (page.items || []).forEach((s) => {
      if (typeof s.loss === "number") entry.points.push([s.iteration, s.loss]);
      entry.last = s.iteration;
    });
    lossByJob.set(job.id, entry);
  }));
  const withData = chosen.filter((j) => (lossByJob.get(j.id) || { points: [] }).points.length > 0);
  const key = withData.map((j) => j.id).join(",");
  const tables = withData.map((j) => {
    const pts = lossByJob.get(j.id).points;
    return [pts.map((p) => p[0]), pts.map((p) => p[1])];
  });
  $("loss-empty").hidden = withData.length > 0;
  const data = tables.length ? uPlot.join(tables) : [[], []];
  if (!lossChart || key !== lossKey) {
    if (lossChart) lossChart.destroy();
    const series = [{ label: "iteration" }];
    if (withData.length === 0) series.push({ label: "no loss reported yet", stroke: "#8d99b3" });
    withData.forEach((j) => series.push({ label: j.name, stroke: jobColor(j.id), width: 2, spanGaps: true,
      points: { show: false },
      value: (_u, v) => (v == null ? "–" : v.toFixed(4)) }));
    lossChart = new uPlot({
      width: chartWidth("loss-chart"), height: 240,
      scales: { x: { time: false } },
      legend: { show: withData.length > 0 },
      axes: [AXIS, AXIS],
      series,
    }, data, $("loss-chart"));
    lossKey = key;
  } else {
    lossChart.setData(data);
  }
}

// ---------------------------------------------------------------- loop
async function refresh() {
  const since = new Date(Date.now() - UTIL_WINDOW_S * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  const [active, finished, cluster, util, scheduler] = await Promise.all([
    api(query(ACTIVE_STATES, 100)),
    api(query(FINISHED_STATES, 10)),
    api("/api/v1/cluster"),
    api("/api/v1/cluster/utilization?since=" + encodeURIComponent(since)),
    api("/api/v1/scheduler").catch((e) => { if (e instanceof AuthError) throw e; return null; }),
  ]);
  const activeJobs = active.items || [];
  const finishedJobs = finished.items || [];
  [...activeJobs, ...finishedJobs].sort((a, b) => (a.created_at < b.created_at ? -1 : 1)).forEach((j) => jobColor(j.id));
  renderSummary(cluster, activeJobs, scheduler);
  renderJobs(activeJobs, finishedJobs);
  renderPacking(cluster);
  renderUtilization(util.items || []);
  await refreshLoss([...activeJobs.filter((j) => j.state === "RUNNING"), ...finishedJobs, ...activeJobs.filter((j) => j.state !== "RUNNING")]);
  document.body.dataset.loaded = "true";
}

async function tick() {
  try {
    await refresh();
    $("status").className = "status";
    $("status").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (error) {
    if (error instanceof AuthError) {
      showLogin("The server refused the token: " + error.message);
      return;
    }
    $("status").className = "status error";
    $("status").textContent = "update failed: " + error.message;
  }
  timer = setTimeout(tick, POLL_MS);
}

function showLogin(message) {
  clearTimeout(timer);
  sessionStorage.removeItem(TOKEN_KEY);
  $("app").hidden = true;
  $("signout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("status").textContent = "not signed in";
  $("token").focus();
}

function showApp() {
  $("login").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  tick();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token").value = "";
    showApp();
  });
  $("signout").addEventListener("click", () => showLogin(""));
  if (sessionStorage.getItem(TOKEN_KEY)) showApp(); else showLogin("");
});
