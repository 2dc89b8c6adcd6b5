/**
 * Client fields nested deeper than `JSON.stringify` can recurse, as raw JSON text: the tests write them
 * into index bodies by hand, since building such a body with `JSON.stringify` would itself fail.
 */
import type { IndexEntry } from '../../lambda/lib/index-file';
import type { S3Store } from '../../lambda/lib/s3';
import { partitionOf } from '../../lambda/lib/keys';
import { indexEntry, indexJson, shardMeta } from './factories';
import { putObject, putObjects } from './s3';

/** JSON text nested `depth` levels deep, arrays and objects in turn, holding a string, a number and null at the bottom. */
export function deepJson(depth: number): string {
  const open: string[] = [];
  const close: string[] = [];
  for (let level = 0; level < depth; level++) {
    open.push(level % 2 === 0 ? '[' : '{"d":');
    close.push(level % 2 === 0 ? ']' : '}');
  }
  return `${open.join('')}["bottom",${depth},null]${close.reverse().join('')}`;
}

const PLACEHOLDER = '"deep-field-placeholder"';

/** An index body as a client writes it whose entry `deepKey` carries `field` nested `depth` levels deep. */
export function indexWithDeepField(entries: readonly IndexEntry[], deepKey: string, depth: number, field = 'clientState'): string {
  const marked = entries.map((e) => (e.key === deepKey ? { ...e, [field]: 'deep-field-placeholder' } : e));
  const text = indexJson(marked);
  // A partition without that entry is written as it is.
  return text.includes(PLACEHOLDER) ? text.replace(PLACEHOLDER, deepJson(depth)) : text;
}

/** Counts how deep the first array or object of `text` nests, without parsing it (to check what was written). */
export function depthOf(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') deepest = Math.max(deepest, ++depth);
    else if (c === ']' || c === '}') depth--;
  }
  return deepest;
}

/** The layouts a root with a deep client field is written in (see `deepRoot`). */
export type DeepLayout = 'monolith' | 'dual-write' | 'shard-first';

/** What `deepRoot` wrote: the key whose entry is deep, and the object added out of band (in no index). */
export interface DeepRoot {
  readonly deepKey: string;
  readonly added: string;
  readonly entries: IndexEntry[];
}

/**
 * A root at `<prefix>/` whose index a client wrote in `layout` with one entry holding a client field nested
 * `depth` levels deep (in the monolith and its mirror file, or in its shard), and one object uploaded out
 * of band since.
 */
export async function deepRoot(store: S3Store, prefix: string, depth: number, layout: DeepLayout = 'monolith'): Promise<DeepRoot> {
  const objects: Record<string, string> = {
    'data/aws/ec2/i-1/1/raw': 'model one',
    'files/readme.txt': 'hello',
    'logs/run-1.log': 'log one',
  };
  const deepKey = 'data/aws/ec2/i-1/1/raw';
  const added = 'files/added-out-of-band.txt';
  await putObjects(store, Object.fromEntries(Object.entries(objects).map(([key, body]) => [`${prefix}/${key}`, body])));
  const entries = Object.entries(objects).map(([key, body]) => indexEntry(key, { size: Buffer.byteLength(body), sha256: `sha-${key}` }));
  const partitions = [...new Set(entries.map((e) => partitionOf(e.key)!))].sort();
  const files: Record<string, string> = {};
  if (layout !== 'shard-first') files[`${prefix}/.datastore-index.json`] = indexWithDeepField(entries, deepKey, depth);
  if (layout !== 'monolith') {
    for (const partition of partitions) {
      const inPartition = entries.filter((e) => partitionOf(e.key) === partition);
      files[`${prefix}/_index/${partition}.json`] = indexWithDeepField([...inPartition], deepKey, depth);
    }
    const meta = layout === 'dual-write' ? { version: 1, partitions } : shardMeta(partitions, 3);
    files[`${prefix}/_index/_meta.json`] = JSON.stringify(meta);
  }
  await putObjects(store, files);
  await putObject(store, `${prefix}/${added}`, 'added by hand');
  return { deepKey, added, entries };
}
