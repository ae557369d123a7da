// Bar charts in plain SVG (no library): days stacked by group, and totals per group. Each bar
// carries a <title> (its value on hover); the usage table beside them has the same numbers.
import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
// Distinguishable in light and dark, and for the common colour blindnesses (Okabe–Ito).
export const PALETTE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"];
export const OTHER_COLOR = "#999999";

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

function title(text) {
  const node = svg("title");
  node.textContent = text;
  return node;
}

function label(x, y, text, attributes = {}) {
  const node = svg("text", { x, y, class: "chart-label", ...attributes });
  node.textContent = text;
  return node;
}

// A round upper bound for an axis: 1, 2 or 5 times a power of ten.
export function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= value);
}

// days: ["2026-11-01", …]; series: [{id, color, values}] (one value per day, stacked in order).
export function stackedBars(days, series, { format, description }) {
  const width = 720;
  const height = 240;
  const left = 56;
  const bottom = 28;
  const top = 10;
  const plotW = width - left - 8;
  const plotH = height - bottom - top;
  const sums = days.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] || 0), 0));
  const max = niceMax(Math.max(0, ...sums));
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": description, class: "chart" });
  for (const fraction of [0, 0.5, 1]) {
    const y = top + plotH * (1 - fraction);
    root.append(svg("line", { x1: left, x2: width - 8, y1: y, y2: y, class: "chart-grid" }));
    root.append(label(left - 6, y + 4, format(max * fraction), { "text-anchor": "end" }));
  }
  const slot = plotW / Math.max(days.length, 1);
  const barW = Math.max(1, Math.min(28, slot * 0.75));
  const every = Math.ceil(days.length / 12); // at most ~12 day labels
  days.forEach((day, i) => {
    const x = left + slot * i + (slot - barW) / 2;
    let y = top + plotH;
    for (const s of series) {
      const value = s.values[i] || 0;
      if (value <= 0) continue;
      const barH = (value / max) * plotH;
      y -= barH;
      const rect = svg("rect", { x, y, width: barW, height: Math.max(barH, 0.5), fill: s.color, "data-day": day, "data-id": s.id });
      rect.append(title(`${day} · ${s.id}: ${format(value)}`));
      root.append(rect);
    }
    if (i % every === 0) root.append(label(x + barW / 2, height - 10, day.slice(5), { "text-anchor": "middle" }));
  });
  return root;
}

// items: [{id, value, color}], largest first.
export function totalBars(items, { format, description }) {
  const rowH = 24;
  const width = 720;
  const labelW = 220;
  const valueW = 90;
  const height = Math.max(rowH * items.length + 8, 40);
  const max = Math.max(...items.map((i) => i.value), 0) || 1;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": description, class: "chart" });
  items.forEach((item, i) => {
    const y = 4 + i * rowH;
    const barW = ((width - labelW - valueW) * item.value) / max;
    const name = item.id.length > 30 ? `${item.id.slice(0, 29)}…` : item.id;
    root.append(label(labelW - 8, y + 16, name, { "text-anchor": "end" }));
    const rect = svg("rect", { x: labelW, y: y + 3, width: Math.max(barW, 0.5), height: rowH - 8, fill: item.color, "data-id": item.id });
    rect.append(title(`${item.id}: ${format(item.value)}`));
    root.append(rect, label(labelW + barW + 6, y + 16, format(item.value)));
  });
  return root;
}

// The colour key under a chart.
export function legend(series) {
  return h(
    "ul",
    { className: "legend" },
    series.map((s) => {
      const swatch = h("span", { className: "swatch", "aria-hidden": "true" });
      swatch.style.background = s.color; // CSSOM, which the page's CSP allows
      return h("li", {}, swatch, s.id);
    }),
  );
}
