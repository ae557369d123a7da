// Nodes: each node's heartbeat age, sessions, version and whether it drains; a Drain button
// (with a confirm) that does what SIGTERM does.
import { $, announce, confirmAction, describeError, h, pill, showBanner } from "./dom.js";
import { formatAge } from "./format.js";

export class NodesView {
  constructor(api) {
    this.api = api;
    this.nodes = [];
    this.asked = new Set(); // nodes this page asked to drain (shown draining until they say so)
  }

  async load() {
    try {
      this.update((await this.api.get("/admin/v1/console/nodes")).nodes || []);
    } catch (error) {
      if (!error.refused) showBanner(`The nodes could not be read: ${describeError(error)}`);
    }
  }

  update(nodes) {
    this.nodes = [...nodes].sort((a, b) => String(a.node_id).localeCompare(String(b.node_id)));
    this.render();
  }

  render() {
    $("node-rows").replaceChildren(...this.nodes.map((node) => this.row(node)));
    if (!this.nodes.length) {
      $("node-rows").append(h("tr", {}, h("td", { colSpan: 6, className: "empty", text: "No node is known." })));
    }
  }

  row(node) {
    const draining = node.draining || this.asked.has(node.node_id);
    const state = !node.alive ? pill("not alive", "bad") : draining ? pill("draining", "warn") : pill("alive", "good");
    const drain = h("button", {
      type: "button",
      className: "danger",
      "data-testid": "node-drain",
      text: draining ? "Draining…" : "Drain",
      disabled: draining || !node.alive,
      "aria-label": `Drain node ${node.node_id}`,
      onClick: () => this.drain(node),
    });
    return h(
      "tr",
      {
        "data-testid": "node-row",
        "data-node-id": node.node_id,
        "data-alive": String(node.alive),
        "data-draining": String(Boolean(node.draining)),
      },
      h("th", { scope: "row", className: "mono", text: node.node_id }),
      h("td", {}, state),
      h("td", { className: "num", text: formatAge(node.heartbeat_age_s) }),
      h("td", { className: "num", "data-testid": "node-sessions", text: String(node.sessions) }),
      h("td", { className: "mono", text: node.version || "–" }),
      h("td", { className: "actions" }, drain),
    );
  }

  async drain(node) {
    const sessions = `${node.sessions} session${node.sessions === 1 ? "" : "s"}`;
    const confirmed = await confirmAction({
      title: `Drain node ${node.node_id}?`,
      message: `It takes no new session, its ${sessions} move to the other nodes (their clients resume there), then it exits. Start it again to bring it back.`,
      action: "Drain",
    });
    if (!confirmed) return;
    try {
      await this.api.fetch("POST", `/admin/v1/console/nodes/${encodeURIComponent(node.node_id)}/drain`);
      this.asked.add(node.node_id);
      announce(`Node ${node.node_id} drains.`);
      showBanner(`Node ${node.node_id} drains: its sessions move to the other nodes, then it exits.`, "good");
      this.render();
    } catch (error) {
      showBanner(`Node ${node.node_id} was not drained: ${describeError(error)}`);
    }
  }
}
