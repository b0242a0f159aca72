import type { ApiError, Obj } from '../api';

export const podsPath = (ns: string) => (ns ? `/api/v1/namespaces/${ns}/pods` : '/api/v1/pods');
export const eventsPath = (ns: string) => (ns ? `/api/v1/namespaces/${ns}/events` : '/api/v1/events');

// The API's own answer (a 403 shows RBAC's message verbatim).
export function Problem({ error }: { error: ApiError | null }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error.code} {error.reason}: {error.message}
    </p>
  );
}

// The phase kubectl shows: a deleting pod is Terminating, a waiting container's reason wins.
export function podStatus(p: Obj): string {
  if (p.metadata && (p.metadata as any).deletionTimestamp) return 'Terminating';
  for (const c of p.status?.containerStatuses ?? []) {
    const w = c.state?.waiting?.reason;
    if (w && w !== 'ContainerCreating') return w;
  }
  return p.status?.phase ?? 'Pending';
}

export const restarts = (p: Obj) =>
  (p.status?.containerStatuses ?? []).reduce((n: number, c: any) => n + (c.restartCount ?? 0), 0);

export function nodeReady(n: Obj): boolean {
  return (n.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
}

export const eventTime = (e: Obj) =>
  e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? '';
