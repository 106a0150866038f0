// A small SVG chart writer for reports: line charts (latency over time, percentile curves,
// memory per phone, reconnect curves) and bar charts. Output is standalone SVG 1.1 that a
// browser opens as is; every piece of text is XML-escaped.

export interface Series {
  name: string;
  points: Array<[number, number]>;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];
const M = { left: 70, right: 20, top: 40, bottom: 55 };

export function escapeXml(s: string): string {
  return s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);
}

/** About five round tick values covering [lo, hi]. */
export function ticks(lo: number, hi: number, want = 5): number[] {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [0];
  if (hi <= lo) hi = lo + 1;
  const raw = (hi - lo) / want;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  const first = Math.floor(lo / step + 1e-9);
  const last = Math.ceil(hi / step - 1e-9);
  for (let k = first; k <= last && out.length < 50; k++) out.push(Number((k * step).toPrecision(12)));
  return out;
}

function fmt(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  return String(+v.toPrecision(4));
}

function frame(o: ChartOptions, body: string[]): string {
  const w = o.width ?? 720;
  const h = o.height ?? 360;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="sans-serif" font-size="12">`,
    `<rect x="0" y="0" width="${w}" height="${h}" fill="#ffffff"/>`,
    `<text x="${w / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(o.title)}</text>`,
    `<text x="${M.left + (w - M.left - M.right) / 2}" y="${h - 12}" text-anchor="middle">${escapeXml(o.xLabel)}</text>`,
    `<text x="16" y="${M.top + (h - M.top - M.bottom) / 2}" text-anchor="middle" transform="rotate(-90 16 ${M.top + (h - M.top - M.bottom) / 2})">${escapeXml(o.yLabel)}</text>`,
    ...body,
    `</svg>`,
    '',
  ].join('\n');
}

function axes(o: ChartOptions, x: (v: number) => number, y: (v: number) => number, xt: number[], yt: number[]) {
  const w = o.width ?? 720;
  const h = o.height ?? 360;
  const out: string[] = [];
  for (const v of yt)
    out.push(
      `<line x1="${M.left}" x2="${w - M.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e0e0e0"/>`,
      `<text x="${M.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${fmt(v)}</text>`,
    );
  for (const v of xt)
    out.push(`<text x="${x(v).toFixed(1)}" y="${h - M.bottom + 16}" text-anchor="middle">${fmt(v)}</text>`);
  out.push(
    `<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${h - M.bottom}" stroke="#333"/>`,
    `<line x1="${M.left}" x2="${w - M.right}" y1="${h - M.bottom}" y2="${h - M.bottom}" stroke="#333"/>`,
  );
  return out;
}

export function lineChart(o: ChartOptions, series: Series[]): string {
  const w = o.width ?? 720;
  const h = o.height ?? 360;
  const pts = series.flatMap((s) => s.points).filter(([a, b]) => Number.isFinite(a) && Number.isFinite(b));
  const xs = pts.map((p) => p[0]);
  const ys = pts.map((p) => p[1]);
  const xt = ticks(xs.length ? Math.min(...xs) : 0, xs.length ? Math.max(...xs) : 1);
  const yt = ticks(Math.min(0, ...ys), ys.length ? Math.max(...ys) : 1);
  const [x0, x1] = [xt[0], xt[xt.length - 1] === xt[0] ? xt[0] + 1 : xt[xt.length - 1]];
  const [y0, y1] = [yt[0], yt[yt.length - 1] === yt[0] ? yt[0] + 1 : yt[yt.length - 1]];
  const x = (v: number) => M.left + ((v - x0) / (x1 - x0)) * (w - M.left - M.right);
  const y = (v: number) => h - M.bottom - ((v - y0) / (y1 - y0)) * (h - M.top - M.bottom);
  const body = axes(o, x, y, xt, yt);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const good = s.points.filter(([a, b]) => Number.isFinite(a) && Number.isFinite(b));
    if (good.length > 1)
      body.push(
        `<polyline fill="none" stroke="${color}" stroke-width="1.8" points="${good.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(' ')}"/>`,
      );
    else if (good.length === 1)
      body.push(`<circle cx="${x(good[0][0]).toFixed(1)}" cy="${y(good[0][1]).toFixed(1)}" r="3" fill="${color}"/>`);
    body.push(
      `<rect x="${M.left + 10}" y="${M.top + 4 + i * 16}" width="10" height="10" fill="${color}"/>`,
      `<text x="${M.left + 26}" y="${M.top + 13 + i * 16}">${escapeXml(s.name)}</text>`,
    );
  });
  if (!pts.length) body.push(`<text x="${w / 2}" y="${h / 2}" text-anchor="middle" fill="#888">no data</text>`);
  return frame(o, body);
}

export function barChart(o: ChartOptions, bars: Array<{ label: string; value: number }>): string {
  const w = o.width ?? 720;
  const h = o.height ?? 360;
  const vals = bars.map((b) => (Number.isFinite(b.value) ? b.value : 0));
  const yt = ticks(0, Math.max(1e-9, ...vals));
  const y1 = yt[yt.length - 1] || 1;
  const y = (v: number) => h - M.bottom - (v / y1) * (h - M.top - M.bottom);
  const slot = (w - M.left - M.right) / Math.max(1, bars.length);
  const body = axes(o, () => -100, y, [], yt);
  bars.forEach((b, i) => {
    const v = vals[i];
    const bx = M.left + i * slot + slot * 0.15;
    body.push(
      `<rect x="${bx.toFixed(1)}" y="${y(v).toFixed(1)}" width="${(slot * 0.7).toFixed(1)}" height="${(h - M.bottom - y(v)).toFixed(1)}" fill="${COLORS[i % COLORS.length]}"/>`,
      `<text x="${(bx + slot * 0.35).toFixed(1)}" y="${(y(v) - 4).toFixed(1)}" text-anchor="middle">${fmt(v)}</text>`,
      `<text x="${(bx + slot * 0.35).toFixed(1)}" y="${h - M.bottom + 16}" text-anchor="middle">${escapeXml(b.label)}</text>`,
    );
  });
  return frame(o, body);
}
