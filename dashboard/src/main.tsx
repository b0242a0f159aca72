import { render } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, clearToken, getToken, onUnauthorized, setToken, watchStats, whoami } from './api';
import { useHash, useTick } from './hooks';
import { Overview } from './views/overview';
import { PodDetail, Pods } from './views/pods';
import { Nodes } from './views/nodes';
import { Workloads } from './views/workloads';
import './style.css';

function Login({ onLogin, notice }: { onLogin: () => void; notice: string }) {
  const [token, set] = useState('');
  const [error, setError] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    setToken(token.trim());
    try {
      sessionStorage.setItem('berth-dashboard-user', await whoami());
      onLogin();
    } catch (err) {
      clearToken();
      setError(err instanceof ApiError ? `Login failed (${err.code}): ${err.message}` : String(err));
    }
  };
  return (
    <form class="login" onSubmit={submit}>
      <h1>Berth</h1>
      <p>Sign in with a bearer token (<code>berth dashboard</code> or <code>kubectl create token</code>).</p>
      <textarea name="token" rows={5} value={token} onInput={(e) => set((e.target as HTMLTextAreaElement).value)} />
      <button type="submit">Sign in</button>
      {error && <p class="error" role="alert">{error}</p>}
      {!error && notice && <p class="error" role="alert" data-testid="signed-out">{notice}</p>}
    </form>
  );
}

const NAV = [
  ['#/overview', 'Overview'],
  ['#/pods', 'Pods'],
  ['#/nodes', 'Nodes'],
  ['#/workloads', 'Workloads'],
];

// Whether the live lists are connected: read from the watches' own counters
// once a second (a clock, not a request).
function LiveState() {
  useTick(1000);
  const { reconnecting, resumes, relists } = watchStats;
  return (
    <span class={reconnecting ? 'bad' : 'ok'} data-testid="live" data-reconnecting={reconnecting}
      data-resumes={resumes} data-relists={relists}
      title={`watches resumed ${resumes}×, relisted ${relists}×`}>
      {reconnecting ? `● reconnecting (${reconnecting})` : '● live'}
    </span>
  );
}

function App() {
  const [authed, setAuthed] = useState(getToken() !== '');
  const [ns, setNs] = useState(sessionStorage.getItem('berth-dashboard-ns') ?? '');
  const [notice, setNotice] = useState('');
  const hash = useHash();
  onUnauthorized((e) => {
    clearToken();
    setNotice(`Signed out: the API answered ${e.code} (${e.message}): the token expired or was revoked.`);
    setAuthed(false);
  });
  if (!authed) return <Login notice={notice} onLogin={() => { setNotice(''); setAuthed(true); }} />;
  const changeNs = (v: string) => {
    sessionStorage.setItem('berth-dashboard-ns', v);
    setNs(v);
  };
  const parts = hash.slice(2).split('/');
  let view;
  if (parts[0] === 'pods' && parts.length >= 3) view = <PodDetail ns={parts[1]} name={parts[2]} />;
  else if (parts[0] === 'pods') view = <Pods ns={ns} />;
  else if (parts[0] === 'nodes') view = <Nodes />;
  else if (parts[0] === 'workloads') view = <Workloads ns={ns} />;
  else view = <Overview ns={ns} />;
  return (
    <div class="shell">
      <header>
        <strong>Berth</strong>
        <nav>
          {NAV.map(([h, label]) => (
            <a href={h} class={hash.startsWith(h) ? 'active' : ''}>{label}</a>
          ))}
        </nav>
        <label>
          Namespace{' '}
          <input name="namespace" placeholder="all namespaces" value={ns}
            onChange={(e) => changeNs((e.target as HTMLInputElement).value.trim())} />
        </label>
        <span class="muted user" data-testid="user">{sessionStorage.getItem('berth-dashboard-user') ?? ''}</span>
        <LiveState />
        <button onClick={() => { clearToken(); setAuthed(false); }}>Sign out</button>
      </header>
      <main>{view}</main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
