/**
 * One seeded chaos run: three roots in one bucket (monolith, dual-write, shard-first) on a serialised moto,
 * swamp-style clients pushing under the lock, an out-of-band writer, the CLI's `repair` and the bundled
 * Lambda (fed the notifications moto really sent, duplicated, reordered, failed items delivered again),
 * the indexer's S3 calls through a seeded fault proxy, and the indexer SIGKILLed at random points or
 * right after a chosen S3 step. Invariants are checked while it runs and at a quiet end.
 *
 * The parts: setup.ts (moto, bucket, cast, proxies), kills.ts, lambda.ts, repair.ts, monitor.ts (the
 * invariant while running), checks.ts (the quiet end), report.ts; crash-points.ts is the table `npm run chaos` adds.
 */
import { sleep } from '../../support/sleep';
import { checkQuietEnd } from './checks';
import { NO_FAULTS } from './fault-proxy';
import { type LambdaFeeder, startLambda } from './lambda';
import { startMonitor } from './monitor';
import { runRepair } from './repair';
import { type ChaosOptions, type ChaosReport, addProxyCounts, concludeReport } from './report';
import { type Cast, type ChaosRun, ROOTS, castOf, prepareBucket, startRun, stopRun } from './setup';

/** Runs one seed; the report says what was done, what was checked and every violation. */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const run = await startRun(options);
  try {
    const queueUrl = await prepareBucket(run);
    const cast = castOf(run);
    const stopAt = Date.now() + options.seconds * 1000;
    const running = () => Date.now() < stopAt;

    const loops = [...startClientLoops(run, cast, running), startOutOfBandLoop(run, cast, running)];
    const monitor = startMonitor(run, cast);
    loops.push(startRepairLoop(run, cast, running));
    const feeder = await startLambda(run, cast, queueUrl);
    const lambdaLoop = startLambdaLoop(run, cast, feeder, running);
    await Promise.all(loops);
    await lambdaLoop;

    await drain(run, cast, feeder);
    await monitor.stop();
    addProxyCounts(run.report, feeder.proxy);
    await checkQuietEnd(run, cast);
    concludeReport(run.report, cast.stats, cast.killer.times);
    // What the indexer asked of the root during each long wait: its lock takes and releases say how long it held the lock.
    run.report.longLockWaits = cast.stats.longLockWaits.map((w) => {
      const meanwhile = run.requests.filter((r) => r.at >= w.from && r.at <= w.to && r.key.startsWith(`${w.root}/`));
      return `${w.text}\n    indexer requests meanwhile (answered):\n      ${meanwhile.map((r) => r.line).join('\n      ')}`;
    });
    return run.report;
  } finally {
    await stopRun(run);
  }
}

/** Runs `body`, noting a failure among the clients' errors instead of ending the run. */
function guard(cast: Cast, what: string, body: () => Promise<void>): Promise<void> {
  return body().catch((err: unknown) => void cast.stats.errors.push(`${what}: ${err instanceof Error ? err.message : String(err)}`));
}

/** Each client pushes, 0.2-1 s apart, until the time is up. */
function startClientLoops(run: ChaosRun, cast: Cast, running: () => boolean): Promise<void>[] {
  return cast.clients.map((client) =>
    (async () => {
      while (running()) {
        await guard(cast, `client ${client.id}`, () => client.push());
        await sleep(200 + run.rng.int(800));
      }
    })(),
  );
}

/** The out-of-band writer uploads and deletes without the lock, 0.1-0.6 s apart, until the time is up. */
async function startOutOfBandLoop(run: ChaosRun, cast: Cast, running: () => boolean): Promise<void> {
  while (running()) {
    await guard(cast, 'out-of-band writer', () => cast.oob.step());
    await sleep(100 + run.rng.int(500));
  }
}

/** `repair` on a random root every 1-4 s, until the time is up. */
async function startRepairLoop(run: ChaosRun, cast: Cast, running: () => boolean): Promise<void> {
  while (running()) {
    await sleep(1000 + run.rng.int(3000));
    if (running()) await guard(cast, 'repair', () => runRepair(run, cast, run.rng.pick(ROOTS)));
  }
}

/** Moves what moto sent to SQS to the Lambda, one batch every 50-300 ms, until the time is up. */
async function startLambdaLoop(run: ChaosRun, cast: Cast, feeder: LambdaFeeder, running: () => boolean): Promise<void> {
  while (running()) {
    await guard(cast, 'lambda', async () => {
      while ((await feeder.receive()) === 10);
      await feeder.batch();
    });
    await sleep(50 + run.rng.int(250));
  }
}

/** The quiet end: no more writers, faults or kills; the Lambda alone drains the queue until nothing moved for 4 s. */
async function drain(run: ChaosRun, cast: Cast, feeder: LambdaFeeder): Promise<void> {
  run.quiet.on = true;
  for (const p of run.proxies) p.rates = NO_FAULTS;
  for (const c of run.children) c.kill('SIGKILL');
  const drainStarted = Date.now();
  let idleSince = Date.now();
  while (Date.now() - drainStarted < 900_000) {
    let got = 0;
    for (let n = 10; n === 10; got += n) n = await feeder.receive().catch(() => 0);
    if (feeder.queue.length) {
      await feeder.batch().catch((err: unknown) => void cast.stats.errors.push(`lambda (drain): ${String(err)}`));
      idleSince = Date.now();
    } else if (got === 0 && Date.now() - idleSince > 4000 && Date.now() - feeder.lastWork > 4000) {
      break;
    } else {
      await sleep(300);
    }
  }
  run.report.drainMs = Date.now() - drainStarted;
}
