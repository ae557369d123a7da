// The console's only way to the gateway: fetch() with the admin credential as a bearer header
// (never a cookie, never in a URL), errors as ApiError, and the live stream read from a fetch
// body (EventSource cannot send a header).

// The gateway's error body is {"error": {"code", "message"}}; anything else keeps the status.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }

  // 401 or 403: the credential (or the page's origin) is refused; retrying will not help.
  get refused() {
    return this.status === 401 || this.status === 403;
  }
}

export async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = response.statusText || `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, code, message);
}

export class Api {
  // token(): the credential now; onRefused(error): a 401/403 anywhere (the page signs out).
  constructor({ token, onRefused }) {
    this.token = token;
    this.onRefused = onRefused;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token()}`, ...extra };
  }

  async fetch(method, path, { body, signal } = {}) {
    const init = { method, headers: this.headers(), signal, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, "network", "the gateway cannot be reached");
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if (error.refused) this.onRefused(error);
      throw error;
    }
    return response;
  }

  async json(method, path, options) {
    const response = await this.fetch(method, path, options);
    return response.status === 204 ? null : response.json();
  }

  get(path, options) {
    return this.json("GET", path, options);
  }

  post(path, body) {
    return this.json("POST", path, { body });
  }

  patch(path, body) {
    return this.json("PATCH", path, { body });
  }

  put(path, body) {
    return this.json("PUT", path, { body });
  }

  async blob(path) {
    return (await this.fetch("GET", path)).blob();
  }
}

// Server-sent events, parsed as they arrive: push(text) returns the complete events in it
// ({event, data}); comments (": ping") return {comment} so a watchdog can see the stream live.
export class EventStreamParser {
  constructor() {
    this.buffer = "";
    this.reset();
  }

  reset() {
    this.event = "message";
    this.data = [];
  }

  push(text) {
    this.buffer += text;
    const out = [];
    let end;
    while ((end = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
      const line = this.buffer.slice(0, end);
      const newline = this.buffer.startsWith("\r\n", end) ? 2 : 1;
      this.buffer = this.buffer.slice(end + newline);
      if (line === "") {
        if (this.data.length) out.push({ event: this.event, data: this.data.join("\n") });
        this.reset();
      } else if (line.startsWith(":")) {
        out.push({ comment: line.slice(1).trim() });
      } else {
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") this.event = value;
        else if (field === "data") this.data.push(value);
      }
    }
    return out;
  }
}

// How long to wait before the next attempt: 0.5 s doubling to 15 s, with up to 20 % jitter.
export function backoffDelay(attempt, random = Math.random) {
  const base = Math.min(500 * 2 ** attempt, 15000);
  return Math.round(base * (1 + 0.2 * random()));
}

const SILENT_MS = 40000; // the gateway pings every 15 s: this long without a byte is a dead link

// The console's live stream (GET path, text/event-stream) until stop(): onEvent(name, data)
// for each event, onState("connecting" | "live" | "reconnecting" | "refused", detail).
// It reconnects with backoff whenever the body ends or fails.
export class LiveStream {
  constructor(api, path, { onEvent, onState }) {
    this.api = api;
    this.path = path;
    this.onEvent = onEvent;
    this.onState = onState;
    this.stopped = false;
    this.attempt = 0;
    this.controller = null;
    this.timer = null;
    this.connects = 0;
  }

  start() {
    this.stopped = false;
    this.run();
    return this;
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.controller) this.controller.abort();
  }

  async run() {
    this.onState(this.connects ? "reconnecting" : "connecting");
    const controller = new AbortController();
    this.controller = controller;
    let watchdog = null;
    const feed = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), SILENT_MS);
    };
    try {
      feed();
      const response = await this.api.fetch("GET", this.path, { signal: controller.signal });
      this.connects += 1;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      const parser = new EventStreamParser();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        feed();
        for (const item of parser.push(value)) {
          if (item.comment !== undefined) continue;
          this.attempt = 0;
          this.onState("live");
          let data;
          try {
            data = JSON.parse(item.data);
          } catch {
            continue; // not ours to show
          }
          this.onEvent(item.event, data);
        }
      }
    } catch (error) {
      if (error instanceof ApiError && error.refused) {
        this.stopped = true;
        this.onState("refused", error);
        return;
      }
    } finally {
      clearTimeout(watchdog);
    }
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt);
    this.attempt += 1;
    this.onState("reconnecting", delay);
    this.timer = setTimeout(() => this.run(), delay);
  }
}
