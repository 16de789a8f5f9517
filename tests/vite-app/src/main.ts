// A chat box on the packed `runahead` package: every call of its API, type-checked by
// `tsc --noEmit`, bundled by `vite build` (scripts/vite-app.sh) and run in Chromium
// (tests/e2e/vite-app.test.mjs). body[data-state] is "done" or "error" at the end.
import Default, {
  Runahead,
  RunaheadError,
  initialize,
  wasmMemoryBytes,
  type CachedModel,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatCompletionMessageParam,
  type Chunk,
  type CpuPoolStats,
  type DraftModelInfo,
  type GenerateOptions,
  type GenerationResult,
  type GenerationStats,
  type LoadEvent,
  type LoadOptions,
  type LoadProgress,
  type ModelInfo,
  type ModelSource,
  type RunaheadErrorCode,
} from 'runahead';

const status = document.querySelector<HTMLParagraphElement>('#status')!;
const output = document.querySelector<HTMLPreElement>('#output')!;
const MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';

function describeEvent(event: LoadEvent): string {
  switch (event.type) {
    case 'cache_hit':
    case 'cache_stored':
      return `${event.type} (${event.model}): ${event.url} (${event.size} bytes)`;
    case 'cache_fallback':
    case 'cache_error':
    case 'cache_skipped':
    case 'cache_unverified':
    case 'worker_fallback':
    case 'threads_fallback':
    case 'history_discarded':
    case 'history_unavailable':
      return `${event.type}: ${event.reason}`;
    case 'history_restored':
      return `${event.type}: ${event.outputs} earlier answers (${event.bytes} bytes)`;
  }
}

async function main(): Promise<void> {
  const stop = new AbortController();
  // SmolLM2 drafting for itself: the plumbing of a draft model (a real pair would be a smaller
  // model of the same tokenizer).
  const draft: ModelSource = MODEL;
  const options: LoadOptions = {
    context: 2048,
    draft,
    backend: 'auto',
    history: true,
    historyTokens: 4096,
    threads: 2,
    worker: true,
    cache: true,
    onProgress: ({ phase, loaded, total, model }: LoadProgress) => {
      status.textContent = `${phase} (${model ?? 'engine'}): ${loaded} / ${total ?? '?'} bytes`;
    },
    onEvent: (event) => console.info(describeEvent(event)),
    signal: stop.signal,
  };
  const model: Runahead = await Runahead.load(MODEL, options);
  const info: ModelInfo = model.info();
  const draftInfo: DraftModelInfo | undefined = info.draft;
  status.textContent = `${info.architecture}, ${info.parameters} parameters on ${info.backend}, ` +
    `${model.inWorker ? 'in a worker' : 'on the page'}, from ${model.loadedFrom}, ` +
    `drafted by ${draftInfo?.name ?? 'no model'} (${draftInfo?.parameters ?? 0} parameters)`;
  document.body.dataset.inWorker = String(model.inWorker);

  const ids: number[] = await model.tokenize('Hello');
  const generateOptions: GenerateOptions = {
    maxTokens: 4, temperature: 0.7, topK: 40, topP: 0.95, seed: 1,
    draft: 'auto', depth: 2, chat: true, signal: stop.signal,
  };
  const generation = model.generate('What is the capital of France?', generateOptions);
  console.assert(model.generating && model.busy, 'generating');
  for await (const chunk of generation as AsyncIterable<Chunk>) {
    output.append(chunk.fromDraft ? chunk.text.toUpperCase() : chunk.text);
  }
  const result: GenerationResult = await generation.result;
  const drafted: GenerationResult =
    await model.generate('Hello', { maxTokens: 4, draft: 'model', depth: 2 }).result;
  console.info(`draft model: ${drafted.stats.accepted}/${drafted.stats.drafted} accepted`);
  const stats: GenerationStats = await generation.stats;
  output.append(`\n${result.tokens.length} tokens (${ids.length} in "Hello"), ` +
    `${stats.tokens_per_second.toFixed(1)} tokens/s, ${stats.accepted}/${stats.drafted} accepted`);

  // Chat: a conversation, streamed OpenAI-style, then the follow-up turn (which reuses the
  // cached prefix) without streaming.
  const messages: ChatCompletionMessageParam[] = [
    { role: 'system', content: 'Answer briefly.' },
    { role: 'user', content: 'What is the capital of France?' },
  ];
  let answer = '';
  const stream: AsyncIterable<ChatCompletionChunk> = await model.chat.completions.create({
    messages, stream: true, stream_options: { include_usage: true }, max_tokens: 4, temperature: 0,
    stop: ['\n\n'],
  });
  for await (const chunk of stream) {
    // The last chunk (include_usage) has no choices, only the usage.
    answer += chunk.choices[0]?.delta.content ?? '';
    if (chunk.usage) output.append(`\ncached ${chunk.usage.prompt_tokens_details.cached_tokens}`);
  }
  messages.push({ role: 'assistant', content: answer }, { role: 'user', content: 'And of Italy?' });
  const reply: ChatCompletion = await model.chat.completions.create({ messages, max_tokens: 4 });
  output.append(`\n${reply.choices[0].message.content} (${reply.choices[0].finish_reason}, ` +
    `${reply.usage.prompt_tokens_details.cached_tokens} cached, ${reply.runahead.stats.backend})`);
  const turn = model.chat(messages, { maxTokens: 2, stop: ['.'] });
  for await (const chunk of turn) output.append(chunk.text);

  await model.clearHistory();
  const second = model.generate('And of Italy?', { maxTokens: 8 });
  second.cancel();
  model.cancel();
  await second.result.catch(() => undefined);

  const memory: number = (await model.wasmMemoryBytes()) + (await wasmMemoryBytes());
  const pool: CpuPoolStats = await model.cpuPool();
  const threadsReason: string | undefined = model.info().threadsReason;
  console.info(`cpu pool: threaded=${pool.threaded} workers=${pool.workers} steps=${pool.stepsJoined} ` +
    `threads=${model.info().threads} ${threadsReason ?? ''}`);
  const cached: CachedModel[] = await Runahead.cache.list();
  console.info(memory, cached.map((m) => `${m.url} ${m.size} ${m.storedAt}`));
  model.dispose();
  await Default.cache.delete(MODEL);
  await Runahead.cache.clear();
  await initialize();
  document.body.dataset.state = 'done';
}

main().catch((e: unknown) => {
  const code: RunaheadErrorCode | 'unknown' = e instanceof RunaheadError ? e.code : 'unknown';
  status.textContent = `${code}: ${e instanceof Error ? e.message : String(e)}`;
  document.body.dataset.state = 'error';
});
