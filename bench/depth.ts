/**
 * How many round trips a run made one after another ("latencies deep"), measured at the client: each
 * request (each attempt) is one deeper than the deepest request that had finished when it was sent. On a
 * store whose every answer takes one fixed latency, a run takes about depth x latency plus its CPU time.
 */
import type { S3Client } from '@aws-sdk/client-s3';

/** The depth of the requests sent through one client so far. */
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

/** Adds a middleware to `client` that measures request depth. */
export function meterDepth(client: S3Client, trace = false): DepthMeter {
  let finished = 0;
  let deepest = 0;
  const log: NonNullable<DepthMeter['trace']> | undefined = trace ? [] : undefined;
  const started = performance.now();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const depth = finished + 1;
      deepest = Math.max(deepest, depth);
      const entry = log
        ? {
            op: (context.commandName ?? '?').replace(/Command$/, ''),
            depth,
            sentMs: performance.now() - started,
            doneMs: NaN,
            input: describe(args.input),
          }
        : undefined;
      if (entry) log!.push(entry);
      try {
        return await next(args);
      } finally {
        finished = Math.max(finished, depth);
        if (entry) entry.doneMs = performance.now() - started;
      }
    },
    // Beside the store's request counter: once per attempt, around the round trip and the reading of the answer.
    { step: 'deserialize', name: 'benchDepthMeter', override: true },
  );
  return { depth: () => deepest, trace: log };
}
