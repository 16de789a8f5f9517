// Counts every call a WebAssembly instance makes into JavaScript, exactly: a wasm module can
// only call JavaScript through its imports, so wrapping each imported function (at
// `WebAssembly.instantiate` / `instantiateStreaming`, before the package instantiates its
// module) sees every wasm -> JS call, WebGPU's and wasm-bindgen's glue alike. Pass
// `installImportCounter` to playwright's `page.addInitScript` (it runs inside the page and
// must stay self-contained); the page then has `globalThis.__importCalls`:
// `total()` (all calls so far) and `byName()` (per import, names as wasm-bindgen emits them,
// e.g. `__wbg_setBindGroup_c83391351ce68826`). The wrapper costs time: time forwards in a page
// without it.

export function installImportCounter() {
  let total = 0;
  const counts = new Map();
  const wrap = (imports) => {
    if (!imports) return imports;
    const wrapped = {};
    for (const [module, fields] of Object.entries(imports)) {
      const out = {};
      for (const [name, value] of Object.entries(fields)) {
        out[name] = typeof value !== 'function' ? value : function (...args) {
          total += 1;
          counts.set(name, (counts.get(name) ?? 0) + 1);
          return value.apply(this, args);
        };
      }
      wrapped[module] = out;
    }
    return wrapped;
  };
  const { instantiate, instantiateStreaming } = WebAssembly;
  WebAssembly.instantiate = (source, imports) => instantiate(source, wrap(imports));
  WebAssembly.instantiateStreaming = (source, imports) => instantiateStreaming(source, wrap(imports));
  globalThis.__importCalls = { total: () => total, byName: () => Object.fromEntries(counts) };
}

/**
 * `__wbg_setBindGroup_c83391351ce68826` -> `setBindGroup` (wasm-bindgen's bindings carry a
 * hash); its own intrinsics (`__wbindgen_generic_0000000000000001`, closures and casts) keep
 * their whole names.
 */
export function importName(name) {
  const binding = /^__wbg_(.+)_[0-9a-f]{16}$/.exec(name);
  return binding ? binding[1] : name;
}
