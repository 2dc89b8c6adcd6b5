/**
 * Run in a child process by the benchmark: one full heal (mode repair, parallel lister) of an unindexed
 * root on an S3 endpoint, so that its peak RSS (`process.resourceUsage().maxRSS`) is that heal's alone.
 *
 *   heal-child.ts <endpoint> <bucket> <prefix> <concurrency>
 */
import { parallelLister } from '../lambda/lib/internal';
import { heal } from './rows';

async function main(): Promise<void> {
  const [endpoint, bucket, prefix, concurrency] = process.argv.slice(2);
  const baselineRssMb = process.memoryUsage().rss / 1048576;
  const timing = await heal({ endpoint, bucket, prefix }, parallelLister({ concurrency: Number(concurrency) }));
  process.stdout.write(`${JSON.stringify({ ...timing, baselineRssMb, peakRssMb: process.resourceUsage().maxRSS / 1024 })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
