import { defineConfig } from 'vite';

export default defineConfig({
  // The package's worker is an ES module that imports the wasm-bindgen glue.
  worker: { format: 'es' },
  // Pre-bundling (dev server only) would move the package away from its worker and .wasm.
  optimizeDeps: { exclude: ['runahead'] },
  build: { target: 'es2022' },
});
