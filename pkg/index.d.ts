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
  | { type: 'cache_skipped'; reason: string; model: LoadedModel }
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
  /** Aborting stops the generation after the token being verified. */
  signal?: AbortSignal;
}

/** One verified token. */
export interface Chunk {
  /**
   * The text this token releases ("" for end tokens, unfinished characters and text held back
   * because it could start a stop string).
   */
  text: string;
  /** Undefined only for a last chunk of held-back text after the final token. */
  token: number | undefined;
  /** Proposed by the drafter and accepted by the model. */
  fromDraft: boolean;
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
  /** Per token: "draft" (proposed and accepted) or "target" (the model's own next token). */
  provenance: ('draft' | 'target')[];
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

/** One message of a conversation. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** `model.chat.completions.create` request (OpenAI's fields, plus runahead's top_k, draft, depth). */
export interface ChatCompletionRequest {
  messages: ChatMessage[];
  stream?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  seed?: number;
  stop?: string | string[];
  signal?: AbortSignal;
  /** Ignored (the loaded model answers). */
  model?: string;
  /** Only 1. */
  n?: 1;
  top_k?: number;
  draft?: GenerateOptions['draft'];
  depth?: GenerateOptions['depth'];
}

/** end_of_text and stop give 'stop'; max_tokens and context_full 'length'. */
export type FinishReason = 'stop' | 'length' | 'cancelled';

export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** cached_tokens: leading prompt tokens reused from the previous turn's cache. */
  prompt_tokens_details: { cached_tokens: number };
}

/** runahead's extension of a response: the engine's statistics and each token's provenance. */
export interface RunaheadExtension {
  stats: GenerationStats;
  provenance: GenerationResult['provenance'];
  tokens: number[];
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: [{ index: 0; message: { role: 'assistant'; content: string }; finish_reason: FinishReason }];
  usage: ChatCompletionUsage;
  runahead: RunaheadExtension;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: [{
    index: 0;
    delta: { role?: 'assistant'; content?: string };
    /** null until the last chunk. */
    finish_reason: FinishReason | null;
  }];
  /** On the last chunk only. */
  usage?: ChatCompletionUsage;
  /** On the last chunk only. */
  runahead?: RunaheadExtension;
}

export interface Chat {
  /** `generate` on a conversation. */
  (messages: ChatMessage[], options?: GenerateOptions): Generation;
  completions: {
    create(request: ChatCompletionRequest & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
    create(request: ChatCompletionRequest & { stream?: false }): Promise<ChatCompletion>;
  };
}

export class Runahead {
  private constructor();
  /** The model cache (shared by every Runahead of this origin). */
  static readonly cache: ModelCache;
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
  generate(prompt: string | ChatMessage[], options?: GenerateOptions): Generation;
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
