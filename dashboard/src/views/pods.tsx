import { useEffect, useRef, useState } from 'preact/hooks';
import { age, ApiError, getToken, lines } from '../api';
import { useTick, useWatch } from '../hooks';
import { eventTime, podsPath, podStatus, Problem, restarts } from './common';

const ROW = 28;
const VISIBLE = 40;

// A virtualised table: only the rows in view are in the DOM, so 10,000 pods
// cost one screen of rows per render.
export function Pods({ ns }: { ns: string }) {
  useTick();
  const pods = useWatch(podsPath(ns));
  const [phase, setPhase] = useState('');
  const [top, setTop] = useState(0);
  const rows = pods.items
    .filter((p) => !phase || podStatus(p) === phase)
    .sort((a, b) =>
      (a.metadata.namespace ?? '').localeCompare(b.metadata.namespace ?? '') || a.metadata.name.localeCompare(b.metadata.name),
    );
  const first = Math.max(0, Math.floor(top / ROW) - 5);
  const shown = rows.slice(first, first + VISIBLE + 10);
  return (
    <section>
      <h2>Pods{ns ? ` in ${ns}` : ''} <span class="muted" data-testid="pod-count">{pods.loaded ? `${rows.length} pods` : 'loading…'}</span></h2>
      <label>
        Phase{' '}
        <select name="phase" value={phase} onChange={(e) => setPhase((e.target as HTMLSelectElement).value)}>
          <option value="">any</option>
          {['Pending', 'Running', 'Succeeded', 'Failed', 'Terminating'].map((p) => <option value={p}>{p}</option>)}
        </select>
      </label>
      <Problem error={pods.error} />
      <div class="thead pods-grid"><span>Name</span><span>Namespace</span><span>Status</span><span>Node</span><span>Restarts</span><span>Age</span></div>
      <div class="scroller" style={{ height: `${Math.min(rows.length, VISIBLE) * ROW + 4}px` }}
        onScroll={(e) => setTop((e.target as HTMLElement).scrollTop)}>
        <div style={{ height: `${rows.length * ROW}px`, position: 'relative' }}>
          {shown.map((p, i) => (
            <a class="row pods-grid" data-testid="pod-row" data-pod={p.metadata.name} data-status={podStatus(p)}
              key={p.metadata.uid} href={`#/pods/${p.metadata.namespace}/${p.metadata.name}`}
              style={{ top: `${(first + i) * ROW}px`, height: `${ROW}px` }}>
              <span>{p.metadata.name}</span>
              <span>{p.metadata.namespace}</span>
              <span class={`phase ${podStatus(p)}`}>{podStatus(p)}</span>
              <span>{p.spec?.nodeName ?? ''}</span>
              <span>{restarts(p)}</span>
              <span>{age(p.metadata.creationTimestamp)}</span>
            </a>
          ))}
        </div>
      </div>
    </section>
  );
}

// An RFC 3339 timestamp as a string that sorts in time order (UTC, the
// fraction padded to nanoseconds), to drop lines seen before a resume.
function tsKey(ts: string): string {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(ts);
  return m ? `${m[1]}.${(m[2] ?? '').padEnd(9, '0')}` : '';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Follows a container's log (`/log?follow=true&timestamps=true`) as a streamed
 * fetch. A dropped stream (the browser's connection reset, a server restart)
 * resumes with `sinceTime` at the last line's timestamp, dropping the lines it
 * already shows; an API error (403, 400) is shown and not retried; the stream
 * ending means the container exited.
 */
function Logs({ ns, name, container }: { ns: string; name: string; container: string }) {
  const [text, setText] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const [state, setState] = useState('following');
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const ctl = new AbortController();
    setText('');
    setError(null);
    let lastRaw = '';
    let lastKey = '';
    (async () => {
      let backoff = 500;
      while (!ctl.signal.aborted) {
        try {
          const from = lastRaw ? `sinceTime=${encodeURIComponent(lastRaw)}` : 'tailLines=500';
          const r = await fetch(
            `/api/v1/namespaces/${ns}/pods/${name}/log?follow=true&timestamps=true&${from}&container=${encodeURIComponent(container)}`,
            { headers: { Authorization: `Bearer ${getToken()}` }, signal: ctl.signal },
          );
          if (!r.ok || !r.body) {
            const t = await r.text();
            let msg = t;
            try { msg = JSON.parse(t).message ?? t; } catch { /* plain text */ }
            setError(new ApiError(r.status, msg));
            setState('stopped');
            return;
          }
          setState('following');
          backoff = 500;
          for await (const l of lines(r.body, ctl.signal)) {
            const sp = l.indexOf(' ');
            const ts = sp > 0 ? l.slice(0, sp) : '';
            const k = tsKey(ts);
            if (k && lastKey && k <= lastKey) continue;
            if (k) {
              lastKey = k;
              lastRaw = ts;
            }
            const shown = k ? l.slice(sp + 1) : l;
            setText((t) => (t + shown + '\n').slice(-200_000));
          }
          setState('ended');
          return;
        } catch {
          if (ctl.signal.aborted) return;
          setState('reconnecting');
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 5000);
        }
      }
    })();
    return () => ctl.abort();
  }, [ns, name, container]);
  useEffect(() => { pre.current?.scrollTo(0, pre.current.scrollHeight); }, [text]);
  return (
    <div>
      <Problem error={error} />
      <p class="muted" data-testid="logs-state">{state === 'ended' ? 'log ended (container exited)' : state}</p>
      <pre class="logs" data-testid="logs" ref={pre}>{text}</pre>
    </div>
  );
}

export function PodDetail({ ns, name }: { ns: string; name: string }) {
  useTick();
  const pod = useWatch(`/api/v1/namespaces/${ns}/pods`, `fieldSelector=metadata.name%3D${encodeURIComponent(name)}`);
  const events = useWatch(`/api/v1/namespaces/${ns}/events`, `fieldSelector=involvedObject.name%3D${encodeURIComponent(name)}`);
  const [logsOf, setLogsOf] = useState('');
  const p = pod.items[0];
  const evs = [...events.items].sort((a, b) => eventTime(a).localeCompare(eventTime(b)));
  const scheduling = evs.filter((e) => e.reason === 'Scheduled' || e.reason === 'FailedScheduling' || e.source?.component === 'default-scheduler');
  return (
    <section>
      <h2>Pod {ns}/{name}</h2>
      <Problem error={pod.error} />
      {pod.loaded && !p && !pod.error && <p class="error">Pod not found.</p>}
      {p && (
        <>
          <p>
            Status <b data-testid="pod-status">{podStatus(p)}</b> · node <b>{p.spec?.nodeName ?? '(unscheduled)'}</b> · IP {p.status?.podIP ?? '-'} · QoS {p.status?.qosClass ?? '-'}
          </p>
          <h3>Containers</h3>
          <table>
            <thead><tr><th>Name</th><th>Image</th><th>State</th><th>Ready</th><th>Restarts</th><th></th></tr></thead>
            <tbody>
              {(p.spec?.containers ?? []).map((c: any) => {
                const s = (p.status?.containerStatuses ?? []).find((x: any) => x.name === c.name);
                const state = s?.state ? Object.keys(s.state)[0] : 'waiting';
                return (
                  <tr key={c.name}>
                    <td>{c.name}</td><td>{c.image}</td><td>{state}</td><td>{String(s?.ready ?? false)}</td><td>{s?.restartCount ?? 0}</td>
                    <td><button data-testid="open-logs" onClick={() => setLogsOf(c.name)}>Logs</button></td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          <h3>Conditions</h3>
          <table>
            <thead><tr><th>Type</th><th>Status</th><th>Reason</th><th>Last transition</th></tr></thead>
            <tbody>
              {(p.status?.conditions ?? []).map((c: any) => (
                <tr key={c.type}><td>{c.type}</td><td>{c.status}</td><td>{c.reason ?? ''}</td><td>{age(c.lastTransitionTime)}</td></tr>
              ))}
            </tbody>
          </table>
          <h3>Why here</h3>
          <div data-testid="why-here">
            {scheduling.length === 0 && <p class="muted">No scheduling events (yet).</p>}
            <ul>
              {scheduling.map((e) => <li key={e.metadata.uid}><b>{e.reason}</b>: {e.message}</li>)}
            </ul>
            {p.spec?.nodeSelector && <p>nodeSelector: <code>{JSON.stringify(p.spec.nodeSelector)}</code></p>}
            {p.spec?.affinity && <p>affinity: <code>{JSON.stringify(p.spec.affinity)}</code></p>}
            {p.spec?.tolerations && <p>tolerations: <code>{(p.spec.tolerations as any[]).map((t) => `${t.key ?? '*'}:${t.effect ?? '*'}`).join(', ')}</code></p>}
          </div>
        </>
      )}
      <h3>Events</h3>
      <Problem error={events.error} />
      <table>
        <thead><tr><th>Age</th><th>Type</th><th>Reason</th><th>From</th><th>Message</th></tr></thead>
        <tbody>
          {evs.map((e) => (
            <tr key={e.metadata.uid}><td>{age(eventTime(e))}</td><td>{e.type}</td><td>{e.reason}</td><td>{e.source?.component ?? e.reportingComponent ?? ''}</td><td>{e.message}</td></tr>
          ))}
        </tbody>
      </table>
      {logsOf && (<><h3>Logs: {logsOf}</h3><Logs ns={ns} name={name} container={logsOf} /></>)}
    </section>
  );
}
