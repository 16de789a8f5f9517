/** Stable error codes (see README.md, "Errors"). */
export type RunaheadErrorCode =
  | 'no_webgpu'
  | 'adapter_limits'
  | 'device_lost'
  | 'out_of_memory'
  | 'gpu'
  | 'gguf'
  | 'unsupported_model'
  /** The `draft` model's tokenizer is not the target's (or its output misses tokens). */
  | 'draft_mismatch'
  | 'chat_template'
  | 'tokenizer'
  | 'invalid_messages'
  | 'empty_prompt'
  | 'prompt_too_long'
  | 'invalid_sampling'
  | 'invalid_option'
  /** A schema or grammar (`grammar`, `response_format`) that cannot be compiled, or the grammar engine failed. */
  | 'grammar'
  | 'cancelled'
  | 'busy'
  | 'fetch'
  | 'invalid_source'
  | 'wasm'
  | 'worker'
  | 'callback'
  | 'history'
  | 'internal';

export class RunaheadError extends Error {
  readonly name: 'RunaheadError';
  readonly code: RunaheadErrorCode;
  /**
   * The HTTP status an OpenAI-compatible server would answer with, as the SDK's `APIError`
   * has it: 400 for an error in the request, 429 for `busy`, none for `cancelled`, 500 else.
   */
  readonly status: 400 | 429 | 500 | undefined;
  /** The request field at fault (`"temperature"`, `"messages[2].content"`), or null. */
  param: string | null;
}

/**
 * Load phases, in order: `compile` (the WebAssembly module), `download` (the model's bytes from
 * the network, or from a File/Blob) or `cache` (from the model cache), `upload` (parsing and
 * uploading the weights to the GPU: `loaded` is 0 at its start and `total` at its end).
 */
export type LoadPhase = 'compile' | 'download' | 'cache' | 'upload';

/** Which model a progress or cache event is about: the target, or the `draft` load option's model. */
export type LoadedModel = 'target' | 'draft';

export interface LoadProgress {
  phase: LoadPhase;
  /**
   * Which model the bytes are of: 'target', or 'draft' (the `draft` load option's model, read
   * and uploaded after the target). Absent for `compile`.
   */
  model?: LoadedModel;
  /** Bytes read so far (download, cache, upload). */
  loaded: number;
  /** Size of the model in bytes, when known. */
  total?: number;
}

/** Things worth telling the user that do not fail the load. */
export type LoadEvent =
  /** The model was read from the cache. */
  | { type: 'cache_hit'; url: string; size: number; model: LoadedModel }
  /** The downloaded model was stored in the cache. */
  | { type: 'cache_stored'; url: string; size: number; model: LoadedModel }
  /** The cached copy was unreadable, short or not a model: it was deleted and the model downloaded. */
  | { type: 'cache_fallback'; reason: string; model: LoadedModel }
  /** The download could not be cached (e.g. the storage quota is full); the load went on. */
  | { type: 'cache_error'; reason: string; model: LoadedModel }
  /** The server gives no size and no ETag/Last-Modified (and no sha256 was given): not cached. */
  | { type: 'cache_skipped'; reason: string; quota?: boolean; model: LoadedModel }
  /** The server could not be reached to check the cached copy: it was used unchecked. */
  | { type: 'cache_unverified'; reason: string; model: LoadedModel }
  /** WebGPU works on the page but not in a worker here: the engine runs on the page. */
  | { type: 'worker_fallback'; reason: string }
  /** The threaded WebAssembly build did not load, or its pool workers could not start: the CPU engine runs one thread. */
  | { type: 'threads_fallback'; reason: string }
  /** The suffix drafter's earlier answers were read back from the origin's storage. */
  | { type: 'history_restored'; outputs: number; bytes: number }
  /** A stored history could not be used (another version, damaged, unreadable): deleted. */
  | { type: 'history_discarded'; reason: string }
  /** This browser has no origin private file system: the history lasts as long as the model. */
  | { type: 'history_unavailable'; reason: string };

/** A model's bytes: a URL, a File/Blob, an ArrayBuffer or a typed array's bytes. */
export type ModelSource = string | URL | Blob | ArrayBuffer | ArrayBufferView;

export interface LoadOptions {
  /** KV cache size in tokens (default 4096, capped by the model's trained context). */
  context?: number;
  /**
   * A draft model (a second GGUF, of any kind the target may be; a URL goes through the same
   * cache): read and loaded after the target, on the same engine (the same WebGPU device, or
   * the CPU engine), with the target's KV cache size. Its tokenizer must be the target's (the
   * same tokens, the same special tokens): otherwise the load fails with `draft_mismatch`.
   * Then `generate(..., { draft: 'model' })` drafts with it and `'auto'` weighs it against the
   * suffix lookup.
   */
  draft?: ModelSource;
  /**
   * Run the engine in a dedicated module worker (default true where `Worker` exists); false
   * runs it on the page's thread. Same API either way.
   */
  worker?: boolean;
  /** Keep a model loaded from a URL in the model cache, and read it from there (default true). */
  cache?: boolean;
  /**
   * The file's SHA-256 (hex): the bytes are checked against it as they arrive (a mismatch fails
   * a download with code `fetch`, and falls back to the network from the cache), and it names
   * this version of the file in the model cache.
   */
  sha256?: string;
  /**
   * Which engine runs the model. 'auto' (default): WebGPU when its adapter is a hardware one
   * whose limits suffice, else the CPU engine (WebAssembly SIMD, one thread), which is also
   * faster than a software (fallback) WebGPU adapter. 'webgpu': WebGPU or the error
   * `no_webgpu`. 'cpu': the CPU engine.
   */
  backend?: 'auto' | 'webgpu' | 'cpu';
  /**
   * Keep the suffix drafter's earlier answers in the origin's storage (OPFS), one record per
   * model, and read them back at the next load (default true).
   */
  history?: boolean;
  /** Tokens of earlier answers kept (default 65536, at most 1048576). */
  historyTokens?: number;
  onProgress?: (progress: LoadProgress) => void;
  onEvent?: (event: LoadEvent) => void;
  /** Stops the load in any phase (rejects with code `cancelled`). */
  signal?: AbortSignal;
  /**
   * Where to fetch the engine's .wasm from (default: next to this package's files,
   * wasm/runahead_relaxed_bg.wasm where `relaxedSimd()`, else wasm/runahead_bg.wasm). A page
   * that serves them elsewhere picks one the same way.
   */
  wasmUrl?: string | URL;
  /**
   * The CPU engine's threads (default: `navigator.hardwareConcurrency`, at most 8; at most 16).
   * More than one runs only in the engine's worker on a cross-origin isolated page (served with
   * `Cross-Origin-Opener-Policy: same-origin` and `Cross-Origin-Embedder-Policy: require-corp`),
   * where the threaded WebAssembly build is loaded; elsewhere one, and `info().threadsReason`
   * says why.
   */
  threads?: number;
  /**
   * Where to fetch the threaded build's .wasm from (default: next to this package's files,
   * wasm-threads/runahead_relaxed_bg.wasm where `relaxedSimd()`, else wasm-threads/runahead_bg.wasm).
   */
  wasmThreadsUrl?: string | URL;
}

/** A model in the model cache. */
export interface CachedModel {
  url: string;
  size: number;
  etag?: string;
  lastModified?: string;
  sha256?: string;
  /** ISO 8601 time it was stored. */
  storedAt: string;
}

export interface ModelCache {
  list(): Promise<CachedModel[]>;
  /** Resolves to whether a model was cached for `url`. */
  delete(url: string | URL): Promise<boolean>;
  /** Resolves to whether there was a cache to remove. */
  clear(): Promise<boolean>;
  /** This origin's storage (`navigator.storage.estimate()`) and the cached models' bytes. */
  estimate(): Promise<StorageEstimateInfo>;
  /** `navigator.storage.persist()`: resolves to whether the origin's storage is persistent now. */
  persist(): Promise<boolean>;
  /** `navigator.storage.persisted()`. */
  persisted(): Promise<boolean>;
}

// ---- Runahead.probe and the cache's storage (README.md, "Before the download: probe") ----

/** `Runahead.cache.estimate()`: bytes (usage, quota, available absent where the browser does not say). */
export interface StorageEstimateInfo {
  usage?: number;
  quota?: number;
  available?: number;
  /** Bytes of the cached models. */
  models: number;
  persisted: boolean;
}

export interface ProbeOptions {
  /** KV cache size to count, in tokens (default 4096, capped by the trained context). */
  context?: number;
  /** The engine `fits` is about (default 'auto': the one a load would take). */
  backend?: 'auto' | 'webgpu' | 'cpu';
  /** Bytes the model may take. */
  memoryBudget?: number;
  /** false: do not read the model cache. */
  cache?: boolean;
  /** Probe in a worker of its own (default true where Worker exists). */
  worker?: boolean;
  signal?: AbortSignal;
  wasmUrl?: string | URL;
}

export interface ProbeCheck {
  supported: boolean;
  reason?: string;
}

export interface EngineFit {
  fits: boolean;
  reason?: string;
  /** Bytes this engine needs (WebGPU: weights and KV cache; CPU: file, KV cache and header in WebAssembly memory). */
  needBytes: number;
}

export interface ProbeAdapter {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  isFallbackAdapter: boolean;
  limits: { maxStorageBufferBindingSize: number; maxBufferSize: number; maxStorageBuffersPerShaderStage: number };
}

export interface ModelProbe {
  supported: boolean;
  /** The first reason the engines do not run the model. */
  reason?: string;
  checks: { architecture: ProbeCheck; tensors: ProbeCheck; tokenizer: ProbeCheck; chatTemplate?: ProbeCheck };
  name?: string;
  architecture?: string;
  fileSize: number;
  /** Where the tensor data starts. */
  headerBytes: number;
  /** Where the last tensor ends. */
  dataEnd: number;
  /** Bytes the parsed header takes. */
  headerMemory: number;
  parameters: number;
  tensorCount: number;
  tensorTypes: Record<string, number>;
  tensorBytes: number;
  /** The weights as the GPU engine holds them; absent when the tensors check failed. */
  weightsBytes?: number;
  largestTensor?: { name: string; type: string; shape: number[]; bytes: number; rowBytes: number };
  /** The longest row of any tensor: one must fit one storage binding on WebGPU. */
  maxRowBytes: number;
  /** Absent when the architecture check failed. */
  shape?: {
    layers: number;
    embedding: number;
    feedForward: number;
    heads: number;
    kvHeads: number;
    headDim: number;
    vocab: number;
    trainedContext: number;
    context: number;
    kvCacheBytes: number;
    kvCacheLayerBytes: number;
    logitsBytes: number;
  };
  adapter: ProbeAdapter | null;
  adapterReason?: string;
  backend: 'webgpu' | 'cpu';
  backendReason?: string;
  engines: { webgpu: EngineFit; cpu: EngineFit };
  fits: boolean;
  fitsReason?: string;
  from: 'network' | 'cache' | 'file' | 'bytes';
  transferredBytes: number;
  rangeRequests?: number;
}

export interface GenerateOptions {
  /** Default 128. */
  maxTokens?: number;
  /** 0 (the default) is greedy. */
  temperature?: number;
  /** 0 (the default) keeps every token. */
  topK?: number;
  /** 1 (the default) keeps every token. */
  topP?: number;
  /** Seed of the sampler (default 0): same seed, same output. */
  seed?: number;
  /**
   * Drafter for speculative decoding; the output is the same with any drafter. 'model': the
   * draft model loaded with `Runahead.load(target, { draft })` (without one: `invalid_option`);
   * 'auto': the suffix lookup, and the draft model when one is loaded, whichever promises more
   * per step.
   */
  draft?: 'none' | 'ngram' | 'suffix' | 'model' | 'auto';
  /**
   * Draft tokens verified per step: "auto" (the default: the device's verification cost,
   * measured once per model, weighed against the running acceptance) or a fixed number.
   */
  depth?: 'auto' | number;
  /** Wrap the prompt in the model's chat template as one user message. */
  chat?: boolean;
  /**
   * The text ends before the first of these it contains (`stop_reason: "stop"`); text that
   * could start one is streamed only once it is known not to. At most 16, each 1 to 256 bytes.
   */
  stop?: string[];
  /**
   * Structured output: the text matches this Lark grammar (llguidance's syntax), regex, or
   * JSON schema (an object, `true`, or its JSON text), on every engine and with every drafter;
   * tokens the grammar forces are free drafts (`provenance: 'forced'`). A schema or grammar
   * that cannot be compiled is the error `grammar`, before any token is generated.
   */
  grammar?: GrammarOption;
  /** Report each token's log-probability in `result.logprobs` (default false). */
  logprobs?: boolean;
  /** With `logprobs`: the most likely alternatives listed per token, 0 (the default) to 20. */
  topLogprobs?: number;
  /** OpenAI's: subtracted from a token's logit per time it was generated, -2 to 2 (default 0). */
  frequencyPenalty?: number;
  /** OpenAI's: subtracted from a token's logit once it was generated, -2 to 2 (default 0). */
  presencePenalty?: number;
  /** Token id -> bias added to its logit, -100 to 100 (-100 bans the token). */
  logitBias?: Record<string, number>;
  /**
   * Functions the model may call, rendered into the prompt by the chat template (needs
   * messages or `chat: true`). With a `toolChoice` other than 'none' the result has `content`
   * and `tool_calls`.
   */
  tools?: readonly ChatCompletionFunctionTool[];
  /** OpenAI's tool_choice: 'auto' (the default), 'none', 'required' or one function by name. */
  toolChoice?: ChatCompletionToolChoiceOption;
  /** Whether one reply may make several calls (default true). */
  parallelToolCalls?: boolean;
  /** Aborting stops the generation after the token being verified. */
  signal?: AbortSignal;
}

/** A function the model may call (OpenAI's `ChatCompletionFunctionTool`). */
export interface ChatCompletionFunctionTool {
  type: 'function';
  function: {
    /** Letters, digits, '_' and '-'. */
    name: string;
    description?: string;
    /** A JSON schema of the arguments (an object); the call's arguments match it. */
    parameters?: Record<string, unknown>;
    strict?: boolean | null;
  };
}

/** 'required': at least one call; a named function: a call of it. */
export type ChatCompletionToolChoiceOption =
  | 'none'
  | 'auto'
  | 'required'
  | { type: 'function'; function: { name: string } };

/** One token's log-probability (`result.logprobs`). */
export interface TokenLogprob {
  /** The token id. */
  token: number;
  /** Its text (bytes of an unfinished character read as U+FFFD). */
  text: string;
  /** Its bytes. */
  bytes: number[];
  logprob: number;
  /** With `topLogprobs`: the most likely tokens at its position, most likely first. */
  top_logprobs: { token: number; text: string; bytes: number[]; logprob: number }[];
}

/** Exactly one of a Lark grammar, a regex or a JSON schema (`json_schema` is read too). */
export type GrammarOption =
  | { lark: string }
  | { regex: string }
  | { jsonSchema: Record<string, unknown> | boolean | string }
  | { json_schema: Record<string, unknown> | boolean | string };

/** One verified token. */
export interface Chunk {
  /**
   * The text this token releases ("" for end tokens, unfinished characters and text held back
   * because it could start a stop string).
   */
  text: string;
  /** Undefined only for a last chunk of held-back text after the final token. */
  token: number | undefined;
  /** Proposed by the drafter (or forced by the grammar) and accepted by the model. */
  fromDraft: boolean;
  /**
   * Where the token came from, as `result.provenance`: "draft", "forced" (the only token the
   * grammar allowed, verified as a free draft) or "target".
   */
  provenance: 'draft' | 'forced' | 'target';
  /** With `logprobs`: the token's entry of `result.logprobs`. */
  logprob?: TokenLogprob;
}

/** The same fields as `runahead generate --json` prints. */
export interface GenerationStats {
  prompt_tokens: number;
  /** Leading prompt tokens reused from the previous generation's cache. */
  cached_tokens: number;
  generated_tokens: number;
  /** Forward passes of the model after the prompt. */
  target_forwards: number;
  drafted: number;
  accepted: number;
  prefill_seconds: number;
  decode_seconds: number;
  /** Timing the GPU behind a long context for `depth: "auto"` (once per loaded model), not in `decode_seconds`. */
  calibration_seconds: number;
  /** Token masks the grammar computed (one per picked or verified position; 0 without `grammar` or `response_format`). */
  masks: number;
  /** Time computing those masks (inside `prefill_seconds` and `decode_seconds`); `mask_seconds / masks` is the mean per mask. */
  mask_seconds: number;
  /** Generated tokens over decoding time (prefill excluded). */
  tokens_per_second: number;
  /** The engine that generated: 'gpu' (WebGPU) or 'cpu'. */
  backend: 'gpu' | 'cpu';
  draft: string;
  stop_reason: 'end_of_text' | 'max_tokens' | 'context_full' | 'cancelled' | 'stop';
  /** Accepted over drafted tokens (0 without drafts). */
  acceptance_rate: number;
  /** Accepted draft tokens per verified draft. */
  mean_accepted_length: number;
  /** Target forward passes per generated token (1 for plain decoding, lower is better). */
  target_forwards_per_token: number;
  /** Per drafter that proposed (auto lists the ones it chose). */
  drafters: { name: string; steps: number; drafted: number; accepted: number; draft_seconds: number }[];
}

export interface GenerationResult {
  tokens: number[];
  text: string;
  stats: GenerationStats;
  /**
   * Per token: "draft" (proposed and accepted), "forced" (the only token the grammar allowed,
   * verified as a free draft) or "target" (the model's own next token).
   */
  provenance: ('draft' | 'forced' | 'target')[];
  /**
   * With `logprobs`: one per token, the log-softmax of the logits it was picked from after the
   * bias, the penalties and a grammar's mask, at the sampling temperature (1 when greedy),
   * before top-k and top-p; the same with and without speculative decoding.
   */
  logprobs?: TokenLogprob[];
  /** With `tools` (and a toolChoice other than 'none'): the reply's text without its calls. */
  content?: string;
  /** With `tools`: the calls the reply made, `arguments` as JSON text. */
  tool_calls?: { name: string; arguments: string }[];
}

export interface Generation extends AsyncIterable<Chunk> {
  readonly result: Promise<GenerationResult>;
  readonly stats: Promise<GenerationStats>;
  cancel(): void;
}

export interface ModelInfo {
  name?: string;
  architecture: string;
  layers: number;
  embedding: number;
  feedForward: number;
  heads: number;
  kvHeads: number;
  vocab: number;
  /** KV cache size of this engine, in tokens. */
  context: number;
  trainedContext: number;
  parameters: number;
  /** Tensor count per GGML type. */
  tensorTypes: Record<string, number>;
  chatTemplate: boolean;
  bos?: number;
  eos?: number;
  endOfTurn?: number;
  /** The engine the model runs on. */
  backend: 'webgpu' | 'cpu';
  /** Why `backend: 'auto'` chose the CPU engine (no WebGPU, a fallback adapter, small limits). */
  backendReason?: string;
  /** The WebGPU adapter, or the CPU engine's kernels and threads ("CPU engine (simd128, 1 thread)"). */
  adapter: string;
  /** The CPU engine's threads (absent on WebGPU). */
  threads?: number;
  /** Why the CPU engine runs fewer threads than `threads` asked for (absent otherwise). */
  threadsReason?: string;
  /** The draft model, when one was loaded (it runs on the same backend and adapter). */
  draft?: DraftModelInfo;
}

/** `cpuPool()`. */
export interface CpuPoolStats {
  /** The threaded WebAssembly build runs this engine. */
  threaded: boolean;
  workers: number;
  stepsJoined: number;
}

/** `info().draft`. */
export interface DraftModelInfo {
  name?: string;
  architecture: string;
  parameters: number;
  layers: number;
  embedding: number;
  vocab: number;
  /** KV cache size, in tokens: the target's, capped by the draft's trained context. */
  context: number;
  /** Tensor count per GGML type. */
  tensorTypes: Record<string, number>;
}

/**
 * One message as the engine reads it (`generate(messages)`), rendered by the model's chat
 * template: `name`, an assistant's `tool_calls` and a tool result's `tool_call_id` are passed
 * to the template as given (HF templates read `tool_calls[i].function.arguments` as an object).
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  name?: string;
  tool_calls?: readonly unknown[];
  tool_call_id?: string;
}

// The OpenAI SDK's shapes, as `chat` and `chat.completions.create` read them: a value typed
// with the SDK's own types (`ChatCompletionMessageParam`, `ChatCompletionCreateParams`) is
// assignable to these, and a `ChatCompletion` / `ChatCompletionChunk` of this package to the
// SDK's (tests/openai-types checks both against the real `openai` types). README.md, "Porting
// from the OpenAI SDK", says what each field does here.

export interface ChatCompletionContentPartText {
  type: 'text';
  text: string;
}

/** In an earlier assistant message: read as its text. */
export interface ChatCompletionContentPartRefusal {
  type: 'refusal';
  refusal: string;
}

/** Image, audio and file parts: refused with `invalid_messages` (the model reads text). */
export interface ChatCompletionContentPartOther {
  type: 'image_url' | 'input_audio' | 'file';
  image_url?: unknown;
  input_audio?: unknown;
  file?: unknown;
}

/** Text parts are joined with newlines. */
export type ChatCompletionTextContent = string | readonly ChatCompletionContentPartText[];

/** `developer` is read as `system`. */
export interface ChatCompletionSystemMessageParam {
  role: 'system' | 'developer';
  content: ChatCompletionTextContent;
  name?: string;
}

export interface ChatCompletionUserMessageParam {
  role: 'user';
  content: string | readonly (ChatCompletionContentPartText | ChatCompletionContentPartOther)[];
  name?: string;
}

/** A function tool call of an earlier assistant turn (`custom` ones are refused). */
export type ChatCompletionMessageToolCall =
  | { id: string; type: 'function'; function: { name: string; arguments: string } }
  | { id: string; type: 'custom'; custom: { name: string; input: string } };

export interface ChatCompletionAssistantMessageParam {
  role: 'assistant';
  /** null or absent: '' (or `refusal`, when given). */
  content?: string | readonly (ChatCompletionContentPartText | ChatCompletionContentPartRefusal)[] | null;
  name?: string;
  refusal?: string | null;
  /** Passed to the chat template, `function.arguments` parsed from JSON into an object. */
  tool_calls?: readonly ChatCompletionMessageToolCall[];
  /** Refused when set (deprecated by OpenAI: use `tool_calls`). */
  function_call?: unknown;
  /** Refused when set (an earlier audio answer cannot be read back). */
  audio?: unknown;
}

/** A tool's result, passed to the chat template with its `tool_call_id`. */
export interface ChatCompletionToolMessageParam {
  role: 'tool';
  content: ChatCompletionTextContent;
  tool_call_id: string;
}

/** Refused (`invalid_messages`): OpenAI's deprecated function role; send a `tool` message. */
export interface ChatCompletionFunctionMessageParam {
  role: 'function';
  content: string | null;
  name: string;
}

export type ChatCompletionMessageParam =
  | ChatCompletionSystemMessageParam
  | ChatCompletionUserMessageParam
  | ChatCompletionAssistantMessageParam
  | ChatCompletionToolMessageParam
  | ChatCompletionFunctionMessageParam;

/**
 * `model.chat.completions.create` request: every field of the OpenAI SDK's
 * `ChatCompletionCreateParams`, and runahead's `top_k`, `draft`, `depth` and `signal`. `null`
 * means unset, and a key set to `undefined` is absent.
 */
export interface ChatCompletionCreateParamsBase {
  messages: readonly ChatCompletionMessageParam[];
  /** Ignored: the loaded model answers (the response's `model` names it). */
  model?: string;
  stream?: boolean | null;
  /** `include_usage`: a last chunk with `choices: []` and the usage; `include_obfuscation` is ignored. */
  stream_options?: { include_usage?: boolean; include_obfuscation?: boolean } | null;
  /** Default: no limit but the context's (as OpenAI's). */
  max_completion_tokens?: number | null;
  /** Same as max_completion_tokens, which wins when both are set. */
  max_tokens?: number | null;
  /** 0 to 2, default 1 (as OpenAI's; `generate`'s default is 0). 0 is greedy. */
  temperature?: number | null;
  /** 0 to 1, default 1; 0 keeps only the most likely token. */
  top_p?: number | null;
  /** Any safe integer; default a fresh random seed per request (`runahead.seed` says which). */
  seed?: number | null;
  /** At most 16 strings of 1 to 256 bytes. */
  stop?: string | readonly string[] | null;
  /** 1 to 16 choices, generated one after another (seeds seed, seed + 1, ...); more than 1 is not streamed. */
  n?: number | null;

  /** Accepted and ignored (nothing leaves the page). */
  user?: string;
  /** Accepted and ignored (nothing is stored). */
  store?: boolean | null;
  /** Accepted and ignored. */
  metadata?: Record<string, string> | null;
  /** Accepted and ignored. */
  service_tier?: string | null;
  /** Accepted and ignored. */
  safety_identifier?: string | null;
  /** Accepted and ignored (the engine reuses a shared prompt prefix by itself). */
  prompt_cache_key?: string | null;
  /** Accepted and ignored. */
  prompt_cache_options?: unknown;
  /** Accepted and ignored. */
  prompt_cache_retention?: string | null;
  /** Whether one reply may make several calls (default true). */
  parallel_tool_calls?: boolean;
  /** Accepted and ignored: a latency hint, the text is the same without it. */
  prediction?: unknown;

  /** Refused unless ['text']: only text is generated. */
  modalities?: readonly ('text' | 'audio')[] | null;
  /** Refused when set: no audio output. */
  audio?: unknown;
  /** -2 to 2 (OpenAI's formula over the generated tokens). */
  frequency_penalty?: number | null;
  /** -2 to 2. */
  presence_penalty?: number | null;
  /** Token id -> -100 to 100. */
  logit_bias?: Record<string, number> | null;
  /**
   * The choice's `logprobs.content`. Streamed: each content chunk has those of the tokens whose
   * text it carries; the rest (a stop string's tokens, a reply with tools) come on the chunk
   * with the finish_reason.
   */
  logprobs?: boolean | null;
  /** 0 to 20, with `logprobs`. */
  top_logprobs?: number | null;
  /**
   * 'json_object': the content is a JSON object; 'json_schema': it matches `json_schema.schema`
   * (constrained token by token, `strict` or not; speculative decoding stays on).
   */
  response_format?: ResponseFormat | null;
  /**
   * Functions the model may call: rendered by the chat template, each call constrained to a
   * defined function and its parameters' schema (speculative decoding stays on). A reply that
   * calls has `message.tool_calls` and finish_reason 'tool_calls'. Custom (free-text) tools
   * are refused.
   */
  tools?: readonly (ChatCompletionFunctionTool | { type: 'custom'; custom: unknown })[];
  /** OpenAI's; `allowed_tools` and custom tools are refused. */
  tool_choice?:
    | ChatCompletionToolChoiceOption
    | { type: 'allowed_tools'; allowed_tools: unknown }
    | { type: 'custom'; custom: { name: string } };
  /** Refused unless empty (deprecated by OpenAI). */
  functions?: readonly unknown[];
  /** Refused unless 'none' or 'auto' (deprecated by OpenAI). */
  function_call?: 'none' | 'auto' | { name: string };
  /** Refused unless 'none'. */
  reasoning_effort?: string | null;
  /** Refused when set. */
  verbosity?: string | null;
  /** Refused when set. */
  web_search_options?: unknown;
  /** Refused when set. */
  moderation?: unknown;

  /** runahead: 0 (the default) keeps every token. */
  top_k?: number;
  /** runahead: the drafter (see GenerateOptions); the text is the same with any. */
  draft?: GenerateOptions['draft'];
  /** runahead: draft tokens verified per step. */
  depth?: GenerateOptions['depth'];
  /** runahead: as create's `{signal}`. */
  signal?: AbortSignal;
  /** runahead: generate's `grammar` (a Lark grammar, a regex or a schema); not with response_format. */
  grammar?: GrammarOption;
}

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | {
      type: 'json_schema';
      json_schema: { name: string; description?: string; schema?: Record<string, unknown>; strict?: boolean | null };
    };

export interface ChatCompletionCreateParamsNonStreaming extends ChatCompletionCreateParamsBase {
  stream?: false | null;
}

export interface ChatCompletionCreateParamsStreaming extends ChatCompletionCreateParamsBase {
  stream: true;
}

export type ChatCompletionCreateParams = ChatCompletionCreateParamsNonStreaming | ChatCompletionCreateParamsStreaming;

/** The former name of ChatCompletionCreateParams. */
export type ChatCompletionRequest = ChatCompletionCreateParams;

/** create's second argument, as the SDK's request options (other keys are ignored). */
export interface ChatCompletionRequestOptions {
  /** Aborting it cancels the generation: before the response, create() rejects with `cancelled`. */
  signal?: AbortSignal | null;
}

/**
 * OpenAI's values: end_of_text, stop and cancelled give 'stop'; max_tokens and context_full
 * 'length'. The engine's own reason is `runahead.stop_reason`.
 */
export type FinishReason = 'stop' | 'length' | 'tool_calls';

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** cached_tokens: leading prompt tokens reused from the previous turn's cache. */
  prompt_tokens_details: { cached_tokens: number };
}

/** runahead's extension of a response: why it stopped, the seed, the engine's statistics. */
export interface RunaheadExtension {
  /** The engine's stop reason ('cancelled' when the request was aborted mid-stream). */
  stop_reason: GenerationStats['stop_reason'];
  /** The seed sampled with (the request's, or the fresh one drawn for it). */
  seed: number;
  stats: GenerationStats;
  provenance: GenerationResult['provenance'];
  tokens: number[];
  /** With `n` > 1: each choice's own (the fields above are the first choice's). */
  choices?: Omit<RunaheadExtension, 'choices'>[];
}

export interface ChatCompletionMessage {
  role: 'assistant';
  /** null when the reply is tool calls only. */
  content: string | null;
  refusal: null;
  /** The calls the reply made (with `tools`), each with the id a `tool` message answers. */
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
}

/** OpenAI's `ChatCompletionTokenLogprob`. */
export interface ChatCompletionTokenLogprob {
  token: string;
  bytes: number[] | null;
  logprob: number;
  top_logprobs: { token: string; bytes: number[] | null; logprob: number }[];
}

/** A choice's `logprobs` when the request asked for them (else null). */
export interface ChatCompletionLogprobs {
  content: ChatCompletionTokenLogprob[] | null;
  refusal: ChatCompletionTokenLogprob[] | null;
}

export interface ChatCompletionChoice {
  index: number;
  message: ChatCompletionMessage;
  logprobs: ChatCompletionLogprobs | null;
  finish_reason: FinishReason;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: ChatCompletionChoice[];
  usage: ChatCompletionUsage;
  runahead: RunaheadExtension;
}

export interface ChatCompletionChunkChoice {
  index: number;
  /**
   * The first chunk: `{role: 'assistant', content: '', refusal: null}`; then `{content}`; the
   * last `{}`. A reply that may call tools is read whole first: its `{content}` and
   * `{tool_calls}` chunks come just before the last.
   */
  delta: {
    role?: 'assistant';
    content?: string;
    refusal?: null;
    tool_calls?: { index: number; id: string; type: 'function'; function: { name: string; arguments: string } }[];
  };
  /**
   * With `logprobs`: on a content chunk, those of the tokens whose text `delta.content` is (a
   * token that releases no text waits for the next chunk with text); on the chunk with the
   * finish_reason, those no content chunk carried; null when there are none. Concatenated,
   * the whole list the non-streamed result has.
   */
  logprobs: ChatCompletionLogprobs | null;
  /** null until the last chunk that has a choice. */
  finish_reason: FinishReason | null;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  /** Empty in the usage chunk (`stream_options.include_usage`). */
  choices: ChatCompletionChunkChoice[];
  /** With `stream_options.include_usage`: null, but in the last chunk. */
  usage?: ChatCompletionUsage | null;
  /** On the chunk with the finish_reason. */
  runahead?: RunaheadExtension;
}

/**
 * A streamed completion, as the SDK's Stream: iterate it once with `for await`. Leaving the
 * loop at any chunk (break, return, throw) cancels the generation and waits until the engine
 * is free; aborting `controller` stops it after the token being verified (the stream then
 * ends with `runahead.stop_reason: 'cancelled'`).
 */
export interface ChatCompletionStream extends AsyncIterable<ChatCompletionChunk> {
  readonly controller: AbortController;
}

export interface Chat {
  /** `generate` on a conversation (OpenAI's message shapes are read as create reads them). */
  (messages: readonly ChatCompletionMessageParam[], options?: GenerateOptions): Generation;
  completions: {
    /**
     * Errors (a bad field, the conversation, a prompt too long, `busy`) reject the returned
     * promise itself, streamed or not: a stream is handed over once its first token is out.
     * A request that is aborted before it completes rejects with `cancelled`.
     */
    create(body: ChatCompletionCreateParamsStreaming, options?: ChatCompletionRequestOptions): Promise<ChatCompletionStream>;
    create(body: ChatCompletionCreateParamsNonStreaming, options?: ChatCompletionRequestOptions): Promise<ChatCompletion>;
    create(body: ChatCompletionCreateParamsBase, options?: ChatCompletionRequestOptions): Promise<ChatCompletionStream | ChatCompletion>;
  };
}

export class Runahead {
  private constructor();
  /** The model cache (shared by every Runahead of this origin). */
  static readonly cache: ModelCache;
  /** Reads only the GGUF header and says whether the model runs and fits here (README.md). */
  static probe(source: ModelSource, options?: ProbeOptions): Promise<ModelProbe>;
  /**
   * A URL is fetched (or read from the model cache) where the engine runs; a File/Blob is sent
   * to the worker as a handle; an ArrayBuffer (or the whole buffer of a typed array) is
   * transferred to the worker, which leaves the caller's buffer detached.
   */
  static load(source: ModelSource, options?: LoadOptions): Promise<Runahead>;
  /** Read once at load: no round trip to the worker. */
  info(): ModelInfo;
  /** A promise in both modes (the tokenizer may be in the worker). */
  tokenize(text: string): Promise<number[]>;
  /** Whether the engine runs in a worker. */
  readonly inWorker: boolean;
  /** Where the model's bytes came from. */
  readonly loadedFrom: 'network' | 'cache' | 'file' | 'bytes';
  readonly generating: boolean;
  /** Same as `generating`. */
  readonly busy: boolean;
  generate(prompt: string | readonly ChatMessage[], options?: GenerateOptions): Generation;
  /** `chat(messages, options)`, and the OpenAI-shaped `chat.completions.create`. */
  readonly chat: Chat;
  /** Forgets the suffix drafter's earlier answers, in the engine and in the origin's storage. */
  clearHistory(): Promise<void>;
  cancel(): void;
  /** Bytes of the WebAssembly memory of the thread that runs this engine. */
  wasmMemoryBytes(): Promise<number>;
  /**
   * The CPU engine's pool in the thread that runs this engine: the Web Workers that joined it
   * and the parallel steps they took part in (both 0 on one thread).
   */
  cpuPool(): Promise<CpuPoolStats>;
  /** Frees the engine, the draft model's included (in a worker: ends the worker). */
  dispose(): void;
}

export function initialize(wasmUrl?: string | URL): Promise<unknown>;

/**
 * Whether this browser runs WebAssembly relaxed SIMD (Chrome 114 on). The package then loads
 * the builds whose CPU kernels multiply with its integer dot product (`runahead_relaxed_bg.wasm`:
 * the same tokens, faster; `info().adapter` names the kernels "simd128+relaxed"); elsewhere, or
 * when the relaxed file does not load, the plain SIMD builds.
 */
export function relaxedSimd(): boolean;

/**
 * Bytes of the page thread's WebAssembly memory (it only grows: after a load, its peak); 0
 * before init. A worker engine's memory: `model.wasmMemoryBytes()`.
 */
export function wasmMemoryBytes(): Promise<number>;

export default Runahead;
