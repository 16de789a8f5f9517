// Reading the demo page's state in the e2e tests (demo.test.mjs, demo-structured.test.mjs).

// Waits until `selector`'s data-state is one of `states`, and returns it. The default wait covers
// a model load, which compiles every pipeline on a CPU-emulated GPU.
export async function waitForState(page, selector, states, timeout = 240_000) {
  const handle = await page.waitForFunction(
    ([sel, wanted]) => {
      const state = document.querySelector(sel)?.dataset.state;
      return wanted.includes(state) && state;
    },
    [selector, states],
    { timeout, polling: 100 },
  );
  return handle.jsonValue();
}

// The error banner's text, or '' while it is hidden.
export async function errorShown(page) {
  return (await page.isVisible('#error')) ? page.textContent('#error') : '';
}
