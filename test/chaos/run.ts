/**
 * `npm run chaos -- --seed N --seconds S` (or `--seeds 1..20` or `4,6,8`, `--parallel 2`, `--no-faults`, `--no-kills`,
 * `--json FILE`): runs seeded chaos schedules and prints one row per seed and a total; a failing seed
 * prints the command that replays it. Exit 1 when any seed broke an invariant. `--crash-points` prints the
 * crash-point tables instead (`--only cli` or `--only lambda` for one of them).
 */
import { writeFileSync } from 'node:fs';
import { runChaos } from './chaos';
import { runCrashPoints } from './crash-points';
import { runFinishPoints } from './finish-points';
import { type ChaosOptions, type ChaosReport, problemsOf, replayCommand } from './report';

function parseArgs(argv: string[]): { seeds: number[]; seconds: number; parallel: number; faults: boolean; kills: boolean; json?: string } {
  const out = { seeds: [1], seconds: 60, parallel: 1, faults: true, kills: true, json: undefined as string | undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i] ?? '';
    if (a === '--seed') out.seeds = [Number(v())];
    else if (a === '--seeds') {
      // A range (`1..20`), a list (`4,6,8`) or both (`1..3,9`).
      out.seeds = v()
        .split(',')
        .flatMap((part) => {
          const [lo, hi] = part.split('..').map(Number);
          return Array.from({ length: Math.max(0, (hi ?? lo) - lo + 1) }, (_, k) => lo + k);
        });
    } else if (a === '--seconds') out.seconds = Number(v());
    else if (a === '--parallel') out.parallel = Math.max(1, Number(v()));
    else if (a === '--no-faults') out.faults = false;
    else if (a === '--no-kills') out.kills = false;
    else if (a === '--json') out.json = v();
    else throw new Error(`unknown flag ${a}`);
  }
  if (out.seeds.length === 0 || out.seeds.some((s) => !Number.isInteger(s)) || !(out.seconds > 0))
    throw new Error('--seed/--seeds take whole numbers, --seconds a positive number');
  return out;
}

function row(r: ChaosReport): string {
  const faults = Object.values(r.faults).reduce((a, b) => a + b, 0);
  const kills = Object.values(r.kills).reduce((a, b) => a + b, 0);
  return (
    [
      r.seed,
      r.ok ? 'ok' : 'FAIL',
      r.pushes,
      r.uploads + r.clientDeletes,
      r.oobOps,
      r.repairRuns,
      r.lambdaBatches,
      r.itemFailures,
      r.indexerRequests,
      `${r.faults.slowdown}/${r.faults.reset}/${r.faults['drop-answer']}/${r.faults.delay}`,
      kills,
      r.entriesChecked,
      r.finalEntries,
      r.vanished.length,
      r.lostFields.length,
      r.removedShards.length,
      r.finalMismatch.length,
      r.lockTimeouts,
      (r.maxLockWaitMs / 1000).toFixed(1),
      (r.maxLockWaitAfterKillMs / 1000).toFixed(1),
      (r.drainMs / 1000).toFixed(1),
    ].join(' | ') + (faults >= 0 ? '' : '')
  );
}

const HEADER =
  'seed | result | pushes | client ops | oob ops | repairs | lambda batches | item failures | indexer requests | faults 503/reset/drop/delay | kills | entries checked | final entries | vanished | lost fields | removed shards | final mismatches | lock timeouts | max lock wait s | max wait after a kill s | drain s';

async function crashPoints(): Promise<void> {
  const only = process.argv[process.argv.indexOf('--only') + 1];
  if (process.argv.includes('--only') && only !== 'cli' && only !== 'lambda') throw new Error('--only takes cli or lambda');
  if (only !== 'lambda') await cliCrashPoints();
  if (only !== 'cli') await lambdaFinishPoints();
}

/** The Lambda's table: killed at each step of a publish, then the time until its queue alone made the scope whole. */
async function lambdaFinishPoints(): Promise<void> {
  const rows = await runFinishPoints((l) => console.error(l));
  console.log('\n| layout | Lambda killed right after | killed | publish record left | whole again after (s) |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const r of rows) {
    const after =
      r.wholeAfterMs !== undefined
        ? (r.wholeAfterMs / 1000).toFixed(1)
        : r.recordLeft
          ? `NEVER: ${r.detail.join('; ')}`
          : `– (nothing written yet: the batch's events come back after its visibility timeout; ${r.detail.length} keys or locks wait)`;
    console.log(`| ${r.layout} | ${r.step} | ${r.killed ? 'yes' : 'step not reached'} | ${r.recordLeft ? 'yes' : 'no'} | ${after} |`);
  }
  const left = rows.filter((r) => r.recordLeft);
  const worst = Math.max(0, ...left.map((r) => r.wholeAfterMs ?? Number.POSITIVE_INFINITY));
  console.log(
    `\nkilled publishes (record left): ${left.length}; whole again: ${left.filter((r) => r.wholeAfterMs !== undefined).length}; worst ${(worst / 1000).toFixed(1)} s after the kill (target 60 s)`,
  );
  if (left.some((r) => r.wholeAfterMs === undefined || r.wholeAfterMs > 60_000)) process.exitCode = 1;
}

async function cliCrashPoints(): Promise<void> {
  const rows = await runCrashPoints((l) => console.error(l));
  console.log('| layout | killed right after | killed | client lock wait s | next run exit | next run finished the work |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const r of rows) {
    console.log(
      `| ${r.layout} | ${r.step} | ${r.killed ? 'yes' : 'step not reached'} | ${(r.clientWaitMs / 1000).toFixed(1)} | ${r.nextExit} | ${r.healed ? 'yes' : `NO: ${r.detail.join('; ')}`} |`,
    );
  }
  const worst = Math.max(0, ...rows.filter((r) => r.killed).map((r) => r.clientWaitMs));
  console.log(
    `\nworst client lock wait after a kill: ${(worst / 1000).toFixed(1)} s; next run finished the work in ${rows.filter((r) => r.healed).length} of ${rows.length}`,
  );
  if (rows.some((r) => !r.healed)) process.exitCode = 1;
}

async function main(): Promise<void> {
  if (process.argv.includes('--crash-points')) return crashPoints();
  const args = parseArgs(process.argv.slice(2));
  const reports: ChaosReport[] = [];
  const queue = [...args.seeds];
  console.log(`| ${HEADER} |`);
  console.log(
    `|${HEADER.split('|')
      .map(() => ' --- ')
      .join('|')}|`,
  );
  const runOne = async (): Promise<void> => {
    for (let seed = queue.shift(); seed !== undefined; seed = queue.shift()) {
      const options: ChaosOptions = {
        seed,
        seconds: args.seconds,
        faults: args.faults,
        kills: args.kills,
        log: (l) => console.error(`[seed ${seed}] ${l}`),
      };
      let report: ChaosReport;
      try {
        report = await runChaos(options);
      } catch (err) {
        console.error(`seed ${seed} could not run: ${err instanceof Error ? err.stack : String(err)}\n  replay: ${replayCommand(options)}`);
        process.exitCode = 1;
        continue;
      }
      reports.push(report);
      console.log(`| ${row(report)} |`);
      for (const wait of report.longLockWaits) console.error(`[seed ${seed}] long lock wait: ${wait}`);
      // Written after every seed, so an interrupted batch keeps what it measured.
      if (args.json) writeFileSync(args.json, JSON.stringify(reports, null, 2));
      if (!report.ok) {
        process.exitCode = 1;
        const problems = problemsOf(report);
        if (report.lockTimeouts) problems.push(`${report.lockTimeouts} client lock timeouts`);
        console.error(`seed ${seed} FAILED:\n  ${problems.slice(0, 30).join('\n  ')}\n  replay: ${replayCommand(options)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: args.parallel }, runOne));
  const sum = (f: (r: ChaosReport) => number) => reports.reduce((a, r) => a + f(r), 0);
  // Counts by name (kills by step, errors by class), summed over the seeds.
  const byName = (f: (r: ChaosReport) => Record<string, number>): Record<string, number> => {
    const total: Record<string, number> = {};
    for (const r of reports) for (const [k, n] of Object.entries(f(r))) total[k] = (total[k] ?? 0) + n;
    return total;
  };
  const kills = byName((r) => r.kills);
  const errors = byName((r) => r.indexerErrors);
  console.log(
    `\n${reports.length} schedules (${reports.filter((r) => r.ok).length} ok), ${args.seconds} s each, faults ${args.faults ? 'on' : 'off'}, kills ${args.kills ? 'on' : 'off'}: ` +
      `${sum((r) => r.pushes)} client pushes, ${sum((r) => r.uploads + r.clientDeletes)} client uploads/deletes, ${sum((r) => r.oobOps)} out-of-band ops, ` +
      `${sum((r) => r.repairRuns)} repairs, ${sum((r) => r.lambdaBatches)} Lambda batches (${sum((r) => r.lambdaRecords)} records, ${sum((r) => r.itemFailures)} item failures), ` +
      `${sum((r) => r.indexerRequests)} indexer requests; faults: 503 ${sum((r) => r.faults.slowdown)}, reset ${sum((r) => r.faults.reset)}, dropped answer ${sum((r) => r.faults['drop-answer'])}, delay ${sum((r) => r.faults.delay)}; ` +
      `kills ${JSON.stringify(kills)}; indexer errors ${JSON.stringify(errors)} (${sum((r) => r.unexpectedErrors.length)} unexpected); entries checked ${sum((r) => r.entriesChecked)}; vanished ${sum((r) => r.vanished.length)}, lost fields ${sum((r) => r.lostFields.length)}, removed shards ${sum((r) => r.removedShards.length)}, ` +
      `final mismatches ${sum((r) => r.finalMismatch.length)}, lock timeouts ${sum((r) => r.lockTimeouts)}, max client lock wait ${(Math.max(0, ...reports.map((r) => r.maxLockWaitMs)) / 1000).toFixed(1)} s (${(Math.max(0, ...reports.map((r) => r.maxLockWaitAfterKillMs)) / 1000).toFixed(1)} s after a kill)`,
  );
  if (args.json) writeFileSync(args.json, JSON.stringify(reports, null, 2));
}

void main();
