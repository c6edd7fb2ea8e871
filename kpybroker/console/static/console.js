// The console's page: a hash router over the JSON endpoints, redrawn every two seconds.
// Text from the broker (topic and group names, client ids) goes in as text, never HTML.
"use strict";

const REFRESH_MS = 2000;
const view = document.getElementById("view");
const statusLine = document.getElementById("status");
let adminEnabled = null;  // from /api/cluster, on the first render

function el(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else element.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

function show(value) {
  return value === null || value === undefined ? "—" : value;
}

function link(href, text) {
  return el("a", { href }, text);
}

// columns: [[heading, field name, render(row) or undefined, numeric?]]
function table(id, columns, rows) {
  const head = el("tr", {}, ...columns.map(([h, , , num]) => el("th", num ? { class: "num" } : {}, h)));
  const body = rows.map((row) =>
    el("tr", {}, ...columns.map(([, field, render, num]) =>
      el("td", { "data-field": field, class: num ? "num" : "" }, render ? render(row) : show(row[field])))));
  return el("table", { id }, el("thead", {}, head), el("tbody", {}, ...body));
}

// Against the origin, not the page's address: opened as https://user:password@host/,
// the page's address holds credentials, which fetch() refuses in a URL. The browser
// sends the ones it logged in with.
function api(path) {
  return new URL(path, location.origin);
}

async function getJson(path) {
  const response = await fetch(api(path), { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

async function change(method, path, body) {
  const response = await fetch(api(path), {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json();
  if (answer.error) alert(`${answer.error}: ${answer.message || ""}`);
  render();
}

function bytes(value) {
  if (value === null || value === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (value >= 1024 && i < units.length - 1) { value /= 1024; i++; }
  return (i ? value.toFixed(1) : value) + " " + units[i];
}

function chartFigure(id, caption, series, unit) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("id", id);
  svg.setAttribute("class", "chart");
  drawChart(svg, series, unit);
  return el("figure", {}, el("figcaption", {}, caption), svg);
}

function seriesOf(samples, name, value) {
  return { name, points: samples.map((s) => ({ t: s.t, v: value(s) || 0, seconds: s.seconds })) };
}

// -- pages -----------------------------------------------------------------------------

async function clusterPage() {
  const [cluster, rates] = await Promise.all([getJson("/api/cluster"), getJson("/api/throughput")]);
  adminEnabled = cluster.admin;
  const samples = rates.samples;
  const charts = [
    chartFigure("chart-records", "Records in / s", [seriesOf(samples, "all topics", (s) => s.records_per_s)], "rec/s"),
    chartFigure("chart-bytes", "Bytes in / s (log growth)", [seriesOf(samples, "all topics", (s) => s.bytes_per_s)], "B/s"),
  ];
  if (rates.latency_available) {
    // Produce and Fetch first, then the APIs seen in the most samples: four lines at most.
    const seen = {};
    samples.forEach((s) => Object.keys(s.latency_ms).forEach((n) => { seen[n] = (seen[n] || 0) + 1; }));
    const rank = (n) => (n === "Produce" ? 0 : n === "Fetch" ? 1 : 2);
    const names = Object.keys(seen)
      .sort((a, b) => rank(a) - rank(b) || seen[b] - seen[a] || a.localeCompare(b))
      .slice(0, 4);
    charts.push(chartFigure("chart-latency", "Request latency (mean ms)",
      names.map((n) => seriesOf(samples, n, (s) => s.latency_ms[n])), "ms"));
  } else {
    charts.push(el("figure", { id: "chart-latency" }, el("figcaption", {}, "Request latency"),
      "No request metrics on this broker."));
  }
  return [
    el("h2", {}, "Cluster ", el("span", { id: "cluster-id" }, cluster.cluster_id)),
    el("p", {}, "Controller: broker ", el("span", { id: "controller-id" }, cluster.controller_id)),
    table("brokers", [["Broker", "id"], ["Host", "host"], ["Port", "port", undefined, true], ["Rack", "rack"]], cluster.brokers),
    el("h2", {}, "Throughput"),
    el("div", { class: "charts" }, ...charts),
  ];
}

async function topicsPage() {
  const topics = await getJson("/api/topics");
  const parts = [el("h2", {}, "Topics")];
  if (adminEnabled) {
    const name = el("input", { name: "name", placeholder: "topic name", required: "" });
    const count = el("input", { name: "partitions", type: "number", min: "1", placeholder: "partitions" });
    parts.push(el("form", {
      class: "admin", id: "create-topic",
      onsubmit: (event) => {
        event.preventDefault();
        change("POST", "/api/topics", { name: name.value, partitions: Number(count.value || -1) });
      },
    }, name, count, el("button", { type: "submit" }, "Create topic")));
  }
  parts.push(table("topics", [
    ["Topic", "name", (t) => link(`#/topics/${encodeURIComponent(t.name)}`, t.name)],
    ["Partitions", "partition_count", undefined, true],
    ["Replication", "replication_factor", undefined, true],
    ["Records", "records", undefined, true],
    ["Size", "size", (t) => bytes(t.size), true],
  ], topics));
  return parts;
}

async function topicPage(name) {
  const [topic, rates] = await Promise.all([
    getJson(`/api/topics/${encodeURIComponent(name)}`), getJson("/api/throughput")]);
  const samples = rates.samples;
  const of = (s) => s.topics[name] || {};
  const parts = [el("h2", {}, "Topic ", el("span", { id: "topic-name" }, topic.name))];
  if (adminEnabled) {
    parts.push(el("button", { class: "danger", id: "delete-topic",
      onclick: () => confirm(`Delete topic ${name}?`) && change("DELETE", `/api/topics/${encodeURIComponent(name)}`) },
    "Delete topic"));
  }
  parts.push(
    table("partitions", [
      ["Partition", "partition", undefined, true],
      ["Leader", "leader", undefined, true],
      ["Replicas", "replicas", (p) => p.replicas.join(", ")],
      ["ISR", "isr", (p) => p.isr.join(", ")],
      ["Start offset", "start_offset", undefined, true],
      ["End offset", "end_offset", undefined, true],
      ["Size", "size", (p) => bytes(p.size), true],
    ], topic.partitions),
    el("h2", {}, "Throughput"),
    el("div", { class: "charts" },
      chartFigure("chart-topic-records", "Records in / s", [seriesOf(samples, name, (s) => of(s).records_per_s)], "rec/s"),
      chartFigure("chart-topic-bytes", "Bytes in / s", [seriesOf(samples, name, (s) => of(s).bytes_per_s)], "B/s")),
  );
  return parts;
}

async function groupsPage() {
  const groups = await getJson("/api/groups");
  return [el("h2", {}, "Groups"), table("groups", [
    ["Group", "group_id", (g) => link(`#/groups/${encodeURIComponent(g.group_id)}`, g.group_id)],
    ["Type", "type"], ["State", "state"],
    ["Members", "members", undefined, true],
    ["Lag", "lag", undefined, true],
  ], groups)];
}

function assignmentText(assignment) {
  return Object.entries(assignment).map(([topic, parts]) => `${topic}: ${parts.join(",")}`).join("; ");
}

async function groupPage(groupId) {
  const group = await getJson(`/api/groups/${encodeURIComponent(groupId)}`);
  const parts = [
    el("h2", {}, "Group ", el("span", { id: "group-id" }, group.group_id)),
    el("p", {}, `Type ${group.type}, state `, el("span", { id: "group-state" }, group.state),
      ", total lag ", el("span", { id: "group-lag" }, show(group.lag))),
  ];
  if (adminEnabled) {
    parts.push(el("button", { class: "danger", id: "delete-group",
      onclick: () => confirm(`Delete group ${groupId}?`) && change("DELETE", `/api/groups/${encodeURIComponent(groupId)}`) },
    "Delete group"));
  }
  parts.push(
    el("h2", {}, "Members"),
    table("members", [["Member", "member_id"], ["Client", "client_id"], ["Host", "client_host"],
      ["Assignment", "assignment", (m) => assignmentText(m.assignment)]], group.members),
    el("h2", {}, "Offsets"),
    table("offsets", [["Topic", "topic"], ["Partition", "partition", undefined, true],
      ["Committed", "committed", undefined, true], ["End offset", "end_offset", undefined, true],
      ["Lag", "lag", undefined, true]], group.offsets),
  );
  return parts;
}

// -- routing ---------------------------------------------------------------------------

function route() {
  const [, page, name] = (location.hash || "#/").split("/");
  const arg = name === undefined ? undefined : decodeURIComponent(name);
  if (page === "topics") return arg ? () => topicPage(arg) : topicsPage;
  if (page === "groups") return arg ? () => groupPage(arg) : groupsPage;
  return clusterPage;
}

let rendering = false;
async function render() {
  if (rendering || document.activeElement instanceof HTMLInputElement) return;
  rendering = true;
  try {
    if (adminEnabled === null) adminEnabled = (await getJson("/api/cluster")).admin;
    view.replaceChildren(...await route()());
    statusLine.textContent = "updated " + new Date().toLocaleTimeString();
    statusLine.className = "";
  } catch (error) {
    statusLine.textContent = String(error);
    statusLine.className = "error";
  } finally {
    rendering = false;
  }
}

window.addEventListener("hashchange", render);
render();
setInterval(render, REFRESH_MS);
