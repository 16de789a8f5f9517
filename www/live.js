// The "Live" card's numbers for the generation running now: counts while tokens stream, the
// engine's statistics once it ends. Every generation (a chat turn, either side of a compare)
// reports here and draws its series on the plot.

import { $, percent, rate } from './ui.js';

const IDS = ['stat-speed', 'stat-generated', 'stat-from-draft', 'stat-acceptance', 'stat-forwards',
  'stat-cached', 'stat-prefill', 'stat-stop'];

function set(id, value) {
  $(id).textContent = value;
}

/** Follows one generation: `token(chunk)` for each streamed chunk, then `done(stats)` or `failed()`. */
export class Tracker {
  #series;
  #plot;
  #count = 0;
  #fromDraft = 0;

  /** `subject` names the generation in the card's title ("chat turn 2", "speculation off"). */
  constructor(plot, kind, subject) {
    this.#plot = plot;
    $('live-subject').textContent = `· ${subject}`;
    this.#series = plot.begin(kind);
    for (const id of IDS) set(id, '–');
    $('stats').dataset.state = 'generating';
  }

  token(chunk) {
    if (chunk.token === undefined) return;
    this.#count += 1;
    this.#fromDraft += chunk.fromDraft ? 1 : 0;
    if (this.#series.add(chunk, performance.now())) this.#plot.update();
    const steps = this.#series.steps;
    if (steps.length > 1) {
      const seconds = steps.at(-1).t;
      set('stat-speed', rate((steps.at(-1).tokens - 1) / seconds));
    }
    set('stat-generated', this.#count);
    set('stat-from-draft', `${this.#fromDraft} (${percent(this.#fromDraft, this.#count)})`);
    // Every token the model picked itself, after the first, took one forward pass.
    set('stat-forwards', this.#count - this.#fromDraft - 1);
  }

  done(s) {
    set('stat-speed', rate(s.tokens_per_second));
    set('stat-generated', s.generated_tokens);
    set('stat-from-draft', `${s.accepted} (${percent(s.accepted, s.generated_tokens)})`);
    set('stat-acceptance', s.drafted > 0 ? `${s.accepted} of ${s.drafted} (${percent(s.accepted, s.drafted)})` : 'no drafts');
    set('stat-forwards', s.target_forwards);
    set('stat-prefill', `${s.prompt_tokens}, ${s.prefill_seconds.toFixed(2)} s`);
    set('stat-cached', `${s.cached_tokens} / ${s.prompt_tokens - s.cached_tokens}`);
    set('stat-stop', s.stop_reason);
    $('stats').dataset.state = 'done';
  }

  failed() {
    $('stats').dataset.state = 'error';
  }
}
