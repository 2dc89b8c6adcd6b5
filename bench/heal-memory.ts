/**
 * The peak RSS of a real parallel heal of a large root on the S3 model, each heal in a child process of
 * its own: an unindexed monolith root, and a shard-first root (healed partition by partition), whose
 * partition files are then checked against the listing.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import type { ModelProcess } from './model';

/** What the two heals measured; the JSON keys `npm run bench -- --json` prints. */
export interface HealMemory {
  readonly lines: string[];
  readonly json: {
    readonly healPeakRssMb1MMonolith: number;
    readonly healPeakRssMb1MShardFirst: number;
    readonly healSeconds1MShardFirst: number;
    /** 1 when every shard-first partition file equalled the listing after the heal. */
    readonly shardFirstPartitionsEqualListing: number;
  };
  /** The monolith heal's child output (what `healPeakRssMb` has always reported). */
  readonly monolith: Record<string, number>;
}

/** Runs `bench/heal-child.ts` in a fresh process and returns its last line, JSON. */
function healChild(args: string[]): Record<string, number> {
  const run = spawnSync(process.execPath, ['--import', 'tsx', join(__dirname, 'heal-child.ts'), ...args], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (run.status !== 0) throw new Error(`heal-child.ts ${args.join(' ')} failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').pop()!) as Record<string, number>;
}

/** Seeds `entries` objects into the bucket `bench-large` and heals it as a monolith, then as a shard-first root. */
export async function healMemory(
  model: ModelProcess,
  options: { readonly entries: number; readonly prefix: string; readonly parallelism: number; readonly log: (text: string) => void },
): Promise<HealMemory> {
  const { entries, prefix, parallelism, log } = options;
  await model.seed('bench-large', { count: entries, prefix, layout: 'swamp' });
  log(`s3-model: a parallel heal of an unindexed ${entries}-object monolith root in a child process, for its peak RSS`);
  const monolith = healChild([model.endpoint, 'bench-large', prefix, String(parallelism), 'monolith']);
  log(`s3-model: the same root made shard-first, healed partition by partition in a child process`);
  const shardFirst = healChild([model.endpoint, 'bench-large', prefix, String(parallelism), 'shard-first']);
  const line = (what: string, r: Record<string, number>): string =>
    `parallel heal of ${what} ${entries}-object root on the model (child process): ${r.seconds.toFixed(1)} s, ` +
    `peak RSS ${r.peakRssMb.toFixed(0)} MiB (${r.baselineRssMb.toFixed(0)} MiB before), ${r.requests} requests`;
  const equal = shardFirst.partitionsEqualListing === 1;
  return {
    lines: [
      line('an unindexed monolith', monolith),
      `${line('an unindexed shard-first', shardFirst)}; ${shardFirst.partitionFiles} partition files, ` +
        `${shardFirst.entriesChecked} entries ${equal ? 'equal to the listing' : 'NOT equal to the listing'}`,
    ],
    json: {
      healPeakRssMb1MMonolith: monolith.peakRssMb,
      healPeakRssMb1MShardFirst: shardFirst.peakRssMb,
      healSeconds1MShardFirst: shardFirst.seconds,
      shardFirstPartitionsEqualListing: shardFirst.partitionsEqualListing,
    },
    monolith,
  };
}
