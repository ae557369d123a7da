// The forms the keys and teams views share: budget inputs, and a problem line under a form.
import { h } from "./dom.js";
import { LIMIT_FIELDS } from "./format.js";

// A labelled input: {name, label, value, type, required, help, testid}.
export function field({ name, label, value = "", type = "text", required = false, help, testid, ...rest }) {
  const id = `f-${name}-${Math.random().toString(36).slice(2, 8)}`;
  const input = h("input", {
    id,
    name,
    type,
    required,
    spellcheck: "false",
    "data-testid": testid ?? `field-${name}`,
    "aria-describedby": help ? `${id}-help` : undefined,
    ...rest,
  });
  input.value = value ?? "";
  return h(
    "div",
    { className: "field" },
    h("label", { for: id, text: label }),
    input,
    help ? h("small", { id: `${id}-help`, className: "muted", text: help }) : null,
  );
}

// Every budget of a key or team (empty: no limit).
export function budgetFields(budgets = {}) {
  return h(
    "fieldset",
    { className: "budgets" },
    h("legend", { text: "Budgets (empty: no limit; days and months are UTC)" }),
    LIMIT_FIELDS.map((limit) =>
      field({
        name: limit.name,
        label: limit.label,
        type: "number",
        min: "0",
        max: limit.soft ? "1" : undefined,
        step: limit.integer ? "1" : "any",
        inputmode: "decimal",
        value: budgets[limit.name] ?? "",
        help: limit.soft ? "default 0.8" : undefined,
      }),
    ),
  );
}

// The form's inputs by name (strings).
export function formValues(form) {
  const values = {};
  for (const input of form.querySelectorAll("input[name], select[name], textarea[name]")) values[input.name] = input.value;
  return values;
}

// The line under a form that says what went wrong (or nothing).
export function problemLine(testid) {
  return h("p", { className: "problem", role: "alert", hidden: true, "data-testid": testid });
}

export function setProblem(line, text) {
  line.hidden = !text;
  line.textContent = text || "";
}

// "2027-01-31T12:00" (datetime-local, taken as UTC) → ISO with Z; "" → undefined.
export function expiryIso(raw) {
  if (!raw) return undefined;
  const date = new Date(`${raw}${raw.length === 16 ? ":00" : ""}Z`);
  if (Number.isNaN(date.getTime())) throw new Error("Expires: a date and time");
  return date.toISOString().replace(/\.000Z$/, "Z");
}

// The other way, for an edit form.
export function expiryInput(iso) {
  return iso ? String(iso).slice(0, 16) : "";
}
