/** healRoot against a real S3 API (moto): rebuilding, checking and repairing indexes, and what it must never touch. */
import { type IndexEntry, parseIndex } from '../../lambda/lib/index-file';
import type { Lister } from '../../lambda/lib/list';
import type { ScopeReport } from '../../lambda/lib/heal-types';
import { healRoot } from '../../lambda/lib/heal';
import { lockKeyOf } from '../../lambda/lib/names';
import { indexEntry, isoAgo } from '../helpers/factories';
import {
  connectStore,
  deleteObject,
  listKeys,
  listObjects,
  putIndex,
  putObject,
  putObjects,
  readIndex,
  readObject,
  seedDatastore,
  snapshotBucket,
  summarize,
  testStore,
  trackRequests,
} from '../helpers/s3';

function scopeReport(reports: readonly ScopeReport[], namespace?: string): ScopeReport {
  const report = reports.find((r) => r.namespace === namespace);
  if (!report) throw new Error(`no report for ${namespace ?? 'the root index'}`);
  return report;
}

describe('healRoot on an unindexed root', () => {
  it('publishes one index per scope whose entries equal the listing, leaving out internal keys and namespace folders', async () => {
    // GIVEN a prefixed root with data, internal files and a namespace, and no index anywhere
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'swamp/prod', objects: 10, internal: true, namespaces: ['ns1'] });
    // ...and a neighbour outside the root that must stay out of it
    await putObject(store, 'swamp/prodx/data/a/b/c', 'not ours');

    // WHEN it is repaired
    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    // THEN each index holds exactly its scope's data objects, with the listing's size and LastModified
    const rootIndex = await readIndex(store, 'swamp/prod/.datastore-index.json');
    const nsIndex = await readIndex(store, 'swamp/prod/ns1/.datastore-index.json');
    expect(summarize(rootIndex)).toEqual(seeded.expectedEntries());
    expect(summarize(nsIndex)).toEqual(seeded.expectedEntries('ns1'));
    const listed = new Map((await listObjects(store, 'swamp/prod/')).map((o) => [o.key, o]));
    for (const entry of rootIndex!.entries.values()) {
      expect(entry).toEqual({
        key: entry.key,
        size: listed.get(`swamp/prod/${entry.key}`)!.size,
        lastModified: listed.get(`swamp/prod/${entry.key}`)!.lastModified,
      });
    }
    for (const entry of nsIndex!.entries.values()) expect(entry.lastModified).toBe(listed.get(`swamp/prod/ns1/${entry.key}`)!.lastModified);
    expect([...rootIndex!.entries.keys()].filter((k) => k.startsWith('ns1/'))).toEqual([]);

    // ...nothing else was written: no index outside the root, no lock left behind
    const indexes = (await listKeys(store)).filter((k) => k.endsWith('.datastore-index.json'));
    expect(indexes).toEqual(['swamp/prod/.datastore-index.json', 'swamp/prod/ns1/.datastore-index.json']);
    expect(await readObject(store, 'swamp/prod/.datastore.lock')).toBeUndefined();

    // ...and the report says what it found
    expect(report.scopes.map((s) => s.namespace)).toEqual([undefined, 'ns1']);
    const rootReport = scopeReport(report.scopes);
    expect(rootReport).toMatchObject({ indexState: 'absent', layout: 'monolith', published: true, objects: 10, entries: 10 });
    expect(rootReport.drift).toEqual({ missing: 10, stale: 0, resized: 0 });
    expect(scopeReport(report.scopes, 'ns1')).toMatchObject({ indexState: 'absent', published: true, entries: 10 });
  });

  it('heals only the namespace it is asked for', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { objects: 3, namespaces: ['ns1', 'ns2'] });

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair', namespace: 'ns2' });

    expect(report.scopes.map((s) => s.namespace)).toEqual(['ns2']);
    expect(summarize(await readIndex(store, 'ns2/.datastore-index.json'))).toEqual(seeded.expectedEntries('ns2'));
    expect(await readObject(store, '.datastore-index.json')).toBeUndefined();
    expect(await readObject(store, 'ns1/.datastore-index.json')).toBeUndefined();
  });

  it('indexes keys with spaces, +, %, XML specials, unicode and .. inside names exactly as listed', async () => {
    const store = await testStore();
    const keys = [
      'data/a b/c d/e f.txt',
      'files/a+b.txt',
      'files/100%.txt',
      'files/%2F.txt',
      'logs/ünï©ødé 日本.log',
      'data/a..b/c..d/e/f',
      'sp  two.md',
      `files/a&b <c> "d" 'e' ]]>.txt`,
      'files/&amp; &#38; literally.txt',
      'files/tab\there.txt',
      'files/emoji 😀.txt',
    ];
    const seeded = await seedDatastore(store, { prefix: 'p q+r', objects: Object.fromEntries(keys.map((k) => [k, `body of ${k}`])) });

    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    const index = await readIndex(store, 'p q+r/.datastore-index.json');
    expect(summarize(index)).toEqual(seeded.expectedEntries());
    expect([...index!.entries.keys()].sort()).toEqual([...keys].sort());
    const check = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'check' });
    expect(scopeReport(check.scopes).drift).toEqual({ missing: 0, stale: 0, resized: 0 });
  });
});

describe('healRoot on a drifted index', () => {
  const OLD = '2020-01-01T00:00:00.000Z';

  /** A clean root, then an index with 2 missing, 2 stale (old) and 1 resized entries, and client fields everywhere. */
  async function driftedRoot() {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'ds', objects: 9, internal: true });
    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
    const clean = (await readIndex(store, seeded.indexKey()))!;
    const keys = [...clean.entries.keys()].sort();
    const [missingA, missingB, resizedKey] = [keys[0], keys[3], keys[5]];
    const entries: IndexEntry[] = [...clean.entries.values()]
      .filter((e) => e.key !== missingA && e.key !== missingB)
      .map((e) =>
        e.key === resizedKey
          ? { ...e, size: e.size + 1000, sha256: 'old-hash', localMtime: '2026-05-04T15:19:58.120Z', clientNote: 'keep me' }
          : { ...e, sha256: `sha-${e.key}`, localMtime: '2026-05-04T15:19:58.120Z', clientNote: { n: e.key.length } },
      );
    entries.push(
      indexEntry('data/gone/x/1/raw', { size: 5, lastModified: OLD, sha256: 'x' }),
      indexEntry('logs/gone.log', { size: 7, lastModified: OLD }),
    );
    await putIndex(store, seeded.indexKey(), entries, { clientVersion: '2026.04.28', lastPulled: '2026-05-04T15:24:03.000Z' });
    const sizes = new Map((await listObjects(store, 'ds/')).map((o) => [o.key.slice(3), o.size]));
    return { store, seeded, entries, missing: [missingA, missingB].sort(), resizedKey, objectSize: sizes.get(resizedKey)! };
  }

  it('check reports exactly the drifting keys and writes nothing', async () => {
    const { store, seeded, missing, resizedKey, objectSize } = await driftedRoot();
    const before = await snapshotBucket(store);
    const checker = connectStore(store.bucket);

    const report = await healRoot(checker, seeded.root, { mode: 'check' });

    expect(scopeReport(report.scopes).driftKeys).toEqual({
      missing,
      stale: ['data/gone/x/1/raw', 'logs/gone.log'],
      resized: [{ key: resizedKey, indexSize: objectSize + 1000, objectSize }],
    });
    expect(scopeReport(report.scopes)).toMatchObject({ indexState: 'valid', published: false, entries: 9 });
    expect(await snapshotBucket(store)).toEqual(before);
    expect(checker.requests.PutObject ?? 0).toBe(0);
    expect(checker.requests.DeleteObject ?? 0).toBe(0);
  });

  it('repair fixes exactly those keys, keeps client and unknown fields of untouched entries, then has nothing left to do', async () => {
    const { store, seeded, entries, resizedKey, objectSize } = await driftedRoot();

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    expect(scopeReport(report.scopes)).toMatchObject({ published: true, drift: { missing: 2, stale: 2, resized: 1 }, entries: 9 });
    const healed = (await readIndex(store, seeded.indexKey()))!;
    expect(summarize(healed)).toEqual(seeded.expectedEntries());
    // untouched entries survive as the client wrote them
    for (const entry of entries) {
      if (entry.key === resizedKey || !healed.entries.has(entry.key)) continue;
      expect(healed.entries.get(entry.key)).toEqual(entry);
    }
    // the resized entry: new size, hashes of the old bytes dropped, unknown fields kept
    const resized = healed.entries.get(resizedKey)!;
    expect(resized).toMatchObject({ key: resizedKey, size: objectSize, clientNote: 'keep me' });
    expect(resized).not.toHaveProperty('sha256');
    expect(resized).not.toHaveProperty('localMtime');
    // unknown top-level fields survive too
    expect(healed.extra).toEqual({ clientVersion: '2026.04.28' });

    // a second repair finds nothing: no index write, no lock taken
    const etag = (await listObjects(store, seeded.indexKey()))[0].etag;
    const again = connectStore(store.bucket);
    const second = await healRoot(again, seeded.root, { mode: 'repair' });
    expect(scopeReport(second.scopes)).toMatchObject({ published: false, drift: { missing: 0, stale: 0, resized: 0 } });
    expect(again.requests.PutObject ?? 0).toBe(0);
    expect((await listObjects(store, seeded.indexKey()))[0].etag).toBe(etag);
  });
});

describe('healRoot on an unreadable index', () => {
  it.each([
    ['bad JSON', '{"version":1,"entries":{"data/a'],
    ['a JSON array', '[{"key":"data/a/b/c"}]'],
    ['foreign JSON', '{"foo":1}'],
    ['a wrong entry shape', '{"version":1,"entries":{"logs/x.log":{"key":"logs/x.log","size":"big"}}}'],
  ])('keeps a copy of %s under _control/datastore-indexer/unreadable/root/ before writing the rebuilt index', async (_what, body) => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'root', objects: 5 });
    await putObject(store, seeded.indexKey(), body);
    const healer = connectStore(store.bucket);
    const log = trackRequests(healer);

    const report = await healRoot(healer, seeded.root, { mode: 'repair' });

    const copies = await listKeys(store, 'root/_control/datastore-indexer/unreadable/root/');
    expect(copies).toHaveLength(1);
    expect(copies[0]).toMatch(/^root\/_control\/datastore-indexer\/unreadable\/root\/\d{4}-\d\d-\d\dT[\d-]+Z-\.datastore-index\.json$/);
    expect((await readObject(store, copies[0]))!.equals(Buffer.from(body))).toBe(true);
    expect(summarize(await readIndex(store, seeded.indexKey()))).toEqual(seeded.expectedEntries());
    const root = scopeReport(report.scopes);
    expect(root).toMatchObject({ indexState: 'unreadable', keptCopy: copies[0], published: true });
    expect(root.unreadableReason).toEqual(expect.any(String));
    // the copy landed before the index was replaced
    const puts = log.filter((r) => r.op === 'PutObject').map((r) => r.key);
    expect(puts.indexOf(copies[0])).toBeGreaterThanOrEqual(0);
    expect(puts.indexOf(copies[0])).toBeLessThan(puts.indexOf(seeded.indexKey()));
    // the copy is internal: a second repair neither indexes it nor copies again
    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
    expect(await listKeys(store, 'root/_control/datastore-indexer/unreadable/root/')).toEqual(copies);
  });
});

describe('healRoot on an unreadable namespace index', () => {
  it("keeps the copy in the root's indexer folder, named by the namespace, and rebuilds only that index", async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'nsbad', objects: 3, namespaces: ['team'] });
    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
    const rootEtag = (await listObjects(store, seeded.indexKey()))[0].etag;
    await putObject(store, seeded.indexKey('team'), '<html>not an index</html>');

    const report = await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    const copies = await listKeys(store, 'nsbad/_control/datastore-indexer/unreadable/ns/team/');
    expect(copies).toHaveLength(1);
    expect((await readObject(store, copies[0]))!.toString()).toBe('<html>not an index</html>');
    // nothing of the indexer's inside the namespace, where the delete permission does not reach
    expect(await listKeys(store, 'nsbad/team/_control/')).toEqual([]);
    expect(summarize(await readIndex(store, seeded.indexKey('team')))).toEqual(seeded.expectedEntries('team'));
    expect(scopeReport(report.scopes)).toMatchObject({ published: false });
    expect((await listObjects(store, seeded.indexKey()))[0].etag).toBe(rootEtag);
  });
});

describe('healRoot confirms stale entries the listing may have missed', () => {
  it('keeps a recent entry whose object exists but was not listed, drops a recent one whose object is gone, trusts the listing for old ones', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'r', objects: 4 });
    // objects that exist, yet the lister below will not report them
    await putObjects(store, { 'r/logs/late.log': 'uploaded as the listing passed', 'r/logs/old.log': 'old and unlisted' });
    const late = indexEntry('logs/late.log', { size: 30, lastModified: isoAgo(1000), sha256: 'late-sha' });
    const gone = indexEntry('logs/gone.log', { size: 3, lastModified: isoAgo(1000) });
    const old = indexEntry('logs/old.log', { size: 16, lastModified: '2020-01-01T00:00:00.000Z' });
    const current = seeded.expectedEntries().map((e) => indexEntry(e.key, { size: e.size, lastModified: isoAgo(3_600_000) }));
    await putIndex(store, seeded.indexKey(), [...current, late, gone, old]);
    const hiding: Lister = (s, prefix) =>
      (async function* () {
        for await (const page of s.listPages({ prefix })) {
          yield { ...page, objects: page.objects.filter((o) => o.key !== 'r/logs/late.log' && o.key !== 'r/logs/old.log') };
        }
      })();
    const healer = connectStore(store.bucket);
    const log = trackRequests(healer);

    const report = await healRoot(healer, seeded.root, { mode: 'repair', lister: hiding });

    const index = (await readIndex(store, seeded.indexKey()))!;
    expect(index.entries.get('logs/late.log')).toEqual(late);
    expect(index.entries.has('logs/gone.log')).toBe(false);
    expect(index.entries.has('logs/old.log')).toBe(false);
    expect(scopeReport(report.scopes).driftKeys.stale).toEqual(['logs/gone.log', 'logs/old.log']);
    // only the two recent entries were asked about (HeadObject), never the old one
    const asked = new Set(log.filter((r) => r.op === 'HeadObject').map((r) => r.key));
    expect([...asked].sort()).toEqual(['r/logs/gone.log', 'r/logs/late.log']);
  });
});

describe('healRoot takes the lock only for a write', () => {
  it('takes no lock when all it found was doubtful and S3 confirms the index', async () => {
    // GIVEN an index true but for a recent entry whose object the listing does not report (an upload it passed)
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'q', objects: 4 });
    await putObjects(store, { 'q/logs/late.log': 'uploaded as the listing passed' });
    const late = indexEntry('logs/late.log', { size: 30, lastModified: isoAgo(1000) });
    const current = seeded.expectedEntries().map((e) => indexEntry(e.key, { size: e.size, lastModified: isoAgo(3_600_000) }));
    const etag = await putIndex(store, seeded.indexKey(), [...current, late]);
    const hiding: Lister = (s, prefix) =>
      (async function* () {
        for await (const page of s.listPages({ prefix }))
          yield { ...page, objects: page.objects.filter((o) => o.key !== 'q/logs/late.log') };
      })();
    const healer = connectStore(store.bucket);
    const log = trackRequests(healer);

    // WHEN it is healed
    const report = await healRoot(healer, seeded.root, { mode: 'repair', lister: hiding });

    // THEN the entry was asked about, found, and nothing was written: not even the lock
    expect(scopeReport(report.scopes)).toMatchObject({ published: false });
    expect(log.filter((r) => r.op === 'HeadObject').map((r) => r.key)).toEqual(['q/logs/late.log']);
    expect(log.filter((r) => r.op === 'PutObject' || r.op === 'DeleteObject')).toEqual([]);
    expect((await store.head(seeded.indexKey()))!.etag).toBe(etag);
  });
});

describe("healRoot sends the lock's take early", () => {
  it('has the take on its way to S3 before the rest of the plan is made, when the drift is sure', async () => {
    // GIVEN an index that lacks one object's entry: drift no confirmation can take back
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'qe', objects: 4 });
    await putIndex(
      store,
      seeded.indexKey(),
      seeded
        .expectedEntries()
        .slice(1)
        .map((e) => indexEntry(e.key, { size: e.size, lastModified: isoAgo(3_600_000) })),
    );
    const healer = connectStore(store.bucket);
    const order: string[] = [];
    // The last step before the HTTP handler: a request that reaches it is sent.
    healer.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'PutObjectCommand' && (args.input as { Key?: string }).Key === lockKeyOf(seeded.root))
          order.push('lock');
        return next(args);
      },
      { step: 'finalizeRequest', priority: 'low', name: 'lockSentProbe' },
    );

    // WHEN it is healed
    const report = await healRoot(healer, seeded.root, { mode: 'repair', onPlanned: () => order.push('planned') });

    // THEN the lock's request left before the plan was done, and the index was written under it
    expect(order).toEqual(['lock', 'planned']);
    expect(scopeReport(report.scopes)).toMatchObject({ published: true, drift: { missing: 1, stale: 0, resized: 0 } });
  });
});

describe('healRoot after a client deleted an object', () => {
  it('drops the entry of an object deleted since the index was written', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { objects: 4 });
    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });
    const victim = seeded.expectedEntries()[0].key;
    await deleteObject(store, victim);

    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'repair' });

    const index = await readIndex(store, seeded.indexKey());
    expect(index!.entries.has(victim)).toBe(false);
    expect(summarize(index)).toEqual(seeded.expectedEntries().filter((e) => e.key !== victim));
    expect(parseIndex((await readObject(store, seeded.indexKey()))!).ok).toBe(true);
  });
});

describe('healScope with a listing older than the index (found by the chaos suite)', () => {
  it('does not resize (and strip the client fields of) an entry whose object was overwritten after the listing passed', async () => {
    const { healScope } = await import('../../lambda/lib/heal');
    const { HealRun } = await import('../../lambda/lib/heal-run');
    const store = await testStore();
    const root = { bucket: store.bucket, prefix: 'h' };
    await putObjects(store, { 'h/logs/over.log': 'x'.repeat(10) });
    const entry = indexEntry('logs/over.log', { size: 10, sha256: 'newer', localMtime: 'm2', lastModified: new Date().toISOString() });
    await putIndex(store, 'h/.datastore-index.json', [entry]);
    // The listing saw the first upload (3 bytes); the client then overwrote it and indexed the new bytes.
    const listing = new Map([['logs/over.log', { key: 'logs/over.log', size: 3, lastModified: isoAgo(5_000) }]]);

    const run = new HealRun(connectStore(store.bucket), root, { mode: 'repair' }, Date.now() - 5_000);
    const report = await healScope(run, { root }, { objects: listing });

    expect(report.published).toBe(false);
    expect((await readIndex(store, 'h/.datastore-index.json'))!.entries.get('logs/over.log')).toEqual(entry);
  });
});
