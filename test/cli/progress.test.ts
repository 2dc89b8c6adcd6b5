/** What a person at a terminal sees while a long listing runs: the objects listed so far, never a frozen line. */
import { Progress } from '../../bin/cli/progress';
import { healRoot } from '../../lambda/lib/heal';
import { listScopes, sequentialLister } from '../../lambda/lib/list';
import { connectStore, seedDatastore, testStore } from '../helpers/s3';

/** A stand-in for a terminal: keeps what was written. */
function terminal(): { stream: NodeJS.WriteStream; text: () => string } {
  const chunks: string[] = [];
  const stream = { isTTY: true, write: (chunk: string) => chunks.push(chunk) > 0 } as unknown as NodeJS.WriteStream;
  return { stream, text: () => chunks.join('') };
}

describe('the listing progress', () => {
  it('hears the count of objects listed after each page, ending at every object seen', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'many', objects: 25 });
    const counts: number[] = [];
    const lister = (s: typeof store, prefix: string) => s.listPages({ prefix, maxKeys: 10 });

    const listing = await listScopes(connectStore(store.bucket), 'many/', lister, (n) => counts.push(n));

    expect(counts).toEqual([10, 20, 25]);
    expect(listing.objectsSeen).toBe(25);
    expect(seeded.expectedEntries()).toHaveLength(25);
  });

  it('is passed through by healRoot', async () => {
    const store = await testStore();
    const seeded = await seedDatastore(store, { prefix: 'heal', objects: 5 });
    const counts: number[] = [];

    await healRoot(connectStore(store.bucket), seeded.root, { mode: 'check', lister: sequentialLister, onListed: (n) => counts.push(n) });

    expect(counts.at(-1)).toBe(5);
  });

  it('shows the objects listed so far after the status, at most ten times a second', () => {
    const tty = terminal();
    const progress = new Progress(tty.stream);

    progress.status('Checking the index of s3://b/swamp…');
    progress.listed(1000, 10_000);
    progress.listed(2000, 10_050); // within 100 ms of the last: not drawn
    progress.listed(20_000, 10_200);

    const lines = tty.text().split('\r\x1b[2K');
    expect(lines).toEqual([
      'Checking the index of s3://b/swamp…',
      'Checking the index of s3://b/swamp… 1,000 objects listed',
      'Checking the index of s3://b/swamp… 20,000 objects listed',
    ]);
    progress.stop();
  });

  it('draws nothing when stderr is not a terminal', () => {
    const pipe = terminal();
    const progress = new Progress(pipe.stream, false);
    progress.status('Checking…');
    progress.listed(1000, 10_000);
    expect(pipe.text()).toBe('');
  });
});

describe('the download bar', () => {
  it('keeps its line from a later status, and follows a total that grows', () => {
    const tty = terminal();
    const progress = new Progress(tty.stream);

    progress.status('Healing the index of s3://b/swamp…');
    progress.update(1, 10);
    progress.status('Comparing the cache with the index…');
    progress.update(11, 12);
    progress.stop();

    expect(tty.text()).not.toContain('Comparing');
    expect(tty.text()).toContain('11/12 files');
  });
});
