/**
 * What a heal by partitions has found and done so far, kept apart from how it goes: counts, drift samples
 * and publish outcomes, which a repair paused between invocations saves and restores as JSON.
 */
import type { ScopeReport } from './heal-types';
import { DriftSample } from './key-sample';
import type { UnreadablePart } from './layouts/types';
import type { PublishOutcome } from './publish-types';
import { type IndexScope, describeScope } from './scope';

/** A tally as JSON (see `HealTally.save`): the report's counts, with the refused keys and the unreadable file. */
export interface SavedTally
  extends Pick<
    ScopeReport,
    | 'objects'
    | 'unshardable'
    | 'entries'
    | 'drift'
    | 'driftKeys'
    | 'held'
    | 'published'
    | 'conflicts'
    | 'lockWaits'
    | 'keptCopy'
    | 'conditional'
    | 'publishMs'
  > {
  readonly refused: string[];
  readonly unreadable?: { readonly key: string; readonly reason: string };
}

/** The running totals of one heal by partitions. */
export class HealTally {
  objects = 0;
  unshardable = 0;
  entries = 0;
  readonly refused = new Set<string>();
  readonly drift: DriftSample;
  /** The first partition file found unreadable (its reason names it in the report). */
  unreadable?: Pick<UnreadablePart, 'key' | 'reason'>;
  /** Why a commit left its partitions as they are (see `LiveLayout.hold`). */
  held?: string;
  private published = false;
  private conflicts = 0;
  private lockWaits = 0;
  private keptCopy?: string;
  private conditional = true;
  private publishMs = 0;

  constructor(keys?: number, saved?: SavedTally) {
    this.drift = new DriftSample(keys);
    if (!saved) return;
    this.objects = saved.objects;
    this.unshardable = saved.unshardable;
    this.entries = saved.entries;
    for (const key of saved.refused) this.refused.add(key);
    this.drift.missing.restore(saved.driftKeys.missing, saved.drift.missing);
    this.drift.stale.restore(saved.driftKeys.stale, saved.drift.stale);
    this.drift.resized.restore(saved.driftKeys.resized, saved.drift.resized);
    this.unreadable = saved.unreadable;
    this.held = saved.held;
    this.published = saved.published;
    this.conflicts = saved.conflicts;
    this.lockWaits = saved.lockWaits;
    this.keptCopy = saved.keptCopy;
    this.conditional = saved.conditional;
    this.publishMs = saved.publishMs;
  }

  /** Adds what one commit's publish did, and how long it took. */
  committed(outcome: PublishOutcome<unknown>, ms: number): void {
    this.publishMs += ms;
    this.published ||= outcome.published;
    this.conflicts += outcome.conflicts;
    this.lockWaits += outcome.lockWaits;
    this.keptCopy ??= outcome.keptCopy;
    this.held ??= outcome.before.hold ?? outcome.last.hold;
    this.conditional &&= outcome.conditional;
  }

  /** The tally as JSON, to be restored by a later run (`new HealTally(keys, saved)`). */
  save(): SavedTally {
    return {
      objects: this.objects,
      unshardable: this.unshardable,
      entries: this.entries,
      refused: [...this.refused],
      drift: this.drift.counts(),
      driftKeys: this.drift.keys(),
      ...(this.unreadable ? { unreadable: { key: this.unreadable.key, reason: this.unreadable.reason } } : {}),
      held: this.held,
      published: this.published,
      conflicts: this.conflicts,
      lockWaits: this.lockWaits,
      keptCopy: this.keptCopy,
      conditional: this.conditional,
      publishMs: this.publishMs,
    };
  }

  report(scope: IndexScope): ScopeReport {
    const { refused, unreadable, ...counts } = this.save();
    return {
      ...counts,
      scope: describeScope(scope),
      namespace: scope.namespace,
      layout: 'shard-first',
      indexState: unreadable ? 'unreadable' : 'valid',
      unreadableReason: unreadable?.reason,
      refused: refused.length,
      refusedKeys: refused.sort(),
      staleMirrors: [],
      mirrorFailures: 0,
    };
  }
}
