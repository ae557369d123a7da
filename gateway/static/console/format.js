// Pure helpers: how numbers, times and sessions are shown, sorted and filtered. No DOM here.

export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

export function formatAge(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  return seconds < 10 ? `${seconds.toFixed(1)} s` : formatDuration(seconds);
}

// Spend in the price table's currency: small amounts keep their significant digits.
export function formatMoney(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  if (value === 0) return "0";
  if (Math.abs(value) < 0.01) return value.toPrecision(2);
  return value.toFixed(Math.abs(value) < 100 ? 2 : 0);
}

export function formatNumber(value, digits = 0) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return value.toLocaleString("en-US", { maximumFractionDigits: digits });
}

// A metric of the usage report as shown (spend: money; tokens: an integer; minutes: 1 decimal).
export function formatMetric(metric, value) {
  if (metric === "spend") return formatMoney(value);
  return formatNumber(value, metric === "minutes" ? 1 : 0);
}

export function formatTime(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

export function formatDate(iso) {
  return iso ? String(iso).slice(0, 10) : "–";
}

// Seconds between two ISO instants ("+3.2 s" in a timeline).
export function offsetSeconds(fromIso, toIso) {
  const from = Date.parse(fromIso);
  const to = Date.parse(toIso);
  return Number.isNaN(from) || Number.isNaN(to) ? null : (to - from) / 1000;
}

export function formatOffset(seconds) {
  if (seconds === null) return "";
  return seconds < 60 ? `+${seconds.toFixed(1)} s` : `+${formatDuration(seconds)}`;
}

export function compactJson(value) {
  if (value === undefined) return "";
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

// UTC calendar days, as the gateway counts them.
export function utcDay(date = new Date()) {
  return date.toISOString().slice(0, 10);
}

export function firstOfMonth(date = new Date()) {
  return `${utcDay(date).slice(0, 8)}01`;
}

// Every day from `first` to `last` (YYYY-MM-DD, inclusive); at most `most` of them.
export function daysBetween(first, last, most = 400) {
  const days = [];
  const end = Date.parse(`${last}T00:00:00Z`);
  for (let t = Date.parse(`${first}T00:00:00Z`); t <= end && days.length < most; t += 86400000) {
    days.push(new Date(t).toISOString().slice(0, 10));
  }
  return days;
}

// "openai/gpt-realtime" → "openai": the usage report's model ids name their provider first.
export function providerOf(modelId) {
  const slash = String(modelId).indexOf("/");
  return slash === -1 ? String(modelId) : String(modelId).slice(0, slash);
}

// Who a session runs as, for the table: its key when it has one, else its user.
export function principalOf(session) {
  return session.key_id ? `${session.key_id} (${session.user_id})` : session.user_id;
}

export function modelOf(session) {
  return session.model ? `${session.provider}/${session.model}` : session.provider;
}

// The live duration: what the snapshot said, plus the time since it was received.
export function liveDuration(session, receivedAtMs, nowMs) {
  const base = Number(session.duration_s) || 0;
  return session.state === "live" ? base + Math.max(0, nowMs - receivedAtMs) / 1000 : base;
}

// The sessions table's columns: what each sorts by.
export const SESSION_COLUMNS = [
  { id: "node", label: "Node", value: (s) => s.node },
  { id: "principal", label: "Key or user", value: principalOf },
  { id: "team", label: "Team", value: (s) => s.team ?? "" },
  { id: "edge", label: "Edge", value: (s) => s.edge },
  { id: "model", label: "Provider / model", value: (s) => `${modelOf(s)} ${s.failovers}` },
  { id: "mode", label: "Mode", value: (s) => s.mode },
  { id: "state", label: "State", value: (s) => s.state },
  { id: "duration", label: "Duration", value: (s) => Number(s.duration_s) || 0, numeric: true },
  { id: "turns", label: "Turns", value: (s) => s.turns, numeric: true },
  { id: "tools", label: "Tool calls", value: (s) => s.tool_calls, numeric: true },
  { id: "spend", label: "Spend", value: (s) => s.spend ?? -1, numeric: true },
];

export function sortSessions(sessions, columnId, direction) {
  const column = SESSION_COLUMNS.find((c) => c.id === columnId) ?? SESSION_COLUMNS[7];
  const sign = direction === "ascending" ? 1 : -1;
  return [...sessions].sort((a, b) => {
    const x = column.value(a);
    const y = column.value(b);
    const order = column.numeric ? x - y : String(x).localeCompare(String(y));
    return order * sign || String(a.session_id).localeCompare(String(b.session_id));
  });
}

export function matchesSession(session, { text = "", node = "", edge = "" }) {
  if (node && session.node !== node) return false;
  if (edge && session.edge !== edge) return false;
  const needle = text.trim().toLowerCase();
  if (!needle) return true;
  const haystack = [
    session.session_id,
    session.node,
    session.user_id,
    session.key_id,
    session.team,
    session.edge,
    session.provider,
    session.model,
    session.mode,
    session.state,
  ];
  return haystack.some((field) => field && String(field).toLowerCase().includes(needle));
}

// Budgets: the limit fields of a key, a team or a user, and how each is shown.
export const LIMIT_FIELDS = [
  { name: "spend_per_day", label: "Spend per day", metric: "spend", window: "day" },
  { name: "spend_per_month", label: "Spend per month", metric: "spend", window: "month" },
  { name: "tokens_per_day", label: "Tokens per day", metric: "tokens", window: "day" },
  { name: "tokens_per_month", label: "Tokens per month", metric: "tokens", window: "month" },
  { name: "minutes_per_day", label: "Minutes per day", metric: "minutes", window: "day" },
  { name: "minutes_per_month", label: "Minutes per month", metric: "minutes", window: "month" },
  { name: "concurrent_sessions", label: "Concurrent sessions", integer: true },
  { name: "soft_limit", label: "Warn at (fraction)", soft: true },
];

// A budgets object from the form's strings: "" is no limit (null). Throws naming the field.
export function parseBudgets(values, { keepSoft = true } = {}) {
  const out = {};
  for (const field of LIMIT_FIELDS) {
    const raw = String(values[field.name] ?? "").trim();
    if (field.soft) {
      if (raw === "") continue;
      const soft = Number(raw);
      if (!(soft > 0 && soft <= 1)) throw new Error(`${field.label}: a number in (0, 1]`);
      if (keepSoft) out.soft_limit = soft;
      continue;
    }
    if (raw === "") {
      out[field.name] = null;
      continue;
    }
    const number = Number(raw);
    if (!Number.isFinite(number) || number < 0) throw new Error(`${field.label}: a number ≥ 0, or empty for no limit`);
    if (field.integer && !Number.isInteger(number)) throw new Error(`${field.label}: a whole number`);
    out[field.name] = number;
  }
  return out;
}

// "a, b , c" → ["a", "b", "c"]; "" → null (the field left out: any, or what the roles allow).
export function parseList(raw) {
  const items = String(raw ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
  return items.length ? items : null;
}

// Sums usage rows per (id, day) and per id; ids mapped through `group` (provider of a model).
export function summarizeUsage(rows, group = (id) => id) {
  const perDay = new Map(); // day → Map(id → {spend, tokens, minutes})
  const totals = new Map(); // id → {spend, tokens, minutes, days:Set}
  for (const row of rows) {
    const id = group(row.id);
    const day = perDay.get(row.day) ?? new Map();
    perDay.set(row.day, day);
    const cell = day.get(id) ?? { spend: 0, tokens: 0, minutes: 0 };
    const total = totals.get(id) ?? { spend: 0, tokens: 0, minutes: 0, days: new Set() };
    for (const metric of ["spend", "tokens", "minutes"]) {
      const value = Number(row[metric]) || 0;
      cell[metric] += value;
      total[metric] += value;
    }
    total.days.add(row.day);
    day.set(id, cell);
    totals.set(id, total);
  }
  return { perDay, totals };
}
