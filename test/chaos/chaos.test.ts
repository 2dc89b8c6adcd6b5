/**
 * A short seeded chaos run (three layouts in one bucket, faults and kills on) as part of `npm test`;
 * `npm run chaos` runs long ones. No wall-clock bound: the invariants are what is asserted.
 */
import { runChaos } from './chaos';
import { problemsOf, replayCommand } from './report';

jest.setTimeout(300_000);

test('seed 11 for 4 s: nothing vanishes, no client field is lost, the Lambda alone makes every index equal its listing', async () => {
  const options = { seed: 11, seconds: 4, clientsPerRoot: 1 };
  const report = await runChaos(options);
  const problems = problemsOf(report);
  expect({ problems, lockTimeouts: report.lockTimeouts, replay: replayCommand(options) }).toEqual({
    problems: [],
    lockTimeouts: 0,
    replay: replayCommand(options),
  });
  expect(report.pushes).toBeGreaterThan(0);
  expect(report.lambdaBatches).toBeGreaterThan(0);
  expect(report.entriesChecked).toBeGreaterThan(0);
  expect(report.finalEntries).toBeGreaterThan(0);
});
