// A session's timeline: turns, tool calls (arguments redacted and results projected, exactly
// as the client saw them), confirmations, intents, errors, barge-ins, moves, failovers, usage
// and its end; transcripts only when the operator keeps them. Polled once a second while the
// session is live and the timeline is open.
import { $, describeError, h, pill } from "./dom.js";
import {
  compactJson,
  formatDuration,
  formatMoney,
  formatNumber,
  formatOffset,
  formatTime,
  modelOf,
  offsetSeconds,
  principalOf,
} from "./format.js";

const POLL_MS = 1000;

export class TimelineView {
  // lookup(sessionId): the session as the live table last saw it (or null).
  constructor(api, { lookup }) {
    this.api = api;
    this.lookup = lookup;
    this.sessionId = null;
    this.timer = null;
    this.controller = null;
    this.lastBody = "";
    this.polls = 0;
  }

  // Follows `sessionId` (null: none) while `visible`.
  show(sessionId) {
    if (sessionId !== this.sessionId) {
      this.stop();
      this.sessionId = sessionId;
      this.lastBody = "";
      $("timeline-entries").replaceChildren();
      $("timeline-facts").replaceChildren();
    }
    $("timeline-none").hidden = sessionId !== null;
    $("timeline-view").hidden = sessionId === null;
    if (sessionId === null) return;
    $("timeline-title").textContent = `Session ${sessionId}`;
    const known = this.lookup(sessionId);
    if (known && !this.lastBody) this.facts(known, null);
    this.poll();
  }

  // The timeline is hidden: no more polling (show() starts again).
  stop() {
    clearTimeout(this.timer);
    this.timer = null;
    if (this.controller) this.controller.abort();
    this.controller = null;
  }

  async poll() {
    clearTimeout(this.timer);
    const sessionId = this.sessionId;
    if (sessionId === null) return;
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    let live = true;
    try {
      const body = await this.api.get(`/admin/v1/console/sessions/${encodeURIComponent(sessionId)}/timeline`, {
        signal: controller.signal,
      });
      if (sessionId !== this.sessionId) return;
      this.polls += 1;
      live = body.live;
      this.render(body);
    } catch (error) {
      if (error.name === "AbortError" || sessionId !== this.sessionId) return;
      if (error.status === 404) {
        live = false;
        this.state("unknown", "bad", "No such session: it ended long ago, or never was.");
      } else {
        this.state("unreachable", "warn", `The timeline could not be read: ${describeError(error)}; trying again.`);
      }
    } finally {
      if (this.controller === controller) this.controller = null;
    }
    if (live && sessionId === this.sessionId && !document.hidden) {
      this.timer = setTimeout(() => this.poll(), POLL_MS);
    }
  }

  state(text, tone, note) {
    $("timeline-state").replaceChildren(pill(text, tone));
    $("timeline-state").dataset.state = text;
    if (note !== undefined) $("timeline-note").textContent = note;
  }

  render(body) {
    const json = JSON.stringify(body);
    if (json === this.lastBody) return;
    this.lastBody = json;
    const session = body.session ?? this.lookup(this.sessionId);
    this.facts(session, body.trace_id, body.trace_url);
    const ended = body.entries.find((e) => e.kind === "ended");
    const hasTranscript = body.entries.some((e) => e.kind === "transcript");
    this.state(
      body.live ? "live" : ended ? `ended: ${ended.reason}` : "not live",
      body.live ? "good" : "muted",
      hasTranscript ? "" : "No transcript: the gateway keeps one only when the operator turns transcript retention on.",
    );
    const start = session?.started_at ?? body.entries[0]?.at;
    // The page scrolls, not the list: one at its bottom stays there as entries arrive.
    const page = document.scrollingElement;
    const follow = page.scrollTop + page.clientHeight >= page.scrollHeight - 24;
    $("timeline-entries").replaceChildren(...body.entries.map((entry) => this.entry(entry, start)));
    if (follow && this.polls > 1) page.scrollTop = page.scrollHeight;
  }

  facts(session, traceId, traceUrl) {
    const list = $("timeline-facts");
    if (!session) return list.replaceChildren();
    const pairs = [
      ["Node", session.node],
      ["Key or user", principalOf(session)],
      ["Team", session.team ?? "–"],
      ["Edge", session.edge],
      ["Provider / model", modelOf(session)],
      ["Failovers", String(session.failovers)],
      ["Mode", session.mode],
      ["Started", formatTime(session.started_at)],
      ["Duration", formatDuration(session.duration_s)],
      ["Turns", String(session.turns)],
      ["Tool calls", String(session.tool_calls)],
      ["Spend", formatMoney(session.spend)],
    ];
    // The operator's trace viewer (GATEWAY_CONSOLE_TRACE_URL), only an http(s) link.
    const link = traceUrl && /^https?:\/\//.test(traceUrl) ? h("a", { href: traceUrl, rel: "noopener", target: "_blank", text: traceId }) : traceId;
    if (traceId) pairs.push(["Trace", link]);
    list.replaceChildren(...pairs.map(([term, value]) => h("div", {}, h("dt", { text: term }), h("dd", {}, value))));
  }

  entry(entry, start) {
    const item = h("li", { "data-testid": "timeline-entry", "data-kind": entry.kind, className: `entry ${entry.kind}` });
    // Since the session started, and the wall clock (UTC) below it.
    const when = h("time", { dateTime: entry.at, className: "when", title: formatTime(entry.at) });
    when.append(formatOffset(offsetSeconds(start, entry.at)), h("small", { text: clockOf(entry.at) }));
    item.append(when, h("span", { className: "kind", text: KIND_LABELS[entry.kind] ?? entry.kind }));
    const describe = DESCRIBE[entry.kind] ?? describeUnknown;
    item.append(h("div", { className: "what" }, describe(entry, item)));
    return item;
  }
}

const KIND_LABELS = {
  turn: "turn",
  transcript: "transcript",
  tool: "tool call",
  confirmation: "confirmation",
  intent: "intent",
  error: "error",
  barge_in: "barge-in",
  move: "moved",
  failover: "failover",
  usage: "usage",
  ended: "ended",
};

// "09:41:10.412" of an ISO instant (UTC).
function clockOf(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : date.toISOString().slice(11, 23);
}

function code(value) {
  return h("code", { text: compactJson(value) });
}

const DESCRIBE = {
  turn: (e) => [`Turn ${e.turn}`, e.response_id ? h("span", { className: "muted mono", text: ` ${e.response_id}` }) : null],
  transcript: (e) => [h("strong", { text: `${e.role}: ` }), h("span", { className: "said", text: e.text })],
  tool(e, item) {
    item.dataset.ok = String(Boolean(e.ok));
    item.dataset.tool = e.name;
    const parts = [
      h("strong", { text: e.name }),
      " ",
      pill(e.ok ? "ok" : "failed", e.ok ? "good" : "bad"),
      h("span", { className: "muted", text: e.duration_ms === undefined ? "" : ` ${e.duration_ms} ms` }),
      h("div", { "data-testid": "tool-arguments" }, h("span", { className: "muted", text: "arguments " }), code(e.arguments)),
    ];
    if (e.ok) parts.push(h("div", { "data-testid": "tool-result" }, h("span", { className: "muted", text: "result " }), code(e.data)));
    else parts.push(h("div", { "data-testid": "tool-error", className: "problem" }, code(e.error)));
    return parts;
  },
  confirmation: (e, item) => {
    item.dataset.state = e.state;
    return [h("strong", { text: e.tool }), ` ${e.state}`];
  },
  intent: (e) => [h("strong", { text: e.name })],
  error: (e) => [h("span", { className: "problem", text: `${e.code}: ${e.message}` })],
  barge_in: () => ["The user spoke over the reply"],
  move(e) {
    const where = [e.from_node ? `from ${e.from_node}` : "", e.to_node ? `to ${e.to_node}` : ""].filter(Boolean).join(" ");
    return [`${where || "to another node"}${e.reason ? ` (${e.reason})` : ""}`];
  },
  failover: (e) => [`${e.previous ? `from ${e.previous} ` : ""}to ${e.provider}${e.model ? `/${e.model}` : ""}`],
  usage(e) {
    const tokens =
      e.usage?.total_tokens !== undefined
        ? `${formatNumber(e.usage.total_tokens)} tokens`
        : e.usage
          ? compactJson(e.usage)
          : "the model reported no usage";
    const cost = e.cost === null || e.cost === undefined ? "" : `, ${formatMoney(e.cost)}`;
    return [`response ${e.status ?? ""}: ${tokens}${cost}`, h("span", { className: "muted mono", text: ` ${e.response_id ?? ""}` })];
  },
  ended: (e) => [h("strong", { text: e.reason })],
};

function describeUnknown(entry) {
  const rest = { ...entry };
  delete rest.at;
  delete rest.kind;
  return [code(rest)];
}
