/**
 * How large a monolith root the Lambda's scheduled repair heals in a given function memory: seeds roots on
 * the S3 model (no added latency), then runs `repairResumable` in a child process with the heap flags the
 * Lambda runtime gives a function of that memory, and prints one JSON line per root (peak RSS, or the
 * `IndexTooLargeError` that stopped it).
 *
 *   npx tsx bench/memory-reach.ts [--memory-mib 1024] [--objects 1000000,330000] [--indexed none,client]
 *
 * `client`: the root has an index of client entries (`sha256`, `localMtime`), one object in a hundred missing
 * from it, so the repair writes; `none`: no index at all.
 */
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import type { DatastoreRoot } from '../lambda/lib/scope';
import { INDEX_KEY, rootBase } from '../lambda/lib/names';
import { type IndexEntry, serializeIndex } from '../lambda/lib/index-file';
import { S3Store } from '../lambda/lib/s3';
import { createS3Client } from '../lambda/lib/s3-client';
import { listScopes, sequentialLister } from '../lambda/lib/list';
import { repairResumable } from '../lambda/lib/repair';
import { startModelProcess } from './model';
import { lambdaHeapFlags } from './heal-10m';

const CREDENTIALS = { AWS_ACCESS_KEY_ID: 'bench', AWS_SECRET_ACCESS_KEY: 'bench', AWS_REGION: 'us-east-1' };

function storeOf(endpoint: string, bucket: string): S3Store {
  return new S3Store(createS3Client({ endpoint, forcePathStyle: true }), bucket);
}

/** In the child: one scheduled repair of the root, as the handler runs it (budget from AWS_LAMBDA_FUNCTION_MEMORY_SIZE). */
async function repairChild(endpoint: string, bucket: string): Promise<void> {
  const root: DatastoreRoot = { bucket, prefix: 'root' };
  const started = Date.now();
  let outcome: Record<string, unknown>;
  try {
    const run = await repairResumable(storeOf(endpoint, bucket), root, { mode: 'repair', remainingMs: () => 3_600_000 });
    outcome = run.status === 'complete' ? { healed: true, entries: run.report.scopes[0]?.entries } : { healed: false, status: run.status };
  } catch (err) {
    outcome = { healed: false, error: (err as Error).name, message: (err as Error).message };
  }
  const peakRssMb = Math.round(process.resourceUsage().maxRSS / 1024);
  process.stdout.write(`${JSON.stringify({ ...outcome, seconds: (Date.now() - started) / 1000, peakRssMb })}\n`);
}

/** Writes an index of client entries for every listed object but one in a hundred. */
async function putClientIndex(store: S3Store, root: DatastoreRoot): Promise<void> {
  const listing = await listScopes(store, rootBase(root), sequentialLister);
  const entries = new Map<string, IndexEntry>();
  let i = 0;
  for (const [key, object] of listing.scopes.get('') ?? []) {
    if (i++ % 100 === 0) continue;
    const sha256 = Buffer.from(key).toString('hex').padEnd(64, '0').slice(0, 64);
    entries.set(key, { key, size: object.size, lastModified: object.lastModified, localMtime: '2026-05-01T11:59:58.120Z', sha256 });
  }
  await store.put(rootBase(root) + INDEX_KEY, serializeIndex({ version: 1, entries, extra: {} }));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === 'child') return repairChild(args[1], args[2]);
  const { values } = parseArgs({
    args,
    options: {
      'memory-mib': { type: 'string', default: '1024' },
      objects: { type: 'string', default: '1000000,330000' },
      indexed: { type: 'string', default: 'none,client' },
    },
  });
  const memoryMib = Number(values['memory-mib']);
  const counts = values.objects.split(',').map(Number);
  const kinds = values.indexed.split(',');
  Object.assign(process.env, CREDENTIALS);
  const heapFlags = lambdaHeapFlags(memoryMib);
  const model = await startModelProcess(0);
  try {
    for (const [n, count] of counts.entries()) {
      const kind = kinds[Math.min(n, kinds.length - 1)];
      const bucket = `reach-${n}`;
      const root: DatastoreRoot = { bucket, prefix: 'root' };
      await model.seed(bucket, { count, prefix: 'root', layout: 'swamp' });
      if (kind === 'client') await putClientIndex(storeOf(model.endpoint, bucket), root);
      const child = spawnSync(process.execPath, [...heapFlags, '--import', 'tsx', __filename, 'child', model.endpoint, bucket], {
        encoding: 'utf8',
        env: {
          ...process.env,
          AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(memoryMib),
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        },
      });
      const line = child.stdout.trim().split('\n').pop() || JSON.stringify({ crashed: child.status, signal: child.signal });
      process.stdout.write(`${JSON.stringify({ memoryMib, objects: count, index: kind, ...JSON.parse(line) })}\n`);
    }
  } finally {
    await model.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
