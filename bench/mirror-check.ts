/**
 * What holding a dual-write mirror against its monolith costs `check`: the S3 requests of a check of the
 * same root as a monolith and as dual-write (every mirror file in step), on the S3 model.
 *
 *   npx tsx bench/mirror-check.ts [--entries 100000] [--latency-ms 0] [--json]
 */
import { parseArgs } from 'node:util';
import { S3Store } from '../lambda/lib/s3';
import { SHARD_META_KEY } from '../lambda/lib/names';
import { createS3Client } from '../lambda/lib/s3-client';
import { healRoot } from '../lambda/lib/heal';
import { parallelLister } from '../lambda/lib/parallel-list';
import { startS3Model } from '../support/s3-model/server';

/** The requests of one check, by operation, and what it found. */
export interface CheckCost {
  readonly layout: 'monolith' | 'dual-write';
  readonly requests: Record<string, number>;
  readonly total: number;
  readonly mirrorFiles: number;
  readonly clean: boolean;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { entries: { type: 'string' }, 'latency-ms': { type: 'string' }, json: { type: 'boolean' } } });
  const entries = Number(values.entries ?? 100_000);
  process.env.AWS_ACCESS_KEY_ID ??= 'bench';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'bench';
  process.env.AWS_REGION ??= 'us-east-1';
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  delete process.env.AWS_PROFILE;
  const model = await startS3Model({ latencyMs: Number(values['latency-ms'] ?? 0) });
  try {
    const rows: CheckCost[] = [];
    for (const layout of ['monolith', 'dual-write'] as const) {
      const bucket = `mirror-check-${layout}`;
      model.seed(bucket, { count: entries, prefix: 'root', layout: 'swamp' });
      const store = new S3Store(createS3Client({ endpoint: model.endpoint, forcePathStyle: true }), bucket);
      if (layout === 'dual-write') await store.put(`root/${SHARD_META_KEY}`, JSON.stringify({ version: 1, partitions: [] }));
      const root = { bucket, prefix: 'root' };
      await healRoot(store, root, { mode: 'repair', lister: parallelLister() });
      const counting = new S3Store(createS3Client({ endpoint: model.endpoint, forcePathStyle: true }), bucket);
      const report = await healRoot(counting, root, { mode: 'check', lister: parallelLister() });
      const scope = report.scopes[0];
      const requests = { ...counting.requests };
      const mirrorFiles = scope.layout === 'dual-write' ? await countMirrorFiles(store) : 0;
      rows.push({
        layout,
        requests,
        total: Object.values(requests).reduce((a, b) => a + b, 0),
        mirrorFiles,
        clean: scope.pending === undefined && scope.drift.missing + scope.drift.stale + scope.drift.resized === 0,
      });
    }
    if (values.json) console.log(JSON.stringify({ entries, rows }));
    else
      for (const row of rows)
        console.log(
          `${entries} entries, ${row.layout}: ${row.total} requests per check ${JSON.stringify(row.requests)}; ${row.mirrorFiles} mirror files; ${row.clean ? 'true' : 'drift'}`,
        );
  } finally {
    await model.stop();
  }
}

async function countMirrorFiles(store: S3Store): Promise<number> {
  let files = 0;
  for await (const page of store.listPages({ prefix: 'root/_index/' }))
    files += page.objects.filter((o) => !o.key.endsWith('_meta.json')).length;
  return files;
}

void main();
