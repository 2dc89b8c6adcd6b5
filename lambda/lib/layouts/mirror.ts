/**
 * The monolith and the partition files beside it: dual-write (manifest version 1) mirrors, or files a
 * writer left on a plain monolith. The monolith is the truth; its mirror is refreshed as a client's push does.
 */
import { type DatastoreIndex, type IndexEntry, serializeIndex, serializePartitionFile } from '../index-file';
import { partitionOf } from '../keys';
import { indexKeyOf, manifestKeyOf, partitionKeyOf, publishRecordKey } from '../names';
import { mapLimit } from '../concurrency';
import type { S3Store, StoredObject, WriteCondition } from '../s3';
import type { IndexScope } from '../scope';
import type { MirrorMeta } from './manifest';
import { readMirrorFiles } from './mirror-check';
import { type SpeculativeRead, conditionFor } from './objects';
import { groupByPartition } from './shards';
import type { IndexWriteResult, LiveIndex, LiveLayout, MirrorFailure, WriteOptions } from './types';

/**
 * The layout beside a monolith, with the partitions whose mirror files an earlier publish recorded (before
 * its monolith write) and did not finish: a run that stopped between the two leaves stale partition files
 * that a scoped pull would read, while the monolith already looks true.
 */
export async function withUnfinishedMirror(
  store: S3Store,
  scope: IndexScope,
  layout: LiveLayout,
  monolith: SpeculativeRead,
): Promise<LiveLayout> {
  let record: StoredObject | undefined;
  try {
    record = await store.get(publishRecordKey(scope));
  } catch (err) {
    monolith.drop();
    throw err;
  }
  if (!record) return layout;
  let partitions: string[] | undefined;
  try {
    const json = JSON.parse(record.body.toString('utf8')) as { partitions?: unknown };
    if (Array.isArray(json.partitions)) partitions = json.partitions.filter((p): p is string => typeof p === 'string');
  } catch {
    // An unreadable record: every mirror file is refreshed.
  }
  const mirror = layout.mirror!;
  const unfinished = new Set(partitions ?? [...mirror.files]);
  return {
    ...layout,
    mirror: { ...mirror, unfinished },
    pending: layout.pending ?? 'an earlier publish stopped between its index and its partition files',
  };
}

/**
 * Writes the monolith conditioned on the version read and then, beside it, the partition files of every
 * partition that changed (plus the version-1 manifest of a dual-write scope), as a client's push does.
 * A monolith whose entries are already true (`next` is the index read) is not written again: only the
 * mirror files left unfinished or found stale are.
 */
export async function writeMonolith(
  store: S3Store,
  scope: IndexScope,
  live: LiveIndex,
  next: DatastoreIndex,
  conditional: boolean,
  options: WriteOptions,
): Promise<IndexWriteResult> {
  const etag = live.state === 'absent' ? undefined : live.etag;
  // Grouped once, for both the partitions to refresh and their bodies; a plain monolith needs neither.
  const grouped = live.mirror ? groupByPartition(next.entries) : new Map<string, Map<string, IndexEntry>>();
  const targets = live.mirror ? mirrorTargets(live, next, grouped) : [];
  const recordKey = publishRecordKey(scope);
  // Recorded before the monolith: a run that stops before its partition files leaves it, and the next run refreshes them.
  if (targets.length > 0) {
    // Beside a plain monolith clients read only the monolith, which is written first: nothing they see is left half done.
    if (live.layout === 'dual-write') await options.beforeRecord?.();
    await store.put(recordKey, JSON.stringify({ startedAt: new Date().toISOString(), partitions: targets }));
  }
  const monolithTrue = live.state === 'valid' && next === live.index && !live.badManifest;
  let monolithEtag: string | undefined;
  if (!monolithTrue) {
    const body = options.body?.index === next ? options.body.take() : serializeIndex(next);
    const result = await store.put(indexKeyOf(scope), body, conditional ? conditionFor(etag) : undefined);
    if (result.status === 'conflict') return { status: 'conflict', key: indexKeyOf(scope), mirrorFailures: [] };
    monolithEtag = result.etag || undefined;
  }
  if (!live.mirror) return { status: 'written', monolithEtag, mirrorFailures: [] };
  const mirror = await writeMirror(store, scope, live, grouped, targets, conditional);
  const { failures: mirrorFailures } = mirror;
  if (mirror.conflict) return { status: 'conflict', key: mirror.conflict, mirrorFailures };
  // A mirror write that failed keeps the record, so the next run tries those partitions again.
  if (mirrorFailures.length === 0 && (targets.length > 0 || live.mirror.unfinished)) await store.delete(recordKey).catch(() => undefined);
  return { status: 'written', monolithEtag, mirrorFailures };
}

/** The partitions whose entries differ between two indexes (all of them when there was no readable index before). */
function touchedPartitions(before: DatastoreIndex | undefined, next: DatastoreIndex): Set<string> {
  const touched = new Set<string>();
  const note = (key: string): void => {
    const partition = partitionOf(key);
    if (partition !== undefined) touched.add(partition);
  };
  if (!before) {
    for (const key of next.entries.keys()) note(key);
    return touched;
  }
  for (const [key, entry] of next.entries) if (before.entries.get(key) !== entry) note(key);
  for (const key of before.entries.keys()) if (!next.entries.has(key)) note(key);
  return touched;
}

/**
 * Refreshes the partition files beside a monolith as a client's push does: each touched partition's file
 * (`{version: 1, entries}`), then for dual-write the version-1 manifest listing every partition it listed
 * and every partition with entries. Each file, and the manifest, is replaced only in the version read (a
 * file `checkMirror` did not read is read first): one a client rewrote since is a conflict, and the
 * publish reads again; the re-check then holds the files against the monolith the client left. Otherwise
 * best effort, as for clients (the monolith is the truth); failures are returned. Beside a plain monolith
 * only partition files that already exist are refreshed, and no manifest is made.
 */
async function writeMirror(
  store: S3Store,
  scope: IndexScope,
  live: LiveIndex,
  grouped: ReadonlyMap<string, ReadonlyMap<string, IndexEntry>>,
  targets: readonly string[],
  conditional: boolean,
): Promise<{ readonly failures: readonly MirrorFailure[]; readonly conflict?: string }> {
  const dualWrite = live.layout === 'dual-write';
  const read = live.mirror?.read;
  const failures: MirrorFailure[] = [];
  let conflict: string | undefined;
  const attempt = async (key: string, body: string | Buffer, condition: WriteCondition | undefined): Promise<void> => {
    try {
      if ((await store.put(key, body, condition)).status === 'conflict') conflict ??= key;
    } catch (err) {
      failures.push({ key, error: (err as Error).message });
    }
  };
  // Clients write these files without the lock too: one this publish has not read is read before it is replaced.
  const unread = conditional ? targets.filter((partition) => !read?.has(partition)) : [];
  const readNow = unread.length > 0 ? await readMirrorFiles(store, scope, unread) : new Map<string, StoredObject | undefined>();
  const versionOf = (partition: string): string | undefined => (read?.has(partition) ? read.get(partition) : readNow.get(partition)?.etag);
  await mapLimit(targets, 8, (partition) => {
    // A partition emptied by this change keeps a file with no entries rather than a stale one.
    const entries = grouped.get(partition) ?? new Map<string, IndexEntry>();
    const condition = conditional ? conditionFor(versionOf(partition)) : undefined;
    return attempt(partitionKeyOf(scope, partition), serializePartitionFile(entries), condition);
  });
  if (dualWrite && grouped.size > 0 && !conflict) {
    // A partition once listed stays listed: its file may be emptied, never dropped (a client may be adding to it).
    const partitions = new Set([...(live.mirror?.meta?.partitions ?? []), ...grouped.keys()]);
    const meta: MirrorMeta = { version: 1, partitions: [...partitions].sort() };
    const metaEtag = live.mirror?.metaEtag ?? live.badManifest?.etag;
    await attempt(manifestKeyOf(scope), JSON.stringify(meta), conditional ? conditionFor(metaEtag) : undefined);
  }
  return { failures, conflict };
}

/** The partition files a write beside a monolith refreshes: those its change touched, those an earlier publish left unfinished, and those found stale. */
function mirrorTargets(live: LiveIndex, next: DatastoreIndex, grouped: ReadonlyMap<string, unknown>): string[] {
  const mirror = live.mirror!;
  const dualWrite = live.layout === 'dual-write';
  const touched = touchedPartitions(live.state === 'valid' && !live.badManifest ? live.index : undefined, next);
  for (const partition of mirror.unfinished ?? []) touched.add(partition);
  for (const partition of mirror.stale ?? []) touched.add(partition);
  const exists = (p: string): boolean => mirror.files.has(p) || mirror.read?.get(p) !== undefined;
  return [...touched].filter((p) => (dualWrite ? grouped.has(p) || exists(p) : exists(p))).sort();
}
