// Teams: their budgets with today's and this month's use, a new team, and edits (PUT: a team's
// budgets are given whole).
import { $, announce, describeError, h, showBanner, usedOf } from "./dom.js";
import { budgetFields, field, formValues, problemLine, setProblem } from "./forms.js";
import { formatDate, formatMetric, parseBudgets } from "./format.js";
import { otherLimits, usageThisMonth } from "./keys.js";

export class TeamsView {
  constructor(api) {
    this.api = api;
    this.teams = [];
    this.usage = new Map();
    $("team-new").addEventListener("click", () => this.open(null));
  }

  ids() {
    return this.teams.map((t) => t.id);
  }

  async load() {
    try {
      const [listed, usage] = await Promise.all([this.api.get("/admin/v1/teams"), usageThisMonth(this.api, "team")]);
      this.teams = (listed.teams || []).sort((a, b) => a.id.localeCompare(b.id));
      this.usage = usage;
      this.render();
    } catch (error) {
      if (!error.refused) showBanner(`The teams could not be read: ${describeError(error)}`);
    }
  }

  render() {
    const money = (v) => formatMetric("spend", v);
    $("team-rows").replaceChildren(
      ...this.teams.map((team) => {
        const usage = this.usage.get(team.id) ?? { day: { spend: 0, tokens: 0, minutes: 0 }, month: { spend: 0, tokens: 0, minutes: 0 } };
        const budgets = team.budgets || {};
        return h(
          "tr",
          { "data-testid": "team-row", "data-team-id": team.id },
          h("td", {}, h("strong", { text: team.id })),
          h("td", {}, usedOf(usage.day.spend, budgets.spend_per_day, money)),
          h("td", {}, usedOf(usage.month.spend, budgets.spend_per_month, money)),
          h("td", {}, otherLimits(budgets, usage)),
          h("td", { text: formatDate(team.created_at) }),
          h("td", { className: "actions" }, h("button", { type: "button", "data-testid": "team-edit", text: "Edit budgets", onClick: () => this.open(team) })),
        );
      }),
    );
    $("teams-empty").hidden = this.teams.length > 0;
  }

  // The team form, for a new team (null) or to change one's budgets.
  open(team) {
    const form = $("team-form");
    if (!form.hidden && this.editing === (team?.id ?? null)) return this.close();
    this.editing = team?.id ?? null;
    const problem = problemLine("team-problem");
    form.replaceChildren(
      h("h3", { text: team ? `Budgets of team ${team.id}` : "New team" }),
      team ? h("input", { type: "hidden", name: "id", value: team.id }) : field({ name: "id", label: "Team id", required: true, pattern: "[A-Za-z0-9_.:@\\-]{1,128}" }),
      budgetFields(team?.budgets || {}),
      problem,
      h(
        "div",
        { className: "bar end" },
        h("button", { type: "button", text: "Cancel", onClick: () => this.close() }),
        h("button", { type: "submit", className: "primary", "data-testid": "team-save", text: team ? "Save budgets" : "Create team" }),
      ),
    );
    form.onsubmit = async (event) => {
      event.preventDefault();
      const values = formValues(form);
      let budgets;
      try {
        budgets = parseBudgets(values);
      } catch (error) {
        return setProblem(problem, error.message);
      }
      const id = values.id.trim();
      try {
        await this.api.put(`/admin/v1/teams/${encodeURIComponent(id)}`, { budgets });
      } catch (error) {
        return setProblem(problem, `Not saved: ${describeError(error)}`);
      }
      this.close();
      announce(`Team ${id} saved.`);
      this.load();
    };
    form.hidden = false;
    $("team-new").setAttribute("aria-expanded", "true");
    form.querySelector("input:not([type=hidden])").focus();
  }

  close() {
    $("team-form").hidden = true;
    $("team-new").setAttribute("aria-expanded", "false");
    this.editing = undefined;
  }
}
