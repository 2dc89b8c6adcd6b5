import { INDEX_KEY, LOCK_KEY, NAMESPACE_MARKER, SHARD_META_KEY } from '../../lambda/lib/names';
import {
  isInternalKey,
  isRefusedKey,
  namespaceOfMarker,
  partitionFolder,
  partitionOf,
  partitionPlace,
  partitionPlaces,
  refusedKeyReason,
  topFolder,
} from '../../lambda/lib/keys';
import { readManifest } from '../../lambda/lib/layouts/manifest';
import { groupByPartition } from '../../lambda/lib/layouts/shards';
import { indexEntry } from '../helpers/factories';

describe('isInternalKey', () => {
  it.each(['.datastore-index.json', '.push-queue.json', '.datastore.lock', '.datastore-sync-state.json'])(
    'treats the exact key %s as internal',
    (key) => expect(isInternalKey(key)).toBe(true),
  );

  it.each(['data/.push-queue.json', 'logs/.datastore-sync-state.json', '.datastore-index.json.bak', 'x.push-queue.json'])(
    'indexes %s: the exact-name rules match the whole relative key only',
    (key) => expect(isInternalKey(key)).toBe(false),
  );

  it.each([
    '_index',
    '_index/',
    '_index/_meta.json',
    '_index/data--aws.json',
    '_index/a/b',
    '_control',
    '_control/',
    '_control/datastore-indexer/unreadable/root/x',
  ])('treats %s (at or under _index/ or _control/) as internal', (key) => expect(isInternalKey(key)).toBe(true));

  it.each(['_indexes/x', '_index.json', '_controlled/x', 'data/_index/x.json', 'data/_control/x'])(
    'indexes %s: only top-level _index/ and _control/ are internal',
    (key) => expect(isInternalKey(key)).toBe(false),
  );

  it.each(['.lock', 'x/.lock', 'data/a/b/.lock', '.namespace.json', 'ns1/.namespace.json', 'a/b/.namespace.json'])(
    'treats %s (last segment .lock or .namespace.json) as internal',
    (key) => expect(isInternalKey(key)).toBe(true),
  );

  it.each(['x.lock', 'a/.lock/b', 'a/.lockfile', 'a/my.namespace.json', 'a/.namespace.json/b'])(
    'indexes %s: the last segment must be exactly .lock or .namespace.json',
    (key) => expect(isInternalKey(key)).toBe(false),
  );

  it.each(['_catalog.db', 'a/_catalog.db', '_catalog.db-wal', 'a/b/_catalog.db-shm', '_catalog.db-journal', '_catalog.db-'])(
    'treats %s (_catalog.db or _catalog.db-*) as internal',
    (key) => expect(isInternalKey(key)).toBe(true),
  );

  it.each(['_catalog.dbx', 'my_catalog.db', '_catalog.db/x', '_catalog.db.bak', 'a/_catalog.db_wal'])(
    'indexes %s: not a catalog file',
    (key) => expect(isInternalKey(key)).toBe(false),
  );

  it.each(['', 'data/', 'data/aws/', 'a b/'])('treats the folder marker %j as never indexed', (key) =>
    expect(isInternalKey(key)).toBe(true),
  );

  it.each(['data/aws/ec2/i-0abc/1/raw', 'notes.md', 'misc/anything', 'a b/c+d/100%', 'ünï/日本.txt'])('indexes the data key %s', (key) =>
    expect(isInternalKey(key)).toBe(false),
  );

  it('names the contract keys', () => {
    expect([INDEX_KEY, LOCK_KEY, NAMESPACE_MARKER, SHARD_META_KEY]).toEqual([
      '.datastore-index.json',
      '.datastore.lock',
      '.namespace.json',
      '_index/_meta.json',
    ]);
  });
});

describe('namespaceOfMarker', () => {
  it('names the namespace of a top-level folder marker', () => {
    expect(namespaceOfMarker('ns1/.namespace.json')).toBe('ns1');
    expect(namespaceOfMarker('team a/.namespace.json')).toBe('team a');
  });

  it.each(['.namespace.json', '/.namespace.json', 'a/b/.namespace.json', 'ns1/.namespace.jsonx', 'ns1/x.namespace.json', 'ns1/'])(
    'finds no namespace in %s',
    (key) => expect(namespaceOfMarker(key)).toBeUndefined(),
  );
});

describe('topFolder', () => {
  it('is the first segment of a nested key and undefined at the top', () => {
    expect(topFolder('ns1/data/x')).toBe('ns1');
    expect(topFolder('notes.md')).toBeUndefined();
    expect(topFolder('/x')).toBeUndefined();
  });
});

describe('partitionOf', () => {
  it.each([
    // one segment only
    ['notes.md', '_root'],
    ['.hidden', '_root'],
    ['data', '_root'],
    // data / outputs / definitions-evaluated: none below 4 segments
    ['data/a', undefined],
    ['data/a/b', undefined],
    ['outputs/a/b', undefined],
    ['definitions-evaluated/a/b', undefined],
    // 4 and 5 segments: the first (count - 1)
    ['data/a/b/c', 'data--a--b'],
    ['data/a/b/c/d', 'data--a--b--c'],
    ['outputs/m/run/out.json', 'outputs--m--run'],
    ['definitions-evaluated/a/b/c/d', 'definitions-evaluated--a--b--c'],
    // 6 or more: the first (count - 3)
    ['data/aws/ec2/i-0abc/1/raw', 'data--aws--ec2'],
    ['data/a/b/c/d/e/f', 'data--a--b--c'],
    ['outputs/a/b/c/d/e/f/g', 'outputs--a--b--c--d'],
    ['definitions-evaluated/a/b/c/d/e', 'definitions-evaluated--a--b'],
    // workflow-runs: the second segment, none below 3 segments
    ['workflow-runs/wf', undefined],
    ['workflow-runs/wf/run.yaml', 'workflow-runs--wf'],
    ['workflow-runs/wf/1/2/3/4', 'workflow-runs--wf'],
    // flat folders: the folder name, whatever the depth
    ['workflows-evaluated/x', 'workflows-evaluated'],
    ['auto-definitions/a/b/c/d/e/f', 'auto-definitions'],
    ['audit/1.json', 'audit'],
    ['telemetry/a/b', 'telemetry'],
    ['logs/run.log', 'logs'],
    ['files/f.txt', 'files'],
    // anything else: no partition
    ['misc/x', undefined],
    ['Data/a/b/c', undefined],
    ['ns1/data/a/b/c', undefined],
  ])('puts %s in %s', (key, partition) => {
    expect(partitionOf(key)).toBe(partition);
  });
});

describe('partitionFolder and partitionPlace', () => {
  it.each([
    ['notes.md', '_root', ''],
    ['data/a/b/c', 'data--a--b', 'data/a/b/'],
    ['data/a/b/c/d', 'data--a--b--c', 'data/a/b/c/'],
    ['data/aws/ec2/i-0abc/1/raw', 'data--aws--ec2', 'data/aws/ec2/'],
    // a segment holding `--`: the folder comes from the key's own segments, not the partition's name
    ['data/a--b/c/d', 'data--a--b--c', 'data/a--b/c/'],
    ['workflow-runs/wf/1/2/3/4', 'workflow-runs--wf', 'workflow-runs/wf/'],
    ['logs/a/b/run.log', 'logs', 'logs/'],
  ])('places %s in %s under %s', (key, partition, folder) => {
    expect(partitionFolder(key)).toBe(folder);
    expect(partitionPlace(key)).toEqual({ partition, folder });
    expect(partitionOf(key)).toBe(partition);
    expect(key.startsWith(folder)).toBe(true);
  });

  it.each(['data/a/b', 'misc/x', 'workflow-runs/wf'])('has no place for %s', (key) => {
    expect(partitionFolder(key)).toBeUndefined();
    expect(partitionPlace(key)).toBeUndefined();
  });
});

describe('partitionPlaces', () => {
  it('places keys in order as partitionPlace does, across depths, `--` segments and folders sharing a start', () => {
    const keys = [
      'audit/a.json',
      'data/a/b/c',
      'data/a/b/c/d',
      'data/a/b/c/d/e',
      'data/a/b/c/d/e/f',
      'data/a/b/c/x',
      'data/a/b/cc/d',
      'data/a--b/c/d',
      'data/a/b/x',
      'data/x',
      'logs/a/b/run.log',
      'logs/z',
      'logsx/z',
      'notes.md',
      'workflow-runs/wf/1',
      'workflow-runs/wf2/1',
    ];
    const place = partitionPlaces();

    for (const key of keys) expect([key, place(key)]).toEqual([key, partitionPlace(key)]);
  });

  it('lets groupByPartition group keys whose partition comes back after others, each once', () => {
    const keys = ['logs/a', 'data/a/b/c/d', 'logs/b', 'notes.md', 'data/a/b/c/d/e', 'misc/x', 'data/a/b/c/e', 'top.md'];
    const grouped = groupByPartition(new Map(keys.map((key) => [key, indexEntry(key)])));

    expect(Object.fromEntries([...grouped].map(([partition, entries]) => [partition, [...entries.keys()]]))).toEqual({
      logs: ['logs/a', 'logs/b'],
      'data--a--b--c': ['data/a/b/c/d', 'data/a/b/c/e'],
      _root: ['notes.md', 'top.md'],
      'data--a--b': ['data/a/b/c/d/e'],
    });
  });
});

describe('refusedKeyReason', () => {
  it.each([
    ['data/../../escape.txt', '"." or ".."'],
    ['../x', '"." or ".."'],
    ['a/./b', '"." or ".."'],
    ['logs/..', '"." or ".."'],
    ['data/x\\..\\..\\y', '"." or ".."'],
    ['/abs/key', 'starts with a slash'],
    ['\\abs', 'starts with a slash'],
    ['a//double', 'empty path segment'],
    ['logs/x\0y', 'NUL'],
    [`files/${'x'.repeat(256)}`, 'over 255 bytes'],
    [`files/${'é'.repeat(128)}`, 'over 255 bytes'],
  ])('refuses %s (%s)', (key, why) => {
    expect(refusedKeyReason(key)).toContain(why);
    expect(isRefusedKey(key)).toBe(true);
  });

  it.each([
    'data/aws/ec2/i-1/1/raw',
    'data/a..b/c..d/e',
    '.hidden/x',
    'a b+c%20/ü.json',
    `files/${'x'.repeat(255)}`,
    `files/${'é'.repeat(127)}`,
  ])('accepts %s', (key) => {
    expect(refusedKeyReason(key)).toBeUndefined();
  });
});

describe('readManifest (the layout decision of clients)', () => {
  it.each([
    ['{"version":2,"partitions":["a"],"commitSeq":3}', 'v2'],
    ['{"version":1,"partitions":["a"]}', 'v1'],
    ['{"version":3,"partitions":[]}', 'ignored'],
    ['{"version":2}', 'ignored'],
    ['[]', 'ignored'],
    ['null', 'unparsable'],
    ['{"version":2,', 'unparsable'],
    ['<html></html>', 'unparsable'],
  ])('reads %s as %s', (body, kind) => {
    expect(readManifest(Buffer.from(body)).kind).toBe(kind);
  });
});
