/** The types of a resumable repair, shared by its two ways (`repair.ts`, `repair-partitions.ts`). */
import type { HealOptions, HealReport } from './heal-types';

/** The saved state of an unfinished listing. */
export interface RepairProgress {
  readonly version: 1;
  /** When the listing began, in its first invocation. */
  readonly startedAt: string;
  /** The last key listed (full object key): the listing resumes after it. */
  readonly lastKey: string;
  readonly objectsListed: number;
  readonly invocations: number;
  /** Full keys of the saved parts, in listing order. */
  readonly parts: string[];
  readonly updatedAt: string;
  /** The listing is healed by partitions as it goes (see `repairByPartitions`): `parts` holds the paused heal, not objects. */
  readonly byPartitions?: boolean;
}

/** How to run a resumable repair; the heal options apply once the listing is complete. */
export interface ResumableRepairOptions extends Omit<HealOptions, 'listing' | 'lister'> {
  /** Milliseconds left in this invocation (e.g. `context.getRemainingTimeInMillis`). */
  readonly remainingMs: () => number;
  /** Stop listing once fewer milliseconds than this remain; at least one page is listed per run. @default 60000 */
  readonly reserveMs?: number;
  /** Saved progress older than this is dropped and the listing starts over. @default 86400000 (a day) */
  readonly maxProgressAgeMs?: number;
  /** Keys per ListObjectsV2 page. @default 1000 */
  readonly pageSize?: number;
}

/** What one run of a resumable repair did. */
export type ResumableRepairResult =
  | {
      readonly status: 'complete';
      readonly report: HealReport;
      /** Runs the listing took, this one included. */
      readonly invocations: number;
      /** Objects listed in earlier runs whose drift was confirmed with HeadObject before healing. */
      readonly confirmed: number;
    }
  | {
      readonly status: 'incomplete';
      /** Where progress was saved; undefined for `check`, which saves nothing. */
      readonly progressKey?: string;
      readonly objectsListed: number;
      readonly lastKey: string;
      readonly invocations: number;
      readonly listingMs: number;
    };
