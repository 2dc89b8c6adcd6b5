/** The types of a publish: what a planner decides, how a publish is asked for, and what it reports. */
import type { DatastoreIndex } from './index-file';
import type { MirrorCheck } from './layouts/mirror-check';
import type { KnownIndex, LiveIndex } from './layouts/types';
import type { LockOptions } from './lock';
import type { IndexScope } from './scope';

/** What a planner decided for a live index: the index to write (none: nothing to change), and what it found on the way. */
export interface Plan<F> {
  readonly index?: DatastoreIndex;
  readonly facts: F;
}

/**
 * Decides the index a scope should have given what is live. `willWrite`, when given, is called once the
 * planner is sure it returns an index: the lock is then taken while it finishes the plan.
 */
export type Planner<F> = (live: LiveIndex, willWrite?: () => void) => Promise<Plan<F>>;

/** Structured events a caller may log. */
export type PublishEvent =
  | { readonly event: 'conflict'; readonly attempt: number; readonly key: string }
  | { readonly event: 'lock-wait'; readonly holder: string; readonly waitedMs: number }
  | { readonly event: 'conditional-writes-unsupported' }
  | { readonly event: 'kept-unreadable-copy'; readonly copyKey: string; readonly reason: string }
  | { readonly event: 'erased'; readonly round: number }
  | { readonly event: 'mirror-failed'; readonly key: string; readonly error: string }
  | { readonly event: 'held'; readonly reason: string };

/** How to publish: the settings a caller of a heal or a delta gives. */
export interface PublishOptions {
  /** How the datastore lock is waited for and held (see `LockOptions`). */
  readonly lock?: LockOptions;
  /** Conditional write attempts before giving up. @default 6 */
  readonly maxAttempts?: number;
  /** Re-checks after a write, re-applying what a racing writer erased; 0 stops at the write. @default 2 */
  readonly convergeRounds?: number;
  /**
   * Awaited before each write that could leave the scope half done for clients should the process die
   * (see `WriteOptions.beforeRecord`): the Lambda queues the finish of its own publish here. A throw stops the publish.
   */
  readonly beforeRecord?: (scope: IndexScope, earlierRecord?: boolean) => Promise<void>;
  /** Called with each structured event of the publish (a lost race, a lock wait, a kept copy), e.g. to log it. */
  readonly onEvent?: (event: PublishEvent) => void;
}

/** How one publish runs: the caller's settings, and what the heal or delta asking for it already knows. */
export interface PublishRunOptions extends PublishOptions {
  /** Partition files a listing saw under `_index/`: orphans to adopt on a shard-first scope, mirror files beside a monolith. */
  readonly shardPartitions?: readonly string[];
  /** The live index as read already (e.g. while the scope was listed): the first read, not sent again. */
  readonly before?: Promise<LiveIndex>;
  /** Mirror files of a dual-write scope each read holds against the monolith; stale ones are refreshed. */
  readonly mirrors?: MirrorCheck;
  /** On a shard-first scope, read only these partitions (see `ReadOptions.partitions`); after a lost race, every one. */
  readonly partitions?: ReadonlySet<string>;
  /** Called with the monolith's size before each read downloads it (see `ReadOptions.monolithBytes`). */
  readonly monolithBytes?: (bytes: number) => void;
  /**
   * Makes every read of the index instead of `readLiveIndex` (a heal's chunk reads its partitions alone, also
   * after a lost race); a re-check's read is given the index as written.
   */
  readonly read?: (known?: KnownIndex) => Promise<LiveIndex>;
}

/** What a publish did. */
export interface PublishOutcome<F> {
  /** True when the index was written at least once. */
  readonly published: boolean;
  /** Index writes made (a conflict is not a write). */
  readonly writes: number;
  /** Conditional writes that lost a race (412). */
  readonly conflicts: number;
  readonly lockWaits: number;
  /** Where the bytes of an unreadable index were kept before it was replaced. */
  readonly keptCopy?: string;
  /** False when the store rejected conditional writes and only the lock protected the write. */
  readonly conditional: boolean;
  /** The live index as it was first read. */
  readonly before: LiveIndex;
  /** The live index as last read: another writer's, when it healed the index first. */
  readonly last: LiveIndex;
  /** The index as written last, when written. */
  readonly index?: DatastoreIndex;
  /** Mirror partition files (or version-1 manifests) that could not be refreshed. */
  readonly mirrorFailures: number;
  /** The facts of every plan made, in order: the first is what the scope held before anything was written. */
  readonly plans: readonly F[];
  /** The facts of the plan whose index was written last. */
  readonly writtenFacts?: F;
}
