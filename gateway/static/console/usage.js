// Usage: per UTC day, by key, team, user, provider or model, from the budget counters (the same
// numbers the budgets enforce): spend, tokens and session minutes, charted and tabled; the CSV
// export downloads the gateway's own CSV through fetch (the credential is a header).
import { OTHER_COLOR, PALETTE, legend, stackedBars, totalBars } from "./charts.js";
import { $, describeError, h, showBanner } from "./dom.js";
import { daysBetween, firstOfMonth, formatMetric, providerOf, summarizeUsage, utcDay } from "./format.js";

const STACKED = PALETTE.length - 1; // groups with a colour of their own per day; the rest: "other"
const MOST_TOTALS = 15;
const METRIC_NAMES = { spend: "spend", tokens: "tokens", minutes: "session minutes" };

export class UsageView {
  // nameOf(groupBy, id): a label for an id (a key's name), or null.
  constructor(api, { nameOf }) {
    this.api = api;
    this.nameOf = nameOf;
    this.rows = [];
    this.loaded = null; // the query of the rows shown
    $("usage-from").value = firstOfMonth();
    $("usage-to").value = utcDay();
    $("usage-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.load();
    });
    $("usage-group").addEventListener("change", () => this.load());
    $("usage-metric").addEventListener("change", () => this.render());
    $("usage-csv").addEventListener("click", () => this.download());
  }

  // The gateway's query: a provider is a model's prefix, so it asks by model.
  query(format) {
    const group = $("usage-group").value;
    const params = new URLSearchParams({
      group_by: group === "provider" ? "model" : group,
      from: $("usage-from").value,
      to: $("usage-to").value,
    });
    if (format) params.set("format", format);
    return { group, params };
  }

  async load() {
    const { group, params } = this.query();
    try {
      const body = await this.api.get(`/admin/v1/usage?${params}`);
      this.rows = body.rows || [];
      this.loaded = { group, from: params.get("from"), to: params.get("to") };
      showBanner("");
      this.render();
    } catch (error) {
      if (!error.refused) showBanner(`The usage could not be read: ${describeError(error)}`);
    }
  }

  render() {
    if (!this.loaded) return;
    const { group, from, to } = this.loaded;
    const metric = $("usage-metric").value;
    const format = (v) => formatMetric(metric, v);
    const { perDay, totals } = summarizeUsage(this.rows, group === "provider" ? providerOf : undefined);
    const ranked = [...totals.entries()].sort((a, b) => b[1][metric] - a[1][metric] || a[0].localeCompare(b[0]));
    const labelOf = (id) => {
      const name = this.nameOf(group, id);
      return name ? `${name} (${id})` : id;
    };
    const colors = new Map(ranked.map(([id], i) => [id, i < STACKED ? PALETTE[i] : OTHER_COLOR]));
    const days = daysBetween(from, to);
    const named = ranked.slice(0, STACKED).map(([id]) => ({
      id: labelOf(id),
      color: colors.get(id),
      values: days.map((day) => perDay.get(day)?.get(id)?.[metric] ?? 0),
    }));
    const rest = ranked.slice(STACKED).map(([id]) => id);
    if (rest.length) {
      named.push({
        id: `${rest.length} other${rest.length === 1 ? "" : "s"}`,
        color: OTHER_COLOR,
        values: days.map((day) => rest.reduce((sum, id) => sum + (perDay.get(day)?.get(id)?.[metric] ?? 0), 0)),
      });
    }
    const what = `${METRIC_NAMES[metric]} per day by ${group}, ${from} to ${to}`;
    $("usage-daily-title").textContent = `${capital(METRIC_NAMES[metric])} per day, by ${group}`;
    $("usage-totals-title").textContent = `${capital(METRIC_NAMES[metric])} from ${from} to ${to}, by ${group}`;
    const daily = $("usage-daily");
    const totalsBox = $("usage-totals");
    if (!ranked.length) {
      const none = `No use recorded from ${from} to ${to}.`;
      daily.replaceChildren(h("p", { className: "empty", text: none }));
      totalsBox.replaceChildren(h("p", { className: "empty", text: none }));
    } else {
      daily.replaceChildren(stackedBars(days, named, { format, description: what }), legend(named));
      const top = ranked.slice(0, MOST_TOTALS).map(([id, t]) => ({ id: labelOf(id), value: t[metric], color: colors.get(id) }));
      totalsBox.replaceChildren(totalBars(top, { format, description: `total ${what}` }));
    }
    $("usage-note").textContent =
      group === "provider"
        ? "A provider's use is the sum of its models'. The CSV export lists models."
        : "Spend is in the price table's currency; without a price table there is no spend.";
    $("usage-id-head").textContent = capital(group);
    $("usage-caption").textContent = `Totals from ${from} to ${to}, by ${group}`;
    $("usage-rows").replaceChildren(
      ...ranked.map(([id, t]) =>
        h(
          "tr",
          { "data-testid": "usage-row", "data-id": id },
          h("th", { scope: "row", text: labelOf(id) }),
          h("td", { className: "num", text: formatMetric("spend", t.spend) }),
          h("td", { className: "num", text: formatMetric("tokens", t.tokens) }),
          h("td", { className: "num", text: formatMetric("minutes", t.minutes) }),
          h("td", { className: "num", text: String(t.days.size) }),
        ),
      ),
    );
  }

  // The gateway's CSV of the same query, saved as a file.
  async download() {
    const { group, params } = this.query("csv");
    try {
      const blob = await this.api.blob(`/admin/v1/usage?${params}`);
      const url = URL.createObjectURL(blob);
      const link = h("a", { href: url, download: `usage-${params.get("group_by")}-${params.get("from")}-${params.get("to")}.csv` });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      if (group === "provider") showBanner("The CSV lists models (a provider is the sum of its models).", "good");
    } catch (error) {
      if (!error.refused) showBanner(`The CSV could not be downloaded: ${describeError(error)}`);
    }
  }
}

function capital(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
