/** Starts the S3 model (`bench/s3-model/`) in a child process and talks to it over IPC. */
import { fork } from 'node:child_process';
import { join } from 'node:path';
import type { SeedOptions, SeedResult } from './s3-model/seed';
import type { RequestCounts } from './s3-model/server';

/** A request to the model's process. */
export type HostRequest =
  | { readonly id: number; readonly op: 'seed'; readonly bucket: string; readonly options: SeedOptions }
  | { readonly id: number; readonly op: 'counts' | 'cpu' | 'reset' | 'stop' };

/** Its answer; id 0 announces the endpoint once the server listens. */
export type HostReply = { readonly id: number; readonly result?: unknown; readonly error?: string };

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
export async function startModelProcess(latencyMs: number): Promise<ModelProcess> {
  const child = fork(join(__dirname, 'model-host.ts'), [String(latencyMs)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  let nextId = 1;
  let exited = false;
  child.on('message', (reply: HostReply) => {
    const w = waiting.get(reply.id);
    if (!w) return;
    waiting.delete(reply.id);
    if (reply.error) w.reject(new Error(`s3-model: ${reply.error}`));
    else w.resolve(reply.result);
  });
  child.on('exit', (code) => {
    exited = true;
    for (const w of waiting.values()) w.reject(new Error(`the s3-model process exited (${code})`));
    waiting.clear();
  });
  const ask = <T>(request: { readonly op: HostRequest['op']; readonly [field: string]: unknown }, id = nextId++): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(new Error('the s3-model process is not running'));
      waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
      if (id !== 0) child.send({ ...request, id });
    });
  const { endpoint } = await ask<{ endpoint: string }>({ op: 'counts' }, 0);
  return {
    endpoint,
    latencyMs,
    seed: (bucket, options) => ask<SeedResult>({ op: 'seed', bucket, options }),
    counts: () => ask<RequestCounts>({ op: 'counts' }),
    cpuMs: () => ask<number>({ op: 'cpu' }),
    reset: () => ask<void>({ op: 'reset' }),
    stop: async () => {
      if (exited) return;
      await ask<void>({ op: 'stop' }).catch(() => undefined);
      if (!exited) child.kill('SIGKILL');
    },
  };
}
