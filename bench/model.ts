/** Starts the S3 model (`support/s3-model/`) in a child process and talks to it over IPC. */
import { join } from 'node:path';
import { type WithoutId, forkHost } from './host';
import type { SeedOptions, SeedResult } from '../support/s3-model/seed';
import type { RequestCounts } from '../support/s3-model/server';

/** A request to the model's process. */
export type HostRequest =
  | { readonly id: number; readonly op: 'seed'; readonly bucket: string; readonly options: SeedOptions }
  | { readonly id: number; readonly op: 'counts' | 'cpu' | 'reset' | 'stop' };

/** Its answer; id 0 announces the endpoint once the server listens. */
export type { HostReply } from './host';

/** The model running in its own process. */
export interface ModelProcess {
  readonly endpoint: string;
  readonly latencyMs: number;
  seed(bucket: string, options: SeedOptions): Promise<SeedResult>;
  /** Requests the model answered, by operation, since start or the last reset. */
  counts(): Promise<RequestCounts>;
  /** CPU time the model's process has used, in ms (user + system). */
  cpuMs(): Promise<number>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

/** Forks `model-host.ts` (through tsx) and resolves once its server listens on 127.0.0.1. */
export async function startModelProcess(latencyMs: number, options: { readonly heapMb?: number } = {}): Promise<ModelProcess> {
  const flags = options.heapMb ? [`--max-old-space-size=${options.heapMb}`] : [];
  const host = await forkHost<WithoutId<HostRequest>>(join(__dirname, 'model-host.ts'), [String(latencyMs)], 's3-model', flags);
  return {
    endpoint: host.endpoint,
    latencyMs,
    seed: (bucket, options) => host.ask<SeedResult>({ op: 'seed', bucket, options }),
    counts: () => host.ask<RequestCounts>({ op: 'counts' }),
    cpuMs: () => host.ask<number>({ op: 'cpu' }),
    reset: () => host.ask<void>({ op: 'reset' }),
    stop: () => host.stop(),
  };
}
