/** The freshness bench's report: the line of each cell, the printed tables and the `--json` fields. */
import { costRows, costTable } from './cost';
import type { FreshnessCell, FreshnessOptions } from './freshness-types';

const mib = (bytes: number): string => `${(bytes / 1048576).toFixed(1)} MiB`;

/** One cell in a line, as the run logs it. */
export function describe(c: FreshnessCell): string {
  return (
    `${c.entries} entries ${c.partitions} partitions ${c.layout}, burst ${c.burst}${c.burst === 1 ? ` x${c.uploads}` : ''}: ` +
    `p50 ${(c.p50Ms / 1000).toFixed(2)} s, p99 ${(c.p99Ms / 1000).toFixed(2)} s, ${c.invocations} invocations, ` +
    `median invocation ${(c.invocationP50Ms / 1000).toFixed(2)} s for ${c.batchP50} records, ` +
    `${Math.round(c.requestsPer1kUploads)} requests and ${mib(c.bytesWrittenPer1kUploads)} written per 1k uploads, ` +
    `${c.failedItems} failed items, ${c.deadLetters} dead letters, ${c.missing} missing; requests ${JSON.stringify(c.requestsByOperation)}`
  );
}

/** The printed table of freshness and cost. */
export function freshnessTable(
  cells: readonly FreshnessCell[],
  o: Pick<FreshnessOptions, 'latencyMs' | 'windowS' | 'maxConcurrency' | 'sqs'>,
): string {
  const head = [
    'root',
    'partitions',
    'layout',
    'burst',
    'fresh p50 s',
    'fresh p99 s',
    'invocations',
    'inv p50 s',
    'batch p50',
    'requests/1k',
    'written/1k',
    'failed',
    'DLQ',
    'upload s',
  ];
  const rows = cells.map((c) => [
    String(c.entries),
    String(c.partitions),
    c.layout,
    c.burst === 1 ? `1 (x${c.uploads})` : String(c.burst),
    (c.p50Ms / 1000).toFixed(2),
    (c.p99Ms / 1000).toFixed(2),
    String(c.invocations),
    (c.invocationP50Ms / 1000).toFixed(2),
    String(c.batchP50),
    String(Math.round(c.requestsPer1kUploads)),
    mib(c.bytesWrittenPer1kUploads),
    String(c.failedItems),
    String(c.deadLetters),
    (c.uploadMs / 1000).toFixed(1),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]): string => r.map((t, i) => (i === 0 || i === 2 ? t.padEnd(widths[i]) : t.padStart(widths[i]))).join('  ');
  return [
    `event path: S3 model at ${o.latencyMs} ms per request, S3 notifications into ${o.sqs === 'moto' ? 'moto SQS' : 'the SQS model (10 ms)'}, emulated event source ` +
      `(batch 1000, window ${o.windowS} s, max concurrency ${o.maxConcurrency}), the Lambda bundle in child processes`,
    line(head),
    ...rows.map(line),
    '',
    costTable(costRows(cells)),
  ].join('\n');
}

/** The `--json` fields: the 5,000-upload burst on the largest monolith root (or the largest burst measured). */
export function freshnessJson(cells: readonly FreshnessCell[]): Record<string, unknown> {
  const largest = Math.max(...cells.map((c) => c.entries));
  const burst = Math.max(...cells.map((c) => c.burst));
  const head = cells.find((c) => c.entries === largest && c.burst === burst && c.layout === 'monolith') ?? cells[cells.length - 1];
  return {
    freshP50Ms: head?.p50Ms ?? null,
    freshP99Ms: head?.p99Ms ?? null,
    requestsPer1kUploads: head?.requestsPer1kUploads ?? null,
    bytesWrittenPer1kUploads: head?.bytesWrittenPer1kUploads ?? null,
    freshness: cells,
    cost: costRows(cells),
  };
}
