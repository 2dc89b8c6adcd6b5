/**
 * The corpus's runs against what real buckets hold: archived objects, indexes a client half
 * broke or a newer client wrote, odd prefixes and endpoints. Each returns what the command did, after
 * asserting what the row's exit code and output cannot show (the bucket as left, the cache as filled).
 */
import { PutObjectCommand, type StorageClass } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { type CliRun, readTree, runCli, tempDir } from '../cli/helpers';
import { indexEntry } from '../helpers/factories';
import { startLoopbackProxy } from '../helpers/proxy';
import { listKeys, putObject, putObjects, putShardLayout, readIndex, readObject, testEndpoint } from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/s3';

/** The scenarios this file runs. */
export const BUCKET_SCENARIOS = [
  'archived-objects',
  'archived-restoring',
  'one-malformed-entry-repair',
  'one-malformed-shard-entry-repair',
  'newer-index-repair',
  'newer-index-check',
  'newer-shard-repair',
  'unknown-manifest-version',
  'html-404-endpoint',
  'folder-key-with-bytes',
  'nfd-prefix',
] as const;
export type BucketScenario = (typeof BUCKET_SCENARIOS)[number];

/** Puts an object in a storage class, as a lifecycle rule leaves it. */
async function putArchived(store: S3Store, key: string, body: string, storageClass: StorageClass): Promise<void> {
  await store.client.send(new PutObjectCommand({ Bucket: store.bucket, Key: key, Body: body, StorageClass: storageClass }));
}

/** 30 objects under `swamp/logs/`, and their entries as a client wrote them (sha256, localMtime). */
async function clientIndexed(store: S3Store): Promise<Record<string, ReturnType<typeof indexEntry>>> {
  const entries: Record<string, ReturnType<typeof indexEntry>> = {};
  const objects: Record<string, string> = {};
  for (let i = 0; i < 30; i++) {
    const key = `logs/${String(i).padStart(2, '0')}.log`;
    objects[`swamp/${key}`] = `log ${i}`;
    entries[key] = indexEntry(key, { size: `log ${i}`.length, sha256: `sha-${i}`, localMtime: '2026-05-04T15:19:58.120Z' });
  }
  await putObjects(store, objects);
  return entries;
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
    case 'one-malformed-entry-repair':
    case 'one-malformed-shard-entry-repair': {
      // The same 30 client entries, one malformed, in the monolith or in a shard-first root's partition file.
      const shardFirst = name === 'one-malformed-shard-entry-repair';
      const fileKey = shardFirst ? 'swamp/_index/logs.json' : 'swamp/.datastore-index.json';
      const entries = await clientIndexed(store);
      const body = JSON.stringify({
        version: 1,
        lastPulled: '2026-05-04T15:24:03.000Z',
        entries: { ...entries, 'logs/07.log': { key: 'logs/07.log', size: '6' } },
      });
      await putObject(store, fileKey, body);
      if (shardFirst) await putObject(store, 'swamp/_index/_meta.json', JSON.stringify({ version: 2, partitions: ['logs'], commitSeq: 3 }));
      const run = await runCli(['repair', '--config', config]);
      const index = (await readIndex(store, fileKey))!;
      expect(index.entries.size).toBe(30);
      for (const [key, entry] of Object.entries(entries)) {
        if (key === 'logs/07.log') expect(index.entries.get(key)).toEqual({ key, size: 5, lastModified: expect.any(String) });
        else expect(index.entries.get(key)).toEqual(entry);
      }
      const copyOf = shardFirst ? 'logs.json' : 'datastore-index';
      const kept = (await listKeys(store, 'swamp/_control/')).filter((k) => k.includes(copyOf));
      expect((await readObject(store, kept[0]))!.toString()).toBe(body);
      return run;
    }
    case 'newer-index-repair':
    case 'newer-index-check': {
      const entries = await clientIndexed(store);
      await putObjects(store, { 'swamp/logs/new.log': 'not indexed yet' });
      const body = JSON.stringify({ version: 99, entries, shape: 'a newer client' });
      await putObject(store, 'swamp/.datastore-index.json', body);
      const run = await runCli([name === 'newer-index-check' ? 'check' : 'repair', '--config', config]);
      expect((await readObject(store, 'swamp/.datastore-index.json'))!.toString()).toBe(body);
      return run;
    }
    case 'newer-shard-repair': {
      const entries = await clientIndexed(store);
      await putShardLayout(store, 'swamp/', Object.values(entries), { version: 2, partitions: ['logs'], commitSeq: 4 });
      const shard = JSON.stringify({ version: 99, entries });
      await putObjects(store, { 'swamp/_index/logs.json': shard, 'swamp/logs/new.log': 'not indexed yet' });
      const run = await runCli(['repair', '--config', config]);
      expect((await readObject(store, 'swamp/_index/logs.json'))!.toString()).toBe(shard);
      expect(JSON.parse((await readObject(store, 'swamp/_index/_meta.json'))!.toString()).commitSeq).toBe(4);
      return run;
    }
    case 'unknown-manifest-version': {
      // Clients read a manifest of version 1 or 2 only; any other they take for none, and read the monolith.
      const entries = await clientIndexed(store);
      const meta = JSON.stringify({ version: 3, partitions: ['logs'] });
      await putObjects(store, { 'swamp/_index/_meta.json': meta, 'swamp/logs/new.log': 'not indexed yet' });
      await putObject(store, 'swamp/.datastore-index.json', JSON.stringify({ version: 1, entries }));
      const run = await runCli(['repair', '--config', config]);
      expect((await readObject(store, 'swamp/_index/_meta.json'))!.toString()).toBe(meta);
      const index = (await readIndex(store, 'swamp/.datastore-index.json'))!;
      expect(index.entries.size).toBe(31);
      expect(index.entries.get('logs/00.log')!.sha256).toBe('sha-0');
      return run;
    }
    case 'html-404-endpoint': {
      // A web server that is not S3: every path is a 404 page.
      const page = await startLoopbackProxy(testEndpoint(), (_req, res) => {
        res.writeHead(404, { 'content-type': 'text/html' });
        res.end('<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN"><title>404 Not Found</title><h1>Not Found</h1>');
        return true;
      });
      try {
        const through = JSON.stringify({ bucket: store.bucket, prefix: 'swamp', endpoint: page.endpoint, forcePathStyle: true });
        const runs = [];
        for (const command of ['check', 'repair']) runs.push(await runCli([command, '--config', through]));
        expect(runs.map((r) => r.code)).toEqual([1, 1]);
        return { ...runs[0], stderr: runs.map((r) => r.stderr).join('') };
      } finally {
        await page.close();
      }
    }
    case 'folder-key-with-bytes': {
      await putObjects(store, { 'swamp/logs/a.log': 'aaa', 'swamp/data/marker/': '', 'swamp/data/x/': 'bytes under a folder name' });
      const check = await runCli(['check', '--config', config]);
      const repair = await runCli(['repair', '--config', config]);
      expect(repair.stdout).toMatch(/\+1 added.*; 1 key refused/);
      expect([...(await readIndex(store, 'swamp/.datastore-index.json'))!.entries.keys()]).toEqual(['logs/a.log']);
      return check;
    }
    case 'nfd-prefix': {
      // Written under the NFC spelling; asked for in NFD, as a macOS file name gives it.
      await putObjects(store, { 'caf\u00e9/logs/a.log': 'aaa' });
      return runCli(['check', '--config', JSON.stringify({ ...JSON.parse(config), prefix: 'cafe\u0301' })]);
    }
  }
}
