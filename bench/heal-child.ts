/**
 * Run in a child process by the benchmark: one full heal (mode repair, parallel lister) of an unindexed
 * root on an S3 endpoint, so that its peak RSS (`process.resourceUsage().maxRSS`) is that heal's alone.
 * `shard-first` makes the root shard-first first (a version-2 manifest listing no partition), so the heal
 * writes every partition, and then checks that the partition files equal the listing (after the peak is read).
 *
 *   heal-child.ts <endpoint> <bucket> <prefix> <concurrency> [monolith|shard-first]
 */
import { PARTITION_WINDOW } from '../lambda/lib/heal';
import { parallelLister } from '../lambda/lib/parallel-list';
import { heal, makeShardFirst, partitionsEqualListing } from './rows';

async function main(): Promise<void> {
  const [endpoint, bucket, prefix, concurrency, layout = 'monolith'] = process.argv.slice(2);
  const target = { endpoint, bucket, prefix };
  if (layout === 'shard-first') await makeShardFirst(target);
  const baselineRssMb = process.memoryUsage().rss / 1048576;
  const window = layout === 'shard-first' ? PARTITION_WINDOW : undefined;
  const timing = await heal(target, parallelLister({ concurrency: Number(concurrency), window, etags: false }), {
    keep: layout === 'shard-first',
  });
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  const checked = layout === 'shard-first' ? await partitionsEqualListing(target) : undefined;
  process.stdout.write(`${JSON.stringify({ ...timing, baselineRssMb, peakRssMb, ...(checked ?? {}) })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
