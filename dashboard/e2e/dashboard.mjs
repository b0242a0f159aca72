// End-to-end check of the dashboard in Debian's chromium (playwright-core),
// against a real `berth server` started by crates/berth/tests/dashboard.rs.
// Env: BERTH_URL (https://host:port), BERTH_TOKEN (admin), BERTH_VIEW_TOKEN
// (bound to `view` in BERTH_VIEW_NS only), BERTH_NODE (a real node agent's
// node, to label), BERTH_NODE_COUNT (Ready nodes expected), SCREENSHOTS (a directory). Exits non-zero on the first
// failed check; prints `metric name=value` lines for the Rust test to report.
// Prints `restart-server` (or `delete-viewer`) and waits for a line on stdin
// when it wants the API server restarted behind BERTH_URL's forwarder (or the
// viewer's ServiceAccount deleted): the Rust side does it and answers.
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { createInterface } from 'node:readline';

const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const base = env('BERTH_URL');
const admin = env('BERTH_TOKEN');
const viewToken = env('BERTH_VIEW_TOKEN');
const viewNs = env('BERTH_VIEW_NS');
const nodeName = env('BERTH_NODE');
const nodeCount = Number(env('BERTH_NODE_COUNT'));
const shots = env('SCREENSHOTS');
mkdirSync(shots, { recursive: true });

const fail = async (e) => {
  console.error(e);
  await page?.screenshot({ path: `${shots}/failure.png`, fullPage: true }).catch(() => {});
  process.exit(1);
};
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
let page;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  // This machine's network is closed: no background connections to Google.
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
// The server's certificate is signed by the cluster's own CA, which the
// browser does not know; the test trusts it as kubectl trusts the kubeconfig's.
const ctx = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 860 } });
page = await ctx.newPage();
page.setDefaultTimeout(30_000);
// Failed requests, for the record (watches cut by the restart step show here too).
page.on('requestfailed', (r) => console.error(`request failed: ${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const step = (s) => console.log(`step ${s}`);

async function login(token) {
  await page.fill('textarea[name=token]', token);
  await page.click('button[type=submit]');
}

// The page's own fetch with the signed-in token: what a user's click would send.
const api = (method, path, body, contentType = 'application/json') =>
  page.evaluate(async ({ method, path, body, contentType }) => {
    const r = await fetch(path, {
      method,
      headers: { Authorization: `Bearer ${sessionStorage.getItem('berth-dashboard-token')}`, 'Content-Type': contentType },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: r.status, body: await r.json() };
  }, { method, path, body, contentType });

// 1. A cold first load (nothing cached): the bytes of the page and its
// assets. Then a garbage token: the login error, with the API's 401.
step('garbage token');
await page.goto(`${base}/dashboard/`);
await page.waitForSelector('textarea[name=token]');
const cold = await page.evaluate(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  return {
    interactive: Math.round(nav.domInteractive),
    bytes: nav.transferSize + res.reduce((n, r) => n + r.transferSize, 0),
    decoded: nav.decodedBodySize + res.reduce((n, r) => n + r.decodedBodySize, 0),
  };
});
console.log(`metric cold_load_dom_interactive_ms=${cold.interactive}`);
console.log(`metric cold_load_bytes_transferred=${cold.bytes} (decoded ${cold.decoded})`);
await login('not-a-token');
const err = await page.textContent('.login .error');
assert.match(err, /Login failed \(401\)/);
assert.match(err, /Unauthorized/);
await shot('login-error');

// 2. Admin login; then a reload (signed in, assets cached): from navigation
// start to the overview showing the nodes, and the bytes of its API lists.
step('admin login');
await page.goto(`${base}/dashboard/`);
await login(admin);
await page.waitForSelector('[data-testid=nodes-ready]');
const readyNodes = () => page.waitForFunction((n) =>
  document.querySelector('[data-testid=nodes-ready]')?.textContent === `${n} / ${n} Ready`, nodeCount);
await readyNodes();
await page.reload();
await readyNodes();
const warm = await page.evaluate(() => {
  const res = performance.getEntriesByType('resource');
  return {
    shown: Math.round(performance.now()),
    bytes: performance.getEntriesByType('navigation')[0].transferSize + res.reduce((n, r) => n + r.transferSize, 0),
    lists: res.filter((r) => r.initiatorType === 'fetch').length,
  };
});
console.log(`metric signed_in_load_to_nodes_shown_ms=${warm.shown}`);
console.log(`metric signed_in_load_bytes_transferred=${warm.bytes} (${warm.lists} API lists; watch streams not counted)`);
await shot('overview');

// 3. A Deployment whose pods cannot be placed yet (a nodeSelector no node
// matches): rows appear Pending; labelling the agent's node lets them run on
// real containers, and the same rows turn Running without a reload.
step('deployment rollout');
await page.evaluate(() => { window.__sameDocument = true; });
await page.fill('input[name=namespace]', 'default');
await page.press('input[name=namespace]', 'Enter');
await page.click('a[href="#/pods"]');
const dep = {
  apiVersion: 'apps/v1', kind: 'Deployment',
  metadata: { name: 'dash-web', labels: { app: 'dash-web' } },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: 'dash-web' } },
    template: {
      metadata: { labels: { app: 'dash-web' } },
      spec: {
        nodeSelector: { 'dashboard-e2e': 'yes' },
        terminationGracePeriodSeconds: 1,
        containers: [{
          name: 'ticker', image: 'busybox',
          command: ['sh', '-c', 'i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done'],
          resources: { requests: { cpu: '100m', memory: '32Mi' } },
        }],
      },
    },
  },
};
const created = await api('POST', '/apis/apps/v1/namespaces/default/deployments', dep);
assert.equal(created.status, 201, JSON.stringify(created.body));
await page.waitForFunction(() =>
  document.querySelectorAll('[data-testid=pod-row][data-pod^="dash-web-"][data-status=Pending]').length === 2);
await shot('pods-pending');
const labelled = await api('PATCH', `/api/v1/nodes/${nodeName}`, { metadata: { labels: { 'dashboard-e2e': 'yes' } } },
  'application/merge-patch+json');
assert.equal(labelled.status, 200, JSON.stringify(labelled.body));
await page.waitForFunction(() =>
  document.querySelectorAll('[data-testid=pod-row][data-pod^="dash-web-"][data-status=Running]').length === 2, null,
  { timeout: 60_000 });
assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page reloaded');
await shot('pods-running');

// 4. Pod detail: containers, conditions, events, why it landed where it did,
// and its log followed: a line written after the log opened shows up.
step('pod detail and logs');
await page.click('[data-testid=pod-row][data-pod^="dash-web-"]');
await page.waitForSelector('[data-testid=pod-status]');
await page.waitForFunction(() => /Scheduled/.test(document.querySelector('[data-testid=why-here]')?.textContent ?? ''));
const why = await page.textContent('[data-testid=why-here]');
assert.match(why, new RegExp(`Successfully assigned default/dash-web-[a-z0-9-]+ to ${nodeName}`));
assert.match(why, /FailedScheduling/);
await page.click('[data-testid=open-logs]');
const lastTick = () => page.evaluate(() => {
  const m = [...(document.querySelector('[data-testid=logs]')?.textContent ?? '').matchAll(/tick (\d+)/g)];
  return m.length ? Number(m[m.length - 1][1]) : 0;
});
await page.waitForFunction(() => /tick \d+/.test(document.querySelector('[data-testid=logs]')?.textContent ?? ''));
const first = await lastTick();
await page.waitForFunction((n) => {
  const m = [...(document.querySelector('[data-testid=logs]')?.textContent ?? '').matchAll(/tick (\d+)/g)];
  return m.length && Number(m[m.length - 1][1]) > n;
}, first, { timeout: 15_000 });
console.log(`logs: followed from tick ${first} to tick ${await lastTick()}`);
await shot('pod-detail');

// 5. Nodes: the stacked capacity bars, with the Deployment's requests on the labelled node.
step('nodes');
await page.click('a[href="#/nodes"]');
await page.waitForSelector('[data-testid=node-card] canvas');
const card = page.locator('[data-testid=node-card]', { hasText: nodeName });
await card.getByText(/cpu: capacity [\d.]+ cores, allocatable [\d.]+ cores, requested 0\.20 cores, kept back [\d.]+ cores/).waitFor();
await shot('nodes');

// 6. Workloads: rollout state, then a replicas edit through the page.
step('workloads');
await page.click('a[href="#/workloads"]');
const row = page.locator('[data-testid=workload-dash-web]');
await row.locator('[data-testid=rollout]', { hasText: 'Complete' }).waitFor({ timeout: 60_000 });
await row.locator('input[name=replicas]').fill('1');
await row.locator('[data-testid=scale]').click();
await row.locator('td', { hasText: /^1\/1$/ }).waitFor({ timeout: 60_000 });
await row.locator('[data-testid=rollout]', { hasText: 'Complete' }).waitFor({ timeout: 60_000 });
await shot('workloads');

// 7. An API server restart: the watches reconnect (resuming from the last
// resourceVersion, or relisting on 410) and a pod made afterwards shows up
// without a reload.
step('api server restart');
await page.click('a[href="#/pods"]');
await page.waitForSelector('[data-testid=pod-row][data-pod^="dash-web-"]');
const before = await page.evaluate(() => ({ ...window.__berthWatchStats }));
console.log('restart-server');
const answer = await stdinLines.next();
assert.equal(answer.value, 'restarted', 'the test did not restart the server');
// Every watch of the pods view back: some resumed or relisted since, none waiting.
await page.waitForFunction((b) => {
  const s = window.__berthWatchStats;
  return s.resumes + s.relists > b.resumes + b.relists && s.reconnecting === 0;
}, before, { timeout: 30_000 }).catch(async (e) => {
  throw new Error(`the watches did not reconnect: ${JSON.stringify(await page.evaluate(() => window.__berthWatchStats))}: ${e}`);
});
await page.waitForSelector('[data-testid=live][data-reconnecting="0"]');
const after = await page.evaluate(() => ({ ...window.__berthWatchStats }));
console.log(`metric watch_resumes=${after.resumes - before.resumes}`);
console.log(`metric watch_relists=${after.relists - before.relists}`);
const late = {
  apiVersion: 'v1', kind: 'Pod', metadata: { name: 'after-restart' },
  spec: { nodeSelector: { 'dashboard-e2e': 'nowhere' }, containers: [{ name: 'c', image: 'busybox' }] },
};
const made = await api('POST', '/api/v1/namespaces/default/pods', late);
assert.equal(made.status, 201, JSON.stringify(made.body));
await page.waitForSelector('[data-testid=pod-row][data-pod="after-restart"][data-status=Pending]', { timeout: 20_000 });
assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page reloaded');
await shot('after-restart');

// 8. A token bound to `view` in one namespace: that namespace's pods, and the
// API's 403 message for the cluster-wide list; its scale button gets the API's answer.
step('view-only user');
await page.click('text=Sign out');
await login(viewToken);
await page.waitForSelector('[data-testid=live], .login .error');
assert.equal(await page.locator('.login .error').count(), 0, await page.locator('.login .error').first().textContent().catch(() => ''));
await page.fill('input[name=namespace]', '');
await page.press('input[name=namespace]', 'Enter');
await page.click('a[href="#/pods"]');
const forbidden = await page.textContent('.error[role=alert]');
assert.match(forbidden, /403 Forbidden: pods is forbidden: User "system:serviceaccount:[^"]+" cannot list resource "pods" in API group "" at the cluster scope/);
await shot('view-forbidden');
await page.fill('input[name=namespace]', viewNs);
await page.press('input[name=namespace]', 'Enter');
await page.waitForSelector('[data-testid=pod-row]');
assert.equal(await page.locator('.error[role=alert]').count(), 0);
await shot('view-namespace');
await page.click('a[href="#/workloads"]');
const vrow = page.locator('[data-testid^=workload-]').first();
await vrow.locator('input[name=replicas]').fill('5');
await vrow.locator('[data-testid=scale]').click();
const denied = await vrow.locator('.error').textContent();
assert.match(denied, /403 Forbidden: deployments.apps "[^"]+" is forbidden: User "system:serviceaccount:[^"]+" cannot patch resource "deployments"/);
await shot('view-scale-denied');
assert.match(await page.textContent('[data-testid=user]'), /^system:serviceaccount:team-a:viewer$/);

// A revoked token (its ServiceAccount deleted): the next request's 401 signs
// the page out, with the API's answer.
step('revoked token');
console.log('delete-viewer');
assert.equal((await stdinLines.next()).value, 'deleted', 'the test did not delete the ServiceAccount');
await page.click('a[href="#/pods"]');
const signedOut = await page.textContent('[data-testid=signed-out]');
assert.match(signedOut, /Signed out: the API answered 401 \(.*Unauthorized.*\)/);
await shot('signed-out');

// 9. A namespace of 1,000 pods (Pending: no scheduler takes them, so the
// measurement is the page's, not the scheduler's): a signed-in reload of the
// pods view, from navigation start, and from the list's arrival, to the rows.
step('1000 pods');
await login(admin);
await page.waitForSelector('[data-testid=live]');
const ns = await api('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'load' } });
assert.equal(ns.status, 201, JSON.stringify(ns.body));
const made1000 = await page.evaluate(async () => {
  const t0 = performance.now();
  const token = sessionStorage.getItem('berth-dashboard-token');
  const one = async (i) => {
    const body = JSON.stringify({
      apiVersion: 'v1', kind: 'Pod', metadata: { name: `load-${i}`, labels: { app: 'load' } },
      spec: { schedulerName: 'dashboard-e2e-none', containers: [{ name: 'c', image: 'busybox' }] },
    });
    // The namespace's default ServiceAccount may not exist for a moment.
    for (let attempt = 0; ; attempt++) {
      const r = await fetch('/api/v1/namespaces/load/pods', {
        method: 'POST', body, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      });
      if (r.status === 201) return;
      if (attempt >= 50) throw new Error(`pod load-${i}: ${r.status} ${await r.text()}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  };
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => { while (next < 1000) await one(next++); }));
  return Math.round(performance.now() - t0);
});
console.log(`created 1000 pods in ${made1000} ms`);
await page.fill('input[name=namespace]', 'load');
await page.press('input[name=namespace]', 'Enter');
await page.click('a[href="#/pods"]');
await page.waitForFunction(() => document.querySelector('[data-testid=pod-count]')?.textContent === '1000 pods');
await page.reload();
await page.waitForFunction(() => document.querySelector('[data-testid=pod-count]')?.textContent === '1000 pods'
  && document.querySelectorAll('[data-testid=pod-row]').length > 0);
const big = await page.evaluate(() => {
  const shown = performance.now();
  const list = performance.getEntriesByType('resource')
    .filter((r) => r.name.includes('/api/v1/namespaces/load/pods') && !r.name.includes('watch='))
    .pop();
  return {
    shown: Math.round(shown),
    afterList: list ? Math.round(shown - list.responseEnd) : -1,
    listBytes: list?.transferSize ?? -1,
    rows: document.querySelectorAll('[data-testid=pod-row]').length,
  };
});
assert.ok(big.afterList >= 0, 'the pod list request was not seen');
console.log(`metric pods1000_load_to_rows_ms=${big.shown}`);
console.log(`metric pods1000_list_to_rows_ms=${big.afterList}`);
console.log(`metric pods1000_list_bytes=${big.listBytes}`);
console.log(`pods1000: ${big.rows} rows in the DOM (virtualised)`);
await shot('pods-1000');

// Responsive under 100 pod updates a second (300 label patches over 3 s, each
// a watch event): the main thread's worst delay, from a 10 ms timer's drift.
const busy = await page.evaluate(async () => {
  const token = sessionStorage.getItem('berth-dashboard-token');
  const events0 = window.__berthWatchStats.events;
  const lags = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    lags.push(now - last - 10);
    last = now;
  }, 10);
  const sent = [];
  for (let tick = 0; tick < 30; tick++) {
    for (let j = 0; j < 10; j++) {
      const i = tick * 10 + j;
      sent.push(fetch(`/api/v1/namespaces/load/pods/load-${i}`, {
        method: 'PATCH',
        body: JSON.stringify({ metadata: { labels: { tick: String(tick) } } }),
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/merge-patch+json' },
      }).then((r) => r.status));
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const codes = await Promise.all(sent);
  await new Promise((r) => setTimeout(r, 1000));
  clearInterval(timer);
  lags.sort((a, b) => a - b);
  return {
    ok: codes.filter((c) => c === 200).length,
    events: window.__berthWatchStats.events - events0,
    max: Math.round(lags[lags.length - 1]),
    p95: Math.round(lags[Math.floor(lags.length * 0.95)]),
  };
});
assert.equal(busy.ok, 300, `patches answered 200: ${busy.ok}`);
assert.ok(busy.events >= 300, `the pods watch delivered ${busy.events} of the 300 updates`);
console.log(`metric pods1000_updates_100_per_s_main_thread_lag_p95_ms=${busy.p95} max_ms=${busy.max}`);

await browser.close();
console.log('e2e ok');
process.exit(0);
