/** What a freshness run takes and what it measures, shared by the run and its report. */

/** What one freshness run measures. */
export interface FreshnessOptions {
  readonly latencyMs: number;
  /** The event source mapping's batching window, in seconds. */
  readonly windowS: number;
  readonly maxConcurrency: number;
  /** Entries of the roots the bursts land on. */
  readonly entries: readonly number[];
  /** Index partitions of those roots (each with each entry count); 0 is the swamp seed's own. @default [0] */
  readonly partitions?: readonly number[];
  readonly bursts: readonly number[];
  readonly layouts: readonly Layout[];
  /** Uploads in flight at once (`aws s3 cp` sends 10). */
  readonly uploadConcurrency?: number;
  /** How many calm single uploads a burst of 1 stands for. @default 5 */
  readonly singles?: number;
  /** The queue: the SQS model (bench/sqs-model.ts, 10 ms per request) or moto, whose SQS is CPU-bound. @default 'model' */
  readonly sqs?: 'model' | 'moto';
  readonly log?: (line: string) => void;
}

export type Layout = 'monolith' | 'dual-write' | 'shard-first';

/** The figures of one burst on one root. */
export interface FreshnessCell {
  readonly entries: number;
  /** Index partitions the root was seeded with (the swamp seed's own when not asked for more). */
  readonly partitions: number;
  readonly layout: Layout;
  readonly burst: number;
  /** Uploads measured (a burst of 1 is repeated on a calm queue). */
  readonly uploads: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Uploads never seen in an index: must be 0. */
  readonly missing: number;
  readonly requestsPer1kUploads: number;
  /** The indexer's requests by S3 operation, over the whole burst (uploads taken out). */
  readonly requestsByOperation: Record<string, number>;
  readonly bytesWrittenPer1kUploads: number;
  readonly invocations: number;
  /** Median time of one invocation and median records in its batch, from the handler's "batch done" lines. */
  readonly invocationP50Ms: number;
  readonly batchP50: number;
  readonly failedItems: number;
  readonly deadLetters: number;
  /** Upload time of the burst (first PUT to last), ms. */
  readonly uploadMs: number;
}
