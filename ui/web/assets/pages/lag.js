// Consumer lag of the whole group, as one worker sees it
// (GET /api/v1/debug/kafka/group: every partition of the topic, whoever
// owns it): the Dashboard's Consumer lag tile and the Pause tab's table.
import { el, card, note, num, timeEl } from "../dom.js";
import { get } from "../api.js";
import { badge } from "../render.js";

// readGroup reads the group view; {off} says why there is none (the Kafka
// read API switched off, the consumer not running, the brokers silent).
export async function readGroup() {
  try {
    return { g: await get("/api/v1/debug/kafka/group") };
  } catch (err) {
    if (err.status === 401) throw err;
    if (err.status === 403) return { off: "the group view is off on this worker (ui.kafka_read_enabled = false)" };
    if (err.status === 503) return { off: "the Kafka consumer is not running" };
    return { off: "the group could not be read: " + err.message };
  }
}

const msgs = (n) => `${num(n)} msg${n === 1 ? "" : "s"}`;

// partitionState says in a word or two what is happening to a partition.
export function partitionState(r) {
  if (r.unowned) return ["unowned", "red"];
  if (r.stalled) return ["stall-paused", "red"];
  if (r.paused) return ["paused", "blue"];
  if (r.paused === false) return ["flowing", "green"];
  return ["unknown", "gray"];
}

// summary: the group's lag in one line (partitions, paused, unowned).
export function summary(g) {
  const rows = g.group_partitions || [];
  const paused = rows.filter((r) => r.paused).length;
  const unowned = rows.filter((r) => r.unowned);
  const since = unowned.length ? Math.min(...unowned.map((r) => r.unowned_since_ms || Date.now())) : 0;
  return [`${rows.length} partitions of group ${g.group}`, paused ? ` · ${paused} paused` : "",
    unowned.length ? [` · ${unowned.length} unowned since `, timeEl(since, true)] : ""];
}

// ownerText names who holds a partition: a worker, a stopped worker's
// member, or nobody.
function ownerText(r) {
  if (!r.owner) return el("span", { class: "muted" }, "nobody (rebalance)");
  const who = r.owner.worker || r.owner.client_id || r.owner.member_id;
  if (r.unowned) return [who, el("span", { class: "muted" }, " (not alive)")];
  return r.mine ? [who, el("span", { class: "muted" }, " (this worker)")] : who;
}

// lagTable lists every partition of the group with its offsets, lag,
// owner and state.
export function lagTable(g) {
  const rows = g.group_partitions || [];
  const head = ["Partition", "Owner", "Committed", "High watermark", "Lag", "State"];
  return el("div", { class: "scroll" }, el("table", { class: "grid lag-table" },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows.map((r) => {
      const [st, color] = partitionState(r);
      return el("tr", { "data-partition": r.partition, "data-lag": r.lag ?? "", "data-state": st },
        el("td", { class: "num" }, r.partition), el("td", {}, ownerText(r)),
        el("td", { class: "num" }, r.committed_offset === null ? "none" : num(r.committed_offset)),
        el("td", { class: "num" }, r.high_watermark === null ? "–" : num(r.high_watermark)),
        el("td", { class: "num" }, r.lag === null ? "–" : msgs(r.lag)),
        el("td", {}, badge(st, { [st]: color }), r.unowned ? [" since ", timeEl(r.unowned_since_ms, true)] : null));
    }))));
}

// lagPanel is the Pause tab's card: the whole group's lag, re-read every
// 5 s while the tab is open.
export async function lagPanel(root) {
  const body = el("div", { "aria-live": "polite" });
  root.append(card("Consumer lag of the group", body,
    note("Every partition of the topic, whoever owns it, with offsets read from the brokers now. During a pause the paused partitions' lag grows as messages arrive; it falls back once intake resumes and the group commits. Another worker's paused state is what its card said at its last heartbeat.")));
  const load = async () => {
    const { g, off } = await readGroup();
    if (off) { body.replaceChildren(note(off)); return; }
    body.replaceChildren(el("p", { class: "lag-total" }, "Total lag ", el("strong", { "data-lag": g.total_lag ?? "" }, g.total_lag === null ? "–" : msgs(g.total_lag)),
      " · ", summary(g), " · read ", timeEl(g.offsets_read_at_ms, true)), lagTable(g));
  };
  await load().catch(() => {});
  const timer = setInterval(() => load().catch(() => {}), 5000);
  return () => clearInterval(timer);
}
