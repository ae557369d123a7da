// Keys: the list with today's and this month's use against each key's budgets, a new key (its
// secret shown once, in a box with a copy button, then forgotten), edits, and revocation.
import { $, announce, confirmAction, describeError, h, pill, showBanner, usedOf } from "./dom.js";
import { budgetFields, expiryInput, expiryIso, field, formValues, problemLine, setProblem } from "./forms.js";
import { firstOfMonth, formatDate, formatMetric, parseBudgets, parseList, utcDay } from "./format.js";

// Use per id from usage rows: {day: {spend, tokens, minutes}, month: {…}} (UTC today, month).
export function usageById(rows, today = utcDay()) {
  const out = new Map();
  for (const row of rows) {
    const entry = out.get(row.id) ?? { day: zero(), month: zero() };
    for (const metric of ["spend", "tokens", "minutes"]) {
      entry.month[metric] += Number(row[metric]) || 0;
      if (row.day === today) entry.day[metric] += Number(row[metric]) || 0;
    }
    out.set(row.id, entry);
  }
  return out;
}

function zero() {
  return { spend: 0, tokens: 0, minutes: 0 };
}

// The limits other than spend, with their use: "tokens/day 1,200 of 50,000", "2 sessions at once".
export function otherLimits(budgets, usage) {
  const list = h("ul", { className: "limits" });
  for (const metric of ["tokens", "minutes"]) {
    for (const window of ["day", "month"]) {
      const limit = budgets?.[`${metric}_per_${window}`];
      if (limit === null || limit === undefined) continue;
      const format = (v) => formatMetric(metric, v);
      list.append(h("li", {}, `${metric}/${window} `, usedOf(usage[window][metric], limit, format)));
    }
  }
  if (budgets?.concurrent_sessions !== null && budgets?.concurrent_sessions !== undefined) {
    list.append(h("li", { text: `at most ${budgets.concurrent_sessions} session(s) at once` }));
  }
  if (!list.children.length) list.append(h("li", { className: "muted", text: "none" }));
  return list;
}

export async function usageThisMonth(api, groupBy) {
  const today = utcDay();
  const query = new URLSearchParams({ group_by: groupBy, from: firstOfMonth(), to: today });
  const body = await api.get(`/admin/v1/usage?${query}`);
  return usageById(body.rows || [], today);
}

export class KeysView {
  // teams(): the team ids known (for the team field's suggestions).
  constructor(api, { teams }) {
    this.api = api;
    this.teams = teams;
    this.keys = [];
    this.usage = new Map();
    $("key-filter").addEventListener("input", () => this.render());
    $("key-revoked").addEventListener("change", () => this.render());
    $("key-new").addEventListener("click", () => this.toggleCreate());
    this.buildCreate();
  }

  async load() {
    try {
      const [listed, usage] = await Promise.all([this.api.get("/admin/v1/keys"), usageThisMonth(this.api, "key")]);
      this.keys = listed.keys || [];
      this.usage = usage;
      this.render();
    } catch (error) {
      if (!error.refused) showBanner(`The keys could not be read: ${describeError(error)}`);
    }
  }

  render() {
    const needle = $("key-filter").value.trim().toLowerCase();
    const all = $("key-revoked").checked;
    const shown = this.keys
      .filter((k) => all || k.status === "active")
      .filter((k) => !needle || [k.id, k.name, k.owner, k.team, k.hint, ...(k.roles || [])].some((v) => v && String(v).toLowerCase().includes(needle)))
      .sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
    $("key-rows").replaceChildren(...shown.map((key) => this.row(key)));
    $("keys-empty").hidden = shown.length > 0;
    $("keys-empty").textContent = this.keys.length ? "No key matches." : "No keys yet.";
  }

  row(key) {
    const usage = this.usage.get(key.id) ?? { day: zero(), month: zero() };
    const budgets = key.budgets || {};
    const money = (v) => formatMetric("spend", v);
    const active = key.status === "active";
    const edit = h("button", { type: "button", "data-testid": "key-edit", text: "Edit", disabled: !active, onClick: () => this.edit(key) });
    const revoke = h("button", {
      type: "button",
      className: "danger",
      "data-testid": "key-revoke",
      text: "Revoke",
      disabled: key.status === "revoked",
      "aria-label": `Revoke ${key.name || key.id}`,
      onClick: () => this.revoke(key),
    });
    return h(
      "tr",
      { "data-testid": "key-row", "data-key-id": key.id, "data-status": key.status },
      h("td", {}, h("strong", { text: key.name || "(no name)" }), h("br"), h("span", { className: "mono", text: key.id }), " ", h("span", { className: "muted mono", text: key.hint })),
      h("td", { text: key.owner }),
      h("td", { text: key.team ?? "–" }),
      h("td", { text: (key.roles || []).join(", ") || "–" }),
      h("td", {}, pill(key.status, key.status === "active" ? "good" : "bad")),
      h("td", { "data-testid": "key-spend-day" }, usedOf(usage.day.spend, budgets.spend_per_day, money)),
      h("td", { "data-testid": "key-spend-month" }, usedOf(usage.month.spend, budgets.spend_per_month, money)),
      h("td", {}, otherLimits(budgets, usage)),
      h("td", { text: key.expires_at ? formatDate(key.expires_at) : "never" }),
      h("td", { className: "actions" }, edit, revoke),
    );
  }

  toggleCreate(open = $("key-create").hidden) {
    $("key-create").hidden = !open;
    $("key-new").setAttribute("aria-expanded", String(open));
    if (open) {
      $("key-teams").replaceChildren(...this.teams().map((id) => h("option", { value: id })));
      $("key-create").querySelector("input").focus();
    }
  }

  buildCreate() {
    const form = $("key-create");
    this.createProblem = problemLine("key-create-problem");
    form.append(
      h("h3", { text: "New key" }),
      field({ name: "owner", label: "Owner (the user its sessions run as)", required: true }),
      field({ name: "name", label: "Name" }),
      field({ name: "team", label: "Team", list: "key-teams" }),
      h("datalist", { id: "key-teams" }),
      field({ name: "roles", label: "Roles", help: "comma-separated; admin gives the admin API" }),
      field({ name: "models", label: "Models", help: "comma-separated, e.g. openai/*; empty: any" }),
      field({ name: "tools", label: "Tools", help: "comma-separated; empty: what its roles allow" }),
      field({ name: "expires_at", label: "Expires (UTC)", type: "datetime-local", help: "empty: never" }),
      budgetFields(),
      this.createProblem,
      h(
        "div",
        { className: "bar end" },
        h("button", { type: "button", text: "Cancel", onClick: () => this.toggleCreate(false) }),
        h("button", { type: "submit", className: "primary", "data-testid": "key-create-submit", text: "Create key" }),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.create(form);
    });
  }

  async create(form) {
    const values = formValues(form);
    let body;
    try {
      body = { owner: values.owner.trim(), ...keyFields(values, null) };
      const budgets = parseBudgets(values);
      const set = Object.fromEntries(Object.entries(budgets).filter(([, v]) => v !== null));
      if (Object.keys(set).length) body.budgets = set;
    } catch (error) {
      return setProblem(this.createProblem, error.message);
    }
    setProblem(this.createProblem, "");
    let made;
    try {
      made = await this.api.post("/admin/v1/keys", body);
    } catch (error) {
      return setProblem(this.createProblem, `Not created: ${describeError(error)}`);
    }
    form.reset();
    this.toggleCreate(false);
    showSecret(made.secret);
    made = null; // the secret lives in the box only, until it closes
    announce("Key created. Copy its secret now: it is shown once.");
    this.load();
  }

  edit(key) {
    const form = $("edit-form");
    const problem = problemLine("edit-problem");
    form.replaceChildren(
      h("h2", { id: "edit-title", text: `Edit ${key.name || key.id}` }),
      h("p", { className: "muted mono", text: `${key.id} · owner ${key.owner}` }),
      field({ name: "name", label: "Name", value: key.name ?? "" }),
      field({ name: "team", label: "Team", value: key.team ?? "", list: "key-teams" }),
      field({ name: "roles", label: "Roles", value: (key.roles || []).join(", ") }),
      field({ name: "models", label: "Models", value: (key.models || []).join(", "), help: "empty: any" }),
      field({ name: "tools", label: "Tools", value: (key.tools || []).join(", "), help: "empty: what its roles allow" }),
      field({ name: "expires_at", label: "Expires (UTC)", type: "datetime-local", value: expiryInput(key.expires_at) }),
      budgetFields(key.budgets || {}),
      problem,
      h(
        "div",
        { className: "bar end" },
        h("button", { value: "cancel", formNoValidate: true, text: "Cancel" }),
        h("button", { type: "submit", value: "save", className: "primary", "data-testid": "edit-save", text: "Save" }),
      ),
    );
    const dialog = $("edit-dialog");
    form.onsubmit = async (event) => {
      if (event.submitter?.value !== "save") return; // Cancel closes the dialog
      event.preventDefault();
      let changes;
      try {
        changes = keyChanges(key, formValues(form));
      } catch (error) {
        return setProblem(problem, error.message);
      }
      if (!Object.keys(changes).length) return dialog.close();
      try {
        await this.api.patch(`/admin/v1/keys/${encodeURIComponent(key.id)}`, changes);
      } catch (error) {
        return setProblem(problem, `Not saved: ${describeError(error)}`);
      }
      dialog.close();
      announce(`Key ${key.id} saved.`);
      this.load();
    };
    dialog.showModal();
  }

  async revoke(key) {
    const confirmed = await confirmAction({
      title: `Revoke ${key.name || key.id}?`,
      message: `Key ${key.id} (owner ${key.owner}) stops working on every node at once, and its live sessions end within a second. This cannot be undone.`,
      action: "Revoke",
    });
    if (!confirmed) return;
    try {
      await this.api.post(`/admin/v1/keys/${encodeURIComponent(key.id)}/revoke`);
      announce(`Key ${key.id} revoked.`);
      showBanner(`Key ${key.id} revoked: its sessions end within a second.`, "good");
    } catch (error) {
      showBanner(`Not revoked: ${describeError(error)}`);
    }
    this.load();
  }
}

// The optional fields of a new key (lists, team, name, expiry); left out when empty.
function keyFields(values) {
  const body = {};
  if (values.name.trim()) body.name = values.name.trim();
  if (values.team.trim()) body.team = values.team.trim();
  for (const name of ["roles", "models", "tools"]) {
    const list = parseList(values[name]);
    if (list) body[name] = list;
  }
  const expires = expiryIso(values.expires_at);
  if (expires) body.expires_at = expires;
  return body;
}

// What a PATCH must say: the fields that changed; budgets field by field (null: removed).
function keyChanges(key, values) {
  const changes = {};
  const name = values.name.trim();
  if (name !== (key.name ?? "")) changes.name = name || null;
  const team = values.team.trim();
  if (team !== (key.team ?? "")) changes.team = team || null;
  for (const list of ["roles", "models", "tools"]) {
    const now = parseList(values[list]);
    const before = key[list] && key[list].length ? key[list] : null;
    if (JSON.stringify(now) !== JSON.stringify(before)) changes[list] = list === "roles" ? now ?? [] : now;
  }
  const expires = expiryIso(values.expires_at) ?? null;
  if (expiryInput(expires) !== expiryInput(key.expires_at)) changes.expires_at = expires;
  const budgets = parseBudgets(values);
  const old = key.budgets || {};
  const changed = Object.entries(budgets).filter(([k, v]) => (old[k] ?? null) !== v);
  if (changed.length) changes.budgets = Object.fromEntries(changed);
  return changes;
}

// The secret of a key just made, in a modal box with a copy button. Closing the box empties
// it: nothing keeps the secret afterwards (no storage, no variable).
export function showSecret(secret) {
  const dialog = $("secret-dialog");
  const input = $("secret-value");
  input.value = secret;
  $("secret-copied").textContent = "";
  $("secret-copy").onclick = async () => {
    input.focus();
    input.select();
    let copied = false;
    try {
      await navigator.clipboard.writeText(input.value);
      copied = true;
    } catch {
      copied = document.execCommand && document.execCommand("copy");
    }
    $("secret-copied").textContent = copied ? "Copied." : "Select it and copy it by hand (Ctrl+C).";
  };
  dialog.addEventListener(
    "close",
    () => {
      input.value = "";
      $("secret-copied").textContent = "";
    },
    { once: true },
  );
  dialog.showModal();
  input.select();
}
