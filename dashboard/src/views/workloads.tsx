import { useState } from 'preact/hooks';
import { ApiError, Obj, patchMerge } from '../api';
import { useWatch } from '../hooks';
import { Problem } from './common';

const KINDS = [
  { kind: 'Deployment', group: 'apps/v1', plural: 'deployments', scalable: true },
  { kind: 'StatefulSet', group: 'apps/v1', plural: 'statefulsets', scalable: true },
  { kind: 'DaemonSet', group: 'apps/v1', plural: 'daemonsets', scalable: false },
  { kind: 'Job', group: 'batch/v1', plural: 'jobs', scalable: false },
];

// kubectl rollout status's words for each kind.
function rollout(kind: string, o: Obj): string {
  const s = o.status ?? {};
  const gen = (o.metadata as any).generation ?? 0;
  if (kind === 'Job') {
    const done = (s.conditions ?? []).find((c: any) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
    return done ? done.type : `${s.succeeded ?? 0}/${o.spec?.completions ?? 1} succeeded, ${s.active ?? 0} active`;
  }
  if ((s.observedGeneration ?? 0) < gen) return 'Waiting for the controller to observe the update';
  if (kind === 'DaemonSet') {
    const want = s.desiredNumberScheduled ?? 0;
    return (s.updatedNumberScheduled ?? 0) < want || (s.numberAvailable ?? 0) < want
      ? `${s.numberAvailable ?? 0} of ${want} available` : 'Complete';
  }
  const want = o.spec?.replicas ?? 1;
  if ((s.updatedReplicas ?? 0) < want) return `${s.updatedReplicas ?? 0} of ${want} updated`;
  if ((s.replicas ?? 0) > (s.updatedReplicas ?? 0)) return `${s.replicas - s.updatedReplicas} old replicas pending termination`;
  if ((s.availableReplicas ?? 0) < want) return `${s.availableReplicas ?? 0} of ${want} available`;
  return 'Complete';
}

function Replicas({ path, o }: { path: string; o: Obj }) {
  const [v, set] = useState(String(o.spec?.replicas ?? 1));
  const [error, setError] = useState<ApiError | null>(null);
  const save = async () => {
    setError(null);
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) {
      setError(new ApiError(0, `replicas must be a whole number ≥ 0, not ${JSON.stringify(v)}`, 'Invalid'));
      return;
    }
    try {
      await patchMerge(`${path}/${o.metadata.name}`, { spec: { replicas: n } });
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, String(e)));
    }
  };
  return (
    <span>
      <input class="replicas" name="replicas" size={3} value={v} onInput={(e) => set((e.target as HTMLInputElement).value)} />
      <button data-testid="scale" onClick={save}>Scale</button>
      <Problem error={error} />
    </span>
  );
}

function Kind({ ns, k }: { ns: string; k: (typeof KINDS)[number] }) {
  const base = `/apis/${k.group}`;
  const path = ns ? `${base}/namespaces/${ns}/${k.plural}` : `${base}/${k.plural}`;
  const live = useWatch(path);
  const items = [...live.items].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  return (
    <div>
      <h3>{k.kind}s</h3>
      <Problem error={live.error} />
      <table>
        <thead><tr><th>Name</th><th>Namespace</th><th>Ready</th><th>Rollout</th>{k.scalable && <th>Replicas</th>}</tr></thead>
        <tbody>
          {items.map((o) => (
            <tr key={o.metadata.uid} data-testid={`workload-${o.metadata.name}`}>
              <td>{o.metadata.name}</td>
              <td>{o.metadata.namespace}</td>
              <td>{k.kind === 'DaemonSet' ? `${o.status?.numberReady ?? 0}/${o.status?.desiredNumberScheduled ?? 0}`
                : k.kind === 'Job' ? `${o.status?.succeeded ?? 0}/${o.spec?.completions ?? 1}`
                : `${o.status?.readyReplicas ?? 0}/${o.spec?.replicas ?? 1}`}</td>
              <td data-testid="rollout">{rollout(k.kind, o)}</td>
              {k.scalable && <td><Replicas key={o.metadata.resourceVersion} path={`${base}/namespaces/${o.metadata.namespace}/${k.plural}`} o={o} /></td>}
            </tr>
          ))}
          {live.loaded && items.length === 0 && !live.error && <tr><td colSpan={5}>None.</td></tr>}
        </tbody>
      </table>
    </div>
  );
}

export function Workloads({ ns }: { ns: string }) {
  return (
    <section>
      <h2>Workloads{ns ? ` in ${ns}` : ''}</h2>
      {KINDS.map((k) => <Kind key={k.kind} ns={ns} k={k} />)}
    </section>
  );
}
