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

  typed(text) {
    this.bubble("user", text, "typed");
  }

  userDelta(delta) {
    if (this.userPartial === null) this.userPartial = this.bubble("user", "", undefined, true);
    this.follow(() => (this.userPartial.textContent += delta));
  }

  userDone(text) {
    const item = this.userPartial ?? this.bubble("user", "");
    item.className = "user";
    item.textContent = text;
    item.append(element("span", "note", "spoken"));
    this.userPartial = null;
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

  started(event) {
    const call = this.entry(event.call_id, event.name);
    this.line(call, `arguments ${compact(event.arguments)}`);
  }

  finished(event) {
    const call = this.entry(event.call_id, event.name);
    const needsConfirmation = !event.ok && event.error && event.error.type === "CONFIRMATION_REQUIRED";
    const label = event.ok ? "ok" : needsConfirmation ? "awaiting confirmation" : "failed";
    call.state.textContent = `${label} · ${event.duration_ms} ms`;
    call.state.className = event.ok ? "ok" : needsConfirmation ? "running" : "failed";
    call.item.dataset.state = event.ok ? "ok" : needsConfirmation ? "confirmation" : "failed";
    if (event.ok) this.line(call, `result ${compact(event.data)}`);
    else if (event.error) this.line(call, `${event.error.type}: ${event.error.message}`);
    if (event.intents && event.intents.length) this.line(call, `intents ${event.intents.join(", ")}`);
  }

  confirmation(callId, name, text) {
    this.line(this.entry(callId, name), text);
  }
}

export class ConfirmationDialog {
  constructor({ onAnswer }) {
    this.dialog = $("confirm");
    this.params = $("confirm-params");
    this.problem = $("confirm-problem");
    this.editedButton = $("approve-edited");
    this.onAnswer = onAnswer;
    this.queue = []; // confirmation.requested events, oldest first
    this.shown = null;
    $("approve").addEventListener("click", () => this.answer("approve"));
    $("reject").addEventListener("click", () => this.answer("reject"));
    this.editedButton.addEventListener("click", () => this.answer("approve", this.edited()));
    this.params.addEventListener("input", () => this.checkEdits());
    this.dialog.addEventListener("cancel", (event) => event.preventDefault()); // answer, don't dismiss
  }

  request(event) {
    this.queue.push(event);
    if (this.shown === null) this.showNext();
  }

  // Closed elsewhere (expired, answered by voice, or by this dialog): forget it.
  resolved(confirmationId) {
    this.queue = this.queue.filter((event) => event.confirmation_id !== confirmationId);
    if (this.shown && this.shown.confirmation_id === confirmationId) {
      this.shown = null;
      this.dialog.close();
      this.showNext();
    }
  }

  clear() {
    this.queue = [];
    this.shown = null;
    if (this.dialog.open) this.dialog.close();
  }

  showNext() {
    const event = this.queue.shift();
    if (!event) return;
    this.shown = event;
    $("confirm-tool").textContent = event.tool;
    $("confirm-prompt").textContent = event.prompt;
    $("confirm-sensitivity").textContent = `${event.sensitivity} sensitivity`;
    $("confirm-expires").textContent = new Date(event.expires_at).toLocaleTimeString();
    this.original = JSON.stringify(event.parameters, null, 2);
    this.params.value = this.original;
    this.checkEdits();
    this.dialog.showModal();
  }

  edited() {
    try {
      const value = JSON.parse(this.params.value);
      return value !== null && typeof value === "object" && !Array.isArray(value) ? value : null;
    } catch {
      return null;
    }
  }

  checkEdits() {
    const changed = this.params.value !== this.original;
    const value = changed ? this.edited() : null;
    this.problem.hidden = !changed || value !== null;
    this.problem.textContent = "The arguments must be a JSON object.";
    this.editedButton.disabled = !changed || value === null;
  }

  answer(decision, parameters) {
    const event = this.shown;
    if (!event || parameters === null) return; // null: edited arguments that are not an object
    this.onAnswer(event, decision, parameters);
    this.resolved(event.confirmation_id);
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
