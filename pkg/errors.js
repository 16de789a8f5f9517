// RunaheadError and its trip across postMessage: an Error's class and extra fields do not survive
// structured cloning, so the worker sends `{code, message}` and the page builds the error again.

// The HTTP status an OpenAI-compatible server would answer with, for apps that branch on the
// SDK's `APIError.status`: 400 for what is wrong with the request, 429 for a busy engine,
// none for a cancelled one (as the SDK's aborted requests have none), 500 for the rest.
const REQUEST_ERRORS = new Set([
  'invalid_option', 'invalid_messages', 'invalid_sampling', 'empty_prompt', 'prompt_too_long',
  'chat_template', 'tokenizer', 'invalid_source', 'grammar',
]);

function statusOf(code) {
  if (REQUEST_ERRORS.has(code)) return 400;
  if (code === 'busy') return 429;
  if (code === 'cancelled') return undefined;
  return 500;
}

/**
 * An error with a stable `code` (see README.md) and a message a person can act on; `status`
 * (HTTP-like, see statusOf) and `param` (the request field at fault, or null) as the OpenAI
 * SDK's errors have them.
 */
export class RunaheadError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'RunaheadError';
    this.code = code;
    this.status = statusOf(code);
    this.param = options?.param ?? null;
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
