/** One heal of a root (or of one namespace), carried by every step of it: what it heals, how, and what it may hold. */
import type { HealOptions } from './heal-types';
import { CLIENT_TURN } from './lock';
import { MemoryGuard, memoryBudget } from './memory';
import { checkNamespaceName, rootBase } from './names';
import type { PublishOptions } from './publish-types';
import type { S3Store } from './s3';
import { type DatastoreRoot, type IndexScope, describeScope } from './scope';

/** Parallel HeadObject requests when confirming, by default (see `HealOptions.concurrency`). */
const CONCURRENCY = 16;
/** The clock skew allowed for, by default (see `HealOptions.clockSkewMs`). */
const CLOCK_SKEW_MS = 300_000;

/** A heal under way: made once where a heal starts (`healRoot`, a repair's run), then handed down to each scope it heals. */
export class HealRun {
  /** The scope the heal was asked for: the root's own, or `options.namespace`. */
  readonly target: IndexScope;
  /** The key prefix of `target`, which the heal lists. */
  readonly base: string;
  /** Stops the heal, with `IndexTooLargeError`, before it holds more than its budget. */
  readonly guard: MemoryGuard;

  /** `listingStartedAt`: when the heal's listing started; by default that of `options.listing`, or now. */
  constructor(
    readonly store: S3Store,
    readonly root: DatastoreRoot,
    readonly options: HealOptions,
    readonly listingStartedAt: number = options.listing?.startedAt ?? Date.now(),
  ) {
    this.base = rootBase(root) + (options.namespace ? `${checkNamespaceName(options.namespace)}/` : '');
    this.target = options.namespace ? { root, namespace: options.namespace } : { root };
    this.guard = new MemoryGuard(memoryBudget(options.memoryBudget));
  }

  /** Parallel HeadObject requests when confirming what the listing may have seen wrongly. */
  get concurrency(): number {
    return this.options.concurrency ?? CONCURRENCY;
  }

  /**
   * Writes before this time (ms) are older than the listing, clocks apart: the listing is no snapshot, so an
   * entry written since may be an upload that landed after the listing passed its key, and is confirmed.
   */
  get since(): number {
    return this.listingStartedAt - (this.options.clockSkewMs ?? CLOCK_SKEW_MS);
  }

  /** The options of a publish of `scope`: the heal's, each event heard by `options.onEvent` under the scope's name too. */
  publishOptions(scope: IndexScope): PublishOptions {
    const name = describeScope(scope);
    const { onEvent, publish } = this.options;
    return {
      ...publish,
      // A heal takes the lock commit after commit: it leaves waiting clients a turn now and then.
      lock: { clientTurn: CLIENT_TURN, ...publish?.lock },
      onEvent: (event) => {
        onEvent?.(name, event);
        publish?.onEvent?.(event);
      },
    };
  }
}
