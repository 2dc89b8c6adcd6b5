/** The heal run every step of a heal carries, and the one confirmation of what a listing found in doubt. */
import { confirmDoubtful } from '../../lambda/lib/confirm';
import { HealRun } from '../../lambda/lib/heal-run';
import type { S3Store } from '../../lambda/lib/s3';

/** A store that answers HeadObject from `sizes` (relative to nothing: full keys), counting the requests. */
function headStore(sizes: Record<string, number>): { store: S3Store; asked: string[] } {
  const asked: string[] = [];
  const head = async (key: string) => {
    asked.push(key);
    const size = sizes[key];
    return size === undefined ? undefined : { size, lastModified: new Date(0), etag: '"e"' };
  };
  return { store: { bucket: 'memory', head } as unknown as S3Store, asked };
}

describe('confirmDoubtful', () => {
  it('says which doubtful keys S3 holds, and which at the size asked, asking once per question under the base', async () => {
    const { store, asked } = headStore({ 'p/there': 1, 'p/same': 5, 'p/other': 6 });
    const sizes = new Map([
      ['same', 5],
      ['other', 5],
      ['absent', 5],
    ]);

    const confirmed = await confirmDoubtful(store, 'p/', { keys: ['there', 'gone'], sizes }, 2);

    expect([...confirmed.there]).toEqual(['there']);
    expect([...confirmed.sized]).toEqual(['same']);
    expect(asked.sort()).toEqual(['p/absent', 'p/gone', 'p/other', 'p/same', 'p/there']);
  });

  it('asks nothing when nothing is in doubt', async () => {
    const { store, asked } = headStore({});
    const confirmed = await confirmDoubtful(store, '', { keys: [], sizes: new Map() }, 16);
    expect(confirmed.there.size + confirmed.sized.size).toBe(0);
    expect(asked).toEqual([]);
  });
});

describe('HealRun', () => {
  const { store } = headStore({});
  const root = { bucket: 'memory', prefix: 'r' };

  it('heals the root, or the namespace asked for, under its key prefix', () => {
    expect(new HealRun(store, root, { mode: 'check' })).toMatchObject({ target: { root }, base: 'r/' });
    expect(new HealRun(store, root, { mode: 'check', namespace: 'ns' })).toMatchObject({
      target: { root, namespace: 'ns' },
      base: 'r/ns/',
    });
    expect(() => new HealRun(store, root, { mode: 'check', namespace: 'a/b' })).toThrow(/is not a namespace name/);
  });

  it('dates its listing from the listing given, and confirms what was written since its start less the clock skew', () => {
    const listing = { scopes: new Map(), shardPartitions: new Map(), objectsSeen: 0, startedAt: 1_000_000, listingMs: 0 };
    expect(new HealRun(store, root, { mode: 'check', listing }).since).toBe(1_000_000 - 300_000);
    expect(new HealRun(store, root, { mode: 'check', clockSkewMs: 0 }, 42).since).toBe(42);
  });

  it('hears each publish event both as the heal and as the publish options were told to', () => {
    const heard: string[] = [];
    const run = new HealRun(store, root, {
      mode: 'repair',
      onEvent: (scope, event) => heard.push(`${scope}:${event.event}`),
      publish: { maxAttempts: 3, onEvent: (event) => heard.push(`publish:${event.event}`) },
    });

    const options = run.publishOptions({ root, namespace: 'ns' });
    options.onEvent?.({ event: 'held', reason: 'a test' });

    expect(options.maxAttempts).toBe(3);
    expect(heard).toEqual(['s3://memory/r#ns:held', 'publish:held']);
  });
});
