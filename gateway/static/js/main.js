// The demo client's composition root: wires the connection, the audio and the view together.
// The connection is a peer connection (webrtc.js) when it can be, else the WebSocket.
import { Microphone, Speaker } from "./audio.js";
import { GatewayConnection, sessionUrl } from "./connection.js";
import { captureRate } from "./pcm.js";
import {
  ConfirmationDialog,
  ToolTimeline,
  Transcript,
  showBanner,
  showError,
  showStatus,
  showTransport,
} from "./ui.js";
import { RTC_RATE, Transports, transportChoice } from "./webrtc.js";

const OUTPUT_RATE = 24000;
const INPUT_RATE = 16000;
const PLAYBACK_REPORT_MS = 250; // audio.playback at most 4 times a second per response

const $ = (id) => document.getElementById(id);
const query = new URLSearchParams(location.search);

// Counters the end-to-end tests read (and anyone debugging audio). Over the WebSocket the
// microphone's frames and the reply's samples are counted here; over WebRTC `rtc` has the
// peer connection's own counters (pc.getStats(): the microphone's packets sent, the reply's
// packets, samples, level and energy received), `peerConnections` how many opened.
const stats = {
  framesSent: 0,
  playedSamples: 0,
  receivedSamples: 0,
  underruns: 0,
  resumes: 0,
  captureRate: INPUT_RATE,
  transport: null,
  peerConnections: 0,
  rtc: null,
};
// The server events of the page's sessions, in order (type and ids), for tests and debugging.
const MAX_EVENTS = 500;
const events = [];

let connection = null;
let transports = null;
let mode = "voice";
let currentResponse = null; // the response whose audio is arriving
// Per session (ids restart with each new session): cleared by newSession().
const lastPlaybackReport = new Map(); // response_id → time of the last audio.playback sent
const confirmations = new Map(); // confirmation_id → {call_id, tool}
const withAudio = new Set(); // response ids whose audio went to the speaker
// Events this page sent with an event_id, and what to do if the gateway refuses one.
const MAX_WATCHED = 100;
const watched = new Map(); // event_id → onRefused(error)
const queuedBubbles = new Map(); // event_id → the bubble of a message typed while reconnecting
let eventCounter = 0;

const transcript = new Transcript($("transcript"));
const timeline = new ToolTimeline($("tools"));
const dialog = new ConfirmationDialog({
  onAnswer(event, decision, parameters) {
    const answer = { type: "confirmation.respond", confirmation_id: event.confirmation_id, decision };
    if (parameters !== undefined) answer.parameters = parameters;
    const how = parameters !== undefined ? "approved with edited arguments" : `${decision}d`;
    const { outcome } = sendWatched(answer, (error) => {
      timeline.confirmation(event.call_id, event.tool, `refused: ${error.code}: ${error.message}`);
      dialog.refused(event.confirmation_id, `The gateway refused that: ${error.message}`);
    });
    if (outcome === null) dialog.refused(event.confirmation_id, "Not connected.");
    else timeline.confirmation(event.call_id, event.tool, `you ${how}`);
  },
  onExpired(event) {
    confirmations.delete(event.confirmation_id);
    timeline.settled(event.call_id, event.tool, "expired");
  },
});

const microphone = new Microphone({
  onFrame(pcm) {
    if (connection !== null && mode === "voice" && connection.sendAudio(pcm)) stats.framesSent += 1;
  },
  onLevel(dbfs) {
    $("level").value = Math.max(-60, dbfs);
  },
});

const speaker = new Speaker({
  onPlayed(responseId, playedMs, final) {
    stats.playedSamples = speaker.playedSamples;
    stats.underruns = speaker.underruns;
    const now = performance.now();
    if (!final && now - (lastPlaybackReport.get(responseId) ?? -Infinity) < PLAYBACK_REPORT_MS) return;
    if (final) lastPlaybackReport.delete(responseId);
    else lastPlaybackReport.set(responseId, now);
    // Only live: a position report is stale after a reconnect (and a burst of them would hit
    // the gateway's event rate limit).
    if (connection !== null && connection.state === "live") {
      send({ type: "audio.playback", response_id: responseId, played_ms: playedMs });
    }
  },
});

function send(event) {
  return connection === null ? null : connection.send(event);
}

// Capture at the rate the upstream takes, so the gateway never resamples the microphone:
// tell the gateway first, then switch (frames of the old rate still in flight are dropped).
// Over WebRTC the microphone is the track's 48 kHz Opus, whatever the upstream takes.
function followUpstreamRate(audio) {
  if (!onWebSocket()) {
    stats.captureRate = RTC_RATE;
    return;
  }
  const { rate, switchTo } = captureRate(audio);
  if (switchTo !== null) send({ type: "session.update", audio: { input_rate: switchTo } });
  microphone.setRate(rate);
  stats.captureRate = rate;
}

// Sends an event with an event_id; `onRefused(error)` runs if the gateway answers it with an
// error (docs/protocol.md sections 3 and 6: the error echoes the event_id), or if it could
// never be sent.
// Returns {outcome: "sent" | "queued" | null, eventId}.
function sendWatched(event, onRefused) {
  const eventId = `page_${++eventCounter}`;
  const outcome = send({ ...event, event_id: eventId });
  if (outcome !== null) {
    watched.set(eventId, onRefused);
    if (watched.size > MAX_WATCHED) watched.delete(watched.keys().next().value);
  }
  return { outcome, eventId };
}

function refused(error) {
  const onRefused = watched.get(error.event_id);
  watched.delete(error.event_id);
  if (onRefused) onRefused(error);
}

// A fresh session (not a resume): its ids may repeat the last session's, so forget those.
function newSession(started) {
  transcript.reset(`session ${started.session_id}`);
  timeline.reset();
  dialog.clear();
  confirmations.clear();
  lastPlaybackReport.clear();
  withAudio.clear();
  watched.clear();
  queuedBubbles.clear();
  currentResponse = null;
  speaker.clear();
}

function setInputsEnabled(live) {
  for (const id of ["text", "send", "cancel", "disconnect"]) $(id).disabled = !live;
  $("connect").disabled = live;
  $("token").disabled = live;
  $("transport-choice").disabled = live;
}

async function startMicrophone() {
  try {
    await microphone.start();
    $("mic-state").textContent = "mic on";
    if (transports !== null) transports.setMicrophone(microphone.track);
    return true;
  } catch (error) {
    showError(`microphone unavailable: ${error.message || error}`);
    $("mic-state").textContent = "mic off";
    return false;
  }
}

async function stopMicrophone() {
  if (transports !== null) transports.setMicrophone(null);
  await microphone.stop();
  $("mic-state").textContent = "mic off";
}

function onWebSocket() {
  return connection !== null && connection.transport === "websocket";
}

async function connect() {
  const token = $("token").value.trim();
  mode = $("mode").value;
  setInputsEnabled(true);
  $("disconnect").disabled = true;
  showBanner("");
  // Both audio contexts start inside this click: browsers keep audio silent without a gesture.
  await speaker.open(OUTPUT_RATE);
  if (mode === "voice" && !(await startMicrophone())) {
    mode = "text";
    $("mode").value = "text";
  }
  const start = {
    type: "session.start",
    mode,
    audio: { input_rate: INPUT_RATE, output_rate: OUTPUT_RATE },
    metadata: { client: "browser-demo" },
  };
  if (query.get("provider")) start.provider = query.get("provider");
  const choice = $("transport-choice").value;
  transports = new Transports({
    choice,
    socketUrl: sessionUrl(location, token),
    origin: location.origin,
    token,
    player: $("remote-audio"),
    onStats(rtc) {
      stats.rtc = rtc;
    },
  });
  transports.setMicrophone(microphone.track);
  stats.transport = null;
  showTransport(null, "connecting…");
  connection = new GatewayConnection({ url: sessionUrl(location, token), start, dial: transports.dial });
  connection.addEventListener("state", (event) => onState(event.detail));
  connection.addEventListener("transport", (event) => {
    const { transport, fallback } = event.detail;
    stats.transport = transport;
    if (transport === "webrtc") stats.peerConnections += 1;
    const why = fallback ? `WebRTC unavailable: ${fallback}` : choice === transport ? "chosen" : "";
    showTransport(transport, why);
  });
  connection.addEventListener("server", (event) => onServerEvent(event.detail));
  connection.addEventListener("audio", (event) => {
    if (currentResponse === null) return;
    withAudio.add(currentResponse);
    speaker.play(event.detail, currentResponse);
    stats.receivedSamples = speaker.receivedSamples;
  });
  connection.addEventListener("flushed", (event) => {
    for (const sent of event.detail) {
      const bubble = queuedBubbles.get(sent.event_id);
      queuedBubbles.delete(sent.event_id);
      if (bubble) transcript.settle(bubble, "sent");
    }
  });
  connection.addEventListener("unsent", (event) => {
    for (const unsent of event.detail) {
      queuedBubbles.delete(unsent.event_id);
      refused({ event_id: unsent.event_id, code: "not_sent", message: "the connection was lost" });
    }
  });
  connection.open();
}

function onState(detail) {
  document.body.dataset.state = detail.state;
  switch (detail.state) {
    case "connecting":
      showStatus("connecting", "connecting…");
      break;
    case "live":
      showStatus("live", `live · ${detail.session.mode}`);
      $("session-id").textContent = detail.session.session_id;
      $("disconnect").disabled = false;
      followUpstreamRate(detail.session.audio);
      break;
    case "resumed":
      stats.resumes += 1;
      followUpstreamRate(detail.session.audio);
      showStatus("live", `live · ${detail.session.mode}`);
      showBanner(
        detail.moved
          ? "The session moved to another server and goes on."
          : "Connection restored: the session was resumed.",
        "good",
      );
      if (detail.session.recovery && detail.session.recovery.lost_turn) {
        showBanner(
          `The server handling the session stopped; this was not answered: "${detail.session.recovery.lost_turn.text}". Send it again if you need to.`,
          "bad",
        );
      }
      break;
    case "reconnecting":
      // What is queued still plays, and a reply in progress goes on after the resume.
      showStatus("reconnecting", `reconnecting (attempt ${detail.attempt})…`);
      showBanner(
        detail.moving
          ? "The server is restarting: the session is being moved to another server…"
          : `Connection lost (${detail.code}). Reconnecting to resume the session…`,
        detail.moving ? "" : "bad",
      );
      break;
    case "ended":
      showStatus("ended", "session ended");
      showBanner(`Session ended: ${detail.reason}${detail.detail ? ` (${detail.detail})` : ""}.`, "");
      finish();
      break;
    case "failed":
      if (stats.transport === null) showTransport(null, ""); // it never connected
      showStatus("failed", "failed");
      showBanner(detail.message, "bad");
      finish();
      break;
  }
}

function finish() {
  setInputsEnabled(false);
  dialog.clear();
  currentResponse = null;
  stopMicrophone();
}

function record(event) {
  const { type, response_id, status, code, role } = event;
  events.push({ at: performance.now(), type, response_id, status, code, role, transport: stats.transport });
  if (events.length > MAX_EVENTS) events.shift();
}

function onServerEvent(event) {
  record(event);
  switch (event.type) {
    case "session.started":
      if (!event.resumed) newSession(event);
      mode = event.mode;
      $("mode").value = event.mode;
      // Over WebRTC the replies play from the peer connection's track, not the speaker.
      if (onWebSocket() && event.audio && event.audio.output_rate !== speaker.rate) {
        speaker.open(event.audio.output_rate);
      }
      break;
    case "session.updated":
      mode = event.mode;
      $("mode").value = event.mode;
      showStatus("live", `live · ${event.mode}`);
      break;
    case "response.started":
      currentResponse = event.response_id;
      break;
    case "text.delta":
      transcript.assistantDelta(event.response_id, event.delta);
      break;
    case "transcript.delta":
      if (event.role === "user") transcript.userDelta(event.delta);
      else transcript.assistantDelta(event.response_id, event.delta);
      break;
    case "transcript.done":
      if (event.role === "user") transcript.userDone(event.text);
      break;
    case "speech.started":
      speaker.clear(); // barge-in: stop talking at once
      currentResponse = null;
      break;
    case "response.done":
      transcript.assistantDone(event.response_id, event.text, event.status);
      if (withAudio.delete(event.response_id)) {
        // A completed reply plays to its end; a cancelled or cut one stops now.
        if (event.status === "completed") speaker.end(event.response_id);
        else speaker.drop(event.response_id);
      }
      if (currentResponse === event.response_id) currentResponse = null;
      break;
    case "tool.started":
      timeline.started(event);
      break;
    case "tool.finished":
      timeline.finished(event);
      break;
    case "tool.slow":
      timeline.slow(event);
      break;
    case "confirmation.requested":
      confirmations.set(event.confirmation_id, { call_id: event.call_id, tool: event.tool });
      timeline.confirmation(event.call_id, event.tool, `asks: ${event.prompt}`);
      dialog.request(event);
      break;
    case "confirmation.resolved": {
      const known = confirmations.get(event.confirmation_id);
      confirmations.delete(event.confirmation_id);
      dialog.resolved(event.confirmation_id);
      if (known) timeline.settled(known.call_id, known.tool, event.decision);
      break;
    }
    case "error":
      showError(`${event.code}: ${event.message}${event.fatal ? " (the session ends)" : ""}`);
      if (event.event_id) refused(event);
      break;
    case "session.ended":
      break; // the "ended" state says it
    default:
      break; // newer events this page does not know yet
  }
}

$("connect-form").addEventListener("submit", (event) => {
  event.preventDefault();
  connect().catch((error) => {
    showBanner(`could not start: ${error.message || error}`, "bad");
    setInputsEnabled(false);
  });
});

$("disconnect").addEventListener("click", () => {
  speaker.clear(); // the user ended it: stop talking now
  if (connection) connection.end("user");
});

$("text-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const box = $("text");
  const text = box.value.trim();
  if (!text) return;
  let bubble = null;
  const { outcome, eventId } = sendWatched({ type: "text.send", text }, (error) => {
    // Refused or never sent: say so, and give the text back if the box is free.
    if (bubble !== null) transcript.settle(bubble, `${error.code}: ${error.message}`);
    if (!box.value) box.value = text;
  });
  if (outcome === null) return;
  bubble = transcript.typed(text, outcome);
  if (outcome === "queued") queuedBubbles.set(eventId, bubble);
  box.value = "";
});

$("cancel").addEventListener("click", () => {
  speaker.clear();
  send({ type: "response.cancel" });
});

// The mode switch: before connecting it picks the start mode; during a session it asks the
// gateway to switch (session.update), and the microphone follows the mode.
$("mode").addEventListener("change", async () => {
  const wanted = $("mode").value;
  if (connection === null || connection.state !== "live") return;
  if (wanted === "voice" && !microphone.running && !(await startMicrophone())) {
    $("mode").value = mode;
    return;
  }
  if (wanted === "text") await stopMicrophone();
  const { outcome } = sendWatched({ type: "session.update", mode: wanted }, () => {
    // Refused (the provider cannot run that mode): back to what the session really is.
    $("mode").value = mode;
    if (mode === "text") stopMicrophone();
  });
  if (outcome === null) $("mode").value = mode;
});

$("token").value = query.get("token") || "";
$("transport-choice").value = transportChoice(location.search);
window.demo = {
  stats,
  events,
  get connection() {
    return connection;
  },
};
document.body.dataset.ready = "true";
