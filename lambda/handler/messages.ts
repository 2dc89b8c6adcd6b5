/** The handler's own queue messages: delayed re-checks of a delta, and continuations of an unfinished repair. */
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { type IndexScope, describeScope } from '../lib/scope';
import { isInternalKey, isRefusedKey } from '../lib/keys';
import { logger } from './observability';

/** Re-check these keys of a scope: HEAD each and make the index say what S3 says. */
export interface RecheckRequest {
  readonly prefix: string;
  readonly namespace?: string;
  /** Scope-relative keys. */
  readonly keys: string[];
  /** 1 for the first re-check of a delta; a re-check that had to restore something sends the next round. */
  readonly round: number;
  /**
   * What the delta left in the index per key: the entry's size, or null for no entry. A key expected
   * absent whose entry is still absent needs no HeadObject; every key indexed as present is asked of S3
   * (its event may have been a late one), and so are keys without an expectation.
   */
  readonly expected?: Readonly<Record<string, number | null>>;
}

/** Continue the saved full repair of a root (or of one namespace); with `start`, begin one if none is saved. */
export interface ContinueRepairRequest {
  readonly prefix: string;
  readonly namespace?: string;
  /** Set for a root the schedule had no time left to begin. */
  readonly start?: boolean;
}

/**
 * Finish a publish of a scope that a run may have left half done (killed between its publish record and its
 * last write): sent before that record, so it arrives whether the run died or not; a record gone costs one HEAD.
 */
export interface FinishPublishRequest {
  readonly prefix: string;
  readonly namespace?: string;
  /** 1 when sent before a publish; a finish that met a busy lock sends the next round. */
  readonly round: number;
  /** Heal from a listing even when the record is gone: the publish found an earlier one's shard-first record (see `PublishFinisher`). */
  readonly listing?: true;
}

/** A message body the handler sent itself, or undefined when the body is not one. */
export type OwnMessage =
  | { readonly kind: 'recheck'; readonly request: RecheckRequest }
  | { readonly kind: 'continue-repair'; readonly request: ContinueRepairRequest }
  | { readonly kind: 'finish-publish'; readonly request: FinishPublishRequest };

/** Re-check rounds per delta: a push that keeps erasing the same keys is caught at most this many times, then the schedule repairs. */
export const MAX_RECHECK_ROUNDS = 3;

/**
 * Finish rounds of one publish: a finish that meets the lock busy (the run still alive, or a client pushing)
 * looks again after the delay, up to this many times (enough to outlast the longest Lambda run), then the schedule finishes it.
 */
export const MAX_FINISH_ROUNDS = 40;

/**
 * Runs of one saved repair listing that queue their own continuation. Past it the chain of messages the function
 * sends itself ends and the next schedule resumes the listing from its saved progress, one run per schedule.
 */
export const MAX_REPAIR_CONTINUATIONS = 100;

/** Keeps each message well under SQS's 256 KiB body limit. */
const MAX_BODY_CHARS = 200_000;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalName(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** A namespace as a finish names it: one folder name that is neither internal nor refused by clients, else undefined. */
function namespaceName(value: unknown): string | undefined {
  if (typeof value !== 'string' || value === '' || value.includes('/')) return undefined;
  return isInternalKey(value) || isRefusedKey(value) ? undefined : value;
}

/** Reads a `finishPublish` body strictly: anything malformed is no message of ours (skipped as unknown, never acted on). */
function finishRequestOf(value: unknown): FinishPublishRequest | undefined {
  if (!isRecord(value) || typeof value.prefix !== 'string') return undefined;
  const namespace = value.namespace === undefined ? undefined : namespaceName(value.namespace);
  if (value.namespace !== undefined && namespace === undefined) return undefined;
  const round = value.round === undefined ? 1 : value.round;
  if (typeof round !== 'number' || !Number.isInteger(round) || round < 1 || round > MAX_FINISH_ROUNDS) return undefined;
  if (value.listing !== undefined && value.listing !== true) return undefined;
  return { prefix: value.prefix, ...(namespace ? { namespace } : {}), round, ...(value.listing ? { listing: true as const } : {}) };
}

/** Reads a parsed body as one of the handler's own messages. */
export function ownMessageOf(json: unknown): OwnMessage | undefined {
  if (!isRecord(json)) return undefined;
  const recheck = json.recheck;
  if (isRecord(recheck) && typeof recheck.prefix === 'string' && Array.isArray(recheck.keys)) {
    const keys = recheck.keys.filter((k): k is string => typeof k === 'string' && k !== '');
    const round = typeof recheck.round === 'number' && Number.isInteger(recheck.round) && recheck.round > 0 ? recheck.round : 1;
    let expected: Record<string, number | null> | undefined;
    if (isRecord(recheck.expected)) {
      expected = {};
      for (const [key, size] of Object.entries(recheck.expected)) {
        if (size === null || (typeof size === 'number' && Number.isInteger(size) && size >= 0)) expected[key] = size;
      }
    }
    return {
      kind: 'recheck',
      request: { prefix: recheck.prefix, namespace: optionalName(recheck.namespace), keys, round, ...(expected ? { expected } : {}) },
    };
  }
  if ('finishPublish' in json) {
    const request = finishRequestOf(json.finishPublish);
    return request ? { kind: 'finish-publish', request } : undefined;
  }
  const cont = json.continueRepair;
  if (isRecord(cont) && typeof cont.prefix === 'string') {
    return {
      kind: 'continue-repair',
      request: { prefix: cont.prefix, namespace: optionalName(cont.namespace), start: cont.start === true || undefined },
    };
  }
  return undefined;
}

/** Splits keys into re-check messages that each fit in one SQS body; `expected` rides along per key. */
export function recheckBodies(
  scope: IndexScope,
  keys: readonly string[],
  round: number,
  expected?: ReadonlyMap<string, number | null>,
): string[] {
  const bodies: string[] = [];
  let chunk: string[] = [];
  let chars = 0;
  const flush = (): void => {
    if (!chunk.length) return;
    const request: RecheckRequest = {
      prefix: scope.root.prefix,
      namespace: scope.namespace,
      keys: chunk,
      round,
      ...(expected ? { expected: Object.fromEntries(chunk.filter((k) => expected.has(k)).map((k) => [k, expected.get(k)!])) } : {}),
    };
    bodies.push(JSON.stringify({ recheck: request }));
    chunk = [];
    chars = 0;
  };
  for (const key of [...keys].sort()) {
    // The key twice (list and map) plus a size.
    const size = (expected ? 2 : 1) * (JSON.stringify(key).length + 1) + (expected ? 16 : 0);
    if (chars + size > MAX_BODY_CHARS) flush();
    chunk.push(key);
    chars += size;
  }
  flush();
  return bodies;
}

/** Sends the handler's own messages to `DATASTORE_QUEUE_URL`. */
export class SelfQueue {
  constructor(
    private readonly sqs: SQSClient,
    readonly url: string,
  ) {}

  /** Sends re-checks of `keys` after `delaySeconds`; returns the number of messages sent. */
  async sendRecheck(
    scope: IndexScope,
    keys: readonly string[],
    round: number,
    delaySeconds: number,
    expected?: ReadonlyMap<string, number | null>,
  ): Promise<number> {
    const bodies = recheckBodies(scope, keys, round, expected);
    for (const body of bodies) {
      await this.sqs.send(new SendMessageCommand({ QueueUrl: this.url, MessageBody: body, DelaySeconds: delaySeconds }));
    }
    return bodies.length;
  }

  /** Sends a finish of a publish of `scope` after `delaySeconds`. */
  async sendFinish(scope: IndexScope, round: number, delaySeconds: number, listing = false): Promise<void> {
    const request: FinishPublishRequest = {
      prefix: scope.root.prefix,
      namespace: scope.namespace,
      round,
      ...(listing ? { listing: true as const } : {}),
    };
    await this.sqs.send(
      new SendMessageCommand({ QueueUrl: this.url, MessageBody: JSON.stringify({ finishPublish: request }), DelaySeconds: delaySeconds }),
    );
  }

  /**
   * Asks a fresh invocation to continue the saved repair of a root or namespace (or, with `start`, to begin one).
   * `runs` is how many runs the saved listing took (`invocations`); from `MAX_REPAIR_CONTINUATIONS` on, nothing
   * is sent and the schedule resumes it.
   */
  async sendContinuation(scope: IndexScope, start = false, runs = 0): Promise<void> {
    if (runs >= MAX_REPAIR_CONTINUATIONS) {
      logger.warn('the repair took many runs; the next schedule continues it', { scope: describeScope(scope), runs });
      return;
    }
    const request: ContinueRepairRequest = { prefix: scope.root.prefix, namespace: scope.namespace, start: start || undefined };
    await this.sqs.send(new SendMessageCommand({ QueueUrl: this.url, MessageBody: JSON.stringify({ continueRepair: request }) }));
  }
}
