// svc UI shell: navigation, the token flow and placeholders for the pages
// a later release fills in. Plain ES module; talks only to /api/v1.
import { api, takeTokenFromURL } from "./api.js";

const builtIn = [
  { path: "/", title: "Dashboard" },
  { path: "/live", title: "Live" },
  { path: "/history", title: "History" },
  { path: "/debug", title: "Debug" },
];

takeTokenFromURL();

const nav = document.getElementById("nav");
const main = document.getElementById("main");
let declared = [];

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

function renderNav() {
  const entries = builtIn.concat(declared.map((p) => ({ path: "/p/" + p.slug, title: p.title || p.slug })));
  nav.replaceChildren(...entries.map((e) => {
    const a = el("a", { href: e.path }, e.title);
    if (e.path === location.pathname) a.setAttribute("aria-current", "page");
    return a;
  }));
}

function renderPage() {
  const path = location.pathname;
  const page = builtIn.find((e) => e.path === path);
  const slug = path.startsWith("/p/") ? path.slice(3) : null;
  const decl = slug && declared.find((p) => p.slug === slug);
  if (page) {
    main.replaceChildren(el("h1", {}, page.title), el("p", { class: "muted" }, "This page arrives with a later UI release."));
  } else if (decl) {
    main.replaceChildren(el("h1", {}, decl.title || decl.slug),
      el("ul", {}, ...decl.widgets.map((w) => el("li", {}, `${w.title || w.view} (${w.view}, ${w.source.kind})`))));
  } else {
    main.replaceChildren(el("h1", {}, "Not found"), el("p", {}, "This worker has no page at this address."));
  }
  renderNav();
  main.focus();
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a");
  if (!a || a.origin !== location.origin || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
  ev.preventDefault();
  history.pushState(null, "", a.pathname);
  renderPage();
});
window.addEventListener("popstate", renderPage);

async function start() {
  renderPage();
  const [identity, pages] = await Promise.all([api("/api/v1/identity"), api("/api/v1/pages")]);
  document.getElementById("worker").textContent = `${identity.worker} · ${identity.cluster}`;
  declared = Array.isArray(pages) ? pages : [];
  renderPage();
}

start().catch((err) => {
  main.append(el("p", { class: "error" }, String(err)));
});
