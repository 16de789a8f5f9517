// The live plot: tokens/s (a line per generation) and the drafted tokens accepted at each
// verification step (a bar over the tokens that step produced), against tokens generated.
// Inline SVG drawn from scratch, styled by the page's CSS (light and dark).

const SVG = 'http://www.w3.org/2000/svg';
const HEIGHT = 190;
const PAD = { left: 40, right: 34, top: 12, bottom: 26 };
// tokens/s at a step is measured over the last WINDOW steps (a step's tokens arrive together).
const WINDOW = 6;

function element(name, attributes, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

// A round axis maximum at or above `value`.
function niceCeiling(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  const step = [1, 2, 2.5, 5, 10].find((s) => s * power >= value);
  return step * power;
}

/** One generation's verification steps, fed from its streamed chunks. */
export class Series {
  constructor(kind) {
    this.kind = kind; // 'off', 'on' or 'chat': its colour
    this.steps = []; // {t: seconds since the first token, tokens: generated so far, accepted}
    this.start = 0;
    this.pending = 0;
  }

  /** A streamed chunk: accepted draft tokens come first, the target's own token ends the step. */
  add(chunk, now) {
    if (chunk.token === undefined) return false;
    if (chunk.fromDraft) {
      this.pending += 1;
      return false;
    }
    if (this.steps.length === 0) this.start = now;
    const tokens = (this.steps.at(-1)?.tokens ?? 0) + this.pending + 1;
    this.steps.push({ t: (now - this.start) / 1000, tokens, accepted: this.pending });
    this.pending = 0;
    return true;
  }

  /** tokens/s at step `i`, over the last WINDOW steps; undefined for the first. */
  rateAt(i) {
    if (i === 0) return undefined;
    const from = this.steps[Math.max(0, i - WINDOW)];
    const to = this.steps[i];
    const seconds = to.t - from.t;
    return seconds > 0 ? (to.tokens - from.tokens) / seconds : undefined;
  }
}

export class LivePlot {
  #svg;
  #series = [];
  #frame = 0;

  constructor(svg) {
    this.#svg = svg;
    new ResizeObserver(() => this.#draw()).observe(svg);
    this.#draw();
  }

  clear() {
    this.#series = [];
    this.#schedule();
  }

  /** A new line (and bars) on the plot, fed through `Series.add` and `update`. */
  begin(kind) {
    const series = new Series(kind);
    this.#series.push(series);
    this.#schedule();
    return series;
  }

  update() {
    this.#schedule();
  }

  #schedule() {
    if (this.#frame) return;
    this.#frame = requestAnimationFrame(() => {
      this.#frame = 0;
      this.#draw();
    });
  }

  #draw() {
    const width = Math.max(240, this.#svg.clientWidth || 600);
    const svg = this.#svg;
    svg.setAttribute('viewBox', `0 0 ${width} ${HEIGHT}`);
    svg.replaceChildren();
    const plotW = width - PAD.left - PAD.right;
    const plotH = HEIGHT - PAD.top - PAD.bottom;
    const all = this.#series.flatMap((s) => s.steps.map((step, i) => ({ step, rate: s.rateAt(i) })));
    const maxTokens = niceCeiling(Math.max(8, ...all.map((p) => p.step.tokens)));
    const maxRate = niceCeiling(Math.max(1, ...all.map((p) => p.rate ?? 0)));
    const maxAccepted = Math.max(4, ...all.map((p) => p.step.accepted));
    const x = (tokens) => PAD.left + (tokens / maxTokens) * plotW;
    const yRate = (r) => PAD.top + plotH - (r / maxRate) * plotH;
    const yAccepted = (a) => PAD.top + plotH - (a / maxAccepted) * plotH;

    if (all.length === 0) {
      svg.append(element('text', { class: 'placeholder', x: width / 2, y: HEIGHT / 2, 'text-anchor': 'middle' },
        'waiting for a generation'));
      return;
    }
    for (let i = 0; i <= 4; i += 1) {
      const value = (maxRate * i) / 4;
      const y = yRate(value);
      svg.append(element('line', { class: 'grid', x1: PAD.left, x2: width - PAD.right, y1: y, y2: y }));
      svg.append(element('text', { class: 'tick', x: PAD.left - 6, y: y + 4, 'text-anchor': 'end' },
        Number(value.toPrecision(3))));
    }
    for (const a of [0, maxAccepted]) {
      svg.append(element('text', { class: 'tick bar-tick', x: width - PAD.right + 6, y: yAccepted(a) + 4 }, a));
    }
    svg.append(element('text', { class: 'tick', x: PAD.left, y: HEIGHT - 6 }, '0'));
    svg.append(element('text', { class: 'tick', x: width - PAD.right, y: HEIGHT - 6, 'text-anchor': 'end' },
      `${maxTokens} tokens`));

    for (const series of this.#series) {
      let previous = 0;
      for (const step of series.steps) {
        if (step.accepted > 0) {
          const left = x(previous);
          svg.append(element('rect', {
            class: `bar ${series.kind}`,
            x: left + 0.5,
            y: yAccepted(step.accepted),
            width: Math.max(1.5, x(step.tokens) - left - 1),
            height: yAccepted(0) - yAccepted(step.accepted),
          }));
        }
        previous = step.tokens;
      }
    }
    for (const series of this.#series) {
      const points = series.steps
        .map((step, i) => [step.tokens, series.rateAt(i)])
        .filter(([, r]) => r !== undefined)
        .map(([tokens, r]) => `${x(tokens).toFixed(1)},${yRate(r).toFixed(1)}`);
      if (points.length > 0) {
        svg.append(element('polyline', { class: `line ${series.kind}`, points: points.join(' ') }));
        const [lx, ly] = points.at(-1).split(',');
        svg.append(element('circle', { class: `dot ${series.kind}`, cx: lx, cy: ly, r: 3 }));
      }
    }
  }
}
