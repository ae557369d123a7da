// The session: session.start, events in and out, and resume after a dropped connection.
//
// States (the "state" event's detail.state): "connecting", "live", "reconnecting",
// "resumed" (then live again), "ended" (session.ended or a deliberate end) and "failed"
// (never started, or could not resume). A session the gateway moves to another node
// ("session.moving", on a deploy) is resumed through the same URL at once. Server events
// arrive as "server" events, audio as "audio" events (detail: ArrayBuffer). Events queued
// while reconnecting come back in a "flushed" event once sent after the resume, or in an
// "unsent" event if they never will be. Each connection that opens is announced in a
// "transport" event (detail: {transport: "websocket" | "webrtc", fallback: why the page is not
// on WebRTC, or null}).
//
// What carries the events is a link: by default a WebSocket to /v1/session (`SocketLink`);
// `dial(startEvent, session)` may hand out another kind (webrtc.js: a peer connection, or
// WebRTC falling back to the socket). A link has `transport`, `fallback`, `start(handlers)`
// (handlers: open(), message(text), audio(ArrayBuffer), close({code, reason, opened})),
// `send(text)` and `sendAudio(pcm)` (false when it cannot take them now), `close()` (the
// handlers hear nothing more), `finished()` (the session is over) and `refusal()` (why it never
// opened).

export const RESUME_WINDOW_MS = 30000; // the gateway's default resume window
const MAX_BUFFERED_AUDIO_BYTES = 64 * 1024; // ≈ 2 s of 16 kHz PCM16 not yet on the wire

// When to try again after a drop: quick first, then backing off, never past the window.
// Pure, for tests: returns the delay in ms, or null when the window is over.
export function reconnectDelay(attempt, elapsedMs, windowMs = RESUME_WINDOW_MS) {
  const delay = Math.min(250 * 2 ** attempt, 4000);
  return elapsedMs + delay < windowMs ? delay : null;
}

// The URL of the gateway's session socket for a page served by the gateway itself: wss://
// behind a TLS-terminating proxy, ws:// on http://localhost.
export function sessionUrl(location, token) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const url = new URL(`${scheme}//${location.host}/v1/session`);
  if (token) url.searchParams.set("token", token);
  return url.toString();
}

// The session's events on a WebSocket to /v1/session, the microphone as binary frames.
export class SocketLink {
  constructor(url) {
    this.url = url;
    this.transport = "websocket";
    this.fallback = null;
    this.socket = null;
  }

  start(handlers) {
    const socket = new WebSocket(this.url); // throws on a malformed URL
    socket.binaryType = "arraybuffer";
    this.socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      handlers.open();
    };
    socket.onmessage = (message) => {
      if (socket !== this.socket) return;
      if (typeof message.data === "string") handlers.message(message.data);
      else handlers.audio(message.data);
    };
    socket.onclose = (close) => {
      if (socket !== this.socket) return;
      this.socket = null;
      handlers.close({ code: close.code, reason: close.reason, opened });
    };
  }

  send(text) {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) return false;
    this.socket.send(text);
    return true;
  }

  // What is captured while the socket is down, or while a stalled link has not taken the last
  // seconds yet, is dropped: late speech is worse than none.
  sendAudio(pcm) {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) return false;
    if (socket.bufferedAmount > MAX_BUFFERED_AUDIO_BYTES) return false;
    socket.send(pcm);
    return true;
  }

  close() {
    const socket = this.socket;
    this.socket = null;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000);
  }

  finished() {} // the gateway closes the socket after session.ended

  // The gateway answers a plain GET of the socket's URL with the same admission check as the
  // upgrade, so its JSON error says why the socket was refused (token, origin, rate limit).
  async refusal() {
    let response;
    try {
      response = await fetch(this.url.replace(/^ws/, "http"), { cache: "no-store" });
    } catch {
      return "could not reach the gateway";
    }
    try {
      const body = await response.json();
      if (body && body.error) return `${body.error.code}: ${body.error.message}`;
    } catch {
      // not the gateway's JSON error: the status is all there is to say
    }
    return `the gateway refused the connection (HTTP ${response.status})`;
  }
}

export class GatewayConnection extends EventTarget {
  constructor({ url, start, clock = () => performance.now(), dial = null }) {
    super();
    this.url = url;
    this.start = start; // the session.start event (without resume)
    this.clock = clock;
    this.dial = dial || (() => new SocketLink(url));
    this.link = null;
    this.session = null; // the last session.started
    this.state = "idle";
    this.dropAt = null;
    this.attempt = 0;
    this.outbox = []; // text events sent while reconnecting, flushed after resume
    this.closing = false;
    this.moving = false; // told to resume elsewhere (session.moving), not yet resumed
    this.timer = null;
  }

  open() {
    this.closing = false;
    this.setState("connecting");
    this.connect(this.start);
  }

  // Sends a client event: "sent", "queued" (while reconnecting: it goes after the resume, or
  // comes back in an "unsent" event if the session cannot be resumed), or null (not connected).
  send(event) {
    if (this.state === "live" && this.link && this.link.send(JSON.stringify(event))) return "sent";
    if (this.state === "reconnecting") {
      this.outbox.push(event);
      return "queued";
    }
    return null;
  }

  // Microphone audio as binary frames: live audio only (a link that carries the microphone
  // otherwise, a WebRTC track, takes none).
  sendAudio(pcm) {
    return this.state === "live" && this.link !== null && this.link.sendAudio(pcm);
  }

  // The transport of the link in use ("websocket", "webrtc"), or null.
  get transport() {
    return this.link === null ? null : this.link.transport;
  }

  // The WebSocket in use, or null (none, or the session is on WebRTC).
  get socket() {
    return (this.link !== null && this.link.transport === "websocket" && this.link.socket) || null;
  }

  end(reason = "user") {
    this.closing = true;
    clearTimeout(this.timer);
    if (!(this.link && this.session && this.link.send(JSON.stringify({ type: "session.end", reason })))) {
      this.drop();
      this.setState("ended", { reason: "client" });
    }
  }

  setState(state, extra = {}) {
    this.state = state;
    if (state === "failed" || state === "ended") {
      clearTimeout(this.timer);
      if (this.link) this.link.finished(); // a peer connection closes; a socket, the gateway closes
      this.link = null;
      const unsent = this.outbox.splice(0);
      if (unsent.length) this.dispatchEvent(new CustomEvent("unsent", { detail: unsent }));
    }
    this.dispatchEvent(new CustomEvent("state", { detail: { state, ...extra } }));
  }

  // Gives up this link (the server is told nothing more).
  drop() {
    const link = this.link;
    this.link = null;
    if (link) link.close();
  }

  connect(startEvent) {
    const link = this.dial(startEvent, this.session);
    this.link = link;
    try {
      link.start({
        open: () => {
          if (link !== this.link) return;
          this.dispatchEvent(
            new CustomEvent("transport", { detail: { transport: link.transport, fallback: link.fallback } }),
          );
          link.send(JSON.stringify(startEvent));
        },
        message: (text) => {
          if (link !== this.link) return;
          let event;
          try {
            event = JSON.parse(text);
          } catch {
            return; // the gateway only sends JSON; nothing sensible to do with anything else
          }
          this.handle(event);
        },
        audio: (pcm) => {
          if (link === this.link) this.dispatchEvent(new CustomEvent("audio", { detail: pcm }));
        },
        close: (close) => {
          if (link !== this.link) return;
          this.link = null;
          this.lastLink = link;
          this.closed(close, close.opened);
        },
      });
    } catch (error) {
      this.link = null;
      this.setState("failed", { message: String(error.message || error) });
    }
  }

  handle(event) {
    if (event.type === "session.started") {
      const resumed = Boolean(event.resumed);
      const moved = this.moving;
      this.session = event;
      this.attempt = 0;
      this.dropAt = null;
      this.moving = false;
      this.setState(resumed ? "resumed" : "live", { session: event, moved });
      this.state = "live";
      const waiting = this.outbox.splice(0);
      for (const queued of waiting) this.send(queued);
      if (waiting.length) this.dispatchEvent(new CustomEvent("flushed", { detail: waiting }));
    } else if (event.type === "session.updated" && this.session !== null) {
      this.session = { ...this.session, mode: event.mode }; // a resume keeps the current mode
    } else if (event.type === "session.moving") {
      // The node is draining: the same session goes on at another node behind this URL.
      this.session = { ...this.session, resume_token: event.resume_token };
      this.dispatchEvent(new CustomEvent("server", { detail: event }));
      this.drop();
      this.moving = true;
      this.dropAt = this.clock();
      this.attempt = 0;
      this.scheduleResume({ code: 1012 }, Math.max(0, Number(event.retry_after_ms) || 0));
      return;
    } else if (event.type === "session.ended") {
      this.closing = true;
      this.dispatchEvent(new CustomEvent("server", { detail: event }));
      this.setState("ended", { reason: event.reason, detail: event.detail });
      return;
    } else if (event.type === "error" && event.code === "resume_failed") {
      this.closing = true;
      this.dispatchEvent(new CustomEvent("server", { detail: event }));
      this.drop();
      this.setState("failed", { message: `could not resume the session: ${event.message}` });
      return;
    } else if (event.type === "error" && this.state === "connecting") {
      // session.start itself was refused (a mode the provider cannot run, say): the gateway
      // keeps the socket for another try, but this page's start is fixed, so give up now.
      this.closing = true;
      this.dispatchEvent(new CustomEvent("server", { detail: event }));
      this.drop();
      this.setState("failed", { message: `the gateway refused the session: ${event.code}: ${event.message}` });
      return;
    } else if (event.type === "error" && this.state === "reconnecting") {
      // A resume attempt refused for another reason (rate_limited…): this try is over.
      this.dispatchEvent(new CustomEvent("server", { detail: event }));
      this.drop();
      this.scheduleResume({ code: 1000 });
      return;
    }
    this.dispatchEvent(new CustomEvent("server", { detail: event }));
  }

  async closed(close, opened) {
    if (this.closing || this.state === "ended" || this.state === "failed") {
      if (this.state !== "ended" && this.state !== "failed") this.setState("ended", { reason: "client" });
      return;
    }
    if (this.session === null) {
      // Never started: a refused upgrade shows up as 1006 with no reason, so ask the server why.
      const why = opened ? close.reason || `closed with ${close.code}` : await this.lastLink.refusal();
      this.setState("failed", { message: why });
      return;
    }
    if (this.dropAt === null) this.dropAt = this.clock();
    this.scheduleResume(close);
  }

  scheduleResume(close, firstDelay = null) {
    const elapsed = this.clock() - this.dropAt;
    const delay = firstDelay ?? reconnectDelay(this.attempt, elapsed);
    if (delay === null) {
      this.setState("failed", {
        message: `the connection was lost (${close.code}) and could not be resumed within ${RESUME_WINDOW_MS / 1000} s`,
      });
      return;
    }
    this.attempt += 1;
    this.setState("reconnecting", { attempt: this.attempt, code: close.code, moving: this.moving });
    this.timer = setTimeout(() => {
      if (this.closing) return;
      const { session_id, resume_token } = this.session;
      this.connect({ ...this.start, mode: this.session.mode, resume: { session_id, resume_token } });
    }, delay);
  }
}
