// Small DOM helpers shared by the views. Text is always set with textContent, never as HTML.

export const $ = (id) => document.getElementById(id);

// h("td", {className: "num", "data-testid": "x", title: "…"}, child, "text", …)
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name === "onClick") node.addEventListener("click", value);
    else if (name in node && !name.includes("-") && typeof value !== "string") node[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Says something to screen readers (the page's polite live region).
export function announce(text) {
  const region = $("announce");
  region.textContent = "";
  // A fresh text node after a tick is announced even when the words repeat.
  setTimeout(() => (region.textContent = text), 30);
}

// The page's banner: tone "bad" (an error), "good", or "" to hide it.
export function showBanner(text, tone = "bad") {
  const banner = $("banner");
  banner.hidden = !text;
  banner.textContent = text || "";
  banner.dataset.tone = tone;
}

// A modal yes/no question; resolves true when confirmed. The Cancel button has the focus.
export function confirmAction({ title, message, action }) {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-message").textContent = message;
  $("confirm-ok").textContent = action;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    dialog.querySelector("[value=cancel]").focus();
  });
}

// How much of a limit is used: "0.42 of 5" with a <meter>, or "0.42 (no limit)".
export function usedOf(used, limit, format) {
  const cell = h("span", { className: "used" });
  if (limit === null || limit === undefined) {
    cell.append(h("span", { text: format(used) }), h("span", { className: "muted", text: " no limit" }));
    return cell;
  }
  const meter = h("meter", {
    min: 0,
    max: limit || 1,
    low: (limit || 1) * 0.8,
    high: (limit || 1) * 0.95,
    optimum: 0,
    value: Math.min(used, limit || 1),
    "aria-label": `${format(used)} of ${format(limit)}`,
  });
  cell.append(meter, h("span", { text: ` ${format(used)} of ${format(limit)}` }));
  if (limit > 0 && used >= limit) cell.dataset.exhausted = "true";
  return cell;
}

// A status word with its own colour and a text that says the same (colour is never alone).
export function pill(text, state) {
  return h("span", { className: "pill", "data-state": state, text });
}

// An error as a person reads it: the gateway's message, and its code.
export function describeError(error) {
  if (error && error.status !== undefined) {
    const status = error.status ? `HTTP ${error.status}, ` : "";
    return `${error.message} (${status}${error.code})`;
  }
  return String(error && error.message ? error.message : error);
}

// Keyboard for a tab list: arrows, Home and End move between tabs (the ARIA tabs pattern).
export function tabKeys(list, onSelect) {
  list.addEventListener("keydown", (event) => {
    const tabs = [...list.querySelectorAll("[role=tab]:not([disabled])")];
    const at = tabs.indexOf(document.activeElement);
    if (at === -1) return;
    const moves = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const next = tabs[(moves[event.key] + tabs.length) % tabs.length];
    next.focus();
    onSelect(next.dataset.tab);
  });
}
