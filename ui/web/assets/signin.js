// Sign-in page helper: a token kept from earlier in this tab is retried
// once by navigating with ?token=; a token that just failed is forgotten.
const KEY = "svc.token";
const params = new URLSearchParams(location.search);
if (params.has("token")) {
  sessionStorage.removeItem(KEY);
} else {
  const kept = sessionStorage.getItem(KEY);
  if (kept) {
    params.set("token", kept);
    location.replace(location.pathname + "?" + params.toString());
  }
}
document.querySelector("input[name=token]")?.focus();
