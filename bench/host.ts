/**
 * A bench helper process (the S3 model, the event host): forked through tsx, asked over IPC with
 * `{...request, id}`, answering `{id, result}` or `{id, error}`; its first message, id 0, says it listens.
 */
import { fork } from 'node:child_process';

/** A helper process's answer to the request of the same id. */
export type HostReply = { readonly id: number; readonly result?: unknown; readonly error?: string };

/** A request as the caller writes it: the host process numbers it (distributes over a union of requests). */
export type WithoutId<R> = R extends { id: number } ? Omit<R, 'id'> : never;

/** A running helper: the endpoint it serves, a way to ask it, and a way to stop it. */
export interface HostProcess<Ask> {
  readonly endpoint: string;
  ask<T>(request: Ask): Promise<T>;
  stop(): Promise<void>;
}

/** Forks `script` with `args` and resolves once it says its endpoint; `label` names it in errors. */
export async function forkHost<Ask extends { readonly op: string }>(
  script: string,
  args: string[],
  label: string,
  /** Node flags beyond loading tsx (a larger heap for a model of millions of keys). */
  nodeFlags: readonly string[] = [],
): Promise<HostProcess<Ask>> {
  const child = fork(script, args, { execArgv: ['--import', 'tsx', ...nodeFlags], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  let nextId = 1;
  let exited = false;
  child.on('message', (reply: HostReply) => {
    const w = waiting.get(reply.id);
    if (!w) return;
    waiting.delete(reply.id);
    if (reply.error) w.reject(new Error(`${label}: ${reply.error}`));
    else w.resolve(reply.result);
  });
  child.on('exit', (code) => {
    exited = true;
    for (const w of waiting.values()) w.reject(new Error(`the ${label} process exited (${code})`));
    waiting.clear();
  });
  const ask = <T>(request: Ask | undefined, id = nextId++): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(new Error(`the ${label} process is not running`));
      waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
      if (request) child.send({ ...request, id });
    });
  const { endpoint } = await ask<{ endpoint: string }>(undefined, 0);
  return {
    endpoint,
    ask: (request) => ask(request),
    stop: async () => {
      if (exited) return;
      await ask({ op: 'stop' } as Ask).catch(() => undefined);
      if (!exited) child.kill('SIGKILL');
    },
  };
}
