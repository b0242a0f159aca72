import { useEffect, useRef } from 'preact/hooks';
import {
  ArcElement, BarController, BarElement, CategoryScale, Chart, DoughnutController, Legend,
  LinearScale, Tooltip, type ChartConfiguration,
} from 'chart.js';

Chart.register(ArcElement, BarController, BarElement, CategoryScale, DoughnutController, Legend, LinearScale, Tooltip);

// One Chart.js chart, updated in place when its data changes (no re-creation per watch event).
export function ChartView({ config, height = 160 }: { config: ChartConfiguration; height?: number }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const chart = useRef<Chart | null>(null);
  useEffect(() => {
    if (!canvas.current) return;
    chart.current = new Chart(canvas.current, { ...config, options: { ...config.options, animation: false, maintainAspectRatio: false } });
    return () => chart.current?.destroy();
  }, [config.type]);
  useEffect(() => {
    const c = chart.current;
    if (!c) return;
    c.data = config.data;
    c.update('none');
  }, [JSON.stringify(config.data)]);
  return (
    <div style={{ height: `${height}px`, position: 'relative' }}>
      <canvas ref={canvas} />
    </div>
  );
}
