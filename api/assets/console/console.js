// The claims console: the officers' review queue and claim view, and the rule authors'
// rulebooks, drafts, backtests and publishing. It calls the same API as any client,
// with the signed-in user's scopes. The access token lives in memory only; the
// refresh cookie (HttpOnly, Path=/api/v1/auth) renews it, also after a reload.
// Every piece of data goes into the page as text, never as markup.
"use strict";

const API = "/api/v1";
let token = null;

// ---- DOM helpers ---------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const view = () => document.getElementById("view");

function show(title, ...content) {
  const heading = h("h1", { tabindex: "-1" }, title);
  view().replaceChildren(heading, ...content);
  document.title = `${title} · Claims console`;
  heading.focus();
}

function money(minor) {
  if (minor === null || minor === undefined) return "–";
  const sign = minor < 0 ? "-" : "";
  const abs = Math.abs(minor);
  return `${sign}${Math.floor(abs / 100).toLocaleString("en-US")}.${String(abs % 100).padStart(2, "0")}`;
}

function toMinor(text) {
  const m = /^\s*(\d+)(?:\.(\d{1,2}))?\s*$/.exec(text);
  if (!m) return null;
  return Number(m[1]) * 100 + Number((m[2] || "0").padEnd(2, "0"));
}

function age(rfc3339) {
  const s = Math.max(0, (Date.now() - Date.parse(rfc3339)) / 1000);
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

function table(caption, headers, rows) {
  return h("div", { class: "scroll" },
    h("table", {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))));
}

function fields(pairs) {
  return h("dl", { class: "fields" }, pairs.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "–")]));
}

function alert(message) {
  return h("p", { class: "error", role: "alert" }, message);
}

// ---- The API ---------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error && body.error.code;
    this.field = body && body.error && body.error.field;
  }
}

async function refresh() {
  const r = await fetch(`${API}/auth/refresh`, { method: "POST", credentials: "same-origin" });
  if (!r.ok) return false;
  token = (await r.json()).access_token;
  return true;
}

async function api(path, options = {}, retried = false) {
  const init = { method: options.method || "GET", credentials: "same-origin", headers: {} };
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const r = await fetch(API + path, init);
  if (r.status === 401 && !retried && (await refresh())) return api(path, options, true);
  if (r.status === 401) {
    signedOut();
    throw new ApiError(401, null);
  }
  const body = r.status === 204 ? null : await r.json().catch(() => null);
  if (!r.ok) throw new ApiError(r.status, body);
  return body;
}

// Answers null where the user lacks the scope or the thing does not exist.
async function optional(path) {
  try {
    return await api(path);
  } catch (e) {
    if (e.status === 403 || e.status === 404) return null;
    throw e;
  }
}

// ---- Signing in ------------------------------------------------------------------

function signedOut() {
  token = null;
  document.getElementById("nav").hidden = true;
  view().replaceChildren();
  const login = document.getElementById("login");
  login.hidden = false;
  login.querySelector("h1").focus();
}

async function signIn(event) {
  event.preventDefault();
  const error = document.getElementById("login-error");
  error.textContent = "";
  const r = await fetch(`${API}/auth/login`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      email: document.getElementById("email").value,
      password: document.getElementById("password").value,
    }),
  });
  if (!r.ok) {
    error.textContent = r.status === 401 ? "The email or the password is wrong." : `Sign-in failed (HTTP ${r.status}).`;
    return;
  }
  token = (await r.json()).access_token;
  document.getElementById("password").value = "";
  signedIn();
}

function signedIn() {
  document.getElementById("login").hidden = true;
  document.getElementById("nav").hidden = false;
  if (!location.hash || location.hash === "#/") location.hash = "#/queue";
  else route();
}

async function signOut() {
  await fetch(`${API}/auth/logout`, {
    method: "POST",
    credentials: "same-origin",
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  }).catch(() => {});
  location.hash = "";
  signedOut();
}

// ---- The review queue ------------------------------------------------------------

async function queuePage(params) {
  const status = params.get("status") || "open";
  const page = await api(`/workflow/tasks?status=${encodeURIComponent(status)}&limit=100`);
  const filter = h("form", { class: "actions", onsubmit: (e) => {
    e.preventDefault();
    location.hash = `#/queue?status=${e.target.status.value}`;
  } },
    h("div", {}, h("label", { for: "status" }, "Tasks"),
      h("select", { id: "status", name: "status" },
        ["open", "claimed", "done"].map((s) => h("option", { value: s, selected: s === status }, s)))),
    h("button", { type: "submit", class: "secondary" }, "Show"));
  const rows = page.data.map((t) => [
    String(t.priority),
    h("a", { href: `#/claims/${encodeURIComponent(t.claim_id)}` }, t.claim_id),
    age(t.created_at),
    t.reasons.map((r) => r.code).join(", "),
    t.assignee ? `${t.status} (${t.assignee})` : t.status,
  ]);
  show("Review queue", filter,
    rows.length
      ? table(`${rows.length} ${status} tasks, highest priority first, then oldest`,
        ["Priority", "Claim", "Age", "Reasons", "Status"], rows)
      : h("p", {}, `No ${status} tasks.`));
}

// ---- A claim -----------------------------------------------------------------------

function linesTable(lines) {
  return table("Lines and their adjudication", ["#", "Code", "Units", "Billed", "Status", "Allowed", "Approved", "Adjustments"],
    lines.map((l) => {
      const a = l.adjudication || {};
      return [String(l.line_no), l.procedure_code, String(l.units), money(l.amount), a.status || "–",
        money(a.allowed_amount), money(a.approved_amount),
        (a.adjustments || []).map((x) => `${x.group}-${x.carc} ${money(x.amount)}`).join("; ") || "–"];
    }));
}

async function claimPage(claimId) {
  const enc = encodeURIComponent(claimId);
  const claim = await api(`/claims/${enc}`);
  const [receipt, fraud, uploads, audit, task] = await Promise.all([
    optional(`/claims/${enc}/decision`),
    optional(`/claims/${enc}/fraud`),
    optional(`/claims/${enc}/uploads`),
    optional(`/audit?entity_id=${enc}&limit=100`),
    claim.task_id ? optional(`/workflow/tasks/${encodeURIComponent(claim.task_id)}`) : null,
  ]);
  const s = claim;
  const parts = [
    fields([
      ["Status", s.status],
      ["Outcome", h("span", { class: s.outcome || "" }, s.outcome || "–")],
      ["Claimed", money(s.claim_amount)],
      ["Approved", money(s.approved_amount)],
      ["Member", s.member_id],
      ["Provider", s.provider_id],
      ["Service date", s.service_date],
      ["Diagnoses", (s.diagnosis_codes || []).join(", ") || "–"],
      ["Received", s.received_at],
      ["Fraud score", s.fraud_score === null || s.fraud_score === undefined ? "–" : s.fraud_score.toFixed(2)],
    ]),
  ];
  if (task) parts.push(taskActions(task, claim));
  parts.push(h("h2", {}, "Lines"), linesTable(claim.lines || []));
  parts.push(h("h2", {}, "Fraud reasons"));
  if (fraud) {
    parts.push(h("p", {}, `Score ${fraud.fraud_score.toFixed(2)} (model ${fraud.model_version})`),
      fraud.reasons.length
        ? h("ul", { id: "fraud-reasons" }, fraud.reasons.map((r) => h("li", {}, h("strong", {}, r.code), ` (+${r.contribution.toFixed(2)}): ${r.detail}`)))
        : h("p", {}, "No fraud signal."));
  } else parts.push(h("p", { class: "muted" }, "Not available to you (needs fraud:read)."));
  parts.push(h("h2", {}, "Decision receipt"));
  if (receipt) {
    parts.push(fields([
      ["Outcome", receipt.outcome],
      ["Approved", money(receipt.approved_amount)],
      ["Rulebook", `${receipt.rulebook_id || "–"} (version ${receipt.rulebook_version})`],
      ["Eligibility", receipt.eligibility || "–"],
      ["Decided", receipt.decided_at],
      ["Officer", receipt.officer || "–"],
      ["Audit record", receipt.audit_id],
    ]), table("Every rule of the rulebook, in order", ["Rule", "Action", "Matched", "Value or error"],
      receipt.rules.map((r) => [r.rule_id, r.action,
        h("span", { class: r.error ? "failed" : r.matched ? "matched" : "" }, r.error ? "error" : r.matched ? "yes" : "no"),
        r.error || r.value || ""])),
    receipt.reasons.length ? h("ul", {}, receipt.reasons.map((r) => h("li", {}, `${r.source} ${r.code}: ${r.message}`))) : null);
  } else parts.push(h("p", { class: "muted" }, "Not decided yet."));
  parts.push(h("h2", {}, "Uploads"));
  if (uploads && uploads.data && uploads.data.length) {
    parts.push(table("Supporting documents", ["File", "Status", "Scan", "OCR excerpt"],
      uploads.data.map((u) => [u.filename, u.status,
        u.scan.signature ? `${u.scan.verdict} (${u.scan.signature})` : u.scan.verdict,
        (u.ocr && u.ocr.excerpt) || "–"])));
  } else parts.push(h("p", { class: "muted" }, uploads ? "No uploads." : "Not available to you."));
  parts.push(h("h2", {}, "Audit trail"));
  if (audit && audit.data) {
    parts.push(table("Changes to this claim, oldest first", ["At", "Actor", "Action"],
      audit.data.map((a) => [a.at, a.actor, a.action])));
  } else parts.push(h("p", { class: "muted" }, "Not available to you (needs audit:read)."));
  show(`Claim ${claim.claim_id}`, ...parts);
}

function taskActions(task, claim) {
  const id = encodeURIComponent(task.task_id);
  const status = h("p", { role: "status" });
  const act = async (path, body) => {
    status.textContent = "";
    try {
      await api(`/workflow/tasks/${id}/${path}`, { method: "POST", body });
      await claimPage(claim.claim_id);
    } catch (e) {
      status.replaceChildren(alert(e.message));
    }
  };
  const box = h("div", { class: "card", id: "task" },
    h("h2", {}, "Review task"),
    fields([["Task", task.task_id], ["Status", task.status], ["Held by", task.assignee || "nobody"],
      ["Priority", String(task.priority)], ["Decision", task.decision || "–"]]));
  if (task.status === "open") {
    box.append(h("button", { type: "button", onclick: () => act("claim") }, "Claim task"));
  } else if (task.status === "claimed") {
    const amount = h("input", { id: "approve-amount", name: "amount", inputmode: "decimal",
      value: money(claim.approved_amount ?? claim.claim_amount).replace(/,/g, "") });
    const note = h("textarea", { id: "decline-note", name: "note", required: true });
    box.append(
      h("button", { type: "button", class: "secondary", onclick: () => act("transition", { action: "release" }) }, "Release task"),
      h("div", { class: "actions" },
        h("form", { onsubmit: (e) => {
          e.preventDefault();
          const minor = toMinor(amount.value);
          if (minor === null) {
            amount.setAttribute("aria-invalid", "true");
            status.replaceChildren(alert("The amount is a number like 125.00."));
            return;
          }
          act("transition", { action: "approve", approved_amount: minor });
        } },
          h("label", { for: "approve-amount" }, "Approved amount"), amount,
          h("button", { type: "submit" }, "Approve")),
        h("form", { onsubmit: (e) => { e.preventDefault(); act("transition", { action: "decline", note: note.value }); } },
          h("label", { for: "decline-note" }, "Reason for declining"), note,
          h("button", { type: "submit", class: "danger" }, "Decline"))));
  }
  box.append(status);
  return box;
}

// ---- Rulebooks ---------------------------------------------------------------------

async function rulebooksPage() {
  const page = await api("/rulebooks?limit=100");
  show("Rulebooks",
    h("p", {}, h("a", { href: "#/rulebooks/new" }, "New draft")),
    page.data.length
      ? table("The tenant's rulebooks, newest version first", ["Name", "Version", "Status", "Rules", "Created"],
        page.data.map((r) => [h("a", { href: `#/rulebooks/${encodeURIComponent(r.rulebook_id)}` }, r.name),
          String(r.version), h("span", { class: "badge" }, r.status), String(r.rules.length), r.created_at]))
      : h("p", {}, "No rulebooks yet."));
}

const ACTIONS = ["flag", "block", "decline", "adjust", "deny_line"];

function ruleFieldset(rule, i, remove) {
  const id = (name) => `rule-${i}-${name}`;
  const input = (name, label, attrs = {}) => [h("label", { for: id(name) }, label),
    h("input", { id: id(name), name, value: rule[name] || "", ...attrs })];
  return h("fieldset", { class: "rule", "data-index": i },
    h("legend", {}, `Rule ${i + 1}`),
    h("div", { class: "row" },
      h("div", {}, ...input("rule_id", "Rule id", { required: true })),
      h("div", {}, h("label", { for: id("action") }, "Action"),
        h("select", { id: id("action"), name: "action" }, ACTIONS.map((a) => h("option", { value: a, selected: a === (rule.action || "flag") }, a)))),
      h("div", {}, ...input("reason_code", "Reason code", { required: true }))),
    h("label", { for: id("when") }, "When (CEL)"),
    h("textarea", { id: id("when"), name: "when", required: true, spellcheck: "false" }, rule.when || ""),
    h("p", { class: "error", id: id("error"), role: "alert" }),
    h("div", { class: "row" },
      h("div", {}, ...input("description", "Description")),
      h("div", {}, ...input("approved_amount", "Approved amount (CEL, adjust rules)"))),
    h("button", { type: "button", class: "secondary", onclick: remove }, `Remove rule ${i + 1}`));
}

async function editorPage(params) {
  const from = params.get("from");
  let base = from ? await optional(`/rulebooks/${encodeURIComponent(from)}`) : await optional("/rulebooks/active");
  const rules = base ? base.rules.map((r) => ({ ...r })) : [{}];
  const name = h("input", { id: "rb-name", name: "name", required: true, value: base ? `${base.name} (draft)` : "" });
  const list = h("div", {});
  const formError = h("p", { class: "error", role: "alert" });
  const collect = () => [...list.querySelectorAll("fieldset.rule")].map((f) => {
    const get = (n) => f.querySelector(`[name=${n}]`).value.trim();
    const rule = { rule_id: get("rule_id"), action: get("action"), when: get("when"), reason_code: get("reason_code") };
    if (get("description")) rule.description = get("description");
    if (get("approved_amount")) rule.approved_amount = get("approved_amount");
    return rule;
  });
  const render = () => {
    list.replaceChildren(...rules.map((r, i) => ruleFieldset(r, i, () => {
      rules.splice(0, rules.length, ...collect());
      rules.splice(i, 1);
      render();
    })));
  };
  render();
  const form = h("form", { novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    formError.textContent = "";
    list.querySelectorAll(".error").forEach((p) => { p.textContent = ""; });
    list.querySelectorAll("[aria-invalid]").forEach((x) => x.removeAttribute("aria-invalid"));
    try {
      const created = await api("/rulebooks", { method: "POST", body: { name: name.value, rules: collect() } });
      location.hash = `#/rulebooks/${encodeURIComponent(created.rulebook_id)}`;
    } catch (err) {
      // `rules[1].when` and the like: the error goes on that rule, at that field.
      const m = /^rules\[(\d+)\](?:\.(\w+))?/.exec(err.field || "");
      const set = m && list.querySelector(`fieldset[data-index="${m[1]}"]`);
      if (set) {
        set.querySelector(".error").textContent = err.message;
        const bad = m[2] && set.querySelector(`[name=${m[2]}]`);
        if (bad) {
          bad.setAttribute("aria-invalid", "true");
          bad.setAttribute("aria-describedby", set.querySelector(".error").id);
          bad.focus();
        }
      } else formError.textContent = err.field ? `${err.field}: ${err.message}` : err.message;
    }
  } },
    h("label", { for: "rb-name" }, "Name"), name,
    list,
    h("button", { type: "button", class: "secondary", onclick: () => {
      rules.splice(0, rules.length, ...collect(), {});
      render();
      list.querySelector("fieldset.rule:last-of-type input").focus();
    } }, "Add rule"),
    h("button", { type: "submit" }, "Save draft"),
    formError);
  show("New draft", h("p", { class: "muted" },
    base ? `Starting from ${base.name} (version ${base.version}). Expressions are compiled when the draft is saved; an error shows on its rule.` : "Expressions are compiled when the draft is saved; an error shows on its rule."),
  form);
}

async function rulebookPage(id) {
  const rb = await api(`/rulebooks/${encodeURIComponent(id)}`);
  const result = h("div", { id: "backtest-result", "aria-live": "polite" });
  const since = h("input", { id: "bt-since", name: "since", placeholder: "2026-01-01T00:00:00Z" });
  const until = h("input", { id: "bt-until", name: "until", placeholder: "2026-12-31T00:00:00Z" });
  const limit = h("input", { id: "bt-limit", name: "limit", inputmode: "numeric", value: "10000" });
  const backtest = h("form", { class: "card", onsubmit: async (e) => {
    e.preventDefault();
    const body = { limit: Number(limit.value) };
    if (since.value.trim()) body.since = since.value.trim();
    if (until.value.trim()) body.until = until.value.trim();
    result.replaceChildren(h("p", {}, "Running…"));
    try {
      result.replaceChildren(...backtestReport(await api(`/rulebooks/${encodeURIComponent(id)}/backtest`, { method: "POST", body })));
    } catch (err) {
      result.replaceChildren(alert(err.field ? `${err.field}: ${err.message}` : err.message));
    }
  } },
    h("h2", {}, "Backtest"),
    h("p", { class: "muted" }, "Runs the tenant's decided claims through this rulebook with the facts they were decided with. Nothing changes."),
    h("div", { class: "row" },
      h("div", {}, h("label", { for: "bt-since" }, "Received since"), since),
      h("div", {}, h("label", { for: "bt-until" }, "Received before"), until),
      h("div", {}, h("label", { for: "bt-limit" }, "Most claims"), limit)),
    h("button", { type: "submit" }, "Run backtest"),
    result);
  const status = h("p", { role: "status" });
  const publish = rb.status === "active" ? null : h("button", { type: "button", onclick: async () => {
    try {
      await api(`/rulebooks/${encodeURIComponent(id)}/publish`, { method: "POST" });
      await rulebookPage(id);
    } catch (err) {
      status.replaceChildren(alert(err.message));
    }
  } }, rb.status === "draft" ? "Publish" : "Publish again (roll back to it)");
  show(`Rulebook ${rb.name}`,
    fields([["Id", rb.rulebook_id], ["Version", String(rb.version)],
      ["Status", h("span", { class: "badge", id: "rulebook-status" }, rb.status)], ["Created", rb.created_at]]),
    h("p", {}, publish, h("a", { href: `#/rulebooks/new?from=${encodeURIComponent(id)}` }, "Copy to a new draft")),
    status,
    table("Rules, in order", ["Rule", "Action", "When", "Reason"],
      rb.rules.map((r) => [r.rule_id, r.action, h("code", {}, r.when), r.reason_code])),
    backtest);
}

function backtestReport(r) {
  const transitions = Object.entries(r.transitions);
  return [
    fields([["Claims run", String(r.claims)], ["Changed", String(r.changed)],
      ["Approved, as decided", money(r.approved_amount.baseline)],
      ["Approved, with this rulebook", money(r.approved_amount.candidate)],
      ["Difference", money(r.approved_amount.candidate - r.approved_amount.baseline)],
      ["Compared with", r.baseline_rulebook_id || "–"]]),
    transitions.length
      ? table("Transitions between outcomes", ["As decided", "With this rulebook", "Claims"],
        transitions.map(([k, n]) => { const [a, b] = k.split("->"); return [a, b, String(n)]; }))
      : h("p", {}, "No decided claims in that window."),
    r.samples.length
      ? table("Changed claims (first 20)", ["Claim", "As decided", "With this rulebook", "Rules matched"],
        r.samples.map((s) => [h("a", { href: `#/claims/${encodeURIComponent(s.claim_id)}` }, s.claim_id),
          `${s.baseline.outcome} ${money(s.baseline.approved_amount)}`,
          `${s.candidate.outcome} ${money(s.candidate.approved_amount)}`, s.rules_matched.join(", ") || "–"]))
      : null,
  ];
}

// ---- Routing ---------------------------------------------------------------------

async function route() {
  if (!token) return;
  const [path, query] = location.hash.slice(1).split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "claims" && parts[1]) await claimPage(parts[1]);
    else if (parts[0] === "rulebooks" && parts[1] === "new") await editorPage(params);
    else if (parts[0] === "rulebooks" && parts[1]) await rulebookPage(parts[1]);
    else if (parts[0] === "rulebooks") await rulebooksPage();
    else await queuePage(params);
  } catch (e) {
    if (e.status === 401) return;
    show("Something went wrong", alert(e.status === 403 ? "You do not have the scope this page needs." : e.message));
  }
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("login-form").addEventListener("submit", signIn);
  document.getElementById("logout").addEventListener("click", signOut);
  if (await refresh()) signedIn();
  else signedOut();
});
