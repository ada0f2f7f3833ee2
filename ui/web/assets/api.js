// API access with the UI token: kept in sessionStorage for this tab, sent
// as an Authorization header, never left in the address bar. ?token= is
// used only where a browser cannot send a header: the renderer module
// import, the /ws handshake and download links.
const KEY = "svc.token";

// takeTokenFromURL moves ?token= into sessionStorage and out of the URL.
export function takeTokenFromURL() {
  const url = new URL(location.href);
  const t = url.searchParams.get("token");
  if (t === null) return;
  sessionStorage.setItem(KEY, t);
  url.searchParams.delete("token");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
}

// token returns the kept UI token, or null.
export function token() {
  return sessionStorage.getItem(KEY);
}

// signOut forgets the token and reloads the page, which the worker answers
// with its sign-in page.
export function signOut() {
  sessionStorage.removeItem(KEY);
  location.assign(location.pathname + location.search);
}

// APIError is a non-2xx answer: status, the error code and its detail.
export class APIError extends Error {
  constructor(status, code, detail) {
    super(detail || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

function headers(extra) {
  const h = { Accept: "application/json", ...extra };
  const t = token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

// request sends a JSON request to this worker (or base, another worker of
// the fleet) and returns the decoded body. A 401 signs out.
export async function request(method, path, body, base = "") {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(base + path, init);
  if (res.status === 401 && !base) {
    signOut();
    throw new APIError(401, "unauthorized", "signed out");
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) throw new APIError(res.status, data?.error, data?.detail || text.slice(0, 200));
  return data;
}

export const get = (path, base) => request("GET", path, undefined, base);
export const post = (path, body) => request("POST", path, body ?? {});


// withToken adds ?token= to a same-origin URL for the places a header
// cannot be sent.
export function withToken(path) {
  const t = token();
  if (!t) return path;
  return path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(t);
}

// wsURL is the /ws address of the worker at base (an http(s) origin).
export function wsURL(base) {
  const u = new URL("/ws", base);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  const t = token();
  if (t) u.searchParams.set("token", t);
  return u.toString();
}

// ndjson streams the lines of an NDJSON answer to onLine; it resolves with
// the error line's text when the stream ended with one, else null. With a
// body it POSTs it as JSON.
export async function ndjson(path, onLine, signal, body) {
  const init = { headers: headers({ Accept: "application/x-ndjson" }), signal };
  if (body !== undefined) Object.assign(init, { method: "POST", body: JSON.stringify(body), headers: headers({ Accept: "application/x-ndjson", "Content-Type": "application/json" }) });
  const res = await fetch(path, init);
  if (res.status === 401) {
    signOut();
    throw new APIError(401, "unauthorized", "signed out");
  }
  if (!res.ok) {
    let data = null;
    try { data = await res.json(); } catch { data = null; }
    throw new APIError(res.status, data?.error, data?.detail);
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const obj = JSON.parse(line);
      if (obj && typeof obj === "object" && "error" in obj) return String(obj.error);
      onLine(obj);
    }
    if (done) break;
  }
  return null;
}
