/**
 * How many round trips a run made one after another ("latencies deep"), measured at the client: each
 * request (each attempt) is one deeper than the deepest request that had finished when it was sent. On a
 * store whose every answer takes one fixed latency, a run takes about depth x latency plus its CPU time.
 */
import type { S3Store } from '../lambda/lib/s3';

/** The depth of the requests a store sent so far. */
export interface DepthMeter {
  /** The deepest request so far (0 before any). */
  depth(): number;
  /** Requests sent and their depth, in order sent, when `trace` was asked for. */
  readonly trace?: { op: string; depth: number; sentMs: number; doneMs: number; input: string }[];
}

function describe(input: unknown): string {
  const i = input as Record<string, unknown>;
  return ['Prefix', 'Delimiter', 'StartAfter', 'Key', 'IfMatch', 'IfNoneMatch']
    .filter((k) => i[k] !== undefined)
    .map((k) => `${k}=${String(i[k])}`)
    .join(' ');
}

/**
 * Measures the request depth of `store`: a middleware on its client for what the SDK sends, and an observer
 * for what the store sends directly (listing pages, object streams, HEADs).
 */
export function meterDepth(store: S3Store, trace = false): DepthMeter {
  let finished = 0;
  let deepest = 0;
  const log: NonNullable<DepthMeter['trace']> | undefined = trace ? [] : undefined;
  const started = performance.now();
  /** One attempt sent now; the function returned is called when it is done. */
  const sent = (op: string, input: unknown): (() => void) => {
    const depth = finished + 1;
    deepest = Math.max(deepest, depth);
    const entry = log ? { op, depth, sentMs: performance.now() - started, doneMs: NaN, input: describe(input) } : undefined;
    if (entry) log!.push(entry);
    return () => {
      finished = Math.max(finished, depth);
      if (entry) entry.doneMs = performance.now() - started;
    };
  };
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      const done = sent((context.commandName ?? '?').replace(/Command$/, ''), args.input);
      try {
        return await next(args);
      } finally {
        done();
      }
    },
    // Beside the store's request counter: once per attempt, around the round trip and the reading of the answer.
    { step: 'deserialize', name: 'benchDepthMeter', override: true },
  );
  store.observe(sent);
  return { depth: () => deepest, trace: log };
}
