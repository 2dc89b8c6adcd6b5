/**
 * The checks at the quiet end of a chaos run: each layout's truth equals the listing, every manifest and
 * partition file agrees with it, client fields survive, and nothing is left behind (lock, publish intent).
 */
import { LOCK_KEY, SHARD_META_KEY } from '../../lambda/lib/names';
import type { S3Store } from '../../lambda/lib/s3';
import { isInternalKey, partitionOf } from '../../lambda/lib/keys';
import { type ChaosLayout, readTruth } from './clients';
import { listedPartitions } from './monitor';
import type { ChaosReport } from './report';
import { type Cast, type ChaosRun, LAYOUT_OF, ROOTS } from './setup';

type Truth = Awaited<ReturnType<typeof readTruth>>;

/** Runs every final check of the run, adding what breaks to the report. */
export async function checkQuietEnd(run: ChaosRun, cast: Cast): Promise<void> {
  const { direct, report } = run;
  const listing = new Map<string, number>();
  for await (const page of direct.listPages({ prefix: '' })) for (const o of page.objects) listing.set(o.key, o.size);
  for (const root of ROOTS) await checkRoot(direct, report, root, LAYOUT_OF[root], listing);
  await checkClientFields(direct, report, cast);
  await checkNoShardRemoved(run, cast, listing);
}

/** Every partition a manifest was ever seen to list is listed still, and its file is there (possibly with no entries). */
async function checkNoShardRemoved(run: ChaosRun, cast: Cast, listing: Map<string, number>): Promise<void> {
  for (const [root, seen] of cast.listedPartitions) {
    const now = new Set(await listedPartitions(run, root));
    for (const p of [...seen].sort()) {
      if (!now.has(p)) run.report.removedShards.push(`${root}: partition ${p} was dropped from the manifest`);
      if (!listing.has(`${root}/_index/${p}.json`)) run.report.removedShards.push(`${root}: partition file ${p}.json was removed`);
    }
  }
}

/** One root: its truth against the listing, then what its layout keeps beside it. */
async function checkRoot(
  direct: S3Store,
  report: ChaosReport,
  root: string,
  layout: ChaosLayout,
  listing: Map<string, number>,
): Promise<void> {
  const base = `${root}/`;
  const truth = await readTruth(direct, base, layout);
  if (truth.problem) report.finalMismatch.push(`${root}: ${truth.problem}`);
  const expected = new Map<string, number>();
  for (const [key, size] of listing) {
    if (!key.startsWith(base)) continue;
    const rel = key.slice(base.length);
    if (isInternalKey(rel)) continue;
    if (layout === 'shard-first' && partitionOf(rel) === undefined) continue;
    expected.set(rel, size);
  }
  for (const [rel, size] of expected) {
    const e = truth.entries.get(rel);
    if (!e) report.finalMismatch.push(`${root}/${rel}: missing from the ${layout} index`);
    else if (e.size !== size) report.finalMismatch.push(`${root}/${rel}: size ${e.size} in the index, ${size} in S3`);
  }
  for (const rel of truth.entries.keys()) if (!expected.has(rel)) report.finalMismatch.push(`${root}/${rel}: indexed but not in S3`);
  report.finalEntries += truth.entries.size;
  if (listing.has(base + LOCK_KEY)) report.leftovers.push(`${base + LOCK_KEY} still held`);
  // No half-written shard set: no publish intent left, and every partition file is one the manifest lists.
  for (const key of listing.keys())
    if (key.startsWith(`${base}_control/datastore-indexer/publishing/`)) report.leftovers.push(`${key}: a publish intent left behind`);
  // (A dual-write partition file the manifest no longer lists is harmless: the monolith is the truth there.)
  if (layout === 'shard-first') await checkShardFirst(direct, report, base, listing);
  if (layout === 'dual-write') await checkDualWrite(direct, report, root, truth);
}

/** Every partition file of a shard-first root is one its manifest lists. */
async function checkShardFirst(direct: S3Store, report: ChaosReport, base: string, listing: Map<string, number>): Promise<void> {
  const metaObj = await direct.get(base + SHARD_META_KEY);
  const listed = new Set(metaObj ? ((JSON.parse(metaObj.body.toString('utf8')) as { partitions?: string[] }).partitions ?? []) : []);
  for (const key of listing.keys()) {
    const m = key.startsWith(`${base}_index/`) ? /^([^/]+)\.json$/.exec(key.slice(base.length + '_index/'.length)) : null;
    if (m && m[1] !== '_meta' && !listed.has(m[1])) report.leftovers.push(`${key}: a partition file the manifest does not list`);
  }
}

/** A dual-write root keeps a version-1 manifest, and each listed partition file mirrors the monolith's entries (a scoped pull reads them). */
async function checkDualWrite(direct: S3Store, report: ChaosReport, root: string, truth: Truth): Promise<void> {
  const base = `${root}/`;
  const metaObj = await direct.get(base + SHARD_META_KEY);
  const meta = metaObj ? (JSON.parse(metaObj.body.toString('utf8')) as { version?: number; partitions?: string[] }) : undefined;
  if (meta?.version !== 1) report.leftovers.push(`${root}: the dual-write manifest became ${JSON.stringify(meta)}`);
  for (const p of meta?.partitions ?? []) {
    const part = await direct.get(`${base}_index/${p}.json`);
    const got = part ? Object.keys((JSON.parse(part.body.toString('utf8')) as { entries?: object }).entries ?? {}).sort() : [];
    const want = [...truth.entries.keys()].filter((rel) => partitionOf(rel) === p).sort();
    if (JSON.stringify(got) !== JSON.stringify(want))
      report.finalMismatch.push(`${root}: partition ${p} mirrors ${got.length} entries, the monolith has ${want.length}`);
  }
}

/** What clients wrote of an entry still published (sha256, localMtime, simTag) is still there, unless the size changed since. */
async function checkClientFields(direct: S3Store, report: ChaosReport, cast: Cast): Promise<void> {
  for (const p of cast.published.values()) {
    const truth = await readTruth(direct, `${p.root}/`, p.layout);
    const e = truth.entries.get(p.rel);
    if (!e) continue; // already counted as a mismatch
    for (const field of ['sha256', 'localMtime', 'simTag'] as const) {
      if (e[field] !== p.entry[field] && e.size === p.entry.size)
        report.lostFields.push(
          `${p.root}/${p.rel}: ${field} ${JSON.stringify(e[field])}, the client wrote ${JSON.stringify(p.entry[field])}`,
        );
    }
  }
}
