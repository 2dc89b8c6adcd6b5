/**
 * Dual-write roots as swamp clients leave them: one a current client wrote without migrating (monolith,
 * every mirror partition file, a version-1 manifest), and a push by an older client that knows nothing
 * of partitions (the monolith rewritten under the lock, the mirror left as it was).
 */
import type { IndexEntry } from '../../lambda/lib/index-file';
import type { S3Store } from '../../lambda/lib/s3';
import { partitionOf } from '../../lambda/lib/keys';
import { indexEntry, lockBody } from './factories';
import { deleteObject, putIndex, putObject, putObjects, putShardLayout, readIndex } from './s3';

/** A dual-write root at `<prefix>/`: its objects, its monolith, a mirror file per partition and a version-1 manifest. */
export async function dualWriteRoot(store: S3Store, prefix: string, objects: Readonly<Record<string, string>>): Promise<IndexEntry[]> {
  await putObjects(store, Object.fromEntries(Object.entries(objects).map(([key, body]) => [`${prefix}/${key}`, body])));
  const entries = Object.entries(objects).map(([key, body]) => indexEntry(key, { size: Buffer.byteLength(body), sha256: `sha-${key}` }));
  await putIndex(store, `${prefix}/.datastore-index.json`, entries);
  await putShardLayout(store, `${prefix}/`, entries);
  await putObject(store, `${prefix}/_index/_meta.json`, JSON.stringify({ version: 1, partitions: partitionsOf(Object.keys(objects)) }));
  return entries;
}

/** An older client's push: under the root's lock, the objects are uploaded and the monolith rewritten with them; no partition file is touched. */
export async function monolithOnlyPush(store: S3Store, prefix: string, objects: Readonly<Record<string, string>>): Promise<void> {
  const lockKey = `${prefix}/.datastore.lock`;
  await putObject(store, lockKey, JSON.stringify(lockBody({ holder: 'older-client' })));
  await putObjects(store, Object.fromEntries(Object.entries(objects).map(([key, body]) => [`${prefix}/${key}`, body])));
  const index = await readIndex(store, `${prefix}/.datastore-index.json`);
  const entries = new Map(index?.entries);
  for (const [key, body] of Object.entries(objects)) entries.set(key, indexEntry(key, { size: Buffer.byteLength(body) }));
  await putIndex(store, `${prefix}/.datastore-index.json`, entries.values());
  await deleteObject(store, lockKey);
}

/** The partitions keys fall in, sorted (keys without one left out). */
export function partitionsOf(keys: Iterable<string>): string[] {
  return [...new Set([...keys].map(partitionOf).filter((p): p is string => p !== undefined))].sort();
}

/** A datastore of `count` models' data, workflow runs, files and logs: the keys a client pushes, with small bodies. */
export function swampObjects(count: number, tag = 'v1'): Record<string, string> {
  const objects: Record<string, string> = {};
  for (let i = 1; i <= count; i++) {
    objects[`data/aws/ec2/i-${i}/1/raw`] = `${tag} model ${i}`;
    objects[`data/aws/s3/b-${i}/1/raw`] = `${tag} bucket ${i}`;
    objects[`workflow-runs/wf-${i}/run-1/log.txt`] = `${tag} run ${i}`;
  }
  objects['files/readme.txt'] = `${tag} readme`;
  objects['logs/run-1.log'] = `${tag} log`;
  return objects;
}
