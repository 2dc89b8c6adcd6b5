/**
 * A delta on a shard-first (or dual-write) root meets partition files the manifest does not describe: a file it does not
 * list (an orphan left by a writer that died, or a new partition), and an entry filed in another
 * partition's file. Clients read every listed file and merge all their entries, so neither may cost an
 * entry its client fields.
 */
import type { IndexEntry } from '../../lambda/lib/index-file';
import type { ShardMeta } from '../../lambda/lib/layouts/manifest';
import { applyDelta } from '../../lambda/lib/delta';
import { indexEntry, objectChange, shardJson, shardMeta } from '../helpers/factories';
import { dualWriteRoot } from '../helpers/dual-write';
import { connectStore, putObject, putObjects, putShardLayout, readIndex, readJson, testStore } from '../helpers/s3';
import type { S3Store } from '../../lambda/lib/s3';

const T = '2026-07-01T00:00:00.000Z';
const CLIENT = { sha256: 'abc', localMtime: '2026-05-04T15:19:58.120Z', note: { kept: true } };

/** A shard-first root under `s/` with `audit` and `logs` listed at commitSeq 41, their objects in the bucket. */
async function shardRoot(store: S3Store): Promise<{ root: { bucket: string; prefix: string } }> {
  await putObjects(store, { 's/audit/a.json': 'a', 's/logs/l.log': 'l' });
  await putShardLayout(store, 's/', [indexEntry('audit/a.json', CLIENT), indexEntry('logs/l.log')], shardMeta(['audit', 'logs'], 41));
  return { root: { bucket: store.bucket, prefix: 's' } };
}

async function entriesOf(store: S3Store, partition: string): Promise<Map<string, IndexEntry>> {
  return (await readIndex(store, `s/_index/${partition}.json`))?.entries ?? new Map();
}

describe('applyDelta and a partition file the manifest does not list', () => {
  it("adopts an orphan's entries whose object exists, with their client fields, and lists it at a higher commitSeq", async () => {
    // GIVEN an orphan `files` file (a client died before its manifest) holding one entry true to its object,
    // one of another size than its object, and one whose object is gone
    const store = await testStore();
    const scope = await shardRoot(store);
    await putObjects(store, {
      's/files/kept.txt': 'kept',
      's/files/grown.txt': 'grown!',
      's/files/new.txt': 'hello',
      's/files/a//b': 'refused',
      's/files/.lock': 'internal',
    });
    await putObject(
      store,
      's/_index/files.json',
      shardJson([
        indexEntry('files/kept.txt', { size: 4, ...CLIENT }),
        indexEntry('files/grown.txt', { size: 2, ...CLIENT }),
        indexEntry('files/gone.txt', { size: 3, ...CLIENT }),
        // ...and keys never indexed, whose objects exist: one clients refuse, one internal
        indexEntry('files/a//b', { size: 7 }),
        indexEntry('files/.lock', { size: 8 }),
      ]),
    );

    // WHEN a delta adds a key of that partition
    const change = objectChange('s/files/new.txt', { size: 5, eventTime: T });
    const report = await applyDelta(connectStore(store.bucket), scope, new Map([['files/new.txt', change]]), { convergeRounds: 0 });

    // THEN it converges, and the file holds the orphan's true entries (client fields kept) beside the new one
    expect(report).toMatchObject({ status: 'applied', published: true, added: 1 });
    const files = await entriesOf(store, 'files');
    expect([...files.keys()].sort()).toEqual(['files/grown.txt', 'files/kept.txt', 'files/new.txt']);
    expect(files.get('files/kept.txt')).toEqual(indexEntry('files/kept.txt', { size: 4, ...CLIENT }));
    // ...an entry of another size describes other bytes: it keeps its unknown fields, not its sha256 and localMtime
    expect(files.get('files/grown.txt')).toMatchObject({ size: 6, note: { kept: true } });
    expect(files.get('files/grown.txt')).not.toHaveProperty('sha256');
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual(shardMeta(['audit', 'files', 'logs'], 42));
  });

  it('creates the file of a new partition and lists it', async () => {
    const store = await testStore();
    const scope = await shardRoot(store);
    await putObjects(store, { 's/files/new.txt': 'hello' });

    const change = objectChange('s/files/new.txt', { size: 5, eventTime: T });
    const report = await applyDelta(connectStore(store.bucket), scope, new Map([['files/new.txt', change]]), { convergeRounds: 0 });

    expect(report).toMatchObject({ status: 'applied', published: true, added: 1, conflicts: 0 });
    expect([...(await entriesOf(store, 'files')).keys()]).toEqual(['files/new.txt']);
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual(shardMeta(['audit', 'files', 'logs'], 42));
  });
});

describe('applyDelta and a mirror file the version-1 manifest does not list', () => {
  it('replaces the file from the monolith (the truth) and lists it', async () => {
    // GIVEN a dual-write root, and a `files` mirror file its manifest does not list (a push that died before it)
    const store = await testStore();
    await dualWriteRoot(store, 'd', { 'audit/a.json': 'a', 'logs/l.log': 'l' });
    await putObject(store, 'd/_index/files.json', shardJson([indexEntry('files/old.txt', { size: 3 })]));
    await putObjects(store, { 'd/files/new.txt': 'hello' });

    // WHEN a delta adds a key of that partition
    const change = objectChange('d/files/new.txt', { size: 5, eventTime: T });
    const scope = { root: { bucket: store.bucket, prefix: 'd' } };
    const report = await applyDelta(connectStore(store.bucket), scope, new Map([['files/new.txt', change]]), { convergeRounds: 0 });

    // THEN it converges: the monolith, the mirror file and the manifest all say the same
    expect(report).toMatchObject({ status: 'applied', layout: 'dual-write', published: true, added: 1, conflicts: 0 });
    const monolith = await readIndex(store, 'd/.datastore-index.json');
    expect([...(monolith?.entries.keys() ?? [])].sort()).toEqual(['audit/a.json', 'files/new.txt', 'logs/l.log']);
    expect([...((await readIndex(store, 'd/_index/files.json'))?.entries.keys() ?? [])]).toEqual(['files/new.txt']);
    expect(await readJson(store, 'd/_index/_meta.json')).toEqual({ version: 1, partitions: ['audit', 'files', 'logs'] });
  });
});

describe('applyDelta and an entry filed in another partition file', () => {
  /** `audit.json` also holds `logs/misfiled.log` (partition `logs`), with client fields. */
  async function misfiled(store: S3Store): Promise<{ root: { bucket: string; prefix: string } }> {
    const scope = await shardRoot(store);
    await putObjects(store, { 's/logs/misfiled.log': 'mis', 's/audit/b.json': 'bb' });
    await putObject(
      store,
      's/_index/audit.json',
      shardJson([indexEntry('audit/a.json', CLIENT), indexEntry('logs/misfiled.log', { size: 3, ...CLIENT })]),
    );
    return scope;
  }

  it('keeps its client fields when a delta rewrites the file that holds it', async () => {
    const store = await testStore();
    const scope = await misfiled(store);

    const change = objectChange('s/audit/b.json', { size: 2, eventTime: T });
    const report = await applyDelta(connectStore(store.bucket), scope, new Map([['audit/b.json', change]]), { convergeRounds: 0 });

    expect(report).toMatchObject({ status: 'applied', published: true, added: 1 });
    // Clients merge every listed file: the entry must still be there, once, with its fields.
    const audit = await entriesOf(store, 'audit');
    const logs = await entriesOf(store, 'logs');
    const found = [audit.get('logs/misfiled.log'), logs.get('logs/misfiled.log')].filter((e) => e !== undefined);
    expect(found).toEqual([indexEntry('logs/misfiled.log', { size: 3, ...CLIENT })]);
    expect(audit.get('audit/b.json')).toMatchObject({ size: 2 });
    expect(await readJson<ShardMeta>(store, 's/_index/_meta.json')).toEqual(shardMeta(['audit', 'logs'], 42));
  });

  it('leaves an entry of a key with no partition in the file that holds it, with its fields', async () => {
    // GIVEN `audit.json` also holding `misc/x/y`, a key no partition takes (no file is its own)
    const store = await testStore();
    const scope = await shardRoot(store);
    await putObjects(store, { 's/misc/x/y': 'why', 's/audit/b.json': 'bb' });
    await putObject(
      store,
      's/_index/audit.json',
      shardJson([indexEntry('audit/a.json', CLIENT), indexEntry('misc/x/y', { size: 3, ...CLIENT })]),
    );

    // WHEN a delta rewrites that file
    const change = objectChange('s/audit/b.json', { size: 2, eventTime: T });
    await applyDelta(connectStore(store.bucket), scope, new Map([['audit/b.json', change]]), { convergeRounds: 0 });

    // THEN clients, who merge every listed file, still see it as it was
    const audit = await entriesOf(store, 'audit');
    expect([...audit.keys()].sort()).toEqual(['audit/a.json', 'audit/b.json', 'misc/x/y']);
    expect(audit.get('misc/x/y')).toEqual(indexEntry('misc/x/y', { size: 3, ...CLIENT }));
  });
});
