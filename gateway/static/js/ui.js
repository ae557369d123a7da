// What the page shows: transcript, tool timeline, confirmation dialog, errors, status.
// It only renders what it is told; main.js decides. Text is always set with textContent.

const $ = (id) => document.getElementById(id);

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function compact(value) {
  return JSON.stringify(value ?? {});
}

export class Transcript {
  constructor(list) {
    this.list = list;
    this.assistant = new Map(); // response_id → bubble
    this.userPartial = null; // the user's utterance being transcribed
  }

  // Runs a change and keeps the newest line in view, unless the user scrolled up to read.
  follow(change) {
    const list = this.list;
    const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 24;
    const result = change();
    if (atBottom) list.scrollTop = list.scrollHeight;
    return result;
  }

  bubble(role, text, note, partial = false) {
    const item = element("li", partial ? `${role} partial` : role, text);
    item.dataset.role = role;
    if (note) item.append(element("span", "note", note));
    return this.follow(() => this.list.appendChild(item));
  }

  // A new session: keep what is shown, forget the ids (the next session may reuse them).
  reset(label) {
    this.assistant.clear();
    this.userPartial = null;
    if (this.list.children.length) this.follow(() => this.list.appendChild(element("li", "divider", label)));
  }

  // A typed message: "sent", or "queued" while the socket is being restored.
  typed(text, state) {
    const item = this.bubble("user", text, state === "queued" ? "waiting for the connection" : "typed");
    item.dataset.status = state;
    return item;
  }

  // What became of a typed message: "sent" once a queued one went out, else why it did not.
  settle(item, outcome) {
    item.dataset.status = outcome === "sent" ? "sent" : "unsent";
    const note = item.querySelector(".note");
    note.textContent = outcome === "sent" ? "typed" : `not sent: ${outcome}`;
  }

  userDelta(delta) {
    if (this.userPartial === null) this.userPartial = this.bubble("user", "", undefined, true);
    this.follow(() => (this.userPartial.textContent += delta));
  }

  userDone(text) {
    const item = this.userPartial ?? this.bubble("user", "");
    this.userPartial = null;
    this.follow(() => {
      item.className = "user";
      item.textContent = text;
      item.append(element("span", "note", "spoken"));
    });
  }

  assistantDelta(responseId, delta) {
    let item = this.assistant.get(responseId);
    if (!item) {
      item = this.bubble("assistant", "", undefined, true);
      item.dataset.responseId = responseId;
      this.assistant.set(responseId, item);
    }
    this.follow(() => item.append(delta));
  }

  assistantDone(responseId, text, status) {
    let item = this.assistant.get(responseId);
    if (!item && !text && status === "completed") return; // a reply that only called tools
    if (!item) {
      item = this.bubble("assistant", "");
      item.dataset.responseId = responseId;
    }
    this.assistant.delete(responseId);
    this.follow(() => {
      item.className = "assistant";
      item.dataset.status = status;
      item.textContent = text || item.textContent;
      if (status !== "completed") item.append(element("span", "note", status));
    });
  }
}

export class ToolTimeline {
  constructor(list) {
    this.list = list;
    this.calls = new Map(); // call_id → {item, state, lines}
  }

  entry(callId, name) {
    let call = this.calls.get(callId);
    if (!call) {
      const item = element("li");
      item.dataset.callId = callId;
      const head = element("div");
      const state = element("span", "running", "running");
      head.append(element("span", "name", name), " ", state);
      const lines = element("div");
      item.append(head, lines);
      this.list.prepend(item);
      call = { item, state, lines };
      this.calls.set(callId, call);
    }
    return call;
  }

  line(call, text) {
    call.lines.append(element("div", "", text));
  }

  reset() {
    this.calls.clear(); // call ids restart with a new session
  }

  setState(call, state, label, className) {
    call.state.textContent = label;
    call.state.className = className;
    call.item.dataset.state = state;
  }

  // A confirmation closed: rejected or expired calls never run; an approved one is "approved"
  // until its tool.finished (which usually came first) says how it went.
  settled(callId, name, decision) {
    const call = this.entry(callId, name);
    this.line(call, `confirmation ${decision}`);
    if (call.item.dataset.state !== "confirmation") return;
    if (decision === "approved") this.setState(call, "approved", "approved", "running");
    else this.setState(call, decision, decision, "failed");
  }

  started(event) {
    const call = this.entry(event.call_id, event.name);
    if (event.background) this.setState(call, "background", "running in the background", "running");
    this.line(call, `arguments ${compact(event.arguments)}`);
  }

  // tool.slow: the model waits for this call past the soft limit (the caller hears a cue).
  slow(event) {
    const call = this.entry(event.call_id, event.name);
    this.setState(call, "slow", `still running · ${event.elapsed_ms} ms`, "running");
    const cue = event.cue === "none" ? "" : `; the caller hears a holding ${event.cue}`;
    this.line(call, `slow: still running after ${event.elapsed_ms} ms${cue}`);
  }

  finished(event) {
    const call = this.entry(event.call_id, event.name);
    const needsConfirmation = !event.ok && event.error && event.error.type === "CONFIRMATION_REQUIRED";
    const label = event.ok ? "ok" : needsConfirmation ? "awaiting confirmation" : "failed";
    const state = event.ok ? "ok" : needsConfirmation ? "confirmation" : "failed";
    const className = event.ok ? "ok" : needsConfirmation ? "running" : "failed";
    this.setState(call, state, `${label} · ${event.duration_ms} ms`, className);
    if (event.ok) this.line(call, `result ${compact(event.data)}`);
    else if (event.error) this.line(call, `${event.error.type}: ${event.error.message}`);
    if (event.intents && event.intents.length) this.line(call, `intents ${event.intents.join(", ")}`);
  }

  confirmation(callId, name, text) {
    this.line(this.entry(callId, name), text);
  }
}

export class ConfirmationDialog {
  // onAnswer(event, decision, parameters) sends the answer; the dialog then waits for
  // confirmation.resolved (closes it) or refused() (the gateway said no: fix and answer again).
  // onExpired(event) runs when a shown confirmation passes its expires_at unanswered.
  constructor({ onAnswer, onExpired }) {
    this.dialog = $("confirm");
    this.params = $("confirm-params");
    this.problem = $("confirm-problem");
    this.approveButton = $("approve");
    this.editedButton = $("approve-edited");
    this.undoButton = $("undo-edits");
    this.onAnswer = onAnswer;
    this.onExpired = onExpired;
    this.queue = []; // confirmation.requested events, oldest first
    this.shown = null;
    this.waiting = false;
    this.expiry = null;
    this.approveButton.addEventListener("click", () => this.answer("approve"));
    $("reject").addEventListener("click", () => this.answer("reject"));
    this.editedButton.addEventListener("click", () => this.answer("approve", this.edited()));
    this.undoButton.addEventListener("click", () => {
      this.params.value = this.original;
      this.update();
    });
    this.params.addEventListener("input", () => this.update());
  }

  request(event) {
    this.queue.push(event);
    if (this.shown === null) this.showNext();
  }

  // Closed elsewhere (expired, answered by voice, or by this dialog): forget it.
  resolved(confirmationId) {
    this.queue = this.queue.filter((event) => event.confirmation_id !== confirmationId);
    if (this.shown && this.shown.confirmation_id === confirmationId) {
      clearTimeout(this.expiry);
      this.shown = null;
      this.dialog.close();
      this.showNext();
    }
  }

  // The gateway refused the answer (edited arguments that fail validation…): still pending.
  refused(confirmationId, message) {
    if (!this.shown || this.shown.confirmation_id !== confirmationId) return;
    this.waiting = false;
    this.update(message);
  }

  clear() {
    clearTimeout(this.expiry);
    this.queue = [];
    this.shown = null;
    this.waiting = false;
    if (this.dialog.open) this.dialog.close();
  }

  showNext() {
    const event = this.queue.shift();
    if (!event) return;
    this.shown = event;
    this.waiting = false;
    $("confirm-tool").textContent = event.tool;
    $("confirm-prompt").textContent = event.prompt;
    $("confirm-sensitivity").textContent = `${event.sensitivity} sensitivity`;
    const expiresAt = new Date(event.expires_at);
    $("confirm-expires").textContent = expiresAt.toLocaleTimeString();
    this.original = JSON.stringify(event.parameters, null, 2);
    this.params.value = this.original;
    this.update();
    // Not modal: the user may still type "yes" (or say it) instead of clicking.
    this.dialog.show();
    // A fallback for when the gateway cannot tell us (the socket is down at that moment).
    const remaining = expiresAt.getTime() - Date.now();
    if (Number.isFinite(remaining)) {
      this.expiry = setTimeout(() => {
        if (this.shown !== event) return;
        this.onExpired(event);
        this.resolved(event.confirmation_id);
      }, Math.max(0, remaining) + 1000);
    }
  }

  edited() {
    try {
      const value = JSON.parse(this.params.value);
      return value !== null && typeof value === "object" && !Array.isArray(value) ? value : null;
    } catch {
      return null;
    }
  }

  // Buttons follow the text: the plain Approve is for the arguments as asked; once they are
  // edited, only "Approve with these arguments" (valid JSON object) or Undo.
  update(refusal) {
    const changed = this.params.value !== this.original;
    const valid = !changed || this.edited() !== null;
    const problem = refusal || (valid ? "" : "The arguments must be a JSON object.");
    this.problem.hidden = !problem;
    this.problem.textContent = problem;
    this.approveButton.disabled = this.waiting || changed;
    this.editedButton.disabled = this.waiting || !changed || !valid;
    this.undoButton.disabled = this.waiting || !changed;
    $("reject").disabled = this.waiting;
    this.params.readOnly = this.waiting;
  }

  answer(decision, parameters) {
    const event = this.shown;
    if (!event || this.waiting || parameters === null) return; // null: not a JSON object
    this.waiting = true;
    this.update();
    this.onAnswer(event, decision, parameters);
  }
}

export function showStatus(state, text) {
  const status = $("status");
  status.dataset.state = state;
  status.textContent = text;
}

export function showBanner(text, tone) {
  const banner = $("banner");
  banner.hidden = !text;
  banner.textContent = text || "";
  banner.className = `banner ${tone || ""}`;
  banner.dataset.tone = tone || "";
}

export function showError(text) {
  const list = $("errors");
  list.prepend(element("li", "", text));
}

// Which transport carries the session ("webrtc", "websocket", null: none yet), and why (a
// fallback's reason, "chosen" when the user asked for it).
export function showTransport(transport, why) {
  const indicator = $("transport");
  indicator.dataset.transport = transport || "";
  indicator.textContent = transport === "webrtc" ? "WebRTC" : transport === "websocket" ? "WebSocket" : "no transport";
  indicator.title = why || "what carries the session";
  $("transport-reason").textContent = why || "";
}
