// The operator console's composition root: the admin credential, the tabs, the live stream,
// and the views. Every request carries the credential as a bearer header (api.js).
import { Api, LiveStream } from "./api.js";
import { $, describeError, showBanner, tabKeys } from "./dom.js";
import { KeysView } from "./keys.js";
import { NodesView } from "./nodes.js";
import { SessionsView } from "./sessions.js";
import { TeamsView } from "./teams.js";
import { TimelineView } from "./timeline.js";
import { UsageView } from "./usage.js";

const STORAGE = "gateway.console.credential"; // sessionStorage: this tab only, gone when it closes
const TABS = ["sessions", "timeline", "keys", "usage", "nodes"];

// What tests and curious operators can read: the stream's state and how many snapshots came.
const stats = { streamState: "off", snapshots: 0, streamConnects: 0, refusals: 0 };

let stream = null;
let signedIn = false;
let currentTab = null;

const credential = () => sessionStorage.getItem(STORAGE) || "";
const api = new Api({ token: credential, onRefused: refused });

const sessions = new SessionsView({ onOpen: (id) => go(`timeline/${id}`) });
const timeline = new TimelineView(api, { lookup: (id) => sessions.find(id) });
const teams = new TeamsView(api);
const keys = new KeysView(api, { teams: () => teams.ids() });
const nodes = new NodesView(api);
const usage = new UsageView(api, {
  nameOf(group, id) {
    if (group !== "key") return null;
    return keys.keys.find((k) => k.id === id)?.name || null;
  },
});

// ?token=… (a link from a script): kept in this tab's storage, then removed from the address
// bar and the history, so it is not bookmarked, shared or sent as a Referer.
function takeTokenFromUrl() {
  const url = new URL(location.href);
  if (!url.searchParams.has("token")) return;
  const token = url.searchParams.get("token").trim();
  url.searchParams.delete("token");
  history.replaceState(history.state, "", `${url.pathname}${url.search}${url.hash}`);
  if (token) sessionStorage.setItem(STORAGE, token);
}

// Who the credential names, without asking anyone: a key's prefix, or a JWT's subject.
function describeCredential(token) {
  if (token.startsWith("gk_")) return `key ${token.slice(0, 7)}…`;
  try {
    const payload = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    return payload.sub ? `JWT of ${payload.sub}` : "a JWT";
  } catch {
    return "a credential";
  }
}

function showSignIn(problem) {
  signedIn = false;
  $("signin").hidden = false;
  $("content").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  $("summary").textContent = "";
  $("auth-error").hidden = !problem;
  $("auth-error").textContent = problem || "";
  setStreamState("off");
  $("credential").focus();
}

async function signIn() {
  const token = credential();
  if (!token) return showSignIn("");
  $("who").textContent = `signed in as ${describeCredential(token)}`;
  let snapshot;
  try {
    snapshot = await api.get("/admin/v1/console/sessions");
  } catch (error) {
    if (!error.refused) showSignIn(`The gateway did not answer: ${describeError(error)}`);
    return; // a refusal signed out already
  }
  signedIn = true;
  $("signin").hidden = true;
  $("content").hidden = false;
  $("sign-out").hidden = false;
  showBanner("");
  onSnapshot(snapshot);
  stream = new LiveStream(api, "/admin/v1/console/stream", {
    onEvent(name, data) {
      if (name === "sessions") onSnapshot(data);
    },
    onState: setStreamState,
  }).start();
  route();
}

// A 401 or 403 from any request: the credential is not (or no longer) an admin's.
function refused(error) {
  stats.refusals += 1;
  stopAll();
  sessionStorage.removeItem(STORAGE);
  showSignIn(`The gateway refused this credential: ${describeError(error)}. The console needs a gateway key or a JWT with the admin role.`);
}

function stopAll() {
  if (stream) stream.stop();
  stream = null;
  timeline.stop();
}

function signOut() {
  stopAll();
  sessionStorage.removeItem(STORAGE);
  showSignIn("");
}

function onSnapshot(snapshot) {
  stats.snapshots += 1;
  sessions.update(snapshot);
  nodes.update(snapshot.nodes || []);
  const alive = (snapshot.nodes || []).filter((n) => n.alive).length;
  const count = (snapshot.sessions || []).length;
  $("summary").textContent = `${count} session${count === 1 ? "" : "s"} · ${alive} node${alive === 1 ? "" : "s"} alive`;
}

const STREAM_WORDS = {
  off: "not connected",
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  refused: "refused",
};

function setStreamState(state, detail) {
  stats.streamState = state;
  if (state === "live" && stream) stats.streamConnects = stream.connects;
  const pill = $("stream-state");
  pill.dataset.state = state;
  pill.textContent =
    state === "reconnecting" && typeof detail === "number"
      ? `reconnecting in ${Math.ceil(detail / 1000)} s`
      : STREAM_WORDS[state] ?? state;
}

// -- tabs ----------------------------------------------------------------------------------

function go(hash) {
  if (location.hash === `#${hash}`) route();
  else location.hash = hash;
}

function route() {
  if (!signedIn) return;
  const [name, ...rest] = location.hash.slice(1).split("/");
  const tab = TABS.includes(name) ? name : "sessions";
  const sessionId = tab === "timeline" && rest.length ? decodeURIComponent(rest.join("/")) : null;
  select(tab, sessionId);
}

function select(tab, sessionId) {
  for (const name of TABS) {
    const button = $(`tab-${name}`);
    const chosen = name === tab;
    button.setAttribute("aria-selected", String(chosen));
    button.tabIndex = chosen ? 0 : -1;
    $(`panel-${name}`).hidden = !chosen;
  }
  if (tab !== currentTab) showBanner(""); // a tab's message stays with its tab
  if (tab !== "timeline") timeline.stop();
  if (tab === "timeline") timeline.show(sessionId ?? timeline.sessionId);
  if (tab === currentTab && tab !== "timeline") return;
  currentTab = tab;
  if (tab === "keys") {
    teams.load();
    keys.load();
  } else if (tab === "usage") {
    if (!keys.keys.length) keys.load().then(() => usage.render());
    usage.load();
  } else if (tab === "nodes") {
    nodes.load();
  }
}

for (const button of document.querySelectorAll("[role=tab]")) {
  button.addEventListener("click", () => {
    const tab = button.dataset.tab;
    go(tab === "timeline" && timeline.sessionId ? `timeline/${timeline.sessionId}` : tab);
  });
}
tabKeys(document.querySelector("[role=tablist]"), (tab) =>
  go(tab === "timeline" && timeline.sessionId ? `timeline/${timeline.sessionId}` : tab),
);
window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && currentTab === "timeline" && signedIn) timeline.show(timeline.sessionId);
});

$("signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("credential").value.trim();
  $("credential").value = "";
  if (!token) return;
  sessionStorage.setItem(STORAGE, token);
  $("auth-error").hidden = true;
  signIn();
});
$("sign-out").addEventListener("click", signOut);

window.gatewayConsole = { stats };
takeTokenFromUrl();
signIn().finally(() => (document.body.dataset.ready = "true"));
