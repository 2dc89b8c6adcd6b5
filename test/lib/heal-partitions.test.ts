/**
 * A full heal of a shard-first root goes partition by partition while it lists, against moto: its reports
 * say what the whole-index heal says, its partition files equal the listing afterwards, client fields of
 * entries that still match survive, partitions are committed before the listing ends, a client's push
 * between two chunks converges, and a client's entry for a key the heal found missing is not replaced.
 */
import type { IndexEntry } from '../../lambda/lib/index-file';
import type { Lister } from '../../lambda/lib/list';
import type { ShardMeta } from '../../lambda/lib/layouts/manifest';
import { healRoot } from '../../lambda/lib/heal';
import { type LockClock, systemClock } from '../../lambda/lib/lock-clock';
import { parallelLister } from '../../lambda/lib/parallel-list';
import { partitionOf } from '../../lambda/lib/keys';
import { type ResumableRepairResult, repairResumable } from '../../lambda/lib/repair';
import { indexEntry, isoAgo, shardJson, shardMeta } from '../helpers/factories';
import {
  type KeySize,
  connectStore,
  groupSummaries,
  hookedStore,
  listKeys,
  listObjects,
  putIndex,
  putObject,
  putObjects,
  putShardLayout,
  readIndex,
  readJson,
  readShardSummaries,
  snapshotBucket,
  sortByKey,
  summarize,
  testStore,
  trackRequests,
} from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/s3';

const BASE = 'sf/';
const LONG = `files/${'x'.repeat(300)}.txt`;

/** Objects in the bucket: many partitions, two of them under two folders each (`data--a--b--c`, `data--p--q--z`), one key clients refuse, one unshardable. */
const OBJECTS: Record<string, string> = {
  'top.txt': 'root file',
  'data/a--b/c/d': 'under a--b',
  'data/a/b/c': 'under a/b',
  'data/a/b/c/d': 'five segments',
  'data/m/n/o': 'kept',
  // `data--p--q--z` under two folders, with other partitions between them: judged as the listing passes each.
  'data/p--q/z/w': 'under p--q',
  'data/p/a/1/2/3': 'between',
  'data/p/b/1/2/3': 'between, indexed',
  'data/p/c/1/2/3': 'between too',
  'data/p/q/z/w': 'under p/q, indexed',
  'logs/run-1.log': 'log one',
  'logs/run-2.log': 'log two, longer now',
  'files/readme.txt': 'hello',
  'misc/thing.txt': 'no partition',
  [LONG]: 'refused',
  ...Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`data/aws/t${i}/m-${i}/1/raw`, `model ${i}`])),
  ...Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`workflow-runs/wf-${i}/run-1/log.txt`, `ran ${i}`])),
};

/** Index entries as clients left them: most true (with client fields), some drifted. */
function clientEntries(): IndexEntry[] {
  const sized = (key: string, fields: Partial<IndexEntry> = {}): IndexEntry =>
    indexEntry(key, { size: Buffer.byteLength(OBJECTS[key]), sha256: `sha-${key}`, localMtime: '2026-05-04T15:19:58.120Z', ...fields });
  return [
    sized('top.txt'),
    sized('data/a/b/c', { note: 'unknown field' }),
    sized('data/m/n/o'),
    sized('data/p/b/1/2/3'),
    sized('data/p/q/z/w'),
    sized('logs/run-1.log'),
    sized('logs/run-2.log', { size: 7 }), // resized
    ...Array.from({ length: 8 }, (_, i) => sized(`data/aws/t${i}/m-${i}/1/raw`)).filter((_, i) => i !== 3 && i !== 6), // t3, t6 missing
    sized('workflow-runs/wf-0/run-1/log.txt'),
    sized('workflow-runs/wf-1/run-1/log.txt'),
    indexEntry('data/a/b/gone'), // stale, old: removed without asking
    indexEntry('files/gone.txt', { lastModified: isoAgo(0) }), // stale, recent: confirmed with HeadObject
    indexEntry('data/old/x/y/z/1'), // a whole partition whose objects are gone
  ];
}

/** A shard-first root: objects, partition files (written before the manifest), the manifest. */
async function shardFirstRoot(): Promise<{ store: S3Store; root: { bucket: string; prefix: string }; meta: ShardMeta }> {
  const store = await testStore();
  await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [BASE + k, v])));
  const grouped = new Map<string, IndexEntry[]>();
  for (const entry of clientEntries()) {
    const p = partitionOf(entry.key)!;
    grouped.set(p, [...(grouped.get(p) ?? []), entry]);
  }
  await putObjects(store, Object.fromEntries([...grouped].map(([p, list]) => [`${BASE}_index/${p}.json`, shardJson(list)])));
  const meta = shardMeta([...grouped.keys()].sort(), 7);
  await putObject(store, `${BASE}_index/_meta.json`, JSON.stringify(meta));
  return { store, root: { bucket: store.bucket, prefix: 'sf' }, meta };
}

/** The listing's truth, by partition: every object but the refused and the unshardable one. */
function truth(extra: Record<string, string> = {}): Map<string, KeySize[]> {
  const all = { ...OBJECTS, ...extra };
  const rows = Object.entries(all)
    .filter(([k]) => k !== LONG && k !== 'misc/thing.txt')
    .map(([key, body]) => ({ key, size: Buffer.byteLength(body) }));
  return groupSummaries(sortByKey(rows));
}

async function partitionsNow(store: S3Store): Promise<Map<string, KeySize[]>> {
  const meta = (await readJson<ShardMeta>(store, `${BASE}_index/_meta.json`))!;
  const read = await readShardSummaries(store, BASE, meta.partitions);
  return new Map([...read].filter(([, rows]) => rows.length > 0));
}

const EXPECTED_DRIFT = {
  missing: [
    'data/a--b/c/d',
    'data/a/b/c/d',
    'data/aws/t3/m-3/1/raw',
    'data/aws/t6/m-6/1/raw',
    'data/p--q/z/w',
    'data/p/a/1/2/3',
    'data/p/c/1/2/3',
    'files/readme.txt',
    'workflow-runs/wf-2/run-1/log.txt',
  ].sort(),
  stale: ['data/a/b/gone', 'data/old/x/y/z/1', 'files/gone.txt'],
  resized: [{ key: 'logs/run-2.log', indexSize: 7, objectSize: 19 }],
};

describe('a full heal of a shard-first root, partition by partition', () => {
  it('check reports the drift, the refused and the unshardable key, and writes nothing', async () => {
    const { store, root } = await shardFirstRoot();
    const before = await snapshotBucket(store);

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'check', lister: parallelLister({ pageSize: 2 }) });

    expect(report.scopes).toHaveLength(1);
    expect(report.scopes[0]).toMatchObject({
      layout: 'shard-first',
      indexState: 'valid',
      drift: { missing: 9, stale: 3, resized: 1 },
      driftKeys: EXPECTED_DRIFT,
      unshardable: 1,
      refused: 1,
      refusedKeys: [LONG],
      objects: Object.keys(OBJECTS).length - 1,
      published: false,
    });
    expect(await snapshotBucket(store)).toEqual(before);
  });

  it('repair makes every partition file equal the listing, keeps client fields and moves commitSeq', async () => {
    const { store, root, meta } = await shardFirstRoot();

    const report = await healRoot(connectStore(store.bucket), root, {
      mode: 'repair',
      chunkEntries: 3,
      lister: parallelLister({ pageSize: 2 }),
    });

    expect(report.scopes[0]).toMatchObject({ layout: 'shard-first', published: true, driftKeys: EXPECTED_DRIFT, unshardable: 1 });
    expect(await partitionsNow(store)).toEqual(truth());
    const after = (await readJson<ShardMeta>(store, `${BASE}_index/_meta.json`))!;
    expect(after.version).toBe(2);
    // one commit per chunk: several, each past the last
    expect(after.commitSeq).toBeGreaterThan(meta.commitSeq + 1);
    expect(after.partitions).toEqual(expect.arrayContaining([...truth().keys()]));
    const ab = await readIndex(store, `${BASE}_index/data--a--b.json`);
    expect(ab!.entries.get('data/a/b/c')).toMatchObject({ sha256: 'sha-data/a/b/c', note: 'unknown field' });
    const pq = await readIndex(store, `${BASE}_index/data--p--q--z.json`);
    expect(pq!.entries.get('data/p/q/z/w')).toMatchObject({ sha256: 'sha-data/p/q/z/w' });
    const logs = await readIndex(store, `${BASE}_index/logs.json`);
    expect(logs!.entries.get('logs/run-1.log')).toMatchObject({ sha256: 'sha-logs/run-1.log' });
    // a resized entry loses what described the old bytes
    expect(logs!.entries.get('logs/run-2.log')).toMatchObject({ size: 19 });
    expect(logs!.entries.get('logs/run-2.log')?.sha256).toBeUndefined();
    expect(await listKeys(store, `${BASE}_control/`)).toEqual([]);

    const again = await healRoot(connectStore(store.bucket), root, { mode: 'check' });
    expect(again.scopes[0]).toMatchObject({ drift: { missing: 0, stale: 0, resized: 0 }, indexState: 'valid' });
  });

  it('heals a namespace inside the root from its own index, and keeps its objects and partition files out of the root', async () => {
    const { store, root } = await shardFirstRoot();
    // A monolith namespace with one entry missing, and a stray partition file of its own under its `_index/`.
    await putObjects(store, {
      [`${BASE}team/.namespace.json`]: JSON.stringify({ namespace: 'team', repoId: 'r', registeredAt: isoAgo(0) }),
      [`${BASE}team/data/x/y/z/1`]: 'in the namespace',
      [`${BASE}team/files/n.txt`]: 'namespaced',
      [`${BASE}team/_index/files.json`]: shardJson([]),
    });
    await putIndex(store, `${BASE}team/.datastore-index.json`, [indexEntry('files/n.txt', { size: Buffer.byteLength('namespaced') })]);

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair', lister: parallelLister({ pageSize: 2 }) });

    expect(report.scopes.map((s) => [s.namespace ?? '', s.layout])).toEqual([
      ['', 'shard-first'],
      ['team', 'monolith'],
    ]);
    expect(report.scopes[1]).toMatchObject({ drift: { missing: 1, stale: 0, resized: 0 }, published: true });
    expect([...(await readIndex(store, `${BASE}team/.datastore-index.json`))!.entries.keys()].sort()).toEqual([
      'data/x/y/z/1',
      'files/n.txt',
    ]);
    // The root's partitions hold the root's objects alone.
    expect(await partitionsNow(store)).toEqual(truth());
  });

  it('a resumable repair heals by partitions across runs, each listing on from where the last stopped, to what one heal makes', async () => {
    const { store, root, meta } = await shardFirstRoot();
    await putObjects(store, {
      [`${BASE}team/.namespace.json`]: JSON.stringify({ namespace: 'team', repoId: 'r', registeredAt: isoAgo(0) }),
      [`${BASE}team/files/n.txt`]: 'namespaced',
      [`${BASE}team/files/o.txt`]: 'namespaced too',
    });
    const reader = connectStore(store.bucket);

    // Time runs short after every page: each run lists one page of two keys.
    const runs: ResumableRepairResult[] = [];
    const seqs: number[] = [];
    for (let i = 0; i < 40 && runs.at(-1)?.status !== 'complete'; i++) {
      runs.push(await repairResumable(connectStore(store.bucket), root, { mode: 'repair', remainingMs: () => 0, pageSize: 2 }));
      seqs.push((await readJson<ShardMeta>(reader, `${BASE}_index/_meta.json`))!.commitSeq);
    }

    const last = runs.at(-1)!;
    expect(last.status).toBe('complete');
    expect(runs.length).toBeGreaterThan(10);
    expect(last.invocations).toBe(runs.length);
    // Partitions were committed by the runs that passed them, not all by the last.
    expect(seqs.slice(0, -1).some((seq) => seq > meta.commitSeq)).toBe(true);
    expect(await partitionsNow(store)).toEqual(truth());
    if (last.status !== 'complete') throw new Error('unreachable');
    const [own, team] = last.report.scopes;
    expect(own).toMatchObject({
      layout: 'shard-first',
      drift: { missing: 9, stale: 3, resized: 1 },
      driftKeys: EXPECTED_DRIFT,
      unshardable: 1,
      refused: 1,
    });
    expect(own.objects).toBe(Object.keys(OBJECTS).length - 1);
    expect(team).toMatchObject({ namespace: 'team', drift: { missing: 2, stale: 0, resized: 0 }, published: true });
    expect([...(await readIndex(store, `${BASE}team/.datastore-index.json`))!.entries.keys()].sort()).toEqual([
      'files/n.txt',
      'files/o.txt',
    ]);
    const ab = await readIndex(store, `${BASE}_index/data--a--b.json`);
    expect(ab!.entries.get('data/a/b/c')).toMatchObject({ sha256: 'sha-data/a/b/c', note: 'unknown field' });
    expect(await listKeys(store, `${BASE}_control/`)).toEqual([]);
  });

  it('stops at a partition too large for its memory with IndexTooLargeError naming it, the partitions before it healed', async () => {
    const { store, root } = await shardFirstRoot();
    await putObjects(store, Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`${BASE}logs/more-${i}.log`, 'x'])));

    // Room for the small partitions, not for the 22 objects of `logs`.
    const heal = healRoot(connectStore(store.bucket), root, {
      mode: 'repair',
      chunkEntries: 1,
      memoryBudget: 10_000,
      lister: parallelLister({ pageSize: 2 }),
    });

    await expect(heal).rejects.toMatchObject({ name: 'IndexTooLargeError', partition: 'logs' });
    await expect(heal).rejects.toThrow(/partition logs holds \d+ objects or more; the partitions committed before it stay healed/);
    const healed = await partitionsNow(store);
    expect(truth().get('data--a--b--c')).toHaveLength(2);
    expect(healed.get('data--a--b--c')).toEqual(truth().get('data--a--b--c'));
    expect(healed.get('logs')).not.toEqual(truth().get('logs'));
  });

  it('commits partitions before the listing has ended', async () => {
    const { store, root, meta } = await shardFirstRoot();
    const reader = connectStore(store.bucket);
    const seen: number[] = [];
    // After each page the heal took, the manifest's commitSeq as clients would read it.
    const watched: Lister = async function* (s, prefix) {
      for await (const page of parallelLister({ pageSize: 2, concurrency: 2 })(s, prefix)) {
        yield page;
        seen.push((await readJson<ShardMeta>(reader, `${BASE}_index/_meta.json`))!.commitSeq);
      }
    };

    await healRoot(connectStore(store.bucket), root, { mode: 'repair', lister: watched, chunkEntries: 1 });

    // Not all at the end: some commit landed while pages were still to come.
    expect(seen.slice(0, -1).some((seq) => seq > meta.commitSeq)).toBe(true);
    expect(await partitionsNow(store)).toEqual(truth());
  });

  it('gives waiting clients a turn at the lock between its commits, but not before the last one', async () => {
    const { store, root } = await shardFirstRoot();
    const turnMs = 1_500;
    // Time that runs on when slept in, at once: the turns are counted, not waited for.
    let ahead = 0;
    const turns: number[] = [];
    const clock: LockClock = {
      now: () => Date.now() + ahead,
      sleep: async (ms) => {
        if (ms > turnMs / 2) turns.push(ms);
        ahead += ms;
      },
      every: systemClock.every,
    };
    let takes = 0;
    const counting = hookedStore(store.bucket, {
      beforePut: async (key, conditional) => {
        if (key === `${BASE}.datastore.lock` && conditional) takes++;
      },
    });

    await healRoot(counting, root, {
      mode: 'repair',
      chunkEntries: 3,
      lister: parallelLister({ pageSize: 2 }),
      publish: { lock: { clientTurn: { afterMs: 0, ms: turnMs }, clock } },
    });

    expect(takes).toBeGreaterThan(2);
    // None before the first take (nothing was released yet), one before every other but the last.
    expect(turns).toHaveLength(takes - 2);
    expect(await partitionsNow(store)).toEqual(truth());
  });

  it('names the first keys of each kind it was asked for, with whole counts', async () => {
    const { store, root } = await shardFirstRoot();

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'check', lister: parallelLister({ pageSize: 2 }), keys: 2 });

    expect(report.scopes[0].drift).toEqual({ missing: 9, stale: 3, resized: 1 });
    expect(report.scopes[0].driftKeys).toEqual({
      missing: EXPECTED_DRIFT.missing.slice(0, 2),
      stale: EXPECTED_DRIFT.stale.slice(0, 2),
      resized: EXPECTED_DRIFT.resized.slice(0, 2),
    });
  });

  it('a commit that fails while the listing goes on fails the heal with its error', async () => {
    const { store, root } = await shardFirstRoot();
    let refused = false;
    // Refused once only: a later commit of the same partition would succeed, so only the first error can fail the heal.
    const failing = hookedStore(store.bucket, {
      async beforePut(key) {
        if (refused || key !== `${BASE}_index/data--aws--t3.json`) return;
        refused = true;
        throw new Error('partition write refused');
      },
    });

    await expect(
      healRoot(failing, root, { mode: 'repair', lister: parallelLister({ pageSize: 2, concurrency: 2 }), chunkEntries: 1 }),
    ).rejects.toThrow('partition write refused');
  });

  it('a client push between two chunks converges', async () => {
    const { store, root } = await shardFirstRoot();
    let pushed = false;
    const racing = hookedStore(store.bucket, {
      async beforePut(key) {
        if (pushed || !key.startsWith(`${BASE}_index/`) || key.endsWith('_meta.json')) return;
        pushed = true;
        // A client uploads a file and pushes: its partition file and a manifest past ours, unconditionally.
        await putObject(store, `${BASE}files/late.txt`, 'late upload');
        const files = await readIndex(store, `${BASE}_index/files.json`);
        const entries = [...(files?.entries.values() ?? []), indexEntry('files/late.txt', { size: 11, lastModified: isoAgo(0) })];
        await putObject(store, `${BASE}_index/files.json`, shardJson(entries));
        const meta = (await readJson<ShardMeta>(store, `${BASE}_index/_meta.json`))!;
        await putObject(store, `${BASE}_index/_meta.json`, JSON.stringify({ ...meta, commitSeq: meta.commitSeq + 1 }));
      },
    });

    const report = await healRoot(racing, root, { mode: 'repair', chunkEntries: 2 });

    expect(pushed).toBe(true);
    expect(report.scopes[0].published).toBe(true);
    expect(await partitionsNow(store)).toEqual(truth({ 'files/late.txt': 'late upload' }));
  });

  it('a key the heal found missing that a client indexes before the commit keeps the entry the client wrote', async () => {
    const { store, root } = await shardFirstRoot();
    let pushed = false;
    const racing = hookedStore(store.bucket, {
      async beforePut(key) {
        if (pushed || key !== `${BASE}_index/files.json`) return;
        pushed = true;
        // A current client pushes without the lock: its entry for the file, with its hash, in the partition file.
        const files = await readIndex(store, key);
        const fresh = indexEntry('files/readme.txt', { size: 5, lastModified: isoAgo(0), sha256: 'sha-from-the-client' });
        await putObject(store, key, shardJson([...(files?.entries.values() ?? []), fresh]));
        const meta = (await readJson<ShardMeta>(store, `${BASE}_index/_meta.json`))!;
        await putObject(store, `${BASE}_index/_meta.json`, JSON.stringify({ ...meta, commitSeq: meta.commitSeq + 1 }));
      },
    });

    const report = await healRoot(racing, root, { mode: 'repair' });

    expect(pushed).toBe(true);
    expect(report.scopes[0].driftKeys?.missing).toContain('files/readme.txt');
    expect((await readIndex(store, `${BASE}_index/files.json`))?.entries.get('files/readme.txt')?.sha256).toBe('sha-from-the-client');
    expect(await partitionsNow(store)).toEqual(truth());
  });

  it('a partition whose change a client made before the commit keeps the file the client wrote, unwritten', async () => {
    const { store, root } = await shardFirstRoot();
    const key = `${BASE}_index/workflow-runs--wf-2.json`;
    let reads = 0;
    let pushedEtag: string | undefined;
    const racing = hookedStore(store.bucket, {
      async beforeGet(got) {
        // The first read is the heal's judgement of the partition; the second, its commit's.
        if (got !== key || ++reads !== 2) return;
        const object = (await listObjects(store, `${BASE}workflow-runs/wf-2/`))[0];
        const entry = indexEntry(object.key.slice(BASE.length), { size: object.size, lastModified: object.lastModified });
        await putObject(store, key, shardJson([entry]));
        pushedEtag = (await listObjects(store, key))[0].etag;
      },
    });
    const log = trackRequests(racing);

    const report = await healRoot(racing, root, { mode: 'repair' });

    expect(pushedEtag).toBeDefined();
    expect(report.scopes[0].driftKeys?.missing).toContain('workflow-runs/wf-2/run-1/log.txt');
    expect(log.filter((r) => r.op === 'PutObject' && r.key === key)).toEqual([]);
    expect((await listObjects(store, key))[0].etag).toBe(pushedEtag);
    expect(await partitionsNow(store)).toEqual(truth());
  });

  it("a commit's re-check does not download again the files it wrote, and one a client pushed over is written again", async () => {
    const { store, root } = await shardFirstRoot();
    const drifted = await store.get(`${BASE}_index/logs.json`);
    let committed = false;
    let pushed = false;
    const racing = hookedStore(store.bucket, {
      beforePut(key) {
        if (key === `${BASE}_index/_meta.json`) committed = true;
      },
      async beforeGet(key) {
        if (!committed || pushed || key !== `${BASE}_index/logs.json`) return;
        pushed = true;
        // A client's push erases the commit's write just before its re-check reads it back.
        await putObject(store, key, drifted!.body.toString('utf8'));
      },
    });
    const log = trackRequests(racing);

    const report = await healRoot(racing, root, { mode: 'repair' });

    expect(pushed).toBe(true);
    expect(report.scopes[0].published).toBe(true);
    expect(await partitionsNow(store)).toEqual(truth());
    const files = (await listObjects(store, `${BASE}_index/`)).filter((o) => !o.key.endsWith('/_meta.json'));
    // Every file the commit wrote and the client left alone is asked for only if changed, and its ETag stood.
    const rechecked = log.filter((r) => r.op === 'GetObject' && r.ifNoneMatch !== undefined);
    expect(rechecked.length).toBeGreaterThan(0);
    for (const r of rechecked.filter((r) => r.key !== `${BASE}_index/logs.json`))
      expect(r.ifNoneMatch?.replace(/"/g, '')).toBe(files.find((o) => o.key === r.key)?.etag.replace(/"/g, ''));
  });

  it('an unreadable partition file is copied under _control/ before it is replaced', async () => {
    const { store, root } = await shardFirstRoot();
    await putObject(store, `${BASE}_index/logs.json`, '{"version":1,"entries":');
    // Written after the manifest would make the layout pending (the whole read): the manifest moves on too.
    const meta = (await readJson<ShardMeta>(store, `${BASE}_index/_meta.json`))!;
    await putObject(store, `${BASE}_index/_meta.json`, JSON.stringify(meta));

    const report = await healRoot(connectStore(store.bucket), root, { mode: 'repair', chunkEntries: 3 });

    expect(report.scopes[0]).toMatchObject({ indexState: 'unreadable', published: true });
    expect(report.scopes[0].keptCopy).toMatch(/_control\/datastore-indexer\/unreadable\//);
    const copies = await listKeys(store, `${BASE}_control/datastore-indexer/unreadable/`);
    expect(copies).toHaveLength(1);
    expect(await partitionsNow(store)).toEqual(truth());
  });

  it.each(['monolith', 'dual-write'] as const)(
    'a %s root keeps the whole-index heal: its monolith equals the listing, its layout stays',
    async (layout) => {
      const store = await testStore();
      await putObjects(store, Object.fromEntries(Object.entries(OBJECTS).map(([k, v]) => [BASE + k, v])));
      await putIndex(store, `${BASE}.datastore-index.json`, clientEntries());
      const partitions = [...groupSummaries(clientEntries()).keys()].sort();
      if (layout === 'dual-write') {
        await putShardLayout(store, BASE, clientEntries());
        await putObject(store, `${BASE}_index/_meta.json`, JSON.stringify({ version: 1, partitions }));
      }

      const report = await healRoot(
        connectStore(store.bucket),
        { bucket: store.bucket, prefix: 'sf' },
        { mode: 'repair', chunkEntries: 1 },
      );

      // The unshardable key is data here: a monolith holds it.
      expect(report.scopes[0]).toMatchObject({ layout, published: true, drift: { missing: 10, stale: 3, resized: 1 }, unshardable: 0 });
      const rows = Object.entries(OBJECTS)
        .filter(([k]) => k !== LONG)
        .map(([key, body]) => ({ key, size: Buffer.byteLength(body) }));
      expect(summarize(await readIndex(store, `${BASE}.datastore-index.json`))).toEqual(sortByKey(rows));
      const meta = await readJson<{ version: number }>(store, `${BASE}_index/_meta.json`);
      expect(meta?.version).toBe(layout === 'dual-write' ? 1 : undefined);
    },
  );
});
