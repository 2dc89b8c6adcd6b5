/**
 * Runs the S3 model until killed:
 *   npx tsx support/s3-model/cli.ts --port 0 --latency-ms 30 --seed 100000 --bucket bench
 * The first line on stdout is the endpoint, printed once seeding is done, so
 * a caller may start its requests as soon as it reads that line. Everything
 * else goes to stderr; on SIGINT/SIGTERM the request counts are printed there.
 */
import { parseArgs } from 'node:util';
import type { SeedLayout } from './seed';
import { startS3Model } from './server';

const USAGE = `usage: cli.ts [--port N] [--latency-ms MS] [--bucket NAME] [--seed COUNT]
              [--prefix ROOT] [--layout swamp|flat] [--random-seed N]`;

function intOption(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer, got ${value}\n${USAGE}`);
  return n;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: 'string' },
      'latency-ms': { type: 'string' },
      bucket: { type: 'string' },
      seed: { type: 'string' },
      prefix: { type: 'string' },
      layout: { type: 'string' },
      'random-seed': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stderr.write(`${USAGE}\n`);
    return;
  }
  const layout = values.layout ?? 'swamp';
  if (layout !== 'swamp' && layout !== 'flat') throw new Error(`--layout must be swamp or flat\n${USAGE}`);
  const model = await startS3Model({
    port: intOption(values.port, 'port', 0),
    latencyMs: intOption(values['latency-ms'], 'latency-ms', 30),
  });
  const bucket = values.bucket ?? 'bench';
  const count = intOption(values.seed, 'seed', 0);
  const cpu0 = process.cpuUsage();
  const seeded = model.seed(bucket, {
    count,
    prefix: values.prefix,
    layout: layout as SeedLayout,
    seed: intOption(values['random-seed'], 'random-seed', 1),
  });
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(`${model.endpoint}\n`);
  const memory = process.memoryUsage();
  process.stderr.write(
    `s3-model: bucket ${bucket} holds ${seeded.count} seeded objects (${seeded.totalBytes} bytes), seeded in ` +
      `${seeded.elapsedMs.toFixed(0)} ms (${((cpu.user + cpu.system) / 1000).toFixed(0)} ms CPU); ` +
      `latency ${model.latencyMs} ms; heap ${(memory.heapUsed / 1048576).toFixed(0)} MiB, ` +
      `rss ${(memory.rss / 1048576).toFixed(0)} MiB\n`,
  );
  const shutdown = (): void => {
    process.stderr.write(`s3-model: requests ${JSON.stringify(model.requestCounts())}\n`);
    model.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
});
