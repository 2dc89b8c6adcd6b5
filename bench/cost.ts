/**
 * What the event path's S3 requests cost, by S3 Standard's request prices: reads (GET, HEAD) and writes
 * (PUT, COPY, POST, LIST) are billed per 1,000 requests at different prices; DELETE is not billed.
 */

/** S3 Standard, per 1,000 GET, HEAD and other read requests, in US dollars. */
export const READ_PRICE_PER_1K_REQUESTS = 0.0004;
/** S3 Standard, per 1,000 PUT, COPY, POST and LIST requests, in US dollars. */
export const WRITE_PRICE_PER_1K_REQUESTS = 0.005;

/** How S3 bills a request: `read` (GET, HEAD), `write` (PUT, COPY, POST, LIST) or `free` (DELETE). */
export type RequestClass = 'read' | 'write' | 'free';

/** The billing class of an S3 operation as the S3 model counts it. */
export function requestClass(operation: string): RequestClass {
  if (operation === 'GetObject' || operation === 'HeadObject' || operation === 'HeadBucket') return 'read';
  if (operation === 'DeleteObject' || operation === 'DeleteBucket') return 'free';
  return 'write';
}

/** Requests per 1,000 uploads by billing class, and their price. */
export interface UploadCost {
  readonly readsPer1kUploads: number;
  readonly writesPer1kUploads: number;
  readonly deletesPer1kUploads: number;
  /** US dollars per 1,000 uploads, the indexer's S3 requests only. */
  readonly dollarsPer1kUploads: number;
}

/** The cost of the requests counted by operation over `uploads` uploads. */
export function uploadCost(requestsByOperation: Readonly<Record<string, number>>, uploads: number): UploadCost {
  const by: Record<RequestClass, number> = { read: 0, write: 0, free: 0 };
  for (const [op, n] of Object.entries(requestsByOperation)) by[requestClass(op)] += n;
  const per1k = (n: number): number => (n / uploads) * 1000;
  return {
    readsPer1kUploads: per1k(by.read),
    writesPer1kUploads: per1k(by.write),
    deletesPer1kUploads: per1k(by.free),
    dollarsPer1kUploads: (per1k(by.read) * READ_PRICE_PER_1K_REQUESTS + per1k(by.write) * WRITE_PRICE_PER_1K_REQUESTS) / 1000,
  };
}

/** A cell of the freshness bench, as far as its cost goes. */
export interface CostedCell {
  readonly entries: number;
  readonly partitions: number;
  readonly layout: string;
  readonly burst: number;
  readonly uploads: number;
  readonly requestsPer1kUploads: number;
  readonly requestsByOperation: Readonly<Record<string, number>>;
}

/** One row of the cost table: the cell's shape and what its uploads cost. */
export type CostRow = Pick<CostedCell, 'entries' | 'partitions' | 'layout' | 'burst' | 'uploads' | 'requestsPer1kUploads'> & UploadCost;

/** The cost rows of some cells. */
export function costRows(cells: readonly CostedCell[]): CostRow[] {
  return cells.map((c) => ({
    entries: c.entries,
    partitions: c.partitions,
    layout: c.layout,
    burst: c.burst,
    uploads: c.uploads,
    requestsPer1kUploads: c.requestsPer1kUploads,
    ...uploadCost(c.requestsByOperation, c.uploads),
  }));
}

/** The printed cost table. */
export function costTable(rows: readonly CostRow[]): string {
  const head = ['root', 'partitions', 'layout', 'burst', 'requests/1k', 'GET+HEAD/1k', 'PUT+LIST/1k', 'DELETE/1k', '$/1k uploads'];
  const n = (v: number): string => String(Math.round(v));
  const lines = rows.map((r) => [
    String(r.entries),
    String(r.partitions),
    r.layout,
    r.burst === 1 ? `1 (x${r.uploads})` : String(r.burst),
    n(r.requestsPer1kUploads),
    n(r.readsPer1kUploads),
    n(r.writesPer1kUploads),
    n(r.deletesPer1kUploads),
    r.dollarsPer1kUploads.toFixed(4),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const line = (l: string[]): string => l.map((t, i) => (i === 2 ? t.padEnd(widths[i]) : t.padStart(widths[i]))).join('  ');
  return [
    `cost of the indexer's S3 requests per 1,000 uploads, S3 Standard prices: GET/HEAD $${READ_PRICE_PER_1K_REQUESTS} and ` +
      `PUT/COPY/POST/LIST $${WRITE_PRICE_PER_1K_REQUESTS} per 1,000 requests, DELETE free`,
    line(head),
    ...lines.map(line),
  ].join('\n');
}
