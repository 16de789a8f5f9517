// RunaheadError and its trip across postMessage: an Error's class and extra fields do not survive
// structured cloning, so the worker sends `{code, message}` and the page builds the error again.

/** An error with a stable `code` (see README.md) and a message a person can act on. */
export class RunaheadError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'RunaheadError';
    this.code = code;
  }
}

// Errors from the wasm side are Errors with a string `code`; anything else is a bug here.
export function toRunaheadError(e, fallbackCode = 'internal') {
  if (e instanceof RunaheadError) return e;
  if (e instanceof Error && typeof e.code === 'string') {
    return new RunaheadError(e.code, e.message, { cause: e.cause ?? e });
  }
  const message = e instanceof Error ? e.message : String(e);
  return new RunaheadError(fallbackCode, message, { cause: e });
}

export function abortError(what) {
  return new RunaheadError('cancelled', `${what} was cancelled`);
}

/** What crosses postMessage. */
export function serializeError(e) {
  const r = toRunaheadError(e);
  return { code: r.code, message: r.message };
}

export function deserializeError({ code, message }) {
  return new RunaheadError(code, message);
}
