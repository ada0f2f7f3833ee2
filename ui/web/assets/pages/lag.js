// Consumer lag of the whole group, as one worker sees it
// (GET /api/v1/debug/kafka/group: every partition of the topic, whoever
// owns it): what the Dashboard's Consumer lag tile needs (the group's lag
// in messages, in time and where it is going). The per-partition table of
// the Consumer lag page and the Pause tab is lagview.js, so the Dashboard
// does not load it.
import { el, num, timeEl } from "../dom.js";
import { get } from "../api.js";
import { badge } from "../render.js";

// readGroup reads the group view (scope fleet: with the key holding each
// of the other workers' partitions, as their owners answer); {off} says
// why there is none (the Kafka read API switched off, the consumer not
// running, the brokers silent).
export async function readGroup(scope = "local") {
  try {
    return { g: await get("/api/v1/debug/kafka/group?scope=" + scope) };
  } catch (err) {
    if (err.status === 401) throw err;
    if (err.status === 403) return { off: "the group view is off on this worker (ui.kafka_read_enabled = false)" };
    if (err.status === 503) return { off: "the Kafka consumer is not running" };
    return { off: "the group could not be read: " + err.message };
  }
}

export const msgs = (n) => `${num(n)} msg${n === 1 ? "" : "s"}`;

// ago says a number of seconds the way an operator reads it.
export function ago(secs) {
  if (secs === null || secs === undefined) return "–";
  if (secs < 1) return "0 s";
  if (secs < 100) return `${Math.round(secs)} s`;
  if (secs < 5400) return `${Math.round(secs / 60)} min`;
  const h = Math.floor(secs / 3600), m = Math.round((secs % 3600) / 60);
  return m ? `${h} h ${m} min` : `${h} h`;
}

// behind is the lag in time of a partition or of the group.
export function behind(secs) {
  if (secs === null || secs === undefined) return el("span", { class: "muted", title: "the oldest unconsumed message is read at most every 10 s" }, "reading…");
  return secs < 1 ? "up to date" : `${ago(secs)} behind`;
}

// drainWords says in the operator's words where the lag is going: when it
// will be 0, or why it will not.
export function drainWords(d) {
  if (!d) return ["estimating…", "gray"];
  switch (d.state) {
    case "catching_up": return [`catching up: ~${ago(d.seconds)}`, "green"];
    case "falling_behind": return ["falling behind", "red"];
    case "holding": return ["holding steady: as fast in as out", "yellow"];
    case "not_consuming": return ["not consuming", "red"];
    case "caught_up": return ["caught up", "green"];
    case "idle": return ["idle", "gray"];
    default: return ["estimating…", "gray"];
  }
}

// drainBadge is drainWords as a badge with its rates on hover.
export function drainBadge(d) {
  const [words, color] = drainWords(d);
  const b = badge(words, { [words]: color });
  b.dataset.drain = d ? d.state : "unknown";
  if (d && d.window_seconds) b.title = `over the last ${ago(d.window_seconds)}: ${d.consumed_per_second.toFixed(2)} msgs/s consumed, ${d.produced_per_second.toFixed(2)} msgs/s produced`;
  return b;
}

// summary: the group's lag in one line (partitions, paused, unowned).
export function summary(g) {
  const rows = g.group_partitions || [];
  const paused = rows.filter((r) => r.paused).length;
  const unowned = rows.filter((r) => r.unowned);
  const since = unowned.length ? Math.min(...unowned.map((r) => r.unowned_since_ms || Date.now())) : 0;
  return [`${rows.length} partition${rows.length === 1 ? "" : "s"} of group ${g.group}`, paused ? ` · ${paused} paused` : "",
    unowned.length ? [` · ${unowned.length} unowned since `, timeEl(since, true)] : ""];
}
