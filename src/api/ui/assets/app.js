// storch dashboard: read-only pages over storch's REST API. No framework, no build step.
// The API token is kept in this tab's sessionStorage and sent as a bearer header; it never
// goes into a URL. Every value from the server is put into the page as text, never as HTML.
"use strict";

const TOKEN_KEY = "storch.dashboard.token";
const PAGES = { overview: overview, classes: classes, volumes: volumes, volume: volumePage, events: events, throughput: throughput };

/** What the current page runs in the background (a follow stream, a timer); stopped on leave. */
let cleanup = [];
/** Bumped on every navigation, so a page that loads late does not draw over the next one. */
let generation = 0;

// ---------------------------------------------------------------------------------------
// Small helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v; // CSSOM: allowed by the page's CSP
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function bytes(n) {
  if (n === null || n === undefined) return "unknown";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : 1)) + " " + units[i];
}

function count(n) { return Number(n).toLocaleString("en-US"); }

function stateBadge(state) { return h("span", { class: "state state-" + state }, state || "—"); }

function setStatus(text) { document.getElementById("status").textContent = text || ""; }

function page() { return document.getElementById("page"); }

function title(text) {
  document.title = text + " · storch";
  return h("h1", {}, text);
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  const parts = path.split("/").map(decodeURIComponent);
  return { name: parts[0] || "overview", arg: parts.slice(1).join("/"), params: new URLSearchParams(query || "") };
}

function link(hash, text) { return h("a", { href: hash }, text); }
function volumeLink(name) { return link("#/volume/" + encodeURIComponent(name), name); }

// ---------------------------------------------------------------------------------------
// Token and requests

function token() { return sessionStorage.getItem(TOKEN_KEY); }

class Unauthorized extends Error {}

async function api(path, options) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const response = await fetch(path, Object.assign({ headers, cache: "no-store" }, options || {}));
  if (response.status === 401) {
    showLogin(t ? "The server refused this token." : "");
    throw new Unauthorized();
  }
  return response;
}

async function json(path) {
  const response = await api(path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
  return body;
}

function showLogin(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  stopPage();
  page().replaceChildren();
  setStatus("");
  document.getElementById("standby").hidden = true;
  document.getElementById("forget-token").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = message || "";
  document.getElementById("token").focus();
}

function hideLogin() {
  document.getElementById("login").hidden = true;
  document.getElementById("forget-token").hidden = !token();
}

// ---------------------------------------------------------------------------------------
// Navigation

function stopPage() {
  generation++;
  for (const stop of cleanup) { try { stop(); } catch (_) { /* already stopped */ } }
  cleanup = [];
}

async function route() {
  stopPage();
  const mine = generation;
  const { name, arg, params } = parseHash();
  const render = PAGES[name] || overview;
  for (const a of document.querySelectorAll("nav a")) {
    const current = a.dataset.page === name || (name === "volume" && a.dataset.page === "volumes");
    if (current) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  setStatus("Loading…");
  try {
    const nodes = await render(arg, params, mine);
    if (mine !== generation) return;
    hideLogin();
    page().replaceChildren(...[].concat(nodes).flat().filter((n) => n !== null && n !== undefined && n !== false));
    setStatus("");
    document.body.dataset.loaded = name;
  } catch (e) {
    if (e instanceof Unauthorized || mine !== generation) return;
    page().replaceChildren(h("p", { class: "error", role: "alert" }, "Could not load this page: " + e.message));
    setStatus("");
  }
}

/** Standby banner, from the overview (every page asks, it is cheap). */
function standby(ov) {
  const el = document.getElementById("standby");
  if (ov.standbyOf) {
    el.textContent = "This instance is an etcd standby: it shows what it has replicated and changes nothing. The leader is " + ov.standbyOf + ".";
    el.hidden = false;
  } else {
    el.hidden = true;
  }
}

// ---------------------------------------------------------------------------------------
// Overview

function capacityBar(p) {
  const used = p.usedBytes || 0;
  const planned = p.plannedBytes || 0;
  const free = p.freeBytes;
  const total = p.totalBytes || (used + planned + (free || 0)) || 1;
  const pct = (n) => Math.min(100, (100 * n) / total).toFixed(2) + "%";
  const label = "used " + bytes(used) + ", planned " + bytes(planned) + ", free " + bytes(free) + " of " + bytes(p.totalBytes);
  return h("div", {},
    h("div", { class: "bar", role: "img", "aria-label": label },
      h("span", { class: "used", style: "width:" + pct(used) }),
      h("span", { class: "planned", style: "width:" + pct(planned) })),
    h("div", { class: "legend" },
      h("span", { class: "used" }, h("i"), "used ", h("b", { "data-field": "used" }, bytes(used))),
      h("span", { class: "planned" }, h("i"), "planned ", h("b", { "data-field": "planned" }, bytes(planned))),
      h("span", { class: "free" }, h("i"), "free ", h("b", { "data-field": "free" }, bytes(free))),
      h("span", {}, "of ", h("b", { "data-field": "total" }, bytes(p.totalBytes)))));
}

function offerText(offer) {
  if (offer === null || offer === undefined) return "";
  if (Array.isArray(offer.offer)) return offer.offer.join(", ");
  if (typeof offer.offer === "boolean") return offer.offer ? "yes" : "no";
  if ("min" in offer) return offer.min + "–" + offer.max;
  return JSON.stringify(offer);
}

function alertStrip(ov, verification) {
  const items = ov.alerts.map((a) => h("li", { class: "alert", "data-alert": a.kind },
    h("strong", {}, a.message), a.names.length ? h("div", { class: "names" }, a.names.join(", ") + (a.count > a.names.length ? ", …" : "")) : null));
  if (verification && !verification.ok) {
    items.push(h("li", { class: "alert", "data-alert": "log_verification" },
      h("strong", {}, "The event log failed verification at record " + verification.firstBad.seq + ": " + verification.firstBad.reason)));
  }
  if (!items.length) items.push(h("li", { class: "alert ok", "data-alert": "none" }, "Nothing needs attention."));
  return h("ul", { class: "alerts", "aria-label": "Alerts" }, items);
}

async function overview(_arg, _params, mine) {
  const [{ overview: ov }, verify] = await Promise.all([
    json("/storch/v1/overview"),
    json("/storch/v1/log/verify").catch((e) => { if (e instanceof Unauthorized) throw e; return null; }),
  ]);
  standby(ov);
  const t = ov.totals;
  const card = (id, label, value) => h("div", { class: "card" }, h("div", { class: "label", id: id + "-label" }, label), h("div", { class: "value", id: id, "aria-labelledby": id + "-label" }, value));
  const verification = verify && verify.verification;
  const nodes = [
    title("Overview"),
    alertStrip(ov, verification),
    h("section", { "aria-label": "Totals", class: "cards" },
      card("total-backends", "Backends", count(t.backends)),
      card("total-pools", "Pools", count(t.pools)),
      card("total-classes", "Storage classes", count(t.storageClasses)),
      card("total-volumes", "Volumes", count(t.volumes)),
      card("total-snapshots", "Snapshots", count(t.snapshots)),
      card("total-capacity", "Capacity", bytes(t.totalBytes)),
      card("total-used", "Used by storch", bytes(t.usedBytes)),
      card("total-planned", "Planned", bytes(t.plannedBytes)),
      card("total-free", "Free", bytes(t.freeBytes)),
      card("log-head", "Events", count(ov.head)),
      card("log-verified", "Hash chain", verification ? (verification.ok ? "verified" : "BROKEN") : "not checked")),
    h("p", { class: "muted" }, "Volumes by state: ", Object.entries(t.volumesByState).map(([k, v]) => k + " " + count(v)).join(" · ") || "none"),
    h("h2", {}, "Backends"),
  ];
  if (!ov.backends.length) nodes.push(h("p", {}, "No backends yet."));
  for (const b of ov.backends) {
    nodes.push(h("section", { class: "backend", "data-backend": b.name, "aria-labelledby": "backend-" + b.name },
      h("header", {},
        h("h2", { id: "backend-" + b.name }, b.name),
        stateBadge(ov.standbyOf ? "standby" : b.state),
        h("span", { class: "muted" }, b.driver + (b.protocol ? " · " + b.protocol : "")),
        h("span", {}, h("b", { "data-field": "volumes" }, count(b.volumes)), " volumes"),
        link("#/volumes?backend=" + encodeURIComponent(b.name), "list")),
      b.stateReason && !ov.standbyOf ? h("p", { class: "error" }, "Last error: " + b.stateReason) : null,
      ov.standbyOf ? h("p", { class: "muted" }, "Run by the leader, not by this standby.") : null,
      h("div", { class: "pools" }, b.pools.map((p) => h("div", { class: "pool", "data-pool": b.name + "/" + p.name },
        h("h3", {}, p.name, " ", h("span", { class: "muted" }, "· ", h("span", { "data-field": "pool-volumes" }, count(p.volumes)), " volumes")),
        capacityBar(p),
        h("p", { class: "attrs" }, Object.entries(p.storageAttributes || {}).map(([k, v]) => k + ": " + offerText(v)).join(" · ") || "no attributes"),
        p.storageClasses.length ? h("p", { class: "attrs" }, "Classes: ", p.storageClasses.join(", ")) : null)))));
  }
  if (mine === generation) { /* drawn by route() */ }
  return nodes;
}

// ---------------------------------------------------------------------------------------
// Storage classes

async function classes() {
  const [{ storageClasses: list }, { overview: ov }] = await Promise.all([json("/storch/v1/storageclasses"), json("/storch/v1/overview")]);
  standby(ov);
  const nodes = [title("Storage classes")];
  if (!list.length) nodes.push(h("p", {}, "No storage classes yet."));
  for (const c of list) {
    const attrs = Object.entries(c.config.attributes || {}).map(([k, v]) => k + "=" + v).join(", ");
    const matched = c.explanation.pools.filter((p) => p.candidate).length;
    const volumes = c.spread.reduce((n, s) => n + s.volumes, 0);
    const most = Math.max(1, ...c.spread.map((s) => s.volumes));
    nodes.push(h("section", { class: "backend", "data-class": c.name, "aria-labelledby": "class-" + c.name },
      h("header", {}, h("h2", { id: "class-" + c.name }, c.name),
        h("span", {}, h("b", { "data-field": "matched" }, matched), " of ", c.explanation.pools.length, " pools take new volumes"),
        h("span", {}, h("b", { "data-field": "class-volumes" }, count(volumes)), " volumes placed", c.unplaced ? ", " + count(c.unplaced) + " being created" : ""),
        link("#/volumes?class=" + encodeURIComponent(c.name), "list")),
      h("p", { class: "attrs" }, "Attributes: " + (attrs || "none")),
      h("h3", {}, "Pools"),
      h("div", { class: "table-wrap" }, h("table", { class: "stack" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Backend"), h("th", { scope: "col" }, "Pool"), h("th", { scope: "col" }, "Takes new volumes"), h("th", { scope: "col" }, "Why not"))),
        h("tbody", {}, c.explanation.pools.map((p) => h("tr", { "data-pool": p.backend + "/" + p.pool },
          h("td", { "data-label": "Backend" }, p.backend), h("td", { "data-label": "Pool" }, p.pool),
          h("td", { "data-label": "Takes" }, p.candidate ? h("span", { class: "yes" }, "yes") : h("span", { class: "no" }, "no")),
          h("td", { "data-label": "Why not" }, p.reasons.join("; "))))))),
      h("h3", {}, "Where its volumes are"),
      c.spread.length ? h("div", { class: "table-wrap" }, h("table", { class: "stack" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Backend / pool"), h("th", { scope: "col", class: "num" }, "Volumes"), h("th", { scope: "col", class: "num" }, "Bytes"), h("th", { scope: "col" }, "Share"))),
        h("tbody", {}, c.spread.map((s) => h("tr", { "data-spread": s.backend + "/" + s.pool },
          h("td", { "data-label": "Pool" }, s.backend + " / " + s.pool),
          h("td", { class: "num", "data-label": "Volumes" }, count(s.volumes)),
          h("td", { class: "num", "data-label": "Bytes" }, bytes(s.bytes)),
          h("td", { "data-label": "Share" }, h("div", { class: "bar", role: "img", "aria-label": Math.round((100 * s.volumes) / Math.max(1, volumes)) + "% of the class's volumes" },
            h("span", { class: "used", style: "width:" + ((100 * s.volumes) / most).toFixed(1) + "%" })))))))) : h("p", { class: "muted" }, "No volumes yet.")));
  }
  return nodes;
}

// ---------------------------------------------------------------------------------------
// Volumes

const COLUMNS = [["name", "Name"], ["class", "Class"], ["backend", "Backend"], ["pool", "Pool"], ["size", "Size"], ["state", "State"], ["protocol", "Protocol"], ["created", "Created"]];
const FILTERS = ["name", "class", "backend", "pool", "state", "protocol"];

function volumesHash(params) {
  const q = new URLSearchParams();
  for (const [k, v] of params) if (v) q.set(k, v);
  const s = q.toString();
  return "#/volumes" + (s ? "?" + s : "");
}

async function volumes(_arg, params) {
  const q = new URLSearchParams();
  for (const k of FILTERS.concat(["sort", "offset", "limit"])) if (params.get(k)) q.set(k, params.get(k));
  const [table, { overview: ov }] = await Promise.all([json("/storch/v1/volumes?" + q), json("/storch/v1/overview")]);
  standby(ov);
  const sort = params.get("sort") || "name";
  const limit = table.limit;
  const offset = table.offset;

  const go = (changes) => {
    const next = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) { if (v === "" || v === null) next.delete(k); else next.set(k, v); }
    location.hash = volumesHash(next);
  };
  const field = (name, label, control) => h("label", { for: "f-" + name }, label, control);
  const text = (name) => h("input", { id: "f-" + name, name, type: "search", value: params.get(name) || "" });
  const choice = (name, values) => h("select", { id: "f-" + name, name },
    h("option", { value: "" }, "any"), values.map((v) => h("option", { value: v, selected: params.get(name) === v }, v)));
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter volumes",
    onsubmit: (e) => {
      e.preventDefault();
      const changes = { offset: "" };
      for (const k of FILTERS) changes[k] = form.elements[k].value.trim();
      go(changes);
    } },
    field("name", "Name contains", text("name")),
    field("class", "Class", text("class")),
    field("backend", "Backend", text("backend")),
    field("pool", "Pool", text("pool")),
    field("state", "State", choice("state", ["creating", "online", "deleting", "missing"])),
    field("protocol", "Protocol", choice("protocol", ["file", "block"])),
    h("button", { type: "submit" }, "Filter"),
    h("button", { type: "button", class: "secondary", onclick: () => { location.hash = "#/volumes"; } }, "Clear"));

  const header = COLUMNS.map(([key, label]) => {
    const active = sort === key || sort === "-" + key;
    const desc = sort === "-" + key;
    return h("th", { scope: "col", class: key === "size" ? "num" : null, "aria-sort": active ? (desc ? "descending" : "ascending") : "none" },
      h("button", { type: "button", class: "sort", onclick: () => go({ sort: active && !desc ? "-" + key : key, offset: "" }) }, label));
  });
  const rows = table.volumes.map((v) => h("tr", { "data-volume": v.name },
    h("td", { "data-label": "Name" }, volumeLink(v.name), v.cloneOf ? h("span", { class: "muted" }, " (clone of " + v.cloneOf + ")") : null),
    h("td", { "data-label": "Class" }, v.storageClass || "—"),
    h("td", { "data-label": "Backend" }, v.backend || "—"),
    h("td", { "data-label": "Pool" }, v.pool || "—"),
    h("td", { "data-label": "Size", class: "num" }, bytes(v.sizeBytes)),
    h("td", { "data-label": "State" }, stateBadge(v.state)),
    h("td", { "data-label": "Protocol" }, v.protocol || "—"),
    h("td", { "data-label": "Created" }, v.created ? when(v.created) : "—")));
  const first = table.matched ? offset + 1 : 0;
  const last = offset + table.volumes.length;
  const pager = h("nav", { class: "pager", "aria-label": "Pages of volumes" },
    h("button", { type: "button", disabled: offset === 0, onclick: () => go({ offset: String(Math.max(0, offset - limit)) }) }, "Previous"),
    h("span", { id: "volume-range" }, count(first) + "–" + count(last) + " of " + count(table.matched) + (table.matched !== table.total ? " (" + count(table.total) + " in all)" : "")),
    h("button", { type: "button", disabled: last >= table.matched, onclick: () => go({ offset: String(offset + limit) }) }, "Next"));
  return [
    title("Volumes"), form, pager,
    h("div", { class: "table-wrap" }, h("table", { class: "stack", id: "volume-table" }, h("caption", { class: "muted" }, "Volumes, sorted by " + sort.replace(/^-/, "") + (sort.startsWith("-") ? " (descending)" : "")),
      h("thead", {}, h("tr", {}, header)), h("tbody", {}, rows))),
    table.volumes.length ? null : h("p", {}, "No volume matches."),
  ];
}

// ---------------------------------------------------------------------------------------
// One volume

async function volumePage(name) {
  const [{ volume: v }, { overview: ov }] = await Promise.all([
    json("/storch/v1/volumes/" + encodeURIComponent(name)),
    json("/storch/v1/overview"),
  ]);
  const history = v.history;
  standby(ov);
  const c = v.Config;
  const created = history.find((e) => e.kind === "VolumeCreated" || e.kind === "VolumeImported");
  const fact = (label, value) => [h("dt", {}, label), h("dd", {}, value === "" || value === null || value === undefined ? "—" : value)];
  const plans = history.filter((e) => e.kind === "PlacementPlanned");
  const failures = history.filter((e) => e.kind === "PlacementAttemptFailed");
  return [
    h("p", {}, link("#/volumes", "← All volumes")),
    title("Volume " + name),
    h("dl", { class: "facts", id: "volume-facts" },
      fact("State", stateBadge(v.state)),
      fact("Storage class", c.storageClass),
      fact("Backend", v.backend),
      fact("Pool", v.pool),
      fact("Size", bytes(v.sizeBytes) + " (" + c.size + ")"),
      fact("Protocol", c.protocol),
      fact("Internal name", c.internalName),
      fact("Created", v.created ? when(v.created) : "not yet"),
      c.cloneSourceVolume ? fact("Clone of", volumeLink(c.cloneSourceVolume)) : [],
      v.lastError ? fact("Last error", v.lastError) : [],
      v.deleteAttempts ? fact("Failed deletes", v.deleteAttempts) : [],
      v.publishedNodes && v.publishedNodes.length ? fact("Published to", v.publishedNodes.join(", ")) : [],
      v.managed === false ? fact("Managed", "no (imported without management)") : []),
    h("h2", {}, "Placement"),
    v.candidates.length ? h("p", {}, "Still to try, in order: " + v.candidates.map((p) => p.backend + "/" + p.pool).join(", ")) : null,
    plans.length ? h("ol", { id: "placement-plans" }, plans.map((e) => h("li", {}, e.time + ": " + e.summary))) : h("p", { class: "muted" }, "No placement plan recorded (imported, or a clone)."),
    h("h3", {}, "Attempts"),
    h("ul", { id: "placement-attempts" },
      failures.map((e) => h("li", {}, h("span", { class: "no" }, "failed "), e.summary)),
      created ? h("li", {}, h("span", { class: "yes" }, "succeeded "), created.summary) : null,
      v.failedAttempts.length && !failures.length ? v.failedAttempts.map((a) => h("li", {}, h("span", { class: "no" }, "failed "), a.backend + "/" + a.pool + ": " + a.reason)) : null),
    h("h2", {}, "Snapshots"),
    v.snapshots.length ? h("div", { class: "table-wrap" }, h("table", { class: "stack", id: "snapshots" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, "Created"), h("th", { scope: "col", class: "num" }, "Size"))),
      h("tbody", {}, v.snapshots.map((s) => h("tr", {}, h("td", { "data-label": "Name" }, s.name), h("td", { "data-label": "Created" }, s.created || "being made"), h("td", { "data-label": "Size", class: "num" }, bytes(s.sizeBytes))))))) : h("p", { class: "muted" }, "No snapshots."),
    h("h2", {}, "Clones"),
    v.clones.length ? h("ul", { id: "clones" }, v.clones.map((n) => h("li", {}, volumeLink(n)))) : h("p", { class: "muted" }, "No clones."),
    h("h2", {}, "History"),
    timeline(history.slice().reverse(), "volume-history"),
  ];
}

function eventItem(e) {
  return h("li", { "data-seq": e.seq },
    h("span", { class: "seq" }, "#" + e.seq),
    when(e.time),
    h("span", { class: "kind" }, e.kind),
    h("span", { class: "summary" }, e.summary),
    h("span", { class: "rid" }, e.stream + " · request " + e.requestId));
}

/** A commit time (RFC 3339 from the API) as the pages show it, with the exact value kept. */
function when(t) {
  return h("time", { class: "time", datetime: t }, t.replace("T", " ").replace("Z", ""));
}

function timeline(list, id) {
  return h("ol", { class: "timeline", id, "aria-label": "Events, newest first" }, list.map(eventItem));
}

// ---------------------------------------------------------------------------------------
// Events: a live timeline over the follow stream

const EVENTS_SHOWN = 500;

async function events(_arg, params, mine) {
  const [{ overview: ov }] = await Promise.all([json("/storch/v1/overview")]);
  standby(ov);
  const object = params.get("object") || "";
  const kind = params.get("kind") || "";
  const rid = params.get("request") || "";
  const since = Math.max(1, ov.head - EVENTS_SHOWN + 1);
  const list = h("ol", { class: "timeline", id: "event-timeline", "aria-label": "Events, newest first" });
  const live = h("span", { id: "follow-state", class: "muted" }, "connecting…");
  const shown = h("span", { id: "event-count" }, "0");
  const verifyState = h("span", { id: "verify-state" }, "checking…");
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter events",
    onsubmit: (e) => {
      e.preventDefault();
      const q = new URLSearchParams();
      for (const k of ["object", "kind", "request"]) { const v = form.elements[k].value.trim(); if (v) q.set(k, v); }
      location.hash = "#/events" + (q.toString() ? "?" + q : "");
    } },
    h("label", { for: "f-object" }, "Object (kind/name)", h("input", { id: "f-object", name: "object", type: "search", placeholder: "volume/NAME", value: object })),
    h("label", { for: "f-kind" }, "Event kind", h("input", { id: "f-kind", name: "kind", type: "search", placeholder: "VolumeCreated", value: kind })),
    h("label", { for: "f-request" }, "Request id", h("input", { id: "f-request", name: "request", type: "search", value: rid })),
    h("button", { type: "submit" }, "Filter"),
    h("button", { type: "button", class: "secondary", onclick: () => { location.hash = "#/events"; } }, "Clear"));

  json("/storch/v1/log/verify").then(({ verification: v }) => {
    verifyState.textContent = v.ok ? "verified: " + count(v.events) + " records, every hash and link checks out" : "BROKEN at record " + v.firstBad.seq + ": " + v.firstBad.reason;
    verifyState.className = v.ok ? "yes" : "no";
  }).catch((e) => { if (!(e instanceof Unauthorized)) verifyState.textContent = "could not verify: " + e.message; });

  // The stream: the last events, then each one as it commits.
  const controller = new AbortController();
  cleanup.push(() => controller.abort());
  const q = new URLSearchParams({ follow: "true", since: String(since) });
  if (object) q.set("object", object);
  let n = 0;
  (async () => {
    try {
      const response = await api("/trident/v1/events?" + q, { signal: controller.signal });
      if (!response.ok) { const b = await response.json(); throw new Error(b.error || "HTTP " + response.status); }
      live.textContent = "following live";
      live.className = "live";
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (!line.trim()) continue;
          const e = JSON.parse(line);
          if (e.error) throw new Error(e.error);
          if (kind && e.kind !== kind) continue;
          if (rid && e.requestId !== rid) continue;
          list.prepend(eventItem(e));
          n++;
          while (list.childElementCount > EVENTS_SHOWN) list.lastElementChild.remove();
          shown.textContent = String(Math.min(n, EVENTS_SHOWN));
        }
      }
      live.textContent = "the stream ended (the server is stopping)";
      live.className = "muted";
    } catch (e) {
      if (controller.signal.aborted || e instanceof Unauthorized || mine !== generation) return;
      live.textContent = "the stream failed: " + e.message;
      live.className = "no";
    }
  })();

  return [
    title("Events"),
    h("p", {}, "Hash chain: ", verifyState),
    form,
    h("p", {}, live, " · ", shown, " events shown (the last " + EVENTS_SHOWN + " at most, newest first)"),
    list,
  ];
}

// ---------------------------------------------------------------------------------------
// Throughput: sampled from /metrics while the page is open

const SAMPLE_MS = 2000;
const WINDOW_MS = 10 * 60 * 1000;
/** Kept across visits of the page, so coming back shows the minutes already sampled. */
const samples = [];

/** Parses the histogram series `name` of a Prometheus text: operation → {count, buckets}. */
function histograms(text, name, label) {
  const out = {};
  const re = new RegExp("^" + name + "_(bucket|count)\\{([^}]*)\\} ([0-9.eE+-]+|\\+Inf)$");
  for (const line of text.split("\n")) {
    const m = re.exec(line);
    if (!m) continue;
    const labels = {};
    for (const part of m[2].match(/[a-z_]+="[^"]*"/g) || []) {
      const i = part.indexOf("=");
      labels[part.slice(0, i)] = part.slice(i + 2, -1);
    }
    const key = labels[label];
    if (!key) continue;
    const h0 = out[key] || (out[key] = { count: 0, buckets: {} });
    const v = Number(m[3]);
    if (m[1] === "count") h0.count += v;
    else h0.buckets[labels.le] = (h0.buckets[labels.le] || 0) + v;
  }
  return out;
}

function quantile(buckets, q) {
  const bounds = Object.keys(buckets).filter((b) => b !== "+Inf").map(Number).sort((a, b) => a - b);
  const total = buckets["+Inf"] || 0;
  if (!total) return null;
  const want = q * total;
  for (const b of bounds) {
    const key = Object.keys(buckets).find((k) => Number(k) === b);
    if (buckets[key] >= want) return b;
  }
  return Infinity;
}

function seconds(s) {
  if (s === null) return "—";
  if (s === Infinity) return "> 60 s";
  return s < 1 ? (s * 1000).toFixed(s < 0.001 ? 2 : 1) + " ms" : s.toFixed(1) + " s";
}

function delta(newer, older) {
  const out = { count: newer.count - (older ? older.count : 0), buckets: {} };
  for (const [k, v] of Object.entries(newer.buckets)) out.buckets[k] = v - (older && older.buckets[k] ? older.buckets[k] : 0);
  return out;
}

function sparkline(points) {
  const max = Math.max(1e-9, ...points);
  const w = 160;
  const step = points.length > 1 ? w / (points.length - 1) : w;
  const coords = points.map((p, i) => (i * step).toFixed(1) + "," + (30 - (28 * p) / max).toFixed(1)).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 160 32");
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "operations per second over the sampled minutes, at most " + max.toFixed(1));
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", coords);
  svg.append(line);
  return svg;
}

async function sample() {
  const response = await api("/metrics");
  if (!response.ok) throw new Error("HTTP " + response.status);
  const text = await response.text();
  samples.push({ at: Date.now(), ops: histograms(text, "storch_operation_duration_seconds", "operation"), http: histograms(text, "storch_http_request_duration_seconds", "route") });
  while (samples.length > 2 && samples[0].at < Date.now() - WINDOW_MS) samples.shift();
}

function throughputTable(kind, caption) {
  const last = samples[samples.length - 1];
  const prev = samples.length > 1 ? samples[samples.length - 2] : null;
  const first = samples[0];
  const span = (last.at - first.at) / 1000;
  const names = Object.keys(last[kind]).sort();
  if (!names.length) return h("p", { class: "muted" }, "Nothing recorded yet.");
  return h("div", { class: "table-wrap" }, h("table", { class: "stack", id: "throughput-" + kind },
    h("caption", { class: "muted" }, caption),
    h("thead", {}, h("tr", {}, ["Operation", "Total", "ops/s now", span >= 60 ? "ops/s over " + (span / 60).toFixed(1) + " min" : "ops/s over " + Math.round(span) + " s", "p50", "p90", "p99", "Trend"].map((t, i) => h("th", { scope: "col", class: i > 0 && i < 7 ? "num" : null }, t)))),
    h("tbody", {}, names.map((name) => {
      const now = last[kind][name];
      const windowed = delta(now, first !== last ? first[kind][name] : null);
      const recent = prev ? (now.count - (prev[kind][name] ? prev[kind][name].count : 0)) / ((last.at - prev.at) / 1000) : 0;
      const rates = [];
      for (let i = 1; i < samples.length; i++) {
        const a = samples[i - 1][kind][name];
        const b = samples[i][kind][name];
        rates.push(b ? (b.count - (a ? a.count : 0)) / ((samples[i].at - samples[i - 1].at) / 1000) : 0);
      }
      const basis = first !== last && windowed.count > 0 ? windowed.buckets : now.buckets;
      return h("tr", { "data-op": name },
        h("td", { "data-label": "Operation" }, name),
        h("td", { class: "num", "data-label": "Total", "data-field": "total" }, count(now.count)),
        h("td", { class: "num", "data-label": "ops/s now" }, recent.toFixed(2)),
        h("td", { class: "num", "data-label": "ops/s window" }, span > 0 ? (windowed.count / span).toFixed(2) : "—"),
        h("td", { class: "num", "data-label": "p50" }, seconds(quantile(basis, 0.5))),
        h("td", { class: "num", "data-label": "p90" }, seconds(quantile(basis, 0.9))),
        h("td", { class: "num", "data-label": "p99" }, seconds(quantile(basis, 0.99))),
        h("td", { "data-label": "Trend" }, sparkline(rates.length ? rates : [0])));
    }))));
}

async function throughput(_arg, _params, mine) {
  const [{ overview: ov }] = await Promise.all([json("/storch/v1/overview"), sample()]);
  standby(ov);
  const body = h("div", { id: "throughput-body" });
  const draw = () => body.replaceChildren(
    h("h2", {}, "Core operations"),
    throughputTable("ops", "Operations of the core (storch_operation_duration_seconds), every outcome"),
    h("h2", {}, "HTTP routes"),
    throughputTable("http", "Requests by route (storch_http_request_duration_seconds)"));
  draw();
  const timer = setInterval(async () => {
    try {
      await sample();
      if (mine === generation) draw();
    } catch (e) {
      if (!(e instanceof Unauthorized)) setStatus("Sampling /metrics failed: " + e.message);
    }
  }, SAMPLE_MS);
  cleanup.push(() => clearInterval(timer));
  return [
    title("Throughput"),
    h("p", { class: "muted" }, "Sampled from /metrics every " + SAMPLE_MS / 1000 + " s while this page is open; rates and percentiles cover the last " + WINDOW_MS / 60000 + " minutes at most (percentiles are bucket upper bounds)."),
    body,
  ];
}

// ---------------------------------------------------------------------------------------
// Start

document.getElementById("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const input = document.getElementById("token");
  const value = input.value.trim();
  if (!value) return;
  sessionStorage.setItem(TOKEN_KEY, value);
  input.value = "";
  document.getElementById("login").hidden = true;
  route();
});
document.getElementById("forget-token").addEventListener("click", () => showLogin("The token was forgotten."));
window.addEventListener("hashchange", route);
route();
