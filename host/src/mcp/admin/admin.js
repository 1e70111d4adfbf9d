// hookhost's admin page: draws what /admin/api/ answers. Every value is set as text
// (textContent), never as HTML: file names, diffs and stderr come from tenants' components.
"use strict";

const TOKEN_KEY = "hookhost-admin-token";
const REFRESH_MS = 5000;
let token = sessionStorage.getItem(TOKEN_KEY);
let refresher = null;

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (nodes, or values shown as text). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function say(message, isError = false) {
  const status = $("status");
  status.textContent = message;
  status.className = isError ? "error" : "";
}

async function api(method, path) {
  const response = await fetch("/admin/api/" + path, {
    method,
    headers: { Authorization: "Bearer " + token },
  });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    signOut("The admin token was refused.");
    throw new Error("the admin token was refused");
  }
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function path(tenant, id) {
  return "sessions/" + encodeURIComponent(tenant) + "/" + encodeURIComponent(id);
}

function drawUpstreams(upstreams) {
  const body = $("upstreams").tBodies[0];
  body.replaceChildren();
  if (upstreams.length === 0) {
    body.append(el("tr", {}, el("td", { colSpan: 2, class: "muted" }, "none configured")));
  }
  for (const u of upstreams) {
    body.append(el("tr", { "data-upstream": u.name },
      el("td", {}, u.name), el("td", { class: "state-" + u.state }, u.state)));
  }
}

function drawComponents(components) {
  const body = $("components").tBodies[0];
  body.replaceChildren();
  for (const c of components) {
    body.append(el("tr", { "data-component": c.owner },
      el("td", {}, c.owner),
      el("td", {}, el("code", {}, c.source)),
      el("td", {}, c.digest ? el("code", {}, c.digest)
        : el("span", { class: "muted" }, c.source.startsWith("builtin:") ? "built in" : "a file on this host")),
      el("td", {}, c.signed_by.length ? c.signed_by.join(", ") : el("span", { class: "muted" }, "not required"))));
  }
}

function facts(tenant) {
  const calls = Object.entries(tenant.calls);
  const callText = calls.length ? calls.map(([o, n]) => n + " " + o).join(", ") : "none";
  const items = [
    ["Sessions", String(tenant.sessions.length)],
    ["Calls", callText],
    ["Rate-limited", String(tenant.rate_limited)],
    ["Disk", tenant.disk.quota_bytes === null
      ? (tenant.disk.used_bytes === null ? "no quota" : bytes(tenant.disk.used_bytes))
      : bytes(tenant.disk.used_bytes) + " of " + bytes(tenant.disk.quota_bytes)],
  ];
  if (tenant.rate) {
    const r = tenant.rate;
    const parts = [];
    if (r.calls_per_second) parts.push(r.calls_per_second + "/s, bursts of " + (r.burst ?? r.calls_per_second));
    if (r.concurrent) parts.push((r.running ?? 0) + " of " + r.concurrent + " running");
    items.push(["Rate limit", parts.join("; ")]);
  }
  return el("div", { class: "facts" },
    ...items.map(([k, v]) => el("span", {}, el("strong", {}, k + ": "), v)));
}

function drawTenants(tenants) {
  const box = $("tenants");
  box.replaceChildren();
  for (const tenant of tenants) {
    const rows = tenant.sessions.map((s) => el("tr", { "data-session": s.id },
      el("td", {}, el("code", {}, s.id)),
      el("td", {}, s.created),
      el("td", {}, s.last_active),
      el("td", {}, s.owner),
      el("td", {},
        el("button", { type: "button", onclick: () => showTimeline(tenant.id, s.id) }, "Timeline"),
        " ",
        el("button", { type: "button", class: "danger", onclick: () => deleteSession(tenant.id, s.id) }, "Delete"))));
    const table = rows.length
      ? el("table", {}, el("thead", {}, el("tr", {},
          ...["Session", "Created", "Last active", "Owner", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...rows))
      : el("p", { class: "muted" }, "No sessions.");
    box.append(el("section", { class: "tenant", "data-tenant": tenant.id },
      el("h3", {}, tenant.id, tenant.declared ? "" : " (undeclared)"),
      facts(tenant), table));
  }
}

async function refresh() {
  const overview = await api("GET", "overview");
  $("config").textContent = overview.config;
  drawUpstreams(overview.upstreams);
  drawComponents(overview.components);
  drawTenants(overview.tenants);
}

function time(iso) {
  return typeof iso === "string" && iso.length >= 23 ? iso.slice(11, 23) : String(iso ?? "");
}

function ms(us) {
  return typeof us === "number" ? (us / 1000).toFixed(1) + " ms" : "";
}

function diffBlock(diff) {
  const pre = el("pre", { class: "diff" });
  for (const line of diff.split("\n")) {
    const kind = line.startsWith("@@") ? "hunk"
      : line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del" : "";
    pre.append(el("span", { class: kind }, line + "\n"));
  }
  return pre;
}

function eventItem(event) {
  const where = [event.layer, event.phase].filter(Boolean).join(" · ");
  const what = [];
  if (event.duration_us !== undefined) what.push(ms(event.duration_us));
  if (event.outcome) what.push(event.outcome);
  if (event.failure) what.push("failed: " + event.failure + (event.detail ? " — " + event.detail : ""));
  if (event.message) what.push("refused: " + event.message);
  if (event.is_error) what.push("error result");
  if (event.output_bytes !== undefined) what.push(bytes(event.output_bytes) + " out");
  if (event.path) what.push(event.path);
  if (event.before_bytes !== undefined || event.after_bytes !== undefined) {
    what.push(bytes(event.before_bytes ?? null) + " → " + bytes(event.after_bytes ?? null));
  }
  const item = el("li", { "data-kind": event.kind },
    el("span", { class: "muted" }, time(event.time), " "),
    el("span", { class: "kind" }, event.kind), " ",
    where ? el("span", { class: "muted" }, "(" + where + ") ") : "",
    what.join(" · "));
  if (event.diff) item.append(diffBlock(event.diff));
  else if (event.diff_ref) item.append(el("div", { class: "muted" }, "diff of " + bytes(event.diff_bytes) + " in " + event.diff_ref));
  if (event.stderr) item.append(el("pre", { class: "diff" }, event.stderr));
  return item;
}

async function showTimeline(tenant, id) {
  let trace;
  try {
    trace = await api("GET", path(tenant, id) + "/trace");
  } catch (e) {
    say("Cannot read the trace: " + e.message, true);
    return;
  }
  const calls = new Map();
  for (const event of trace.events) {
    const key = event.call || "(session)";
    if (!calls.has(key)) calls.set(key, []);
    calls.get(key).push(event);
  }
  const box = $("calls");
  box.replaceChildren();
  for (const [call, events] of calls) {
    events.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
    const finished = events.find((e) => e.kind === "call.finished");
    const title = finished
      ? finished.tool + " — " + finished.outcome + ", " + ms(finished.duration_us)
      : "call " + call;
    box.append(el("div", { class: "call outcome-" + (finished ? finished.outcome : "running"), "data-call": call },
      el("h3", {}, title),
      el("ol", { class: "events" }, ...events.map(eventItem))));
  }
  $("timeline-session").textContent = tenant + "/" + id;
  $("timeline-note").textContent = trace.events.length === 0
    ? "No events: the session made no traced call yet."
    : trace.events.length + " events" + (trace.truncated ? " (the earliest left out)" : "");
  $("timeline").hidden = false;
  $("timeline").scrollIntoView();
}

async function deleteSession(tenant, id) {
  if (!confirm("Delete session " + id + " of " + tenant + "? Its commands are stopped and its files deleted.")) return;
  try {
    await api("DELETE", path(tenant, id));
    say("Session " + id + " deleted.");
    if ($("timeline-session").textContent === tenant + "/" + id) $("timeline").hidden = true;
    await refresh();
  } catch (e) {
    say("Deleting failed: " + e.message, true);
  }
}

async function reload() {
  try {
    const answer = await api("POST", "reload");
    say("Config reloaded: " + answer.summary + ".");
    await refresh();
  } catch (e) {
    say("Reload refused: " + e.message, true);
  }
}

function showSignedIn(signedIn) {
  $("login").hidden = signedIn;
  $("main").hidden = !signedIn;
  $("reload").hidden = !signedIn;
  $("sign-out").hidden = !signedIn;
}

function signOut(why = "") {
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  clearInterval(refresher);
  showSignedIn(false);
  $("login-error").textContent = why;
}

async function signIn() {
  try {
    await refresh();
  } catch (e) {
    if (token) say("Cannot load: " + e.message, true);
    return;
  }
  $("login-error").textContent = "";
  showSignedIn(true);
  clearInterval(refresher);
  refresher = setInterval(() => refresh().catch((e) => say("Cannot load: " + e.message, true)), REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, token);
    signIn();
  });
  $("reload").addEventListener("click", reload);
  $("sign-out").addEventListener("click", () => signOut());
  $("timeline-close").addEventListener("click", () => { $("timeline").hidden = true; });
  if (token) signIn();
});
