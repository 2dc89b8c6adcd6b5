/** The sanity row: the same root shape on moto, where every request costs CPU, not waiting. */
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { createS3Client } from '../lambda/lib/s3-client';
import { mapLimit } from '../lambda/lib/concurrency';
import { startMoto } from '../support/moto';
import { processCpuMs } from './load';
import { syntheticKey } from './synthetic';
import type { Target } from './rows';

/** A moto server holding `objects` swamp-shaped objects under `root/` of bucket `bench`. */
export async function seededMoto(objects: number): Promise<{ target: Target; cpuMs: () => Promise<number>; stop: () => Promise<void> }> {
  const moto = await startMoto();
  const client = createS3Client({ endpoint: moto.endpoint, forcePathStyle: true });
  try {
    await client.send(new CreateBucketCommand({ Bucket: 'bench' }));
    await mapLimit(
      Array.from({ length: objects }, (_, i) => i),
      32,
      (i) =>
        client.send(new PutObjectCommand({ Bucket: 'bench', Key: `root/${syntheticKey(i, objects)}`, Body: 'x'.repeat(1 + (i % 64)) })),
    );
  } catch (err) {
    await moto.stop();
    throw err;
  } finally {
    client.destroy();
  }
  return {
    target: { endpoint: moto.endpoint, bucket: 'bench', prefix: 'root' },
    cpuMs: async () => processCpuMs(moto.process.pid),
    stop: () => moto.stop(),
  };
}
