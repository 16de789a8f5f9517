// Compare: one prompt generated twice with the same options, with the chosen drafter and then
// without one, shown side by side with both speeds, the speedup and whether the texts match.
// Speculation goes first so that its drafter cannot copy the plain run's answer.

import { $, appendChunk, rate } from './ui.js';
import { Tracker } from './live.js';

function lane(side) {
  return { output: $(`${side}-output`), speed: $(`${side}-speed`), meta: $(`${side}-meta`) };
}

function describe(s) {
  const parts = [`${s.generated_tokens} tokens`, `${s.target_forwards} forward passes`];
  if (s.drafted > 0) parts.push(`${s.accepted}/${s.drafted} drafted accepted`);
  // `auto` picks a drafter per step: say which ones proposed, and how well.
  if (s.drafters.length > 1) {
    parts.push(s.drafters.map((d) => `${d.name} ${d.accepted}/${d.drafted} in ${d.steps} steps`).join(', '));
  }
  parts.push(s.stop_reason.replaceAll('_', ' '));
  return parts.join(' · ');
}

async function runSide(model, side, prompt, options, plot) {
  const { output, speed, meta } = lane(side);
  output.closest('.lane').dataset.state = 'generating';
  const tracker = new Tracker(plot, side, side === 'on' ? `speculation on (${options.draft})` : 'speculation off');
  const generation = model.generate(prompt, options);
  try {
    for await (const chunk of generation) {
      appendChunk(output, chunk);
      tracker.token(chunk);
    }
    const result = await generation.result;
    tracker.done(result.stats);
    speed.textContent = `${rate(result.stats.tokens_per_second)} tok/s`;
    speed.dataset.value = result.stats.tokens_per_second;
    meta.textContent = describe(result.stats);
    output.closest('.lane').dataset.state = 'done';
    return result;
  } catch (e) {
    tracker.failed();
    output.closest('.lane').dataset.state = 'error';
    throw e;
  }
}

function reset(drafter) {
  for (const side of ['off', 'on']) {
    const { output, speed, meta } = lane(side);
    output.replaceChildren();
    speed.textContent = '…';
    delete speed.dataset.value;
    meta.textContent = '';
    output.closest('.lane').dataset.state = 'idle';
  }
  $('on-drafter').textContent = drafter;
  $('compare-speedup').textContent = '…';
  const identical = $('compare-identical');
  identical.textContent = '';
  identical.className = 'identical';
}

// Greedy decoding is the same with any drafter; sampling keeps the distribution, not the sample.
function showVerdict(on, off, greedy) {
  const same = on.text === off.text && on.tokens.join() === off.tokens.join();
  const identical = $('compare-identical');
  identical.dataset.same = same;
  if (same) {
    identical.textContent = '✓ identical texts';
    identical.className = 'identical same';
  } else if (greedy) {
    identical.textContent = '✗ the texts differ: greedy decoding should not (please report it)';
    identical.className = 'identical differ';
  } else {
    identical.textContent = '≠ different samples: when sampling, speculation keeps the model\'s ' +
      'distribution, not the sample (which depends on the drafts)';
    identical.className = 'identical sampled';
  }
  const cancelled = [on, off].some((r) => r.stats.stop_reason === 'cancelled');
  const speedup = on.stats.tokens_per_second / off.stats.tokens_per_second;
  $('compare-speedup').textContent = cancelled || !Number.isFinite(speedup) ? '–' : `${speedup.toFixed(2)}×`;
}

/** Runs both sides; resolves when both ended (or rejects with the first failure). */
export async function runCompare(model, options, plot, signal) {
  const drafter = options.draft === 'none' ? 'auto' : options.draft;
  const prompt = $('compare-prompt').value;
  const chat = $('chat').checked;
  const summary = $('compare-summary');
  reset(drafter);
  plot.clear();
  summary.dataset.state = 'running';
  try {
    const on = await runSide(model, 'on', prompt, { ...options, chat, draft: drafter, signal }, plot);
    if (signal.aborted) {
      summary.dataset.state = 'cancelled';
      $('compare-speedup').textContent = '–';
      $('off-speed').textContent = 'not run';
      return;
    }
    const off = await runSide(model, 'off', prompt, { ...options, chat, draft: 'none', signal }, plot);
    showVerdict(on, off, !(options.temperature > 0));
    summary.dataset.state = 'done';
  } catch (e) {
    summary.dataset.state = 'error';
    $('compare-speedup').textContent = '–';
    throw e;
  }
}
