/**
 * The machine's load while a row runs, so a figure measured on a busy machine is labelled as such: the load
 * average, and the CPU that processes outside the measurement used (the machine's busy time from /proc/stat,
 * less the CPU of the measured process, its children and the S3 model). `--busy-cores N` adds a known load:
 * N processes spinning for the whole run, counted apart from the unplanned rest.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';

/** Unplanned load, in cores, above which a row's figures are marked as not counting. */
export const LOADED_CORES = 0.25;

/** What ran beside one row. */
export interface LoadReading {
  /** The one-minute load average when the row ended. */
  readonly loadAvg: number;
  /** Cores kept busy on purpose (`--busy-cores`). */
  readonly busyCores: number;
  /** Cores used by anything else beside the measurement, on average over the row; NaN where /proc/stat is missing. */
  readonly otherCores: number;
}

let ticksPerSecond: number | undefined;

/** The machine's CPU time spent busy so far, in ms (all cores), or undefined off Linux. */
function machineBusyMs(): number | undefined {
  let stat: string;
  try {
    stat = readFileSync('/proc/stat', 'utf8');
  } catch {
    return undefined;
  }
  // cpu user nice system idle iowait irq softirq steal ...: busy is everything but idle and iowait.
  const f = stat.split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const busy = f[0] + f[1] + f[2] + f[5] + f[6] + (f[7] ?? 0);
  ticksPerSecond ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  return (busy * 1000) / ticksPerSecond;
}

/** CPU time a running process has used so far, in ms (user + system), or 0 where /proc is missing. */
export function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th of them.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticksPerSecond ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
    return ((Number(f[11]) + Number(f[12])) * 1000) / ticksPerSecond;
  } catch {
    return 0;
  }
}

let spinners: ChildProcess[] = [];

/** Starts `n` processes that each keep one core busy until `stopBusyCores`; the known load of a row. */
export function startBusyCores(n: number): void {
  for (let i = 0; i < n; i++) {
    const child = spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
    child.unref();
    spinners.push(child);
  }
}

/** Stops the processes of `startBusyCores`. */
export function stopBusyCores(): void {
  for (const child of spinners) child.kill('SIGKILL');
  spinners = [];
}

/** Cores kept busy on purpose now. */
export const busyCores = (): number => spinners.length;

/** A probe started before a row; `stop` takes the CPU the measurement itself used (ms) and returns the reading. */
export function startLoadProbe(): { stop(measuredCpuMs: number): LoadReading } {
  const busyAtStart = machineBusyMs();
  const started = performance.now();
  const own = process.cpuUsage();
  return {
    stop(measuredCpuMs) {
      const wallMs = performance.now() - started;
      const busyNow = machineBusyMs();
      const self = process.cpuUsage(own);
      const selfMs = (self.user + self.system) / 1000;
      const known = busyCores();
      const otherCores =
        busyAtStart === undefined || busyNow === undefined || wallMs <= 0
          ? Number.NaN
          : Math.max(0, (busyNow - busyAtStart - selfMs - measuredCpuMs) / wallMs - known);
      return { loadAvg: loadavg()[0], busyCores: known, otherCores };
    },
  };
}

/** True when a reading's unplanned load was too high for its figures to count. */
export const tooLoaded = (reading: LoadReading): boolean => reading.otherCores > LOADED_CORES;

/** `load 1.1, other CPU 0.03 cores[, 1 core kept busy]`, and a plain warning when it does not count. */
export function describeLoad(reading: LoadReading): string {
  const other = Number.isNaN(reading.otherCores) ? 'other CPU unknown' : `other CPU ${reading.otherCores.toFixed(2)} cores`;
  const busy = reading.busyCores > 0 ? `, ${reading.busyCores} core${reading.busyCores > 1 ? 's' : ''} kept busy` : '';
  return `load ${reading.loadAvg.toFixed(1)}, ${other}${busy}${tooLoaded(reading) ? ' (TOO LOADED: does not count)' : ''}`;
}

/** The worst of several readings (the most other CPU), for a row measured several times. */
export function worstLoad(readings: readonly LoadReading[]): LoadReading {
  return readings.reduce((a, b) => (b.otherCores > a.otherCores || Number.isNaN(a.otherCores) ? b : a));
}

/** One line saying whether the whole run counts, for the end of a report. */
export function loadVerdict(readings: readonly LoadReading[]): string {
  const loaded = readings.filter(tooLoaded).length;
  const worst = readings.length ? worstLoad(readings) : undefined;
  const cores = cpus().length;
  if (!worst) return `load: nothing measured (${cores} CPUs)`;
  return loaded === 0
    ? `load: every row quiet enough to count (at most ${worst.otherCores.toFixed(2)} other cores busy of ${cores})`
    : `load: ${loaded} of ${readings.length} row runs had more than ${LOADED_CORES} other cores busy (at worst ${worst.otherCores.toFixed(2)} of ${cores}): those figures do not count; run again on a quiet machine`;
}
