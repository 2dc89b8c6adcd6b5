/** Child processes timed with their CPU: the shell's `times` reports what the command and its children used. */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A child's run: wall seconds, CPU seconds (user, sys) of it and its children, and its stdout. */
export interface ChildRun {
  readonly seconds: number;
  readonly userS: number;
  readonly sysS: number;
  readonly stdout: string;
}

/** `1m2.5s` (the shell's `times`) in seconds. */
function shellSeconds(text: string): number {
  const m = /^(\d+)m([\d.]+)s$/.exec(text.trim());
  if (!m) throw new Error(`unexpected times output: ${text}`);
  return Number(m[1]) * 60 + Number(m[2]);
}

/** Runs a command under `sh`, whose `times` then gives the command's CPU (user and sys, children included). */
export async function timed(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<ChildRun> {
  const dir = await mkdtemp(join(tmpdir(), 'bench-times-'));
  const timesFile = join(dir, 'times');
  try {
    const script = 'f=$1; shift; "$@"; s=$?; times > "$f"; exit $s';
    return await new Promise<ChildRun>((resolve, reject) => {
      const started = performance.now();
      const child = spawn('sh', ['-c', script, 'sh', timesFile, command, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
      child.on('error', reject);
      child.on('exit', (code) => {
        const seconds = (performance.now() - started) / 1000;
        if (code !== 0) return reject(new Error(`${command} exited with ${code}: ${stderr.trim()}`));
        readFile(timesFile, 'utf8').then((times) => {
          // Line 1: the shell's own times; line 2: its children's, the command's.
          const [userS, sysS] = times.trim().split('\n')[1].trim().split(/\s+/).map(shellSeconds);
          resolve({ seconds, userS, sysS, stdout });
        }, reject);
      });
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
