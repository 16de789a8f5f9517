/** Stable error codes (see README.md, "Errors"). */
export type RunaheadErrorCode =
  | 'no_webgpu'
  | 'adapter_limits'
  | 'device_lost'
  | 'out_of_memory'
  | 'gpu'
  | 'gguf'
  | 'unsupported_model'
  | 'chat_template'
  | 'tokenizer'
  | 'empty_prompt'
  | 'prompt_too_long'
  | 'invalid_sampling'
  | 'invalid_option'
  | 'cancelled'
  | 'busy'
  | 'fetch'
  | 'invalid_source'
  | 'wasm'
  | 'internal';

export class RunaheadError extends Error {
  readonly name: 'RunaheadError';
  readonly code: RunaheadErrorCode;
}

export interface LoadProgress {
  /** Bytes read so far. */
  loaded: number;
  /** Size of the model in bytes, when known. */
  total?: number;
}

export interface LoadOptions {
  /** KV cache size in tokens (default 4096, capped by the model's trained context). */
  context?: number;
  /**
   * Which engine runs the model. 'auto' (default): WebGPU when its adapter is a hardware one
   * whose limits suffice, else the CPU engine (WebAssembly SIMD, one thread), which is also
   * faster than a software (fallback) WebGPU adapter. 'webgpu': WebGPU or the error
   * `no_webgpu`. 'cpu': the CPU engine.
   */
  backend?: 'auto' | 'webgpu' | 'cpu';
  onProgress?: (progress: LoadProgress) => void;
  signal?: AbortSignal;
  /** Where to fetch runahead_bg.wasm from (default: next to this package's files). */
  wasmUrl?: string | URL;
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
  /** Drafter for speculative decoding; the output is the same with any drafter. */
  draft?: 'none' | 'ngram' | 'suffix' | 'auto';
  /**
   * Draft tokens verified per step: "auto" (the default: the device's verification cost,
   * measured once per model, weighed against the running acceptance) or a fixed number.
   */
  depth?: 'auto' | number;
  /** Wrap the prompt in the model's chat template as one user message. */
  chat?: boolean;
  /** Aborting stops the generation after the token being verified. */
  signal?: AbortSignal;
}

/** One verified token. */
export interface Chunk {
  /** The text this token completes ("" for end tokens and unfinished characters). */
  text: string;
  token: number;
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
  stop_reason: 'end_of_text' | 'max_tokens' | 'context_full' | 'cancelled';
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
}

export class Runahead {
  private constructor();
  static load(
    source: string | URL | Blob | ArrayBuffer | ArrayBufferView,
    options?: LoadOptions,
  ): Promise<Runahead>;
  info(): ModelInfo;
  tokenize(text: string): number[];
  readonly generating: boolean;
  generate(prompt: string, options?: GenerateOptions): Generation;
  cancel(): void;
  dispose(): void;
}

export function initialize(wasmUrl?: string | URL): Promise<unknown>;

/** Bytes of the WebAssembly memory (it only grows: after a load, its peak); 0 before init. */
export function wasmMemoryBytes(): Promise<number>;

export default Runahead;
