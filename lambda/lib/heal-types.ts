/** What a heal takes and what it reports, shared by the whole heal and the heal by partitions. */
import type { Drift, DriftCounts } from './drift';
import type { DatastoreIndex } from './index-file';
import type { Layout } from './layouts/types';
import type { Lister, ScopedListing } from './list';
import type { MemoryBudget } from './memory';
import type { PublishEvent, PublishOptions } from './publish';
import type { DatastoreRoot, IndexScope } from './scope';

/** `check` reports drift and writes nothing; `repair` publishes the healed index. */
export type HealMode = 'check' | 'repair';

/** How to heal. */
export interface HealOptions {
  readonly mode: HealMode;
  /** Heal only this namespace; by default the root's own index and every namespace in it. */
  readonly namespace?: string;
  /** How the root is listed. @default `parallelLister()`: slices of the key space listed 16 requests at a time (a shard-first scope's: with a `window` of `PARTITION_WINDOW` pages; without ETags) */
  readonly lister?: Lister;
  /** A listing made already (of the root, or of `namespace` when given), e.g. one resumed across invocations; `lister` is then unused. */
  readonly listing?: ScopedListing;
  readonly publish?: PublishOptions;
  /** Parallel HeadObject requests when confirming stale entries. @default 16 */
  readonly concurrency?: number;
  /** Entries this much newer than the listing's start, or newer, are confirmed with HeadObject before removal. @default 300000 */
  readonly clockSkewMs?: number;
  readonly onEvent?: (scope: string, event: PublishEvent) => void;
  /** Stop with `EmptyDatastoreError` when the root (or namespace) holds no object at all, rather than create an empty index there (a mistyped prefix). @default false */
  readonly refuseEmpty?: boolean;
  /** Namespaces to leave alone (neither checked nor written) in a heal of the whole root. @default none */
  readonly skipNamespace?: (namespace: string) => boolean;
  /** Hears the count of objects listed so far, after each page of the root's listing. */
  readonly onListed?: (objectsListed: number) => void;
  /**
   * Hears each page of the listing of a root (or namespace) healed whole, as it comes and before any plan:
   * what a hydrate may fetch ahead. Keys are full; nothing is decided by them yet.
   */
  readonly onListedPage?: (objects: readonly { readonly key: string; readonly size: number }[]) => void;
  /**
   * Hears, once per scope healed whole and before anything of it is published, the index its first plan
   * leaves: the healed index, or the index as read when it was true. A scope whose index is held, or that is
   * healed by partitions, is not heard. The index published may still differ (another writer's change read
   * under the lock); the scope's report says what was.
   */
  readonly onPlanned?: (scope: IndexScope, index: DatastoreIndex) => void;
  /**
   * Bytes the heal may hold (its estimate: listing, the index read, the healed copy, the index as written);
   * past them a monolith or dual-write scope stops with `IndexTooLargeError`, having written nothing.
   * @default from the environment: a share of `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` in a Lambda, else of the V8 heap limit
   */
  readonly memoryBudget?: number | MemoryBudget;
  /**
   * Entry changes a shard-first heal commits at once, at most (one lock, one manifest write). While the
   * listing goes on, a commit starts once a fifth of this is kept. @default 100000
   */
  readonly chunkEntries?: number;
  /** Drifting keys of each kind a report names, the first in key order (its counts stay whole); a heal by partitions then holds no more. @default all */
  readonly keys?: number;
}

/** What a heal found and did for one index. */
export interface ScopeReport {
  readonly scope: string;
  readonly namespace?: string;
  readonly layout: Layout;
  /** The index's state before the heal. */
  readonly indexState: 'absent' | 'unreadable' | 'valid';
  readonly unreadableReason?: string;
  /** Data objects in the listing, refused keys apart. */
  readonly objects: number;
  readonly drift: DriftCounts;
  /** The drifting keys, sorted (the first `HealOptions.keys` of each kind). */
  readonly driftKeys: Drift;
  /** Keys a shard-first root cannot hold (no partition); left out. */
  readonly unshardable: number;
  /** Keys clients refuse (see `refusedKeyReason`), in the listing or in the index: never indexed, removed from an index that held them. */
  readonly refused: number;
  /** The refused keys, sorted. */
  readonly refusedKeys: string[];
  /** Why the layout needed a write although its entries were true (an unfinished publish, an orphan shard, a manifest to rebuild). */
  readonly pending?: string;
  /** Why the scope was left as it is (a manifest that does not parse and does not say its layout); the heal could not be made. */
  readonly held?: string;
  /** Partitions whose dual-write mirror file differed from the monolith (a scoped pull would have missed or 404ed on entries), sorted. */
  readonly staleMirrors: string[];
  /** Mirror partition files (dual-write) that could not be refreshed. */
  readonly mirrorFailures: number;
  /** Entries in the index after the heal, as last read when another writer healed it first (for `check`, what it would have). */
  readonly entries: number;
  readonly published: boolean;
  readonly conflicts: number;
  readonly lockWaits: number;
  readonly keptCopy?: string;
  readonly conditional: boolean;
  readonly publishMs: number;
  /** The healed index, when it was published. */
  readonly index?: DatastoreIndex;
}

/** What a heal of a root did. */
export interface HealReport {
  readonly root: DatastoreRoot;
  readonly scopes: ScopeReport[];
  readonly objectsSeen: number;
  readonly listingMs: number;
  /** Set when the root (or namespace) holds no object at all, not even an index (most likely a mistyped prefix): what to do. */
  readonly empty?: string;
}
