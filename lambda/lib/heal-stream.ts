/**
 * The listing of a root (or namespace) whose own scope is shard-first, taken page by page in key order and
 * fed to that scope's heal by partitions (`shard-heal.ts`); objects of namespaces inside the root are
 * gathered as `listScopes` gathers them, for the whole-index heal.
 */
import type { HealRun } from './heal-run';
import type { ScopeReport } from './heal-types';
import type { ListedObject } from './index-file';
import { compareKeys } from './key-space';
import { isSkippedObject, topFolder } from './keys';
import type { ShardBase } from './layouts/shard-chunk';
import { namespaceExists, notePartition } from './list';
import { holdHeapGrowth } from './memory';
import type { ListPage } from './s3';
import type { IndexScope } from './scope';
import { PartitionHeal } from './shard-heal';

/** What a heal by partitions while listing leaves for the rest of the heal. */
export interface PartitionListing {
  /** The report of the shard-first scope healed while listing. */
  readonly report: ScopeReport;
  /** Objects of namespaces inside the root (none when a namespace was listed), keyed relative to each. */
  readonly namespaces: Map<string, Map<string, ListedObject>>;
  /** Partition files seen under each namespace's `_index/`. */
  readonly shardPartitions: Map<string, string[]>;
  readonly objectsSeen: number;
  readonly listingMs: number;
}

/** The pages a heal by partitions takes, in key order. */
export interface ListingSource {
  /** The scope's key prefix, cut from every key listed. */
  readonly base: string;
  readonly pages: AsyncIterable<ListPage> | Iterable<ListPage>;
  /** The listing is of the whole root, namespaces included: they are told apart and gathered. */
  readonly namespaces: boolean;
  /** Asked after each page: true stops the listing there (see `feedListing`). */
  readonly stopWhen?: () => boolean;
}

/** What `feedListing` took from a listing. */
export interface FedListing {
  readonly namespaces: Map<string, Map<string, ListedObject>>;
  readonly shardPartitions: Map<string, string[]>;
  /** Top-level folders asked about, and whether each is a namespace (carried to a later run). */
  readonly folders: Map<string, boolean>;
  readonly objectsSeen: number;
  /** The last key (full) of the page after which `stopWhen` stopped the listing; undefined when it ended. */
  readonly stoppedAfter?: string;
}

/**
 * Lists `base` (the scope's key prefix) with `pages` in key order and heals `scope` by partitions as the
 * listing passes them. With `source.namespaces`, a top-level folder holding `.namespace.json` is a namespace
 * (asked once per folder as the listing reaches it): its objects are gathered, not healed here.
 */
export async function healWhileListing(
  run: HealRun,
  scope: IndexScope,
  shards: ShardBase,
  source: ListingSource,
): Promise<PartitionListing> {
  const release = holdHeapGrowth();
  try {
    const heal = new PartitionHeal(run, scope, shards);
    const fed = await feedListing(run, heal, source);
    const listingMs = Date.now() - run.listingStartedAt;
    const report = await heal.finish();
    return { report, namespaces: fed.namespaces, shardPartitions: fed.shardPartitions, objectsSeen: fed.objectsSeen, listingMs };
  } finally {
    release();
  }
}

/**
 * Feeds the listing's pages to `heal` (see `healWhileListing`) until it ends, or until `source.stopWhen`
 * says stop after a page. `carried`: what an earlier run of the same listing took (folders known, objects
 * seen); a namespace found then is not gathered again, as its objects listed then are gone.
 */
export async function feedListing(
  run: HealRun,
  heal: PartitionHeal,
  source: ListingSource,
  carried?: { readonly folders: ReadonlyMap<string, boolean>; readonly objectsSeen: number },
): Promise<FedListing> {
  const { store, root, options } = run;
  const { base, pages } = source;
  const namespaces = new Map<string, Map<string, ListedObject>>();
  const shardPartitions = new Map<string, string[]>();
  const folders = new Map<string, boolean>(carried?.folders ?? []);
  let objectsSeen = carried?.objectsSeen ?? 0;
  for await (const page of pages) {
    let last: string | undefined;
    for (const object of page.objects) {
      objectsSeen++;
      // A slice keeps its key alive, a key of the same object held no longer than the slice: copying each costs more.
      const rel = base ? object.key.slice(base.length) : object.key;
      last = rel;
      const top = source.namespaces ? topFolder(rel) : undefined;
      let namespace = top !== undefined ? folders.get(top) : false;
      if (namespace === undefined) {
        namespace = await namespaceExists(store, root, top!);
        folders.set(top!, namespace);
        if (namespace && !options.skipNamespace?.(top!)) namespaces.set(top!, new Map());
      }
      if (namespace) {
        const objects = namespaces.get(top!);
        if (!objects) continue;
        const scoped = rel.slice(top!.length + 1);
        if (!isSkippedObject(scoped, object.size))
          objects.set(scoped, { key: scoped, size: object.size, lastModified: object.lastModified });
        else notePartition(shardPartitions, top!, scoped);
        continue;
      }
      if (!isSkippedObject(rel, object.size)) heal.add(rel, object);
    }
    options.onListed?.(objectsSeen);
    if (last !== undefined) await heal.advance(last);
    if (last !== undefined && source.stopWhen?.()) {
      return { namespaces, shardPartitions, folders, objectsSeen, stoppedAfter: base + last };
    }
  }
  return { namespaces, shardPartitions, folders, objectsSeen };
}

/** A scope's objects held in memory (a listing resumed across invocations), as pages in key order. */
export function* pagesInKeyOrder(objects: ReadonlyMap<string, ListedObject>, pageSize = 1000): Generator<ListPage> {
  const keys = [...objects.keys()].sort(compareKeys);
  for (let i = 0; i < keys.length; i += pageSize) {
    const slice = keys.slice(i, i + pageSize).map((key) => {
      const o = objects.get(key)!;
      return { key, size: o.size, lastModified: o.lastModified, etag: '' };
    });
    yield { objects: slice, prefixes: [] };
  }
}
