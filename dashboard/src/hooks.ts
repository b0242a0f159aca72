import { useEffect, useState } from 'preact/hooks';
import { ApiError, Obj, Watch } from './api';

export type Live = { items: Obj[]; error: ApiError | null; loaded: boolean };

// A live list of `path` (with `query`, e.g. a field selector) for a component's lifetime.
export function useWatch(path: string | null, query = ''): Live {
  const [state, set] = useState<Live>({ items: [], error: null, loaded: false });
  useEffect(() => {
    set({ items: [], error: null, loaded: false });
    if (!path) return;
    const w = new Watch(path, query, (items, error) =>
      set({ items: [...items.values()], error, loaded: true }),
    );
    return () => w.stop();
  }, [path, query]);
  return state;
}

export function useHash(): string {
  const [h, set] = useState(location.hash || '#/overview');
  useEffect(() => {
    const on = () => set(location.hash || '#/overview');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return h;
}

// Re-renders every few seconds so ages stay current (a clock, not a poll of the API).
export function useTick(ms = 5000) {
  const [, set] = useState(0);
  useEffect(() => {
    const t = setInterval(() => set((n) => n + 1), ms);
    return () => clearInterval(t);
  }, [ms]);
}
