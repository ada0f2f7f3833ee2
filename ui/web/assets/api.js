// API access with the UI token: kept in sessionStorage for this tab, sent as
// an Authorization header, never left in the address bar.
const KEY = "svc.token";

// takeTokenFromURL moves ?token= into sessionStorage and out of the URL.
export function takeTokenFromURL() {
  const url = new URL(location.href);
  const token = url.searchParams.get("token");
  if (token === null) return;
  sessionStorage.setItem(KEY, token);
  url.searchParams.delete("token");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
}

// token returns the kept UI token, or null.
export function token() {
  return sessionStorage.getItem(KEY);
}

// api GETs a JSON route; a 401 drops the token and reloads into sign-in.
export async function api(path) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  const res = await fetch(path, { headers });
  if (res.status === 401) {
    sessionStorage.removeItem(KEY);
    location.assign(location.pathname);
    throw new Error("signed out");
  }
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return res.json();
}
