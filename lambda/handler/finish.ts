/**
 * Finishing the handler's own publishes. A run killed between a publish record and its last write (shard-first:
 * the partition files ahead of `_meta.json`; dual-write: the monolith ahead of its mirror) leaves clients a
 * scope they see half done until some run reads it again. So before such a record the run queues a delayed
 * `finishPublish` for the scope: whether the run died or not it arrives, and costs one HeadObject when the
 * record is gone.
 */
import { type IndexScope, describeScope } from '../lib/scope';
import type { SelfQueue } from './messages';
import { Metric, count, logger } from './observability';

/** Queues the finish of each publish that could be left half done, before its record is written. */
export class PublishFinisher {
  /** When a finish was last queued per scope: one still delayed covers a publish begun meanwhile. */
  private readonly queuedAt = new Map<string, number>();

  constructor(
    private readonly queue: SelfQueue,
    /** `DATASTORE_FINISH_DELAY_SECONDS`. */
    readonly delaySeconds: number,
  ) {}

  /**
   * The `beforeRecord` of a publish: queues a finish of `scope` unless one queued earlier is still delayed
   * (it arrives after this record is written, so it covers this publish too). A publish that found an earlier
   * one's shard-first record asks for a listing: it deletes that record, and only a listing adopts the partition
   * files the manifest may not list yet. A failed send is logged and the publish goes on, as it did before
   * finishes were queued: the next run of the scope, or the schedule, finishes it.
   */
  readonly beforeRecord = async (scope: IndexScope, earlierRecord = false): Promise<void> => {
    const id = describeScope(scope);
    const now = Date.now();
    const earlier = this.queuedAt.get(id);
    if (!earlierRecord && earlier !== undefined && now < earlier + this.delaySeconds * 1000) return;
    try {
      await this.queue.sendFinish(scope, 1, this.delaySeconds, earlierRecord);
      this.queuedAt.set(id, now);
      count(Metric.FinishesSent, 1);
    } catch (err) {
      logger.warn('could not queue the finish of a publish; the next run of the scope finishes it if this one dies', {
        scope: id,
        error: err as Error,
      });
    }
  };
}
