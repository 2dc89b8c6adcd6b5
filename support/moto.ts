import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

/** A moto_server process bound to loopback on a free port. */
export interface MotoServer {
  readonly endpoint: string;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

/** Asks the kernel for a free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Starts `python3 -m moto.server` and resolves once it listens and `GET /moto-api/` answers. */
export async function startMoto(timeoutMs = 30_000): Promise<MotoServer> {
  const probe = spawnSync('python3', ['-c', 'import moto.server'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    throw new Error(
      'moto is not installed: the S3 tests need python3 with moto 5.x (pip install "moto[server]"). ' +
        (probe.stderr || probe.error?.message || '').trim(),
    );
  }
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const child = spawn('python3', ['-m', 'moto.server', '-H', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  // The server says it is running once its socket listens: that line is the signal, not a poll.
  const listening = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => fail(new Error(`moto_server did not start on ${endpoint} within ${timeoutMs} ms: ${stderr}`)),
      timeoutMs,
    );
    const fail = (err: Error): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(err);
    };
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
      if (!stderr.includes(`Running on ${endpoint}`)) return;
      clearTimeout(timer);
      resolve();
    });
    child.once('exit', (code) => fail(new Error(`moto_server exited early (${code}): ${stderr}`)));
  });
  await listening;
  const res = await fetch(`${endpoint}/moto-api/`);
  if (!res.ok) throw new Error(`moto_server on ${endpoint} answered ${res.status} to its own API`);
  return {
    endpoint,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 3000).unref();
      }),
  };
}
