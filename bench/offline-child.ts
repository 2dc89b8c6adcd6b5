/**
 * The benchmark's work without network, run in a child process so that its peak RSS
 * (`process.resourceUsage().maxRSS`) is that work's alone. Prints one JSON line.
 *
 *   index <entries>            list a synthetic root through listScopes, build its index, serialise it
 *   delta <entries> <events>   fold and apply a delta of S3 events to an index (applyChanges)
 */
import { type DatastoreIndex, type IndexEntry, serializeIndex } from '../lambda/lib/index-file';
import { type ObjectChange, applyChanges, latestChanges } from '../lambda/lib/events';
import type { S3Store } from '../lambda/lib/s3';
import { diffIndex, healIndex } from '../lambda/lib/drift';
import { listScopes } from '../lambda/lib/list';
import { syntheticKey, syntheticLister } from './synthetic';

const mb = (bytes: number): number => bytes / 1048576;

async function indexBuild(entries: number): Promise<Record<string, number>> {
  const baselineRssMb = mb(process.memoryUsage().rss);
  const t0 = performance.now();
  const listing = await listScopes(undefined as unknown as S3Store, 'swamp/', syntheticLister(entries));
  const t1 = performance.now();
  // What healScope does for a root without an index: every listed object is missing from it.
  const objects = listing.scopes.get('')!;
  const index = healIndex(undefined, diffIndex(new Map(), objects), objects);
  const t2 = performance.now();
  const heapAfterBuildMb = mb(process.memoryUsage().heapUsed);
  const bytes = serializeIndex(index);
  const t3 = performance.now();
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  return {
    entries: index.entries.size,
    listMs: t1 - t0,
    buildMs: t2 - t1,
    serializeMs: t3 - t2,
    totalMs: t3 - t0,
    indexBytes: bytes.length,
    baselineRssMb,
    heapAfterBuildMb,
    peakRssMb,
    bytesPerEntry: ((peakRssMb - baselineRssMb) * 1048576) / entries,
  };
}

function syntheticIndex(entries: number): DatastoreIndex {
  const map = new Map<string, IndexEntry>();
  for (let i = 0; i < entries; i++) {
    const key = syntheticKey(i, entries);
    map.set(key, { key, size: 64 + (i % 65536), lastModified: '2026-05-01T12:00:00.000Z', localMtime: '2026-05-01T11:59:58.120Z' });
  }
  return { version: 1, lastPulled: '2026-05-01T12:00:00.000Z', entries: map, extra: {} };
}

/** Events as S3 sends them for one batch: 60 % new objects, 30 % deletions, 10 % overwrites with a new size. */
function syntheticEvents(index: DatastoreIndex, events: number): ObjectChange[] {
  const keys = [...index.entries.keys()];
  const changes: ObjectChange[] = [];
  for (let i = 0; i < events; i++) {
    const sequencer = (0x1000 + i).toString(16).toUpperCase();
    const eventTime = new Date(Date.UTC(2026, 4, 2) + i * 1000).toISOString();
    const existing = keys[(i * 7919) % keys.length];
    if (i % 10 < 6)
      changes.push({ bucket: 'b', key: `data/new/model-${i}/1/raw`, kind: 'created', size: 100 + i, etag: 'e', sequencer, eventTime });
    else if (i % 10 < 9) changes.push({ bucket: 'b', key: existing, kind: 'removed', sequencer, eventTime });
    else changes.push({ bucket: 'b', key: existing, kind: 'created', size: 7 + i, etag: 'e', sequencer, eventTime });
  }
  return changes;
}

function deltaApply(entries: number, events: number, runs = 7): Record<string, number> {
  const index = syntheticIndex(entries);
  const changes = syntheticEvents(index, events);
  const times: number[] = [];
  let changed = 0;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    const result = applyChanges(index, latestChanges(changes));
    times.push(performance.now() - t0);
    changed = result.added + result.removed + result.resized;
  }
  times.sort((a, b) => a - b);
  return { entries, events, changed, medianMs: times[Math.floor(times.length / 2)], minMs: times[0], maxMs: times[times.length - 1] };
}

async function main(): Promise<void> {
  const [what, a, b] = process.argv.slice(2);
  const result = what === 'index' ? await indexBuild(Number(a)) : what === 'delta' ? deltaApply(Number(a), Number(b)) : undefined;
  if (!result) throw new Error('usage: offline-child.ts index <entries> | delta <entries> <events>');
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
