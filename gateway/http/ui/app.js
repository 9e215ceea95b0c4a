// The inspector page: reads the gateway's inspection API with the key typed in (kept for this tab only).
// Every text from the store is set with textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem("pcp-key") || "", thread: null, offset: 0 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (name === "text") node.textContent = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

async function api(path) {
  const headers = state.key ? { Authorization: "Bearer " + state.key } : {};
  const response = await fetch(path, { headers });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const message = body && body.error ? body.error.message : response.statusText;
    throw new Error(`${response.status}: ${message}`);
  }
  return body;
}

function day(iso) { return iso ? iso.replace("T", " ").replace("Z", " UTC") : "?"; }

// -- threads -------------------------------------------------------------------------------------------

async function loadThreads(append) {
  const list = $("threads");
  if (!append) { list.replaceChildren(); state.offset = 0; }
  $("threads-status").textContent = "Loading threads…";
  try {
    const page = await api(`/pcp/threads?limit=50&offset=${state.offset}`);
    for (const thread of page.data) {
      const button = el("button", { type: "button", "data-thread": thread.id, onclick: () => openThread(thread.id) },
        `${thread.id} — ${thread.pages} page${thread.pages === 1 ? "" : "s"}, last stored ${day(thread.last_used)}`);
      list.append(el("li", {}, button));
    }
    state.offset += page.data.length;
    $("threads-more").hidden = !page.has_more;
    $("threads-status").textContent = page.total ? `${page.total} thread${page.total === 1 ? "" : "s"}` : "No threads for this key.";
    markCurrent();
  } catch (error) {
    $("threads-status").textContent = "Could not list threads: " + error.message;
  }
}

function markCurrent() {
  for (const button of document.querySelectorAll("#threads button")) {
    button.setAttribute("aria-current", button.dataset.thread === state.thread ? "true" : "false");
  }
}

// -- one thread ----------------------------------------------------------------------------------------

function pageNode(page, views) {
  const view = views[page.id] || "Summary";
  const kind = page.type === "Consolidated" ? "[Consolidated]" : "[Original]";
  const head = el("span", { class: "node-head" },
    el("span", { class: "node-kind", text: kind }),
    ` ${page.id} · ${day(page.timestamp)} · ${page.tokens} tokens · view: ${view}` +
    (page.children ? ` · ${page.children.length} inside` : "") + (page.heat ? ` · opened ${page.heat}×` : ""));
  const content = el("pre", { hidden: "", tabindex: "0" });
  const show = el("button", { type: "button", "aria-expanded": "false" }, "Show content");
  show.addEventListener("click", async () => {
    if (!content.hidden) { content.hidden = true; show.textContent = "Show content"; show.setAttribute("aria-expanded", "false"); return; }
    show.textContent = "Loading…";
    try {
      const full = await api(`/pcp/threads/${encodeURIComponent(state.thread)}/pages/${page.id}`);
      content.textContent = full.content;
      content.hidden = false;
      show.textContent = "Hide content";
      show.setAttribute("aria-expanded", "true");
    } catch (error) {
      show.textContent = "Show content (failed: " + error.message + ")";
    }
  });
  const body = [el("p", { class: "node-summary", text: "Summary: " + (page.summary || "(none)") }), show, content];
  if (page.children && page.children.length) {
    const details = el("details", { "data-page": page.id }, el("summary", {}, head));
    details.append(...body, el("ul", {}, ...page.children.map((child) => pageNode(child, views))));
    return el("li", {}, details);
  }
  return el("li", { "data-page": page.id }, head, ...body);
}

async function openThread(thread) {
  state.thread = thread;
  location.hash = "thread=" + encodeURIComponent(thread);
  markCurrent();
  $("thread-title").textContent = "Thread " + thread;
  $("thread-status").textContent = "Loading…";
  try {
    const data = await api(`/pcp/threads/${encodeURIComponent(thread)}`);
    const facts = $("thread-facts");
    facts.replaceChildren();
    const rows = [
      ["Pages", `${data.total_pages} (${data.consolidated_pages} consolidated)`],
      ["Pending jobs", String(data.pending_jobs)],
      ["Form", data.form],
      ["Topic buffer", `${data.segment.buffer_pages.length} page(s), ${data.segment.buffer_tokens} tokens`],
    ];
    for (const [name, value] of rows) facts.append(el("dt", { text: name }), el("dd", { text: value }));
    $("tree").replaceChildren(...data.pages.map((page) => pageNode(page, data.views)));
    if (!data.pages.length) $("tree").append(el("li", { text: "No pages stored." }));
    $("trace").replaceChildren(...data.trace.map((step) =>
      el("li", { text: `${day(step.time)} ${step.action} ${step.target}: ${step.reason}` })));
    if (!data.trace.length) $("trace").append(el("li", { text: "No zoom steps yet." }));
    $("thread-body").hidden = false;
    $("thread-status").textContent = `Loaded ${data.total_pages} page(s).`;
  } catch (error) {
    $("thread-body").hidden = true;
    $("thread-status").textContent = "Could not load the thread: " + error.message;
  }
}

async function buildContext(event) {
  event.preventDefault();
  const q = $("question").value.trim();
  if (!q || !state.thread) return;
  const budget = $("budget").value.trim();
  $("context-status").textContent = "Building…";
  try {
    const params = new URLSearchParams({ q });
    if (budget) params.set("budget", budget);
    const data = await api(`/pcp/threads/${encodeURIComponent(state.thread)}/context?${params}`);
    $("context-facts").textContent = `${data.prompt_tokens} tokens of a ${data.budget}-token budget` +
      (data.over_budget ? " (over budget: the client's own parts do not fit)" : "") +
      `; ${data.pages_shown} of ${data.pages_total} pages shown; model ${data.model}.`;
    $("context-system").textContent = data.system;
    const rest = data.messages.filter((m) => m.role !== "system");
    $("context-messages").replaceChildren(...rest.map((m) =>
      el("li", {}, el("span", { class: "role", text: m.role }), " ", typeof m.content === "string" ? m.content : JSON.stringify(m.content))));
    $("context-result").hidden = false;
    $("context-status").textContent = "Built (nothing was sent to the model).";
  } catch (error) {
    $("context-result").hidden = true;
    $("context-status").textContent = "Could not build the context: " + error.message;
  }
}

function start() {
  $("api-key").value = state.key;
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.key = $("api-key").value.trim();
    sessionStorage.setItem("pcp-key", state.key);
    loadThreads(false);
  });
  $("open-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const thread = $("open-thread").value.trim();
    if (thread) openThread(thread);
  });
  $("threads-more").addEventListener("click", () => loadThreads(true));
  $("refresh").addEventListener("click", () => state.thread && openThread(state.thread));
  $("context-form").addEventListener("submit", buildContext);
  loadThreads(false);
  const match = /thread=([^&]+)/.exec(location.hash);
  if (match) openThread(decodeURIComponent(match[1]));
}

document.addEventListener("DOMContentLoaded", start);
