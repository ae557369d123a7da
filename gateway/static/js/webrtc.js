// The session over WebRTC: a peer connection to the gateway (POST /v1/webrtc/offer) whose data
// channel carries the same JSON events as the WebSocket, whose audio track carries the
// microphone (with the browser's own echo canceller, noise suppression and gain control) and
// whose remote track, the gateway's replies, plays through an <audio> element. Both tracks are
// 48 kHz Opus, and so is the session's audio (whatever session.start asks).
//
// `Transports` decides what each connection of a session is (connection.js asks it through
// `dial`): with "auto" a peer connection first, and the WebSocket when WebRTC cannot be had
// (no RTCPeerConnection, the offer refused, not connected within CONNECT_TIMEOUT_MS); the
// session then stays on the WebSocket, resumes included. A session on WebRTC whose peer
// connection fails or closes resumes on a new one, or on the WebSocket if none connects.
// "webrtc" and "websocket" use only that one.

import { SocketLink } from "./connection.js";

export const TRANSPORTS = ["auto", "webrtc", "websocket"];
export const RTC_RATE = 48000;
export const CONNECT_TIMEOUT_MS = 5000; // offer, answer, ICE, DTLS and the channel open
const GATHER_TIMEOUT_MS = 2000; // host candidates take milliseconds; a STUN server may not answer
const DISCONNECTED_GRACE_MS = 3000; // "disconnected" that long is a lost connection
const STATS_EVERY_MS = 250;

// The transport asked for in the page's URL (?transport=auto|webrtc|websocket); pure.
export function transportChoice(search) {
  const asked = new URLSearchParams(search).get("transport");
  return TRANSPORTS.includes(asked) ? asked : "auto";
}

// Whether a session's audio can ride the peer connection's tracks (48 kHz PCM16 both ways):
// a session begun on the WebSocket at other rates cannot be resumed over WebRTC. Pure.
export function fitsTracks(session) {
  const audio = session && session.audio;
  if (!audio) return true; // a new session: the gateway makes it 48 kHz
  return audio.input_rate === RTC_RATE && audio.output_rate === RTC_RATE && (audio.encoding ?? "pcm16") === "pcm16";
}

// Why a refused HTTP request was refused, from the gateway's JSON error if there is one.
async function refusedBecause(response) {
  try {
    const body = await response.json();
    if (body && body.error) return `${body.error.code}: ${body.error.message}`;
  } catch {
    // not the gateway's JSON error
  }
  return `HTTP ${response.status}`;
}

function withTimeout(promise, ms, message) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ICE gathering complete (every candidate is in the offer: the gateway takes no trickle), or
// what was gathered when the time runs out.
function gathered(pc, ms) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      pc.removeEventListener("icegatheringstatechange", check);
      resolve();
    }
    function check() {
      if (pc.iceGatheringState === "complete") done();
    }
    pc.addEventListener("icegatheringstatechange", check);
  });
}

// The peer connection's data channel open, or why it will not.
function channelOpen(pc, channel) {
  if (channel.readyState === "open") return Promise.resolve();
  return new Promise((resolve, reject) => {
    channel.addEventListener("open", () => resolve(), { once: true });
    channel.addEventListener("close", () => reject(new Error("the data channel closed before it opened")), {
      once: true,
    });
    pc.addEventListener("connectionstatechange", () => {
      if (pc.connectionState === "failed") reject(new Error("the peer connection failed (ICE or DTLS)"));
    });
  });
}

// One peer connection carrying the session (the link interface of connection.js).
export class RtcLink {
  constructor({ origin, token, player, microphone = null, onStats = () => {}, timeoutMs = CONNECT_TIMEOUT_MS }) {
    this.transport = "webrtc";
    this.fallback = null;
    this.origin = origin; // the gateway's http(s) origin
    this.token = token;
    this.player = player; // the <audio> element the replies play through
    this.microphone = microphone; // the microphone's track, or null (text mode)
    this.onStats = onStats;
    this.timeoutMs = timeoutMs;
    this.pc = null;
    this.channel = null;
    this.sender = null;
    this.stream = null; // the gateway's track, playing
    this.handlers = null;
    this.opened = false;
    this.closed = false;
    this.why = null; // why it never opened
    this.early = []; // messages before open() was told (none expected: the gateway waits)
    this.statsTimer = null;
    this.graceTimer = null;
  }

  start(handlers) {
    this.handlers = handlers;
    const late = `the peer connection did not connect within ${this.timeoutMs / 1000} s`;
    withTimeout(this.dial(), this.timeoutMs, late).then(
      () => {
        if (this.closed) return;
        this.opened = true;
        this.watch();
        handlers.open();
        for (const text of this.early.splice(0)) handlers.message(text);
      },
      (error) => this.lost(String((error && error.message) || error)),
    );
  }

  headers(extra = {}) {
    return this.token ? { ...extra, Authorization: `Bearer ${this.token}` } : extra;
  }

  async iceServers() {
    let response;
    try {
      response = await fetch(`${this.origin}/v1/webrtc/config`, { headers: this.headers(), cache: "no-store" });
    } catch {
      throw new Error("could not reach the gateway");
    }
    if (!response.ok) throw new Error(`the gateway refused WebRTC: ${await refusedBecause(response)}`);
    const body = await response.json();
    return Array.isArray(body.ice_servers) ? body.ice_servers : [];
  }

  async dial() {
    if (typeof RTCPeerConnection !== "function") throw new Error("this browser has no RTCPeerConnection");
    const iceServers = await this.iceServers();
    if (this.closed) return;
    const pc = new RTCPeerConnection({ iceServers });
    this.pc = pc;
    const channel = pc.createDataChannel("events");
    this.channel = channel;
    channel.onmessage = ({ data }) => {
      if (this.closed || typeof data !== "string") return; // the gateway sends JSON text only
      if (this.opened) this.handlers.message(data);
      else this.early.push(data);
    };
    // Always an audio transceiver: the microphone may come later (text to voice) without a
    // new offer, and the gateway sends its replies on it.
    this.sender = pc.addTransceiver(this.microphone || "audio", { direction: "sendrecv" }).sender;
    pc.ontrack = ({ track, streams }) => {
      if (this.closed || track.kind !== "audio") return;
      this.stream = streams[0] || new MediaStream([track]);
      this.player.srcObject = this.stream;
      this.player.play().catch(() => {}); // autoplay: the Connect click allowed it
    };
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc, GATHER_TIMEOUT_MS);
    if (this.closed) return;
    let response;
    try {
      response = await fetch(`${this.origin}/v1/webrtc/offer`, {
        method: "POST",
        headers: this.headers({ "Content-Type": "application/json" }),
        body: JSON.stringify({ sdp: pc.localDescription.sdp, type: "offer" }),
        cache: "no-store",
      });
    } catch {
      throw new Error("could not reach the gateway");
    }
    if (!response.ok) throw new Error(`the offer was refused: ${await refusedBecause(response)}`);
    const answer = await response.json();
    if (this.closed) return;
    await pc.setRemoteDescription({ type: "answer", sdp: answer.sdp });
    await channelOpen(pc, channel);
  }

  // After open: a closed channel, a failed or closed peer connection, or one disconnected for
  // DISCONNECTED_GRACE_MS, is a lost connection (the session resumes on a new one).
  watch() {
    const { pc, channel } = this;
    channel.onclose = () => this.lost("the data channel closed");
    pc.onconnectionstatechange = () => {
      const state = pc.connectionState;
      clearTimeout(this.graceTimer);
      if (state === "failed" || state === "closed") this.lost(`the peer connection ${state}`);
      else if (state === "disconnected") {
        this.graceTimer = setTimeout(() => this.lost("the peer connection was disconnected"), DISCONNECTED_GRACE_MS);
      }
    };
    this.statsTimer = setInterval(() => this.poll(), STATS_EVERY_MS);
    this.poll();
  }

  async poll() {
    const pc = this.pc;
    if (this.closed || pc === null) return;
    let report;
    try {
      report = await pc.getStats();
    } catch {
      return;
    }
    const snapshot = {};
    report.forEach((entry) => {
      if (entry.kind !== "audio") return;
      if (entry.type === "inbound-rtp") {
        snapshot.packetsReceived = entry.packetsReceived ?? 0;
        snapshot.bytesReceived = entry.bytesReceived ?? 0;
        snapshot.samplesReceived = entry.totalSamplesReceived ?? 0;
        snapshot.concealedSamples = entry.concealedSamples ?? 0;
        snapshot.audioLevel = entry.audioLevel ?? 0; // 0..1, of the reply as it plays
        snapshot.audioEnergy = entry.totalAudioEnergy ?? 0;
        snapshot.samplesDuration = entry.totalSamplesDuration ?? 0;
      } else if (entry.type === "outbound-rtp") {
        snapshot.packetsSent = entry.packetsSent ?? 0; // 20 ms Opus frames of the microphone
        snapshot.bytesSent = entry.bytesSent ?? 0;
      }
    });
    if (!this.closed) this.onStats(snapshot);
  }

  lost(why) {
    if (this.closed) return;
    const opened = this.opened;
    if (!opened) this.why = why;
    this.shut();
    this.handlers.close({ code: why, reason: why, opened });
  }

  shut() {
    this.closed = true;
    clearInterval(this.statsTimer);
    clearTimeout(this.graceTimer);
    if (this.pc !== null) {
      this.pc.onconnectionstatechange = null;
      this.pc.close();
    }
    if (this.stream && this.player.srcObject === this.stream) this.player.srcObject = null;
  }

  send(text) {
    if (this.closed || this.channel === null || this.channel.readyState !== "open") return false;
    this.channel.send(text);
    return true;
  }

  sendAudio() {
    return false; // the microphone is the audio track
  }

  setMicrophone(track) {
    this.microphone = track;
    if (this.sender !== null && !this.closed) this.sender.replaceTrack(track).catch(() => {});
  }

  close() {
    if (!this.closed) this.shut();
  }

  finished() {
    this.close();
  }

  async refusal() {
    return this.why || "WebRTC could not connect";
  }
}

// WebRTC first, the WebSocket when the peer connection never opens (the link interface).
class FallbackLink {
  constructor(first, makeSecond, onFallback) {
    this.first = first;
    this.makeSecond = makeSecond;
    this.onFallback = onFallback;
    this.current = first;
    this.reason = null;
  }

  get transport() {
    return this.current.transport;
  }

  get fallback() {
    return this.current === this.first ? null : this.reason;
  }

  get socket() {
    return this.current.socket || null;
  }

  start(handlers) {
    this.first.start({
      ...handlers,
      close: (close) => {
        if (close.opened || this.current !== this.first) {
          handlers.close(close);
          return;
        }
        this.reason = close.reason;
        this.onFallback(close.reason);
        this.current = this.makeSecond();
        try {
          this.current.start(handlers);
        } catch (error) {
          handlers.close({ code: 1006, reason: String(error.message || error), opened: false });
        }
      },
    });
  }

  send(text) {
    return this.current.send(text);
  }

  sendAudio(pcm) {
    return this.current.sendAudio(pcm);
  }

  setMicrophone(track) {
    if (this.current.setMicrophone) this.current.setMicrophone(track);
  }

  close() {
    this.current.close();
  }

  finished() {
    this.current.finished();
  }

  refusal() {
    return this.current.refusal();
  }
}

// What each connection of one session is: `dial` is GatewayConnection's.
export class Transports {
  constructor({ choice, socketUrl, origin, token, player, onStats = () => {} }) {
    this.choice = choice;
    this.socketUrl = socketUrl;
    this.origin = origin;
    this.token = token;
    this.player = player;
    this.onStats = onStats;
    this.microphone = null;
    this.fallback = null; // why this session is on the WebSocket ("auto" only): it stays there
    this.link = null;
    this.dial = (startEvent, session) => this.next(session);
  }

  socket(fallback = null) {
    const link = new SocketLink(this.socketUrl);
    link.fallback = fallback;
    return link;
  }

  rtc() {
    return new RtcLink({
      origin: this.origin,
      token: this.token,
      player: this.player,
      microphone: this.microphone,
      onStats: this.onStats,
    });
  }

  next(session) {
    let link;
    if (this.choice === "websocket") link = this.socket();
    else if (this.choice === "webrtc") link = this.rtc();
    else if (this.fallback !== null) link = this.socket(this.fallback);
    else if (!fitsTracks(session)) {
      this.fallback = "the session's audio is not 48 kHz PCM16";
      link = this.socket(this.fallback);
    } else {
      link = new FallbackLink(
        this.rtc(),
        () => this.socket(this.fallback),
        (reason) => {
          this.fallback = reason;
        },
      );
    }
    this.link = link;
    return link;
  }

  // The microphone's track (null: none), for the peer connection in use and the next ones.
  setMicrophone(track) {
    this.microphone = track;
    if (this.link !== null && this.link.setMicrophone) this.link.setMicrophone(track);
  }
}
