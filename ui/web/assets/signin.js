// Sign-in page helper: a token kept from earlier in this tab is retried
// once by navigating with ?token=; a token that just failed is forgotten
// and taken out of the address bar (the page's other parameters stay, so
// signing in lands where the link pointed).
const KEY = "svc.token";
const params = new URLSearchParams(location.search);
if (params.has("token")) {
  sessionStorage.removeItem(KEY);
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
} else {
  const kept = sessionStorage.getItem(KEY);
  if (kept) {
    params.set("token", kept);
    location.replace(location.pathname + "?" + params.toString());
  }
}
document.querySelector("input[name=token]")?.focus();
