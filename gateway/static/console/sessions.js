// Live sessions: the table of every node's sessions, fed by the console's stream; filter by
// text, node and edge; sort by any column; a row opens the session's timeline.
import { $, h, pill } from "./dom.js";
import {
  SESSION_COLUMNS,
  formatDuration,
  formatMoney,
  liveDuration,
  matchesSession,
  modelOf,
  principalOf,
  sortSessions,
} from "./format.js";

const MAX_ROWS = 500; // beyond this, the filter narrows it down

export class SessionsView {
  // onOpen(sessionId): a row was chosen.
  constructor({ onOpen }) {
    this.onOpen = onOpen;
    this.sessions = [];
    this.receivedAt = performance.now();
    this.sort = { column: "duration", direction: "descending" };
    this.rows = new Map(); // session_id → <tr>
    this.filters = { text: "", node: "", edge: "" };
    this.buildHead();
    $("session-filter").addEventListener("input", (e) => this.setFilter("text", e.target.value));
    $("session-node").addEventListener("change", (e) => this.setFilter("node", e.target.value));
    $("session-edge").addEventListener("change", (e) => this.setFilter("edge", e.target.value));
    $("session-filters").addEventListener("submit", (e) => e.preventDefault());
    // Durations of live sessions go on between two snapshots.
    this.ticker = setInterval(() => this.tick(), 1000);
  }

  buildHead() {
    const head = $("session-head");
    head.replaceChildren(h("th", { scope: "col", text: "Session" }));
    for (const column of SESSION_COLUMNS) {
      const button = h("button", { type: "button", className: "sort", "data-column": column.id, text: column.label });
      button.addEventListener("click", () => this.sortBy(column.id));
      const th = h("th", { scope: "col", className: column.numeric ? "num" : "", "data-column": column.id }, button);
      head.append(th);
    }
    this.showSort();
  }

  sortBy(columnId) {
    const same = this.sort.column === columnId;
    const numeric = SESSION_COLUMNS.find((c) => c.id === columnId)?.numeric;
    const direction = same
      ? this.sort.direction === "ascending" ? "descending" : "ascending"
      : numeric ? "descending" : "ascending";
    this.sort = { column: columnId, direction };
    this.showSort();
    this.render();
  }

  showSort() {
    for (const th of $("session-head").querySelectorAll("th[data-column]")) {
      if (th.dataset.column === this.sort.column) th.setAttribute("aria-sort", this.sort.direction);
      else th.removeAttribute("aria-sort");
    }
  }

  setFilter(name, value) {
    this.filters[name] = value;
    this.render();
  }

  // A snapshot from the stream (or GET /admin/v1/console/sessions).
  update(snapshot) {
    this.sessions = snapshot.sessions || [];
    this.receivedAt = performance.now();
    this.fillChoices("session-node", (snapshot.nodes || []).map((n) => n.node_id).concat(this.sessions.map((s) => s.node)));
    this.fillChoices("session-edge", this.sessions.map((s) => s.edge));
    this.render();
  }

  fillChoices(id, values) {
    const select = $(id);
    const wanted = [...new Set(values.filter(Boolean))].sort();
    const have = [...select.options].slice(1).map((o) => o.value);
    if (select.value && !wanted.includes(select.value)) wanted.push(select.value); // keep the choice
    if (wanted.join("\n") === have.join("\n")) return;
    const chosen = select.value;
    select.replaceChildren(select.options[0], ...wanted.map((v) => h("option", { value: v, text: v })));
    select.value = chosen;
  }

  visible() {
    const shown = this.sessions.filter((s) => matchesSession(s, this.filters));
    return sortSessions(shown, this.sort.column, this.sort.direction);
  }

  render() {
    const shown = this.visible();
    const body = $("session-rows");
    const keep = new Set();
    const ordered = [];
    for (const session of shown.slice(0, MAX_ROWS)) {
      let row = this.rows.get(session.session_id);
      if (!row) {
        row = this.newRow(session.session_id);
        this.rows.set(session.session_id, row);
      }
      this.fillRow(row, session);
      keep.add(session.session_id);
      ordered.push(row);
    }
    for (const [id, row] of this.rows) {
      if (!keep.has(id)) {
        row.remove();
        this.rows.delete(id);
      }
    }
    // Move rows only when the order changed (a moved row would lose the keyboard focus).
    const current = [...body.children];
    if (current.length !== ordered.length || current.some((row, i) => row !== ordered[i])) {
      body.replaceChildren(...ordered);
    }
    const total = this.sessions.length;
    const nodes = new Set(this.sessions.map((s) => s.node)).size;
    const more = shown.length > MAX_ROWS ? `, the first ${MAX_ROWS} shown` : "";
    $("session-count").textContent =
      shown.length === total
        ? `${total} session${total === 1 ? "" : "s"} on ${nodes} node${nodes === 1 ? "" : "s"}`
        : `${shown.length} of ${total} sessions match${more}`;
    $("sessions-empty").hidden = shown.length > 0;
    $("sessions-empty").textContent = total ? "No session matches the filter." : "No sessions right now.";
  }

  newRow(sessionId) {
    const open = h("button", { type: "button", className: "link", "data-testid": "session-open", text: sessionId });
    open.addEventListener("click", (event) => {
      event.stopPropagation();
      this.onOpen(sessionId);
    });
    const row = h("tr", { "data-testid": "session-row", "data-session-id": sessionId, className: "clickable" });
    row.append(h("td", { className: "mono" }, open));
    for (const column of SESSION_COLUMNS) {
      row.append(h("td", { "data-column": column.id, className: column.numeric ? "num" : "" }));
    }
    row.addEventListener("click", () => this.onOpen(sessionId));
    return row;
  }

  fillRow(row, s) {
    const cells = Object.fromEntries([...row.querySelectorAll("td[data-column]")].map((td) => [td.dataset.column, td]));
    row.dataset.node = s.node;
    row.dataset.edge = s.edge;
    row.dataset.state = s.state;
    setText(cells.node, s.node);
    setText(cells.principal, principalOf(s));
    setText(cells.team, s.team ?? "–");
    setText(cells.edge, s.edge);
    const model = modelOf(s) + (s.failovers ? ` (${s.failovers} failover${s.failovers === 1 ? "" : "s"})` : "");
    setText(cells.model, model);
    setText(cells.mode, s.mode);
    if (cells.state.dataset.value !== s.state) {
      cells.state.dataset.value = s.state;
      cells.state.replaceChildren(pill(s.state, s.state === "live" ? "good" : "warn"));
    }
    setText(cells.duration, formatDuration(liveDuration(s, this.receivedAt, performance.now())));
    setText(cells.turns, String(s.turns));
    setText(cells.tools, String(s.tool_calls));
    setText(cells.spend, formatMoney(s.spend));
  }

  tick() {
    const now = performance.now();
    for (const session of this.sessions) {
      const row = this.rows.get(session.session_id);
      if (row && session.state === "live") {
        setText(row.querySelector("td[data-column=duration]"), formatDuration(liveDuration(session, this.receivedAt, now)));
      }
    }
  }

  // The last snapshot's record of a session (the timeline's header until its own arrives).
  find(sessionId) {
    return this.sessions.find((s) => s.session_id === sessionId) ?? null;
  }
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}
