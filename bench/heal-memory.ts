/**
 * The peak RSS of a real parallel heal of a large root on the S3 model, each heal in a child process of its
 * own, bundled as the Lambda is: an unindexed monolith root, and a shard-first root (healed partition by
 * partition), whose partition files are then checked against the listing.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import lambdaBundle from '../infra/bundling.json';
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

/**
 * `bench/heal-child.ts` bundled by esbuild, as the Lambda ships (the options of `infra/bundling.json`, for
 * this machine's Node): run through tsx, its peak would also hold tsx's loader thread and compile cache,
 * which no shipped form carries.
 */
async function childBundle(dir: string): Promise<string> {
  const outfile = join(dir, 'heal-child.js');
  await build({
    entryPoints: [join(__dirname, 'heal-child.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    minify: lambdaBundle.minify,
    keepNames: lambdaBundle.keepNames,
    mainFields: [...lambdaBundle.mainFields],
    supported: lambdaBundle.supported,
    logLevel: 'warning',
  });
  return outfile;
}

/** Runs the bundled `bench/heal-child.ts` in a fresh process and returns its last line, JSON. */
function healChild(bundle: string, args: string[]): Record<string, number> {
  const run = spawnSync(process.execPath, [bundle, ...args], {
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
  const dir = mkdtempSync(join(tmpdir(), 'heal-child-'));
  let monolith: Record<string, number>;
  let shardFirst: Record<string, number>;
  try {
    const bundle = await childBundle(dir);
    await model.seed('bench-large', { count: entries, prefix, layout: 'swamp' });
    log(`s3-model: a parallel heal of an unindexed ${entries}-object monolith root in a child process, for its peak RSS`);
    monolith = healChild(bundle, [model.endpoint, 'bench-large', prefix, String(parallelism), 'monolith']);
    log(`s3-model: the same root made shard-first, healed partition by partition in a child process`);
    shardFirst = healChild(bundle, [model.endpoint, 'bench-large', prefix, String(parallelism), 'shard-first']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
