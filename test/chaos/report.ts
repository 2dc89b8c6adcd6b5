/** What a chaos run is asked to do and what it reports: counts, checks made, and every broken invariant. */
import { CHAOS_LAYOUTS, type ChaosLayout, type ClientStats } from './clients';
import { FAULT_KINDS, type FaultKind, type FaultProxy } from './fault-proxy';

export interface ChaosOptions {
  readonly seed: number;
  readonly seconds: number;
  readonly faults?: boolean;
  readonly kills?: boolean;
  readonly clientsPerRoot?: number;
  readonly log?: (line: string) => void;
  /** Hears every S3 request the indexer (the Lambda bundle and the command) sends, before any fault. */
  readonly onIndexerRequest?: (method: string, url: string) => void;
}

export interface ChaosReport {
  seed: number;
  seconds: number;
  layouts: ChaosLayout[];
  pushes: number;
  uploads: number;
  clientDeletes: number;
  oobOps: number;
  repairRuns: number;
  repairExits: Record<string, number>;
  lambdaBatches: number;
  lambdaRecords: number;
  itemFailures: number;
  faults: Record<FaultKind, number>;
  indexerRequests: number;
  kills: Record<string, number>;
  entriesChecked: number;
  finalEntries: number;
  maxLockWaitMs: number;
  maxLockWaitAfterKillMs: number;
  lockTimeouts: number;
  /** Client lock waits past 30 s, each with who held the lock meanwhile (not a failure below 60 s). */
  longLockWaits: string[];
  vanished: string[];
  lostFields: string[];
  /** A partition some manifest listed that is no longer listed, or whose file is gone: no writer may remove one. */
  removedShards: string[];
  finalMismatch: string[];
  leftovers: string[];
  crashesWithoutMessage: string[];
  /** Every error an indexer process ended a run or a root on, by name (`repair` exits and the Lambda's failed roots). */
  indexerErrors: Record<string, number>;
  /** One line for each of those errors whose name is not in `EXPECTED_ERRORS`: a bug, even when the data stayed whole. */
  unexpectedErrors: string[];
  clientErrors: string[];
  drainMs: number;
  ok: boolean;
}

/** The report of a run that has not started: every count 0, no violation, not ok yet. */
export function emptyReport(options: ChaosOptions): ChaosReport {
  return {
    seed: options.seed,
    seconds: options.seconds,
    layouts: [...CHAOS_LAYOUTS],
    pushes: 0,
    uploads: 0,
    clientDeletes: 0,
    oobOps: 0,
    repairRuns: 0,
    repairExits: {},
    lambdaBatches: 0,
    lambdaRecords: 0,
    itemFailures: 0,
    faults: { slowdown: 0, reset: 0, 'drop-answer': 0, delay: 0 },
    indexerRequests: 0,
    kills: {},
    entriesChecked: 0,
    finalEntries: 0,
    maxLockWaitMs: 0,
    maxLockWaitAfterKillMs: 0,
    lockTimeouts: 0,
    longLockWaits: [],
    vanished: [],
    lostFields: [],
    removedShards: [],
    finalMismatch: [],
    leftovers: [],
    crashesWithoutMessage: [],
    indexerErrors: {},
    unexpectedErrors: [],
    clientErrors: [],
    drainMs: 0,
    ok: false,
  };
}

/**
 * The errors a chaos run may end an indexer's work on: a lock held past the wait, an index that kept
 * changing under the lock, and S3 failing past the retries (the fault proxy's 503s, resets and dropped
 * answers). Anything else, an `UnexpectedError` or a `TypeError` above all, is a bug the data checks can miss.
 */
export const EXPECTED_ERRORS: ReadonlySet<string> = new Set(['LockBusyError', 'PublishConflictError', 'S3UnavailableError']);

/** Counts an error an indexer process (`who`) ended on, and keeps it as a problem when it is not expected. */
export function noteIndexerError(report: ChaosReport, who: string, name: string, message: string): void {
  report.indexerErrors[name] = (report.indexerErrors[name] ?? 0) + 1;
  if (!EXPECTED_ERRORS.has(name)) report.unexpectedErrors.push(`${who}: ${name}: ${message.slice(0, 300)}`);
}

/** Adds the requests an indexer process sent through `proxy` and the faults it met there. */
export function addProxyCounts(report: ChaosReport, proxy: FaultProxy): void {
  report.indexerRequests += proxy.requests;
  for (const k of FAULT_KINDS) report.faults[k] += proxy.faults[k];
}

/** Adds what the clients did and waited to the report (given when the indexer was killed), and decides `ok`. */
export function concludeReport(report: ChaosReport, stats: ClientStats, killTimes: readonly number[]): void {
  report.pushes = stats.pushes;
  report.uploads = stats.uploads;
  report.clientDeletes = stats.deletes;
  report.oobOps = stats.oobOps;
  report.maxLockWaitMs = Math.max(0, ...stats.lockWaitsMs);
  // A wait that ended after a kill and began at most one indexer lock ttl (10 s) after it: what a killed indexer costs clients.
  report.maxLockWaitAfterKillMs = Math.max(
    0,
    ...stats.lockWaitsMs.filter((ms, i) =>
      killTimes.some((t) => t <= stats.lockWaitStarts[i] + ms && stats.lockWaitStarts[i] <= t + 10_000),
    ),
  );
  report.lockTimeouts = stats.lockTimeouts;
  report.longLockWaits = stats.longLockWaits.map((w) => w.text);
  report.clientErrors = stats.errors;
  report.ok = problemsOf(report).length === 0 && report.lockTimeouts === 0;
}

/** Every broken invariant a run reported, one line each (lock timeouts are counted apart). */
export function problemsOf(report: ChaosReport): string[] {
  return [
    ...report.vanished,
    ...report.lostFields,
    ...report.removedShards,
    ...report.finalMismatch,
    ...report.leftovers,
    ...report.crashesWithoutMessage,
    ...report.unexpectedErrors,
    ...report.clientErrors,
  ];
}

/** The command that replays a seed. */
export function replayCommand(options: ChaosOptions): string {
  const flags = [`--seed ${options.seed}`, `--seconds ${options.seconds}`];
  if (options.faults === false) flags.push('--no-faults');
  if (options.kills === false) flags.push('--no-kills');
  return `npm run chaos -- ${flags.join(' ')}`;
}
