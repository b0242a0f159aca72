// The dashboard's only backend is the Kubernetes API: every request carries the
// user's bearer token (kept in sessionStorage), so RBAC decides what it sees.

const TOKEN_KEY = 'berth-dashboard-token';

export const getToken = () => sessionStorage.getItem(TOKEN_KEY) ?? '';
export const setToken = (t: string) => sessionStorage.setItem(TOKEN_KEY, t);
export const clearToken = () => sessionStorage.removeItem(TOKEN_KEY);

export class ApiError extends Error {
  constructor(public code: number, message: string, public reason = '') {
    super(message);
  }
}

export type Obj = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    ownerReferences?: { kind: string; name: string }[];
  };
  spec?: any;
  status?: any;
  [k: string]: any;
};

function headers(extra: Record<string, string> = {}): Record<string, string> {
  return { Authorization: `Bearer ${getToken()}`, Accept: 'application/json', ...extra };
}

// A non-2xx answer as the API's own Status message (403s show RBAC's words).
async function failure(r: Response): Promise<ApiError> {
  const text = await r.text();
  try {
    const s = JSON.parse(text);
    if (s && s.kind === 'Status') return new ApiError(r.status, s.message ?? text, s.reason ?? '');
  } catch {
    /* not JSON */
  }
  return new ApiError(r.status, text.trim() || r.statusText);
}

// Called when the API answers 401 to a signed-in request: the token expired
// or was revoked (its ServiceAccount deleted), so the page signs out.
let unauthorized: (e: ApiError) => void = () => {};
export const onUnauthorized = (f: (e: ApiError) => void) => {
  unauthorized = f;
};

async function call(path: string, init: RequestInit): Promise<Response> {
  return fetch(path, { ...init, headers: headers((init.headers as Record<string, string>) ?? {}) });
}

// A request with the signed-in token; a 401 signs the page out.
export async function request<T = any>(path: string, init: RequestInit = {}): Promise<T> {
  const r = await call(path, init);
  if (!r.ok) {
    const e = await failure(r);
    if (e.code === 401) unauthorized(e);
    throw e;
  }
  return r.json();
}

// Whether `token` is accepted: who it is, by a SelfSubjectReview (any
// authenticated user may ask); the API's error otherwise.
export async function whoami(): Promise<string> {
  const r = await call('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
  });
  if (!r.ok) throw await failure(r);
  const review = await r.json();
  return review?.status?.userInfo?.username ?? '';
}

export const patchMerge = (path: string, body: unknown) =>
  request(path, {
    method: 'PATCH',
    body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/merge-patch+json' },
  });

export const create = (path: string, body: unknown) =>
  request(path, { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });

type Listener = (items: Map<string, Obj>, error: ApiError | null) => void;

/**
 * How the page's live lists are doing, for the header's indicator (and the
 * browser test): watches resumed from their last resourceVersion after a
 * dropped connection, relists after 410 Gone, and how many are waiting to
 * reconnect now, and the watch events received.
 */
export const watchStats = { resumes: 0, relists: 0, reconnecting: 0, events: 0 };
(globalThis as any).__berthWatchStats = watchStats;

const key = (o: Obj) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Splits a streamed body into lines (the watch's JSON events, the log's lines).
export async function* lines(body: ReadableStream<Uint8Array>, signal: AbortSignal) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    while (!signal.aborted) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        yield buf.slice(0, i);
        buf = buf.slice(i + 1);
      }
    }
    if (buf) yield buf;
  } finally {
    reader.releaseLock();
  }
}

/**
 * A live list: LIST, then WATCH from its resourceVersion (a streamed fetch of
 * JSON lines, bookmarks on). A watch that ends (server restart, timeout)
 * resumes from the last resourceVersion seen; 410 Gone relists. Updates are
 * batched to one notification per animation frame so 100s of events a second
 * cost one render each frame.
 */
export class Watch {
  items = new Map<string, Obj>();
  error: ApiError | null = null;
  rv = '';
  private ctl = new AbortController();
  private pending = false;

  constructor(private path: string, private query: string, private listener: Listener) {
    this.run();
  }

  stop() {
    this.ctl.abort();
  }

  private notify() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (!this.ctl.signal.aborted) this.listener(this.items, this.error);
    });
  }

  private url(extra: string) {
    const q = [this.query, extra].filter(Boolean).join('&');
    return q ? `${this.path}?${q}` : this.path;
  }

  private async list() {
    const l = await request(this.url(''), { signal: this.ctl.signal });
    this.items = new Map((l.items ?? []).map((o: Obj) => [key(o), o]));
    this.rv = l.metadata?.resourceVersion ?? '';
    this.error = null;
    this.notify();
  }

  private async run() {
    const signal = this.ctl.signal;
    let backoff = 500;
    let needList = true;
    // Set while this watch is between a dropped connection and its next answer.
    let broken = false;
    // Set when this reconnection had to relist (410 Gone) rather than resume.
    let relisted = false;
    const healed = () => {
      if (broken) watchStats.reconnecting--;
      broken = false;
    };
    while (!signal.aborted) {
      try {
        if (needList) await this.list();
        needList = false;
        const r = await fetch(
          this.url(`watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(this.rv)}`),
          { headers: headers(), signal },
        );
        if (r.status === 410) {
          watchStats.relists++;
          relisted = true;
          needList = true;
          continue;
        }
        if (!r.ok || !r.body) {
          const e = await failure(r);
          if (e.code === 401) unauthorized(e);
          throw e;
        }
        if (broken && !relisted) watchStats.resumes++;
        relisted = false;
        healed();
        backoff = 500;
        for await (const line of lines(r.body, signal)) {
          if (!line.trim()) continue;
          const ev = JSON.parse(line);
          const o: Obj = ev.object;
          if (ev.type === 'ERROR') {
            // 410 Gone: our resourceVersion is too old; relist.
            if (o?.code === 410) {
              watchStats.relists++;
              relisted = true;
              needList = true;
            }
            break;
          }
          if (o?.metadata?.resourceVersion) this.rv = o.metadata.resourceVersion;
          if (ev.type === 'BOOKMARK') continue;
          watchStats.events++;
          if (ev.type === 'DELETED') this.items.delete(key(o));
          else this.items.set(key(o), o);
          this.notify();
        }
      } catch (e) {
        if (signal.aborted) {
          healed();
          return;
        }
        if (e instanceof ApiError && e.code >= 400 && e.code < 500 && e.code !== 410 && e.code !== 429) {
          // Forbidden, Unauthorized: show the API's answer and try again slowly
          // (a RoleBinding may be granted meanwhile).
          healed();
          this.error = e;
          this.items = new Map();
          this.notify();
          needList = true;
          await sleep(5000);
          continue;
        }
        // A dropped connection (server restart): resume from the last
        // resourceVersion after a short backoff.
        if (!broken) watchStats.reconnecting++;
        broken = true;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
    // Stopped while reconnecting (its view closed): no longer waiting.
    healed();
  }
}

// Kubernetes quantities as numbers (cores for cpu, bytes for memory).
const SUFFIX: Record<string, number> = {
  n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6,
};
export function quantity(q: string | number | undefined): number {
  if (q === undefined || q === null) return 0;
  if (typeof q === 'number') return q;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(q.trim());
  if (!m) return 0;
  return parseFloat(m[1]) * (SUFFIX[m[2]] ?? 1);
}

export function age(ts?: string): string {
  if (!ts) return '';
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 120) return `${Math.floor(s)}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
