import { Obj, quantity } from '../api';
import { ChartView } from '../charts';
import { useWatch } from '../hooks';
import { nodeReady, Problem } from './common';

// Requests of the pods bound to each node that still hold resources.
function requestsByNode(pods: Obj[]): Map<string, { cpu: number; memory: number }> {
  const m = new Map<string, { cpu: number; memory: number }>();
  for (const p of pods) {
    const node = p.spec?.nodeName;
    const phase = p.status?.phase;
    if (!node || phase === 'Succeeded' || phase === 'Failed') continue;
    const r = m.get(node) ?? { cpu: 0, memory: 0 };
    for (const c of p.spec?.containers ?? []) {
      r.cpu += quantity(c.resources?.requests?.cpu);
      r.memory += quantity(c.resources?.requests?.memory);
    }
    m.set(node, r);
  }
  return m;
}

const fmt = (res: 'cpu' | 'memory', v: number) =>
  res === 'cpu' ? `${v.toFixed(v < 10 ? 2 : 0)} cores` : `${(v / 1024 ** 3).toFixed(1)} GiB`;

/**
 * Capacity as one stacked bar per resource: requests and free allocatable,
 * then what the node keeps back (capacity − allocatable). The node agent does
 * not publish the split of that reserve into kube-reserved, system-reserved and
 * the eviction threshold, so it is drawn as one segment.
 */
function NodeBars({ node, req }: { node: Obj; req: { cpu: number; memory: number } }) {
  const bars = (['cpu', 'memory'] as const).map((res) => {
    const cap = quantity(node.status?.capacity?.[res]);
    const alloc = quantity(node.status?.allocatable?.[res]);
    const used = Math.min(req[res], alloc);
    return { res, cap, alloc, used, free: Math.max(0, alloc - used), reserved: Math.max(0, cap - alloc) };
  });
  return (
    <div>
      <ChartView
        height={140}
        config={{
          type: 'bar',
          data: {
            labels: bars.map((b) => b.res),
            datasets: [
              { label: 'requested', data: bars.map((b) => (b.cap ? (100 * b.used) / b.cap : 0)), backgroundColor: '#4a7bd0' },
              { label: 'allocatable free', data: bars.map((b) => (b.cap ? (100 * b.free) / b.cap : 0)), backgroundColor: '#9cc4a4' },
              { label: 'kept back (kube-reserved + system-reserved + eviction threshold)', data: bars.map((b) => (b.cap ? (100 * b.reserved) / b.cap : 0)), backgroundColor: '#c9c9c9' },
            ],
          },
          options: {
            indexAxis: 'y',
            scales: { x: { stacked: true, max: 100, ticks: { callback: (v) => `${v}%` } }, y: { stacked: true, ticks: { autoSkip: false } } },
            plugins: { legend: { position: 'bottom', labels: { boxWidth: 10 } } },
          },
        }}
      />
      <p class="muted">
        {bars.map((b) => `${b.res}: capacity ${fmt(b.res, b.cap)}, allocatable ${fmt(b.res, b.alloc)}, requested ${fmt(b.res, b.used)}, kept back ${fmt(b.res, b.reserved)}`).join(' · ')}
      </p>
      <p class="muted">The Node publishes capacity and allocatable only: how much of what it keeps back is
        kube-reserved, system-reserved or the eviction threshold is not published, so it is one segment.</p>
    </div>
  );
}

export function Nodes() {
  const nodes = useWatch('/api/v1/nodes');
  const pods = useWatch('/api/v1/pods');
  const req = requestsByNode(pods.items);
  const list = [...nodes.items].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)).slice(0, 50);
  return (
    <section>
      <h2>Nodes <span class="muted">{nodes.items.length}</span></h2>
      <Problem error={nodes.error} />
      <Problem error={pods.error} />
      {nodes.items.length > list.length && <p class="muted">Showing the first {list.length}.</p>}
      <div class="nodes">
        {list.map((n) => (
          <div class="card" data-testid="node-card" key={n.metadata.uid}>
            <h3>{n.metadata.name} <span class={nodeReady(n) ? 'ok' : 'bad'}>{nodeReady(n) ? 'Ready' : 'NotReady'}</span></h3>
            <p class="muted">{n.status?.nodeInfo?.kubeletVersion} · pods {req.has(n.metadata.name) ? pods.items.filter((p) => p.spec?.nodeName === n.metadata.name).length : 0}/{n.status?.allocatable?.pods}
              {(n.spec?.taints ?? []).length > 0 && ` · taints ${(n.spec.taints as any[]).map((t) => `${t.key}:${t.effect}`).join(', ')}`}</p>
            <NodeBars node={n} req={req.get(n.metadata.name) ?? { cpu: 0, memory: 0 }} />
          </div>
        ))}
      </div>
    </section>
  );
}
