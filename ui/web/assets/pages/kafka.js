// Kafka browser: read an alias by time window (paged with "next window")
// or by partition:offset. Records show key, value and headers as the API
// encodes them; a stream that ends with an error line says so instead of
// looking short. The DLQ tab is dlq.js.
import { el, card, note, banner, timeEl, bytes, encoded } from "../dom.js";
import { get, ndjson } from "../api.js";
import { coords } from "./common.js";


const toLocalInput = (ms) => {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
};

export async function mount(root, ctx) {
  const topics = (await get("/api/v1/debug/kafka/topics")).topics || [];
  if (!topics.length) {
    root.append(banner("info", "This worker has no readable Kafka alias."));
    return;
  }
  const alias = el("select", { id: "kafka-alias" }, topics.map((t) => el("option", { value: t.alias }, `${t.alias} (${t.kind})`)));
  const now = Date.now();
  const fromIn = el("input", { type: "datetime-local", id: "kafka-from", value: toLocalInput(now - 15 * 60e3) });
  const toIn = el("input", { type: "datetime-local", id: "kafka-to", value: "" });
  const limit = el("input", { type: "number", id: "kafka-limit", min: 1, max: 10000, value: 100 });
  const part = el("input", { type: "number", id: "kafka-partition", min: 0, placeholder: "all" });
  const pIn = el("input", { type: "number", id: "kafka-p", min: 0, placeholder: "partition", "aria-label": "partition" });
  const oIn = el("input", { type: "number", id: "kafka-o", min: 0, placeholder: "offset", "aria-label": "offset" });
  // The transaction view: an exactly-once worker's operators see what its
  // read_committed consumers see unless they ask for every record.
  const iso = el("select", { id: "kafka-isolation" },
    el("option", { value: "read_committed" }, "committed only"),
    el("option", { value: "read_uncommitted" }, "all records"));
  iso.value = ctx.identity && ctx.identity.kafka_delivery === "exactly_once" ? "read_committed" : "read_uncommitted";
  const nextBtn = el("button", { type: "button", disabled: true }, "Next window");
  const out = el("div", { "aria-live": "polite" });
  let lastTS = null;
  let abort = null;

  const current = () => alias.value;
  const read = async (fromMs) => {
    if (abort) abort.abort();
    abort = new AbortController();
    const q = new URLSearchParams({ from_ts: String(fromMs), limit: String(Math.min(10000, Math.max(1, Number(limit.value) || 100))) });
    if (toIn.value) q.set("to_ts", String(new Date(toIn.value).getTime()));
    if (part.value !== "") q.set("partition", part.value);
    q.set("isolation", iso.value);
    const recs = [];
    const body = el("tbody");
    const status = note("Reading…");
    out.replaceChildren(status, records(body));
    let err;
    try {
      err = await ndjson(`/api/v1/debug/kafka/${encodeURIComponent(current())}/messages?${q}`, (r) => {
        recs.push(r);
        body.append(recordRow(r, ctx));
      }, abort.signal);
    } catch (e) {
      if (e.name === "AbortError") return;
      out.replaceChildren(banner("error", e.message));
      return;
    }
    lastTS = recs.length ? Math.max(...recs.map((r) => r.timestamp_ms || 0)) : null;
    nextBtn.disabled = lastTS === null;
    status.replaceWith(err ? banner("error", `The stream ended with an error after ${recs.length} record(s): ${err}`)
      : note(`${recs.length} record(s)` + (recs.length ? "; next window starts after the last timestamp." : ".")));
  };
  const lookup = async (ev) => {
    if (ev) ev.preventDefault();
    try {
      const r = await get(`/api/v1/debug/kafka/${encodeURIComponent(current())}/message?partition=${pIn.value}&offset=${oIn.value}&isolation=${iso.value}`);
      const body = el("tbody", {}, recordRow(r, ctx));
      out.replaceChildren(records(body));
    } catch (e) {
      out.replaceChildren(banner("error", e.message));
    }
  };
  nextBtn.onclick = () => { if (lastTS !== null) read(lastTS + 1); };
  root.append(card("Kafka browser",
    el("form", { class: "inline", onsubmit: (ev) => { ev.preventDefault(); read(new Date(fromIn.value).getTime()); } },
      el("label", { for: "kafka-alias" }, "Alias"), alias,
      el("label", { for: "kafka-from" }, "From"), fromIn, el("label", { for: "kafka-to" }, "To"), toIn,
      el("label", { for: "kafka-limit" }, "Limit"), limit, el("label", { for: "kafka-partition" }, "Partition"), part,
      el("label", { for: "kafka-isolation" }, "View"), iso,
      el("button", { type: "submit", id: "kafka-read" }, "Read"), nextBtn),
    el("form", { class: "inline", onsubmit: lookup }, el("span", {}, "Or one record at "), pIn, el("span", {}, ":"), oIn, el("button", { type: "submit" }, "Fetch")),
    note("Reads are invisible to the pipeline: no group is joined and no offset is committed. ",
      "View \u201ccommitted only\u201d shows what a read_committed consumer sees: no records of aborted transactions, nothing past an open one; \u201call records\u201d shows those too.")), out);
  // Opened at one record (/debug?tab=kafka&alias=source&partition=P&offset=O,
  // as a redrive line links where a record landed): fetch it.
  const P = ctx.params || new URLSearchParams();
  if (topics.some((t) => t.alias === P.get("alias"))) alias.value = P.get("alias");
  if (/^\d+$/.test(P.get("partition") || "") && /^\d+$/.test(P.get("offset") || "")) {
    pIn.value = P.get("partition");
    oIn.value = P.get("offset");
    await lookup();
  }
  return () => { if (abort) abort.abort(); };
}

function records(body) {
  const heads = ["Partition:offset", "Time", "Key", "Value", "Headers", "Size"];
  return el("div", { class: "scroll" }, el("table", { class: "grid records" }, el("thead", {}, el("tr", {}, heads.map((h) => el("th", { scope: "col" }, h)))), body));
}

function recordRow(r, ctx) {
  const base = [el("td", {}, coords(ctx, r.alias, r.partition, r.offset)), el("td", {}, timeEl(r.timestamp_ms)), el("td", {}, encoded(r.key, r.key_encoding, 80))];
  const hs = (r.headers || []).map((x) => el("div", {}, el("code", {}, x.key), "=", encoded(x.value, x.value_encoding, 80)));
  return el("tr", { "data-offset": `${r.partition}:${r.offset}` }, base, el("td", { class: "summary" }, encoded(r.payload, r.payload_encoding, 300)), el("td", {}, hs), el("td", { class: "num" }, bytes(r.payload_size_bytes || 0)));
}
