// LiveSocket keeps one /ws connection to a worker: it subscribes, hands
// frames over in batches once per animation frame (so a burst of 200
// tasks/s costs one DOM update per frame), and reconnects with backoff.
// The worker coalesces its items into "batch" frames (at most 10 a
// second, each a list of tasks, events and state frames); they are
// unpacked here, so pages see one frame per item.
// A socket to another worker of the fleet may ask first: retry() decides
// whether that worker is worth a new handshake (it is not when the
// registry says it stopped or turned unreachable), so the page does not
// knock on a dead port forever.
import { wsURL } from "./api.js";

export class LiveSocket {
  // base: the worker's http(s) origin; sub: the subscribe message;
  // onFrames(frames, base); onStatus(state, base), state one of
  // connecting, live, reconnecting, gone; retry(), when given, resolves
  // true to reconnect or false to give up (status gone).
  constructor(base, sub, onFrames, onStatus = () => {}, retry = null) {
    Object.assign(this, { base, sub, onFrames, onStatus, retry });
    this.queue = [];
    this.raf = 0;
    this.closed = false;
    this.delay = 1000;
    this.connect();
  }

  connect() {
    if (this.closed) return;
    this.onStatus("connecting", this.base);
    const ws = new WebSocket(wsURL(this.base));
    this.ws = ws;
    ws.onopen = () => {
      this.delay = 1000;
      ws.send(JSON.stringify(this.sub));
      this.onStatus("live", this.base);
    };
    ws.onmessage = (ev) => {
      let f;
      try { f = JSON.parse(ev.data); } catch { return; }
      if (f.stream === "ping" || f.stream === "subscribed") return;
      if (f.stream === "batch") {
        if (!Array.isArray(f.data)) return;
        for (const item of f.data) this.queue.push(item);
      } else this.queue.push(f);
      if (!this.raf) this.raf = requestAnimationFrame(() => this.flush());
    };
    ws.onclose = async () => {
      if (this.closed) return;
      this.onStatus("reconnecting", this.base);
      if (this.retry && !(await this.retry())) {
        if (!this.closed) this.onStatus("gone", this.base);
        this.closed = true;
        return;
      }
      if (this.closed) return;
      this.timer = setTimeout(() => this.connect(), this.delay);
      this.delay = Math.min(this.delay * 2, 30000);
    };
  }

  flush() {
    this.raf = 0;
    const frames = this.queue;
    this.queue = [];
    if (frames.length && !this.closed) this.onFrames(frames, this.base);
  }

  // resubscribe changes what the socket receives.
  resubscribe(sub) {
    this.sub = sub;
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(sub));
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.raf) cancelAnimationFrame(this.raf);
    if (this.ws) {
      this.ws.onclose = null;
      this.ws.close();
    }
  }
}
