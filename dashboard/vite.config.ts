import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';

// Served by berth at /dashboard/; hashed asset names so the server can cache
// them for a year while index.html is always revalidated.
export default defineConfig({
  base: '/dashboard/',
  plugins: [preact()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, reportCompressedSize: false },
});
