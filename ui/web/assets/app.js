// svc UI shell: navigation, the token flow and the page router. Plain ES
// modules, no framework; talks only to /api/v1 and /ws of its workers.
import { get, takeTokenFromURL } from "./api.js";
import { el, banner } from "./dom.js";
import { loadRenderers, closePanel } from "./render.js";

const builtIn = [
  { path: "/", title: "Dashboard", load: () => import("./pages/dashboard.js") },
  { path: "/live", title: "Live", load: () => import("./pages/live.js") },
  { path: "/workers", title: "Workers", load: () => import("./pages/workers.js") },
  { path: "/history", title: "History", load: () => import("./pages/history.js") },
  { path: "/lag", title: "Consumer lag", nav: "Lag", show: (id) => id.features.kafka_source && id.features.kafka_read, load: () => import("./pages/lagview.js") },
  { path: "/debug", title: "Debug", load: () => import("./pages/debug.js") },
];

takeTokenFromURL();

const nav = document.getElementById("nav");
const main = document.getElementById("main");
const ctx = { identity: null, pages: [], navigate };
let unmount = null;
let seq = 0;

function renderNav() {
  const entries = builtIn.filter((e) => !e.show || e.show(ctx.identity)).concat(ctx.pages.map((p) => ({ path: "/p/" + p.slug, title: p.title || p.slug })));
  nav.replaceChildren(...entries.map((e) => {
    const a = el("a", { href: e.path }, e.nav || e.title);
    if (e.path === location.pathname) a.setAttribute("aria-current", "page");
    return a;
  }));
}

// route finds the page module for the current path.
function route() {
  const path = location.pathname;
  const page = builtIn.find((e) => e.path === path);
  if (page) return { title: page.title, load: page.load };
  if (path.startsWith("/p/")) {
    const decl = ctx.pages.find((p) => p.slug === path.slice(3));
    if (decl) return { title: decl.title || decl.slug, decl, load: () => import("./pages/declared.js") };
  }
  return null;
}

async function renderPage() {
  const my = ++seq;
  if (unmount) { try { unmount(); } catch { /* a page's cleanup never blocks the next */ } }
  unmount = null;
  closePanel();
  renderNav();
  const r = route();
  if (!r) {
    document.title = "Not found · svc";
    main.replaceChildren(el("h1", {}, "Not found"), el("p", {}, "This worker has no page at this address."), el("p", {}, el("a", { href: "/" }, "Go to the dashboard")));
    return;
  }
  document.title = `${r.title} · ${ctx.identity.worker} · svc`;
  const root = el("div", { class: "page" });
  main.replaceChildren(el("h1", {}, r.title), root);
  try {
    const mod = await r.load();
    if (my !== seq) return;
    unmount = (await mod.mount(root, { ...ctx, decl: r.decl, params: new URLSearchParams(location.search) })) || null;
  } catch (err) {
    if (my === seq) root.append(banner("error", "This page failed to load: " + err.message));
  }
}

// navigate moves to a page of the UI without reloading.
function navigate(href, replace = false) {
  history[replace ? "replaceState" : "pushState"](null, "", href);
  renderPage();
  main.focus({ preventScroll: true });
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a");
  if (!a || a.target || a.hasAttribute("download") || a.origin !== location.origin || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.button !== 0) return;
  if (a.pathname.startsWith("/api/") || a.pathname.startsWith("/assets/")) return;
  ev.preventDefault();
  navigate(a.pathname + a.search);
});
window.addEventListener("popstate", renderPage);

async function start() {
  const [identity, pages] = await Promise.all([get("/api/v1/identity"), get("/api/v1/pages")]);
  ctx.identity = identity;
  ctx.pages = Array.isArray(pages) ? pages : [];
  document.getElementById("worker").replaceChildren(
    el("span", { class: "worker-name" }, identity.worker), " · ", identity.cluster,
    identity.release ? el("span", { class: "muted" }, " · UI " + identity.release) : null);
  await loadRenderers(identity.custom_renderers);
  await renderPage();
}

start().catch((err) => {
  if (err.status === 401) return;
  main.replaceChildren(el("h1", {}, "svc"), banner("error", "Cannot reach this worker's API: " + err.message));
});
