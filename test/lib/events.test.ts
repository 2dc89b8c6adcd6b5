import { applyChanges, compareSequencers, decodeEventKey, isLater, latestChanges } from '../../lambda/lib/events';
import { datastoreIndex, encodeEventKey, indexEntry, objectChange } from '../helpers/factories';

describe('decodeEventKey', () => {
  it.each([
    ['data/a+b.txt', 'data/a b.txt'],
    ['a++b', 'a  b'],
    ['a%2Bb', 'a+b'],
    ['data%2Faws%2Fx', 'data/aws/x'],
    ['100%25.txt', '100%.txt'],
    ['%C3%BCn%C3%AF%2F%E6%97%A5%E6%9C%AC.txt', 'ünï/日本.txt'],
    ['a..b/c..d', 'a..b/c..d'],
    ['plain/key', 'plain/key'],
  ])('decodes %s as %s', (encoded, key) => {
    expect(decodeEventKey(encoded)).toBe(key);
  });

  it.each(['a b+c', '100% ü/日本 +x', 'a..b/c%2F..d', "~!*()'"])('undoes S3 event encoding of %s', (key) => {
    expect(decodeEventKey(encodeEventKey(key))).toBe(key);
  });
});

describe('compareSequencers', () => {
  it.each([
    ['0A', '9', 1],
    ['9', '10', -1], // as strings "9" > "10"; as padded hex 09 < 10
    ['F', '10', -1],
    ['0055AED6DCD90281E5', '55AED6DCD90281E6', -1],
    ['0055AED6DCD90281E5', '55AED6DCD90281E5', 0],
    ['ff', '0FF', 0],
    ['abc', 'ABB', 1],
    ['1', '1', 0],
  ])('compares %s with %s as %d', (a, b, sign) => {
    expect(Math.sign(compareSequencers(a, b))).toBe(sign);
    expect(Math.sign(compareSequencers(b, a))).toBe(-sign || 0);
  });
});

describe('isLater and latestChanges', () => {
  const created = objectChange('k', { kind: 'created', size: 5, sequencer: '0A' });
  const removed = objectChange('k', { kind: 'removed', sequencer: '9' });

  it('orders by sequencer, whatever the event times say', () => {
    const a = objectChange('k', { sequencer: '10', eventTime: '2026-01-01T00:00:00.000Z' });
    const b = objectChange('k', { sequencer: 'F', eventTime: '2026-12-01T00:00:00.000Z' });
    expect(isLater(a, b)).toBe(true);
    expect(isLater(b, a)).toBe(false);
  });

  it('falls back to event times without sequencers, a removal winning a tie', () => {
    const early = objectChange('k', { eventTime: '2026-01-01T00:00:00.000Z' });
    const late = objectChange('k', { kind: 'removed', eventTime: '2026-01-02T00:00:00.000Z' });
    expect(isLater(late, early)).toBe(true);
    expect(isLater(early, late)).toBe(false);
    const tieCreated = objectChange('k', { eventTime: '2026-01-01T00:00:00.000Z' });
    const tieRemoved = objectChange('k', { kind: 'removed', eventTime: '2026-01-01T00:00:00.000Z' });
    expect(isLater(tieRemoved, tieCreated)).toBe(true);
    expect(isLater(tieCreated, tieRemoved)).toBe(false);
  });

  it('keeps the latest change of each key whatever order they arrive in', () => {
    expect(latestChanges([created, removed]).get('k')).toBe(created);
    expect(latestChanges([removed, created]).get('k')).toBe(created);
  });

  it('collapses duplicates to one change per key', () => {
    const other = objectChange('other', { sequencer: '01' });
    const latest = latestChanges([created, other, removed, created, other, removed]);
    expect([...latest.keys()].sort()).toEqual(['k', 'other']);
    expect(latest.get('k')).toBe(created);
    expect(latest.get('other')).toBe(other);
  });

  it('groups by a custom key', () => {
    const latest = latestChanges([objectChange('p/a', { sequencer: '1' }), objectChange('p/a', { sequencer: '2', size: 9 })], (c) =>
      c.key.slice(2),
    );
    expect([...latest.keys()]).toEqual(['a']);
    expect(latest.get('a')!.size).toBe(9);
  });
});

describe('applyChanges', () => {
  const base = datastoreIndex(
    [
      indexEntry('same', { size: 5, sha256: 'aa', localMtime: 'm', custom: 1 }),
      indexEntry('grows', { size: 1, sha256: 'bb', custom: 2 }),
      indexEntry('goes', { size: 1 }),
    ],
    { extra: { clientVersion: 'x' } },
  );
  const changes = new Map([
    ['same', objectChange('same', { size: 5, eventTime: '2026-07-01T00:00:00.000Z' })],
    ['grows', objectChange('grows', { size: 8, eventTime: '2026-07-01T00:00:00.000Z' })],
    ['goes', objectChange('goes', { kind: 'removed' })],
    ['new', objectChange('new', { size: 3, eventTime: '2026-07-02T00:00:00.000Z' })],
    ['never-indexed', objectChange('never-indexed', { kind: 'removed' })],
  ]);

  it('adds, removes and resizes, counting each, and keeps untouched entries and extra fields', () => {
    const result = applyChanges(base, changes);
    expect({ added: result.added, removed: result.removed, resized: result.resized }).toEqual({ added: 1, removed: 1, resized: 1 });
    expect([...result.index.entries.keys()].sort()).toEqual(['grows', 'new', 'same']);
    expect(result.index.entries.get('same')).toBe(base.entries.get('same'));
    expect(result.index.entries.get('grows')).toEqual({ key: 'grows', size: 8, lastModified: '2026-07-01T00:00:00.000Z', custom: 2 });
    expect(result.index.entries.get('new')).toEqual({ key: 'new', size: 3, lastModified: '2026-07-02T00:00:00.000Z' });
    expect(result.index.extra).toEqual({ clientVersion: 'x' });
    // the input is not mutated
    expect([...base.entries.keys()]).toEqual(['same', 'grows', 'goes']);
  });

  it('is a no-op on a replay: zero counts and the very same index', () => {
    const once = applyChanges(base, changes).index;
    const again = applyChanges(once, changes);
    expect({ added: again.added, removed: again.removed, resized: again.resized }).toEqual({ added: 0, removed: 0, resized: 0 });
    expect(again.index).toBe(once);
  });

  it('applies the folded result of reordered, duplicated events as one', () => {
    const events = [
      objectChange('x', { kind: 'removed', sequencer: '03' }),
      objectChange('x', { size: 4, sequencer: '02' }),
      objectChange('x', { size: 6, sequencer: '04' }),
      objectChange('x', { size: 6, sequencer: '04' }),
      objectChange('y', { size: 1, sequencer: '01' }),
      objectChange('y', { kind: 'removed', sequencer: '0A' }),
    ];
    const result = applyChanges(datastoreIndex([indexEntry('y')]), latestChanges(events));
    expect([...result.index.entries.values()].map((e) => [e.key, e.size])).toEqual([['x', 6]]);
    expect({ added: result.added, removed: result.removed, resized: result.resized }).toEqual({ added: 1, removed: 1, resized: 0 });
  });
});
