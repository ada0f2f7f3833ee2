// Rendering of declared columns and fields: link templates, formats,
// badges, custom renderers, tables and detail panels. Shared by declared
// pages and the probe details.
import { el, formatValue, text, autoLabel, kvTable, field as fieldOf } from "./dom.js";
import { withToken } from "./api.js";

// percentEncode escapes every byte outside A-Z a-z 0-9 - . _ ~ (the Go
// side's ui.PercentEncode).
export function percentEncode(s) {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

function scalar(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v);
}

const safeLink = (s) => s.startsWith("https://") || s.startsWith("http://") || (s.startsWith("/") && !s.startsWith("//"));

// expand fills a template's {value}, {row.<field>} and {<base>} tokens;
// null when one cannot be resolved (the caller shows plain text).
export function expand(tpl, { value, row, bases }, url) {
  let out = "";
  let rest = tpl;
  while (rest) {
    const open = rest.indexOf("{");
    if (open < 0) { out += rest; break; }
    out += rest.slice(0, open);
    const close = rest.indexOf("}", open);
    if (close < 0) return null;
    const tok = rest.slice(open + 1, close);
    rest = rest.slice(close + 1);
    if (tok === "value" || tok.startsWith("row.")) {
      const raw = tok === "value" ? value : row && Object.hasOwn(row, tok.slice(4)) ? row[tok.slice(4)] : undefined;
      const s = scalar(raw);
      if (s === null) return null;
      try { out += url ? percentEncode(s) : s; } catch { return null; }
    } else {
      const base = bases && Object.hasOwn(bases, tok) ? bases[tok] : null;
      if (base === null) return null;
      out += base.replace(/\/+$/, "");
    }
  }
  if (url && !safeLink(out)) return null;
  return out;
}

const COLORS = new Set(["green", "red", "yellow", "blue", "gray", "purple"]);

// badge is a coloured pill: the value's colour, else the "*" colour, else
// a neutral pill.
export function badge(value, colors = {}) {
  const key = text(value);
  const c = Object.hasOwn(colors, key) ? colors[key] : colors["*"];
  return el("span", { class: "badge" + (COLORS.has(c) ? " badge-" + c : "") }, key || "—");
}

// Custom renderers: the module at /api/v1/ui/renderers.js, loaded once.
// Any failure falls back to the default content with one console warning
// per renderer (one in all when the module itself fails).
let renderers = null;
let loading = null;
const warned = new Set();

function warnOnce(key, msg) {
  if (warned.has(key)) return;
  warned.add(key);
  console.warn("svc ui: " + msg);
}

// loadRenderers imports the module when identity says one is configured.
export async function loadRenderers(enabled) {
  if (!enabled) return;
  if (!loading) {
    loading = import(withToken("/api/v1/ui/renderers.js")).then((m) => {
      const d = m.default;
      if (d === null || typeof d !== "object" || Object.getPrototypeOf(d) !== Object.prototype) {
        warnOnce("module", "custom renderers module: its default export is not a plain object; default rendering is used");
        renderers = {};
      } else {
        renderers = d;
      }
    }, (err) => {
      warnOnce("module", "custom renderers module failed to load (" + err.message + "); default rendering is used");
      renderers = {};
    });
  }
  await loading;
}

function custom(name, value, row, key) {
  if (!renderers) {
    warnOnce("module", "custom renderer '" + name + "' used but no renderers module is loaded; default rendering is used");
    return null;
  }
  const fn = renderers[name];
  if (typeof fn !== "function") {
    warnOnce("r:" + name, "custom renderer '" + name + "' is missing or not a function; default rendering is used");
    return null;
  }
  try {
    const out = fn(value, row, { key });
    if (out instanceof HTMLElement) return out;
    warnOnce("r:" + name, "custom renderer '" + name + "' did not return an HTMLElement; default rendering is used");
  } catch (err) {
    warnOnce("r:" + name, "custom renderer '" + name + "' threw (" + (err && err.message) + "); default rendering is used");
  }
  return null;
}

// formatted shows a value in its format with the raw value on hover.
export function formatted(value, format) {
  if (!format) return document.createTextNode(text(value));
  const f = formatValue(value, format);
  if (!f.ok) return el("span", { title: "raw value (not a " + format + ")" }, text(value));
  return el("span", { class: "fmt", title: text(value) + (f.utc ? " · " + f.utc : "") }, f.text);
}

// cell renders one value under its column settings (label, link_template,
// badge_colors, format, hint, renderer). ctx: {row, bases, key}.
export function cell(value, col, ctx) {
  if (col.renderer) {
    const out = custom(col.renderer, value, ctx.row, ctx.key);
    if (out) return withHint(out, col, value, ctx);
  }
  let node;
  if (col.badge_colors) {
    node = badge(value, col.badge_colors);
  } else {
    node = formatted(value, col.format);
    if (col.link_template) {
      const href = expand(col.link_template, { value, row: ctx.row, bases: ctx.bases }, true);
      if (href !== null) node = el("a", { href, rel: "noreferrer", target: "_blank", class: "ext" }, node);
    }
  }
  return withHint(node, col, value, ctx);
}

function withHint(node, col, value, ctx) {
  if (!col.hint) return node;
  const t = expand(col.hint, { value, row: ctx.row, bases: ctx.bases }, false);
  if (t === null) return node;
  return el("span", { class: "hint", title: t }, node);
}

// columnsOf normalizes the wire form of columns (names, or name → column)
// to [{name, ...settings}]; fallback names when none are declared.
export function columnsOf(cols, fallback = []) {
  if (Array.isArray(cols)) return cols.map((c) => (typeof c === "string" ? { name: c } : c));
  if (cols && typeof cols === "object") return Object.entries(cols).map(([name, c]) => ({ name, ...c }));
  return fallback.map((name) => ({ name }));
}

// table renders rows under columns. opts: bases, detail (a Detail opened
// on row click), onRow (click handler), caption.
export function table(rows, cols, opts = {}) {
  const head = el("tr", {}, cols.map((c) => el("th", { scope: "col" }, c.label || autoLabel(c.name))));
  const body = el("tbody", {}, rows.map((row) => tableRow(row, cols, opts)));
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: cols.length || 1, class: "muted" }, "No rows yet.")));
  return el("div", { class: "scroll" }, el("table", { class: "grid" }, el("thead", {}, head), body));
}

export function tableRow(row, cols, opts = {}, depth = 0) {
  const tds = cols.map((c, i) => {
    const v = row && typeof row === "object" ? fieldOf(row, c.name) : undefined;
    const td = el("td", {}, cell(v === undefined ? null : v, c, { row, bases: opts.bases, key: c.name }));
    if (i === 0 && depth > 0) td.classList.add("depth-" + Math.min(depth, 6));
    return td;
  });
  const tr = el("tr", {}, tds);
  const open = opts.detail ? () => openDetail(opts.detail, row, opts) : opts.onRow ? () => opts.onRow(row) : null;
  if (open) {
    tr.classList.add("clickable");
    tr.tabIndex = 0;
    tr.addEventListener("click", (ev) => { if (!ev.target.closest("a,button")) open(); });
    tr.addEventListener("keydown", (ev) => { if (ev.key === "Enter") { ev.preventDefault(); open(); } });
  }
  return tr;
}

// panel opens the right-side detail panel with title and content; Escape
// or the close button closes it and focus returns where it was.
export function panel(title, ...content) {
  closePanel();
  const back = document.activeElement;
  const close = el("button", { class: "close", "aria-label": "Close panel", onclick: () => closePanel() }, "×");
  const p = el("aside", { class: "panel", role: "dialog", "aria-label": title, id: "detail-panel" },
    el("header", {}, el("h2", {}, title), close), el("div", { class: "panel-body" }, ...content));
  p.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closePanel(); });
  p._back = back;
  document.body.append(p);
  close.focus();
  return p;
}

export function closePanel() {
  const p = document.getElementById("detail-panel");
  if (!p) return;
  p.remove();
  if (p._back && p._back.isConnected) p._back.focus();
}

// openDetail renders a Detail declaration for a clicked row.
export function openDetail(detail, row, opts) {
  const title = (detail.title && expand(detail.title, { row, bases: opts.bases }, false)) || "Details";
  const blocks = (detail.elements || []).map((e) => element(e, row, opts));
  panel(title, ...blocks);
}

function element(e, row, opts) {
  const label = e.label || (e.field ? autoLabel(e.field) : "");
  const v = e.field ? fieldOf(row, e.field) : undefined;
  let body;
  switch (e.view) {
    case "string":
      body = el("p", {}, formatted(v ?? null, null));
      break;
    case "keyvalue":
      body = v && typeof v === "object" ? kvTable(v) : el("p", {}, text(v));
      break;
    case "table": {
      const rows = Array.isArray(v) ? v : [];
      const names = [...new Set(rows.flatMap((r) => (r && typeof r === "object" ? Object.keys(r) : [])))];
      body = table(rows, columnsOf(null, names), { bases: opts.bases });
      break;
    }
    case "links":
      body = el("ul", { class: "links" }, (e.links || []).map((l) => {
        const href = expand(l.template, { row, bases: opts.bases }, true);
        return el("li", {}, href === null ? el("span", { title: "link unavailable: a value or link base is missing" }, l.label) : el("a", { href, rel: "noreferrer", target: "_blank" }, l.label));
      }));
      break;
    case "custom":
      body = custom(e.renderer, v, row, e.field) || el("p", {}, text(v));
      break;
    default:
      body = placeholder(`needs a newer UI (unsupported detail view '${e.view}')`);
  }
  return el("section", { class: "detail-el" }, label ? el("h3", {}, label) : null, body);
}

// placeholder stands in for what this UI release cannot show.
export function placeholder(msg) {
  return el("div", { class: "placeholder", role: "note" }, msg);
}

export { custom as renderCustom };
