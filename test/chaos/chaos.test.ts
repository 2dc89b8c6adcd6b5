/**
 * A short seeded chaos run (three layouts in one bucket, faults and kills on) as part of `npm test`;
 * `npm run chaos` runs long ones. No wall-clock bound: the invariants are what is asserted. Every S3 request
 * the indexer made (the Lambda bundle and the command) is then evaluated against the synthesised role.
 */
import { type S3Authorisation, authorisationOf, refusedRequests, rolePolicies } from '../helpers/iam-eval';
import { BUCKET_NAME, indexerStack } from '../infra/helpers';
import { runChaos } from './chaos';
import { problemsOf, replayCommand } from './report';

jest.setTimeout(300_000);

const recorded: S3Authorisation[] = [];

test('seed 11 for 4 s: nothing vanishes, no client field is lost, the Lambda alone makes every index equal its listing', async () => {
  const options = {
    seed: 11,
    seconds: 4,
    clientsPerRoot: 1,
    onIndexerRequest: (m: string, u: string) => recorded.push(authorisationOf(m, u)),
  };
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

test("every S3 request the indexer made in the run is allowed by the role of a stack for the run's roots", async () => {
  const { template } = indexerStack({ prefixes: ['mono', 'dual', 'shard'] });
  const policies = rolePolicies(template.toJSON(), BUCKET_NAME);
  expect(recorded.length).toBeGreaterThan(0);
  expect(
    await refusedRequests(
      policies,
      recorded.map((r) => ({ ...r, bucket: BUCKET_NAME })),
    ),
  ).toEqual([]);
  console.log(`chaos: ${recorded.length} recorded requests allowed`);
});
