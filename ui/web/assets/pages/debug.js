// Debug: probe, Kafka browser, DLQ, consume pause, config and runtime. A
// tab whose kill switch is off is not shown; a note names the key.
import { el, card, note, banner, timeEl, text } from "../dom.js";
import { get, post } from "../api.js";
import { metrics, sum, intakeCaps, backpressureWords } from "./common.js";

const tabs = [
  { id: "probe", title: "Probe", key: "ui.probe_enabled", on: (f) => f.probe, load: () => import("./probe.js") },
  { id: "kafka", title: "Kafka", key: "ui.kafka_read_enabled", on: (f) => f.kafka_read, load: () => import("./kafka.js") },
  { id: "dlq", title: "DLQ", key: "ui.kafka_read_enabled", on: (f) => f.kafka_read, load: () => import("./dlq.js") },
  { id: "pause", title: "Consume pause", key: "ui.consume_pause.enabled", on: (f) => f.consume_pause, mount: pauseTab },
  { id: "config", title: "Config", on: () => true, mount: configTab },
  { id: "runtime", title: "Runtime", on: () => true, load: () => import("./runtime.js") },
];

const TAB_KEY = "svc.debugTab";

export async function mount(root, ctx) {
  const f = ctx.identity.features;
  const shown = tabs.filter((t) => t.on(f));
  const off = [...new Set(tabs.filter((t) => !t.on(f)).map((t) => t.key))];
  // The tab is in the address (?tab=), and this browser tab remembers the
  // last one: Debug from the navigation opens it again.
  const kept = sessionStorage.getItem(TAB_KEY);
  let current = shown.find((t) => t.id === ctx.params.get("tab")) || shown.find((t) => t.id === kept) || shown[0];
  const list = el("div", { role: "tablist", class: "tabs", "aria-label": "Debug tools" });
  const pane = el("div", { role: "tabpanel", id: "debug-pane" });
  root.append(...[list, off.length ? note("Turned off on this worker: ", off.map((k, i) => [i ? ", " : "", el("code", { class: "off-key" }, k + " = false")])) : null, pane].filter(Boolean));
  let cleanup = null;

  const select = async (t, params) => {
    current = t;
    sessionStorage.setItem(TAB_KEY, t.id);
    if (cleanup) cleanup();
    cleanup = null;
    for (const b of list.children) b.setAttribute("aria-selected", String(b.dataset.tab === t.id));
    const url = new URL(location.href);
    if (url.searchParams.get("tab") !== t.id) history.replaceState(null, "", "/debug?tab=" + t.id);
    const box = el("div", { class: "tab-body" });
    pane.replaceChildren(box);
    try {
      const m = t.mount ? t : await t.load();
      cleanup = (await m.mount(box, { ...ctx, params: params || new URLSearchParams(), tab: t.id })) || null;
    } catch (err) {
      box.append(banner("error", `${t.title} failed: ${err.message}`));
    }
  };
  for (const t of shown) {
    const b = el("button", { type: "button", role: "tab", "data-tab": t.id, "aria-controls": "debug-pane" }, t.title);
    b.onclick = () => select(t);
    b.onkeydown = (ev) => {
      const i = shown.indexOf(t);
      const j = ev.key === "ArrowRight" ? i + 1 : ev.key === "ArrowLeft" ? i - 1 : -2;
      if (j === -2) return;
      const next = shown[(j + shown.length) % shown.length];
      list.querySelector(`[data-tab="${next.id}"]`).focus();
      select(next);
    };
    list.append(b);
  }
  if (current) await select(current, ctx.params);
  return () => { if (cleanup) cleanup(); };
}

// pauseTab: start a timed consume pause, watch its countdown, resume.
async function pauseTab(root, ctx) {
  const stateBox = el("div", { "aria-live": "polite" });
  const words = el("div");
  const msg = el("div", { "aria-live": "assertive" });
  let st = await get("/api/v1/debug/consume-pause");
  const act = async (path, body) => {
    msg.replaceChildren();
    try {
      st = await post(path, body);
      draw();
      explain();
    } catch (err) {
      msg.replaceChildren(banner("error", err.status === 503 ? "The Kafka consumer is not running: there is nothing to pause." : err.message));
    }
  };
  const custom = el("input", { type: "number", min: 1, max: 3600, step: 1, value: 120, id: "pause-custom", required: true });
  const presets = el("div", { class: "toolbar" }, (st.durations_seconds || []).map((s) =>
    el("button", { type: "button", class: "preset", onclick: () => act("/api/v1/debug/consume-pause", { duration_seconds: s }) }, `Pause ${s}s`)));
  const form = el("form", { class: "inline", onsubmit: (ev) => {
    ev.preventDefault();
    const n = Number(custom.value);
    if (!Number.isInteger(n) || n < 1 || n > 3600) { msg.replaceChildren(banner("error", "A pause lasts 1 to 3600 whole seconds.")); return; }
    act("/api/v1/debug/consume-pause", { duration_seconds: n });
  } }, el("label", { for: "pause-custom" }, "Custom (1-3600 s)"), custom, el("button", { type: "submit" }, "Pause"));
  const resume = el("button", { type: "button", id: "resume", onclick: () => act("/api/v1/debug/consume-resume") }, "Resume now");

  const draw = () => {
    if (!st.active) {
      stateBox.replaceChildren(el("p", { class: "pause-state" }, el("strong", {}, "Consuming."), " No operator pause is active."));
      resume.disabled = true;
      return;
    }
    const left = Math.max(0, st.resume_at_ms - Date.now());
    const m = Math.floor(left / 60000);
    const s = Math.floor((left % 60000) / 1000);
    stateBox.replaceChildren(el("p", { class: "pause-state" }, el("strong", {}, "Paused."), " Resumes in ",
      el("span", { class: "countdown", "data-ms": left }, `${m}:${String(s).padStart(2, "0")}`), " (at ", timeEl(st.resume_at_ms), `), asked for ${st.requested_seconds}s.`));
    resume.disabled = false;
    if (left === 0) setTimeout(async () => { st = await get("/api/v1/debug/consume-pause"); draw(); explain(); }, 500);
  };
  let caps = null;
  get("/api/v1/config").then((c) => { caps = intakeCaps(c); explain(); }).catch(() => {});
  const explain = async () => {
    try {
      const m = await metrics();
      const bp = sum(m, "svc_backpressure_active") > 0;
      const hold = sum(m, "svc_executor_hold_active") > 0;
      const stalled = sum(m, "svc_kafka_partitions_stalled");
      const lines = [
        st.active ? "Your pause holds intake: backpressure cannot resume the partitions until the pause ends." : "No pause of yours holds intake.",
        "Backpressure is " + backpressureWords(bp, sum(m, "svc_kafka_messages_waiting"), caps) + "." +
          (bp && st.active ? " After you resume, partitions stay paused until that much has drained." : ""),
        hold ? "The executor is unavailable: intake stays held until it is back, whatever you do here." : "The executor is available.",
        stalled ? `${stalled} partition(s) are stall-paused after a failed DLQ send; neither your pause nor a resume touches them (restart or revoke releases them).` : "No partition is stall-paused.",
        "Partitions assigned by a rebalance during a pause arrive paused.",
      ];
      words.replaceChildren(el("ul", { class: "plain precedence" }, lines.map((l) => el("li", {}, l))));
    } catch { words.replaceChildren(); }
  };
  draw();
  explain();
  const timer = setInterval(draw, 1000);
  root.append(card("Consume pause", stateBox, presets, form, el("div", { class: "toolbar" }, resume), msg,
    note("While paused, the poll loop and group heartbeats keep running: no rebalance, no commit; tasks in flight finish."),
    el("p", { class: "per-worker" }, el("strong", {}, "A pause is per worker: "),
      `it holds the intake of ${ctx.identity.worker} alone. The other workers of the consumer group go on with their own partitions, and this worker's partitions stay with it (no rebalance), so their messages wait. To pause the whole fleet, pause each worker on its own UI.`)),
  card("Who holds intake", words));
  // The whole group's lag per partition (pages/lag.js, loaded on demand).
  const lagBox = el("div");
  root.append(lagBox);
  let lagCleanup = null, closed = false;
  if (ctx.identity.features.kafka_source) {
    import("./lagview.js").then(async (m) => {
      const c = await m.lagPanel(lagBox);
      if (closed) c(); else lagCleanup = c;
    }).catch((err) => lagBox.replaceChildren(banner("error", "Lag failed to load: " + err.message)));
  }
  return () => { closed = true; clearInterval(timer); if (lagCleanup) lagCleanup(); };
}

// configTab: the effective config, secrets masked by the worker.
async function configTab(root) {
  const cfg = await get("/api/v1/config");
  const tree = (v) => (v && typeof v === "object" && !Array.isArray(v) ? kvTree(v) : el("code", {}, text(v)));
  const kvTree = (obj) => el("dl", { class: "tree" }, Object.entries(obj).map(([k, v]) =>
    v && typeof v === "object" && !Array.isArray(v) ? el("details", { open: true }, el("summary", {}, k), tree(v)) : [el("dt", {}, k), el("dd", {}, tree(v))]));
  root.append(note("The effective configuration with every default filled in; secrets show as ***."), kvTree(cfg));
}
