/** Medians and the printed table. */
import { basename } from 'node:path';

/** The median of some numbers (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** One line of the table. */
export interface Row {
  readonly name: string;
  readonly seconds?: number;
  /** Seconds of the floor this row is compared with; the ratio printed is floor / seconds (higher is faster). */
  readonly floor?: number;
  readonly requests?: number;
  readonly note?: string;
}

const pad = (text: string, width: number, right = false): string => (right ? text.padStart(width) : text.padEnd(width));

/** A plain-text table: name, median seconds, speedup over the floor (floor / row: above 1 is faster), requests, note. */
export function table(rows: readonly Row[]): string {
  const head = ['', 'median s', 'speedup', 'requests', ''];
  const cells = rows.map((r) => [
    r.name,
    r.seconds === undefined ? '-' : r.seconds.toFixed(3),
    r.seconds === undefined || r.floor === undefined ? '' : `${(r.floor / r.seconds).toFixed(2)}x`,
    r.requests === undefined ? '' : String(Math.round(r.requests)),
    r.note ?? '',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c: string[]): string =>
    c
      .map((text, i) => pad(text, widths[i], i > 0 && i < 4))
      .join('  ')
      .trimEnd();
  return [line(head), ...cells.map(line)].join('\n');
}

/**
 * Whether node was started with the bench script `name` (its file name without extension), not just
 * loaded it: in the bench's bundle (`scripts/bench.mjs`) every module shares one `module`, so
 * `require.main === module` holds for all of them.
 */
export function startedAs(name: string): boolean {
  return basename(process.argv[1] ?? '').replace(/\.[cm]?[jt]s$/, '') === name;
}
