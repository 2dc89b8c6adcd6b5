/** The CLI's `repair` in a chaos run: the command as it ships, through its own fault proxy, sometimes killed. */
import { spawn } from 'node:child_process';
import { addProxyCounts, noteIndexerError } from './report';
import { type Cast, type ChaosRun, startProxy } from './setup';

/** Runs `repair` on `root` once and records how it ended; a failure must say why in one line, not with a stack. */
export async function runRepair(run: ChaosRun, cast: Cast, root: string): Promise<void> {
  const { report, children, proxies, log } = run;
  const proxy = await startProxy(run, cast.faultRng, `repair-${report.repairRuns}`);
  const child = spawn(
    process.execPath,
    [
      run.cli,
      'repair',
      '--bucket',
      run.direct.bucket,
      '--prefix',
      root,
      '--endpoint',
      proxy.endpoint,
      '--force-path-style',
      '--lock-wait',
      '20',
      '--json',
    ],
    { env: { ...process.env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.add(child);
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  let stdout = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  const disarm = cast.killer.arm(proxy, () => child.kill('SIGKILL'), 'repair');
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.once('exit', (c, s) => resolve([c, s])),
  );
  disarm();
  children.delete(child);
  report.repairRuns++;
  const outcome = signal ? `killed` : `exit ${code}`;
  report.repairExits[outcome] = (report.repairExits[outcome] ?? 0) + 1;
  if (!signal && code !== 0 && code !== 2) {
    const said = stderr.split('\n').some((l) => l.startsWith('datastore-indexer: '));
    if (!said || /\n\s+at /.test(stderr)) report.crashesWithoutMessage.push(`repair ${root} exit ${code}: ${stderr.slice(0, 400)}`);
    else log(`repair ${root} exit ${code}: ${stderr.trim().split('\n').pop()?.slice(0, 300)}`);
    const error = errorOf(stdout);
    if (error) noteIndexerError(report, `repair ${root}`, error.name, error.message);
    else report.crashesWithoutMessage.push(`repair ${root} exit ${code} printed no JSON error: ${stdout.slice(-400)}`);
  }
  addProxyCounts(report, proxy);
  proxies.splice(proxies.indexOf(proxy), 1);
  await proxy.close();
}

/** The error object `--json` prints when the command fails, if its output holds one. */
function errorOf(stdout: string): { name: string; message: string } | undefined {
  const at = stdout.lastIndexOf('{\n  "error"');
  if (at < 0) return undefined;
  try {
    const { error } = JSON.parse(stdout.slice(at)) as { error?: { name?: unknown; message?: unknown } };
    return typeof error?.name === 'string' ? { name: error.name, message: String(error.message) } : undefined;
  } catch {
    return undefined;
  }
}
