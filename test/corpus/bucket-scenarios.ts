/**
 * The corpus's runs against what real buckets hold (issue 34): archived objects, indexes a client half
 * broke or a newer client wrote, odd prefixes and endpoints. Each returns what the command did, after
 * asserting what the row's exit code and output cannot show (the bucket as left, the cache as filled).
 */
import { PutObjectCommand, type StorageClass } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { type CliRun, readTree, runCli, tempDir } from '../cli/helpers';
import { indexEntry } from '../helpers/factories';
import { startLoopbackProxy } from '../helpers/proxy';
import { putObjects, readIndex, readObject, testEndpoint } from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/internal';

/** The scenarios this file runs. */
export const BUCKET_SCENARIOS = ['archived-objects', 'archived-restoring'] as const;
export type BucketScenario = (typeof BUCKET_SCENARIOS)[number];

/** Puts an object in a storage class, as a lifecycle rule leaves it. */
async function putArchived(store: S3Store, key: string, body: string, storageClass: StorageClass): Promise<void> {
  await store.client.send(new PutObjectCommand({ Bucket: store.bucket, Key: key, Body: body, StorageClass: storageClass }));
}

export async function bucketScenario(name: BucketScenario, store: S3Store, config: string): Promise<CliRun> {
  switch (name) {
    case 'archived-objects': {
      const objects: Record<string, string> = {};
      for (let i = 0; i < 38; i++) objects[`swamp/logs/${String(i).padStart(2, '0')}.log`] = `log ${i}`;
      await putObjects(store, objects);
      await putArchived(store, 'swamp/files/old-a.bin', 'cold a', 'GLACIER');
      await putArchived(store, 'swamp/files/old-b.bin', 'cold b', 'DEEP_ARCHIVE');
      const cache = join(tempDir(), 'cache');
      const run = await runCli(['hydrate', '--config', config, '--cache', cache]);
      // Archived objects stay indexed: they exist, and a client meets them as this command does.
      const index = await readIndex(store, 'swamp/.datastore-index.json');
      expect(index!.entries.size).toBe(40);
      const files = [...readTree(cache).keys()];
      expect(files.filter((f) => f.startsWith('logs/'))).toHaveLength(38);
      expect(files.filter((f) => f.startsWith('files/'))).toEqual([]);
      expect(run.stderr).not.toMatch(/Access denied|s3:GetObject/);
      return run;
    }
    case 'archived-restoring': {
      await putObjects(store, { 'swamp/logs/a.log': 'aaa' });
      await putArchived(store, 'swamp/files/cold.bin', 'cold', 'GLACIER');
      // moto ends a restore at once; S3 answers a HEAD of an object being restored so.
      const proxy = await startLoopbackProxy(testEndpoint(), (req, res) => {
        if (req.method !== 'HEAD' || !req.url?.includes('/swamp/files/cold.bin')) return false;
        res.writeHead(200, {
          'content-length': '4',
          etag: '"x"',
          'last-modified': new Date().toUTCString(),
          'x-amz-storage-class': 'GLACIER',
          'x-amz-restore': 'ongoing-request="true"',
        });
        res.end();
        return true;
      });
      try {
        const through = JSON.stringify({ bucket: store.bucket, prefix: 'swamp', endpoint: proxy.endpoint, forcePathStyle: true });
        return await runCli(['hydrate', '--config', through, '--cache', join(tempDir(), 'cache'), '--json']);
      } finally {
        await proxy.close();
      }
    }
  }
}

// Used by scenarios added below.
void indexEntry;
void readObject;
