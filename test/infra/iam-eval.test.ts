/**
 * IAM, evaluated: every S3 request the Lambda bundle and the command make against a real S3 API (moto, on
 * loopback, through a recording proxy) is evaluated against the role of the synthesised stack, and must be
 * allowed; writes of data keys of every layout, listings of other prefixes and writes in a sibling prefix are
 * generated and must be denied. Configurations: a root at the bucket root, two prefixes, namespaces (listed
 * and not), an SSE-KMS bucket, and EventBridge delivery.
 */
import { Bucket, BucketEncryption } from 'aws-cdk-lib/aws-s3';
import { isInternalKey } from '../../lambda/lib/keys';
import { EventDelivery } from '../../infra/props';
import { ensureBuiltCli, runCli, tempDir } from '../cli/helpers';
import { s3Event, s3EventRecord, sqsRecord } from '../helpers/factories';
import { type S3Authorisation, evaluate, refusedRequests, rolePolicies, startRecordingProxy } from '../helpers/iam-eval';
import { eventBridgeS3Event, handlerEnv, invoke, loadHandler, scheduledEvent, sqsRecordOf } from '../helpers/lambda';
import { putObject, putObjects, seedDatastore, testEndpoint, testStore } from '../helpers/s3';
import { BUCKET_NAME, indexerStack } from './helpers';

jest.setTimeout(600_000);

interface Configuration {
  readonly name: string;
  readonly prefixes: string[];
  readonly namespaces: string[];
  readonly eventBridge?: boolean;
  readonly kms?: boolean;
}

const CONFIGURATIONS: Configuration[] = [
  { name: 'a root at the bucket root, namespace team-a', prefixes: [], namespaces: ['team-a'] },
  {
    name: 'prefixes swamp and infra, namespaces swamp/team-a and infra/team-b',
    prefixes: ['swamp', 'infra'],
    namespaces: ['swamp/team-a', 'infra/team-b'],
  },
  {
    name: 'an SSE-KMS bucket, prefixes swamp and infra',
    prefixes: ['swamp', 'infra'],
    namespaces: ['swamp/team-a', 'infra/team-b'],
    kms: true,
  },
  {
    name: 'EventBridge delivery, prefixes swamp and infra',
    prefixes: ['swamp', 'infra'],
    namespaces: ['swamp/team-a', 'infra/team-b'],
    eventBridge: true,
  },
];

/** A namespace every configuration holds but none lists: the Lambda must leave it alone. */
const UNLISTED = 'team-x';

const base = (prefix: string): string => (prefix ? `${prefix}/` : '');
const listedIn = (c: Configuration, prefix: string): string =>
  c.namespaces.find((n) => n.startsWith(base(prefix)) && !n.slice(base(prefix).length).includes('/'))!.slice(base(prefix).length);

function policiesOf(c: Configuration, namespaces = c.namespaces) {
  const { template } = indexerStack(
    { prefixes: c.prefixes, namespaces, eventDelivery: c.eventBridge ? EventDelivery.EVENTBRIDGE : EventDelivery.S3_NOTIFICATIONS },
    c.kms ? (stack) => new Bucket(stack, 'Shared', { bucketName: BUCKET_NAME, encryption: BucketEncryption.KMS }) : undefined,
  );
  const policies = rolePolicies(template.toJSON(), BUCKET_NAME);
  if (c.kms) expect(JSON.stringify(policies)).toContain('kms:GenerateDataKey');
  return policies;
}

function refusedOf(policies: ReturnType<typeof policiesOf>, requests: readonly S3Authorisation[]): Promise<string[]> {
  return refusedRequests(
    policies,
    requests.map((r) => ({ ...r, bucket: BUCKET_NAME })),
  );
}

/** Keys of every layout that swamp clients call data (in the root, and in a listed namespace). */
function dataKeys(prefix: string, ns: string): string[] {
  const rels = [
    'data/m/1/v1/raw',
    'data/aws/ec2/i-0abc/1/raw',
    'outputs/o/1/v1/out.json',
    'definitions-evaluated/d/1/def.yaml',
    'workflow-runs/r/workflow-run-1.yaml',
    'workflows-evaluated/w.yaml',
    'auto-definitions/a.yaml',
    'audit/2026/05/01.jsonl',
    'telemetry/t.json',
    'logs/l.log',
    'files/a.txt',
    'top-level.txt',
    'other/x.json',
    // Data keys that end in, or pass through, an internal-looking name.
    'data/x/.datastore-index.json',
    'data/x/_index/_meta.json',
    'data/x/_index/data--x.json',
    'data/x/.datastore.lock',
    'data/x/_control/datastore-indexer/y',
    `${UNLISTED}/.datastore-index.json`,
    `${UNLISTED}/_index/_meta.json`,
    `${UNLISTED}/data/x/1/v1/raw`,
  ];
  const keys = [...rels, ...rels.filter((r) => !r.startsWith(`${UNLISTED}/`)).map((r) => `${ns}/${r}`)];
  for (const k of keys) {
    const inNs = k.startsWith(`${ns}/`) ? k.slice(ns.length + 1) : k;
    expect([k, isInternalKey(inNs)]).toEqual([k, false]);
  }
  return keys.map((k) => `${base(prefix)}${k}`);
}

/** Names the indexer writes in every layout, which must stay writable. */
function indexerNames(prefix: string, ns: string): { put: string[]; del: string[] } {
  const b = base(prefix);
  const scoped = (s: string) => [
    `${s}.datastore-index.json`,
    `${s}_index/_meta.json`,
    `${s}_index/_root.json`,
    `${s}_index/data--m--1.json`,
    `${s}_index/workflow-runs--r.json`,
    `${s}_index/files.json`,
  ];
  const del = [
    `${b}.datastore.lock`,
    `${b}_control/datastore-indexer/publishing/root.json`,
    `${b}_control/datastore-indexer/repair/ns/${ns}/progress.json`,
    `${b}_control/datastore-indexer/unreadable/root/x.json`,
  ];
  return { put: [...scoped(b), ...scoped(`${b}${ns}/`), ...del], del };
}

const figures = { allowed: 0, denied: 0, configurations: [] as string[] };
afterAll(() => {
  console.log(
    `IAM evaluation: ${figures.allowed} recorded requests allowed, ${figures.denied} generated requests denied, configurations: ${figures.configurations.join('; ')}`,
  );
});

beforeAll(() => ensureBuiltCli());

describe.each(CONFIGURATIONS)('$name', (c) => {
  const recordedLambda: S3Authorisation[] = [];
  const recordedCli: S3Authorisation[] = [];
  const roots = c.prefixes.length ? c.prefixes : [''];
  let lambdaLines: string[] = [];

  beforeAll(async () => {
    const store = await testStore();
    for (const prefix of roots) {
      const ns = listedIn(c, prefix);
      const seeded = await seedDatastore(store, { prefix, objects: 8, internal: true, namespaces: [ns, UNLISTED] });
      // The root's first scope is shard-first, the listed namespace dual-write: their partition files are written too.
      await putObjects(store, {
        [seeded.fullKey('_index/_meta.json')]: JSON.stringify({ version: 2, partitions: [], commitSeq: 1 }),
        [seeded.fullKey('_index/_meta.json', ns)]: JSON.stringify({ version: 1, partitions: [] }),
      });
    }
    const proxy = await startRecordingProxy(testEndpoint());
    try {
      const lambda = loadHandler({
        ...handlerEnv({ bucket: store.bucket, prefixes: c.prefixes.join(','), s3: proxy.endpoint }),
        DATASTORE_NAMESPACES: c.namespaces.join(','),
      });
      const lines: string[] = [];
      const run = async (event: unknown) => {
        const out = await invoke(lambda, event);
        lines.push(...out.lines.map((l) => JSON.stringify(l)));
      };
      await run(scheduledEvent());
      // Objects written out of band (root, listed and unlisted namespace), one deleted, and an index that does not parse.
      const root0 = base(roots[0]);
      const ns0 = listedIn(c, roots[0]);
      const added = [`${root0}data/new/1/v1/raw`, `${root0}${ns0}/files/new.txt`, `${root0}${UNLISTED}/files/new.txt`];
      for (const key of added) await putObject(store, key, 'new');
      await putObject(store, `${root0}${ns0}/.datastore-index.json`, '{not json');
      const removed = `${root0}files/gone.txt`;
      await putObject(store, removed, 'x');
      const changes = [...added.map((key) => ({ key, kind: 'created' as const })), { key: removed, kind: 'removed' as const }];
      if (c.eventBridge) {
        await run({
          Records: changes.map((ch, i) =>
            sqsRecordOf(
              JSON.stringify({
                ...eventBridgeS3Event({ bucket: store.bucket, key: ch.key, kind: ch.kind, size: 3, sequencer: `00${i}` }),
                id: `evt-${i}`,
              }),
              `eb-${i}`,
            ),
          ),
        });
      } else {
        await run({
          Records: [
            sqsRecord(
              s3Event(
                changes.map((ch, i) => s3EventRecord({ bucket: store.bucket, key: ch.key, kind: ch.kind, size: 3, sequencer: `00${i}` })),
              ),
              'n-1',
            ),
          ],
        });
      }
      await run({ action: 'check' });
      await run({ action: 'repair' });
      lambdaLines = lines;
      recordedLambda.push(...proxy.recorded.splice(0));
      // The command: check, repair and hydrate of every root (it heals every namespace it finds).
      for (const prefix of roots) {
        const at = ['--bucket', store.bucket, ...(prefix ? ['--prefix', prefix] : []), '--endpoint', proxy.endpoint, '--force-path-style'];
        await putObject(store, `${base(prefix)}data/cli/1/v1/raw`, 'cli');
        for (const args of [
          ['check', ...at],
          ['repair', ...at],
          ['hydrate', ...at, '--cache', tempDir()],
        ]) {
          const out = await runCli(args);
          expect([args[0], out.code, out.stderr]).toEqual([args[0], args[0] === 'check' ? 2 : 0, expect.any(String)]);
        }
      }
      recordedCli.push(...proxy.recorded.splice(0));
    } finally {
      await proxy.close();
    }
  });

  test('every request the Lambda bundle made is allowed, and it wrote nothing of the unlisted namespace', async () => {
    expect(recordedLambda.length).toBeGreaterThan(0);
    const writes = recordedLambda.filter((r) => r.action !== 's3:GetObject' && r.action !== 's3:ListBucket');
    expect(writes.some((r) => r.key?.includes(`/_index/`))).toBe(true);
    expect(writes.filter((r) => r.key?.includes(`${UNLISTED}/`))).toEqual([]);
    expect(lambdaLines.some((l) => l.includes(`namespace \\"${UNLISTED}\\"`) && l.includes('`namespaces` prop'))).toBe(true);
    expect(await refusedOf(policiesOf(c), recordedLambda)).toEqual([]);
    figures.allowed += recordedLambda.length;
  });

  test('every request the command made is allowed by the same grants, for the namespaces it wrote', async () => {
    const all = [...c.namespaces, ...roots.map((p) => `${base(p)}${UNLISTED}`)];
    expect(await refusedOf(policiesOf(c, all), recordedCli)).toEqual([]);
    figures.allowed += recordedCli.length;
  });

  test('writes of data keys of every layout, other listings and a sibling prefix are denied; the indexer names stay writable', async () => {
    const policies = policiesOf(c);
    const denied: S3Authorisation[] = [];
    for (const prefix of roots) {
      for (const key of dataKeys(prefix, listedIn(c, prefix)))
        for (const action of ['s3:PutObject', 's3:DeleteObject']) denied.push({ action, bucket: BUCKET_NAME, key, sent: 'generated' });
    }
    if (c.prefixes.length) {
      for (const key of [
        'swamp-other/.datastore-index.json',
        'swamp-other/_index/_meta.json',
        'swamp-other/.datastore.lock',
        'swamp-other/data/x/1/v1/raw',
      ])
        for (const action of ['s3:PutObject', 's3:DeleteObject']) denied.push({ action, bucket: BUCKET_NAME, key, sent: 'generated' });
      for (const prefix of ['swamp-other/', 'other/', '', 'swam'])
        denied.push({ action: 's3:ListBucket', bucket: BUCKET_NAME, prefix, sent: 'generated' });
    }
    const decisions = await Promise.all(denied.map(async (r) => [r, await evaluate(policies, r)] as const));
    expect(decisions.filter(([, d]) => d !== 'ImplicitlyDenied').map(([r, d]) => `${d}: ${r.action} ${r.key ?? r.prefix}`)).toEqual([]);
    figures.denied += denied.length;

    const allowed: S3Authorisation[] = [];
    for (const prefix of roots) {
      const { put, del } = indexerNames(prefix, listedIn(c, prefix));
      for (const key of put) allowed.push({ action: 's3:PutObject', bucket: BUCKET_NAME, key, sent: 'generated' });
      for (const key of del) allowed.push({ action: 's3:DeleteObject', bucket: BUCKET_NAME, key, sent: 'generated' });
    }
    expect(await refusedOf(policies, allowed)).toEqual([]);
    // The same names in a bucket of another account (one of the same name): denied, by s3:ResourceAccount.
    const elsewhere = await Promise.all(allowed.map((r) => evaluate(policies, r, '210987654321')));
    expect(elsewhere.filter((d) => d !== 'ImplicitlyDenied')).toEqual([]);
    if (!figures.configurations.includes(c.name)) figures.configurations.push(c.name);
  });
});
