import { age } from '../api';
import { ChartView } from '../charts';
import { useTick, useWatch } from '../hooks';
import { eventTime, eventsPath, nodeReady, podsPath, podStatus, Problem } from './common';

const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'];
const COLORS = ['#e0a800', '#2e9e44', '#4a7bd0', '#d0453a', '#888'];

export function Overview({ ns }: { ns: string }) {
  useTick();
  const nodes = useWatch('/api/v1/nodes');
  const pods = useWatch(podsPath(ns));
  const warnings = useWatch(eventsPath(ns), 'fieldSelector=type%3DWarning');
  const byPhase = PHASES.map((ph) => pods.items.filter((p) => (p.status?.phase ?? 'Pending') === ph).length);
  const ready = nodes.items.filter(nodeReady).length;
  const recent = [...warnings.items].sort((a, b) => eventTime(b).localeCompare(eventTime(a))).slice(0, 20);
  return (
    <section>
      <h2>Cluster overview</h2>
      <div class="cards">
        <div class="card">
          <h3>Nodes</h3>
          <Problem error={nodes.error} />
          <p class="big" data-testid="nodes-ready">{ready} / {nodes.items.length} Ready</p>
        </div>
        <div class="card">
          <h3>Pods by phase{ns ? ` in ${ns}` : ''}</h3>
          <Problem error={pods.error} />
          <p data-testid="pods-by-phase">
            {PHASES.map((ph, i) => `${ph} ${byPhase[i]}`).join(' · ')}
          </p>
          <ChartView
            config={{
              type: 'doughnut',
              data: { labels: PHASES, datasets: [{ data: byPhase, backgroundColor: COLORS }] },
              options: { plugins: { legend: { position: 'right' } } },
            }}
          />
        </div>
      </div>
      <h3>Recent warnings</h3>
      <Problem error={warnings.error} />
      <table>
        <thead><tr><th>Age</th><th>Object</th><th>Reason</th><th>Message</th></tr></thead>
        <tbody>
          {recent.map((e) => (
            <tr key={e.metadata.uid}>
              <td>{age(eventTime(e))}</td>
              <td>{e.involvedObject?.kind}/{e.involvedObject?.name}</td>
              <td>{e.reason}</td>
              <td>{e.message}</td>
            </tr>
          ))}
          {recent.length === 0 && <tr><td colSpan={4}>No warnings.</td></tr>}
        </tbody>
      </table>
      {pods.items.length > 0 && <p class="muted">Pods: {pods.items.filter((p) => podStatus(p) !== 'Running').length} not Running.</p>}
    </section>
  );
}
