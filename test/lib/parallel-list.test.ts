/**
 * parallelLister: the key space cut into slices listed at once must merge back into exactly what one
 * sequential ListObjectsV2 walk returns, key for key and in the same order, whatever the layout.
 * An in-memory store with S3's listing rules checks many layouts at scale; moto checks the real API.
 */
import type { ListOptions, ListPage } from '../../lambda/lib/s3-types';
import type { S3Store } from '../../lambda/lib/s3';
import { compareKeys, cutRest, extrapolate } from '../../lambda/lib/key-space';
import { healRoot } from '../../lambda/lib/heal';
import { isRefusedKey } from '../../lambda/lib/keys';
import { listScopes, sequentialLister } from '../../lambda/lib/list';
import type { ListingHint } from '../../lambda/lib/parallel-hint';
import { parallelLister } from '../../lambda/lib/parallel-list';
import { type SlotTurn, Slots } from '../../lambda/lib/parallel-slices';
import { connectStore, putObjects, readIndex, summarize, testStore } from '../helpers/s3';
import { sleep } from '../../support/sleep';

// ---------------------------------------------------------------------------------------------
// An in-memory store that lists as S3 does (code point order, Prefix, Delimiter, StartAfter, MaxKeys)
// ---------------------------------------------------------------------------------------------

interface MemoryStore {
  readonly store: S3Store;
  /** Requests made, delimiter listings (probes) counted apart. */
  readonly counts: { lists: number; probes: number; keysReturned: number; depth: number; mostAtOnce: number };
}

/**
 * An in-memory store. `latencyMs`: every answer takes exactly that long; otherwise 0 to 2 ms, drawn from a
 * generator seeded with `seed` (default 1). `counts.depth` is how many requests followed one another: each is
 * one deeper than the deepest answered when it was sent.
 */
function memoryStore(keys: Iterable<string>, options: { failAfter?: number; latencyMs?: number; seed?: number } = {}): MemoryStore {
  const sorted = [...new Set(keys)].sort(compareKeys);
  const latency = random(options.seed ?? 1);
  const counts = { lists: 0, probes: 0, keysReturned: 0, depth: 0, mostAtOnce: 0 };
  let answered = 0;
  let atOnce = 0;
  const firstAbove = (bound: string, inclusive: boolean): number => {
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = compareKeys(sorted[mid], bound);
      if (c < 0 || (c === 0 && !inclusive)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  async function* listPages({ prefix, delimiter, startAfter, maxKeys = 1000 }: ListOptions): AsyncGenerator<ListPage> {
    let i = firstAbove(prefix, true);
    if (startAfter !== undefined) i = Math.max(i, firstAbove(startAfter, false));
    for (;;) {
      if (delimiter) counts.probes++;
      else counts.lists++;
      if (options.failAfter !== undefined && counts.lists + counts.probes > options.failAfter) throw new Error('injected listing failure');
      const depth = answered + 1;
      counts.depth = Math.max(counts.depth, depth);
      counts.mostAtOnce = Math.max(counts.mostAtOnce, ++atOnce);
      // Answers arrive in any order, as they do from a real endpoint.
      await sleep(options.latencyMs ?? latency() * 2);
      atOnce--;
      answered = Math.max(answered, depth);
      const objects: ListPage['objects'] = [];
      const prefixes: string[] = [];
      while (i < sorted.length && sorted[i].startsWith(prefix) && objects.length + prefixes.length < maxKeys) {
        const key = sorted[i];
        const cut = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
        if (cut >= 0) {
          const common = key.slice(0, cut + delimiter!.length);
          prefixes.push(common);
          while (i < sorted.length && sorted[i].startsWith(common)) i++;
        } else {
          objects.push({ key, size: key.length, lastModified: '1970-01-01T00:00:00.000Z', etag: 'e' });
          i++;
        }
      }
      counts.keysReturned += objects.length;
      const truncated = i < sorted.length && sorted[i].startsWith(prefix);
      yield { objects, prefixes, truncated };
      if (!truncated) return;
    }
  }
  return { store: { listPages, bucket: 'memory', requests: {} } as unknown as S3Store, counts };
}

async function keysOf(pages: AsyncIterable<ListPage>): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of pages) for (const object of page.objects) keys.push(object.key);
  return keys;
}

/** A deterministic pseudo-random sequence, so a failing layout can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hex = (n: number, width = 8): string => Math.floor(n).toString(16).padStart(width, '0');

/** Keys that sort right around folder boundaries: `a` before `a-b`, `a.b`, `a/`, then `a/…`, `a0`. */
const BOUNDARY_KEYS = [
  'a',
  'a-b',
  'a.b',
  'a/',
  'a/x',
  'a/x/',
  'a/x/1',
  'a/x-1',
  'a/x.1',
  'a/x0',
  'a0',
  'a0/b',
  'a//double',
  'b/',
  'b',
  'b/c/d/e/f/g',
  'c/\u00e9t\u00e9',
  'c/\uff5e-fullwidth',
  'c/\ud83d\ude00-emoji',
  'c/\ue000-private',
  'c/~tilde',
  'c/ space',
  'z',
];

const layouts: Record<string, () => string[]> = {
  empty: () => [],
  'one key': () => ['only/one'],
  'boundary keys': () => BOUNDARY_KEYS.map((k) => `root/${k}`),
  'one huge folder beside tiny ones': () => {
    const r = random(1);
    const keys: string[] = [];
    for (let i = 0; i < 3000; i++) keys.push(`root/data/aws/ec2/ec2-${hex(r() * 2 ** 32)}/${1 + (i % 3)}/raw`);
    for (const tiny of ['audit', 'files', 'logs', 'telemetry', 'zz']) keys.push(`root/${tiny}/one.json`);
    return keys;
  },
  'many tiny folders': () => Array.from({ length: 1200 }, (_, i) => `root/f${hex(i * 7919, 6)}/x`),
  'a flat folder of counters': () => Array.from({ length: 2500 }, (_, i) => `root/obj/${String(i).padStart(9, '0')}`),
  'a flat folder of hashes': () => {
    const r = random(2);
    return Array.from({ length: 2500 }, () => `root/h/${hex(r() * 2 ** 32)}${hex(r() * 2 ** 32)}`);
  },
  'top-level objects between folders': () => {
    const keys: string[] = [];
    for (const top of ['a', 'c', 'e', 'g']) for (let i = 0; i < 300; i++) keys.push(`root/${top}/k${hex(i, 4)}`);
    for (const loose of ['.datastore-index.json', '_catalog.db', 'b', 'b.json', 'd-x', 'f', 'g', 'h']) keys.push(`root/${loose}`);
    return keys;
  },
  'a swamp-like datastore': () => {
    const r = random(3);
    const keys: string[] = ['root/_catalog.db', 'root/.datastore-sync-state.json'];
    const types = ['aws/ec2', 'aws/s3', 'gcp/gke', 'k8s/pod', 'github/repo'];
    for (let i = 0; i < 4000; i++) {
      const pick = r();
      if (pick < 0.7) keys.push(`root/data/${types[i % types.length]}/m-${hex(r() * 2 ** 32)}/${1 + (i % 2)}/raw`);
      else if (pick < 0.85) keys.push(`root/workflow-runs/wf-${i % 12}/run-${hex(r() * 2 ** 32)}.json`);
      else if (pick < 0.95) keys.push(`root/logs/wf-${i % 12}/run-${hex(r() * 2 ** 32)}.log`);
      else keys.push(`root/audit/2026-05-${String(1 + (i % 28)).padStart(2, '0')}/${hex(r() * 2 ** 32)}.json`);
    }
    keys.push('root/ns1/.namespace.json', 'root/ns1/data/x/y/z/raw', 'root/zz-last');
    return keys;
  },
};

describe('compareKeys', () => {
  it('orders keys by code point, as S3 orders their UTF-8 bytes', () => {
    // U+E000 sorts below U+1F600 by code point, above its surrogates by UTF-16 code unit
    expect(compareKeys('\ue000', '\ud83d\ude00')).toBeLessThan(0);
    expect(compareKeys('a/', 'a-b')).toBeGreaterThan(0);
    expect(compareKeys('a', 'a/')).toBeLessThan(0);
    expect(compareKeys('same', 'same')).toBe(0);
    const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');
    const sorted = [...BOUNDARY_KEYS].sort(compareKeys);
    expect(sorted).toEqual([...BOUNDARY_KEYS].sort((a, b) => Buffer.compare(utf8(a), utf8(b))));
  });
});

describe('extrapolate', () => {
  it('cuts past a page of run-named files only within their run, where files of the run can still be', () => {
    // GIVEN the last page of a folder of 4,000 files named run-<hash>.log
    const r = random(11);
    const all = Array.from({ length: 4000 }, () => `f/run-${hex(r() * 2 ** 32)}.log`).sort(compareKeys);
    const page = all.slice(3800, 3900);

    // WHEN the folder is cut past it into pieces of two such pages
    const bounds = extrapolate('f/', page, 2, 16);

    // THEN every bound but the page's last key stays within the run: none lists the empty space after it
    expect(bounds[0]).toBe(page[page.length - 1]);
    for (const bound of bounds) expect(bound.startsWith('f/run-')).toBe(true);
    expect(bounds.length).toBeLessThan(4);
  });
});

describe('cutRest', () => {
  it('cuts the rest of evenly spread names into pieces of about as many names, in order', () => {
    // GIVEN a page of names a quarter of the way through 4,000 hash-named folders
    const r = random(7);
    const all = Array.from({ length: 4000 }, () => `f/w-${hex(r() * 2 ** 32)}`).sort(compareKeys);
    const page = all.slice(1000, 1100);

    // WHEN the rest is cut into 6 pieces of at least half a page
    const bounds = cutRest('f/w-', page, 0.5, 6);

    // THEN there are 5 bounds, in order, after the page, each piece holding about a sixth of the rest
    expect(bounds).toHaveLength(5);
    expect([...bounds].sort(compareKeys)).toEqual(bounds);
    const edges = [page[page.length - 1], ...bounds, '\uffff'];
    for (let i = 0; i + 1 < edges.length; i++) {
      const held = all.filter((n) => compareKeys(n, edges[i]) > 0 && compareKeys(n, edges[i + 1]) <= 0).length;
      expect(held).toBeGreaterThan(2900 / 6 / 2);
      expect(held).toBeLessThan((2900 / 6) * 2);
    }
  });

  it('cuts nothing when what is left would not make two pieces of the smallest size', () => {
    const r = random(7);
    const all = Array.from({ length: 4000 }, () => `f/w-${hex(r() * 2 ** 32)}`).sort(compareKeys);
    expect(cutRest('f/w-', all.slice(3880, 3980), 0.5, 16)).toEqual([]);
    expect(cutRest('f/w-', all.slice(3700, 3800), 0.5, 16).length).toBeGreaterThan(0);
  });

  it('cuts only up to an end inside the names, into pieces of about as many names', () => {
    const r = random(7);
    const all = Array.from({ length: 4000 }, () => `f/w-${hex(r() * 2 ** 32)}`).sort(compareKeys);
    const page = all.slice(1000, 1100);
    const end = all[2999];

    const bounds = cutRest('f/w-', page, 0.5, 4, end);

    // 1,900 names left before the end, in 4 pieces; the last piece ends at the end, not at the folder's.
    expect(bounds).toHaveLength(3);
    const edges = [page[page.length - 1], ...bounds, end];
    for (let i = 0; i + 1 < edges.length; i++) {
      const held = all.filter((n) => compareKeys(n, edges[i]) > 0 && compareKeys(n, edges[i + 1]) <= 0).length;
      expect(held).toBeGreaterThan(1900 / 4 / 2);
      expect(held).toBeLessThan((1900 / 4) * 2);
    }
  });
});

describe('Slots', () => {
  it('serves the slice the consumer reads from first, then probes, then other slices, in order within each', async () => {
    const slots = new Slots(1);
    await slots.acquire();
    const served: string[] = [];
    const ask = (name: string, turn?: SlotTurn): Promise<void> => slots.acquire(turn).then(() => void served.push(name));
    const asked = [ask('slice 1'), ask('probe 1', 'probe'), ask('slice 2', 'slice'), ask('head', 'head'), ask('probe 2', 'probe')];
    for (let i = 0; i < asked.length; i++) {
      slots.release();
      await asked[[3, 1, 4, 0, 2][i]];
    }
    expect(served).toEqual(['head', 'probe 1', 'probe 2', 'slice 1', 'slice 2']);
  });

  it('frees a slot when nobody waits, and serves those who ask again after a queue ran dry', async () => {
    const slots = new Slots(2);
    await Promise.all([slots.acquire(), slots.acquire('head')]);
    const served: string[] = [];
    const waiting = slots.acquire('probe').then(() => void served.push('probe'));
    slots.release();
    await waiting;
    slots.release();
    slots.release();
    // Two free again: both asks are served at once.
    await Promise.all([slots.acquire('slice'), slots.acquire('probe')]);
    const third = slots.acquire('head').then(() => void served.push('head'));
    slots.release();
    await third;
    expect(served).toEqual(['probe', 'head']);
  });
});

describe('parallelLister against an in-memory S3', () => {
  for (const [name, layout] of Object.entries(layouts)) {
    it(`lists exactly the sequential listing, in order: ${name}`, async () => {
      // GIVEN a root laid out this way
      const keys = layout();
      const { store } = memoryStore(keys);
      const expected = await keysOf(sequentialLister(store, 'root/'));

      for (const [concurrency, pageSize] of [
        [1, 1000],
        [4, 7],
        [16, 50],
        [64, 13],
      ] as const) {
        // WHEN it is listed in slices
        const listed = await keysOf(parallelLister({ concurrency, pageSize })(store, 'root/'));
        // THEN every key comes back once, in S3's order
        expect(listed).toEqual(expected);
      }
    });
  }

  it('lists only the keys after startAfter, once each and in order, for a listing resumed', async () => {
    for (const [name, layout] of Object.entries(layouts)) {
      const { store } = memoryStore(layout());
      const expected = await keysOf(sequentialLister(store, 'root/'));
      for (const at of [0, Math.floor(expected.length / 3), expected.length - 1]) {
        const listed = await keysOf(parallelLister({ concurrency: 8, pageSize: 7, startAfter: expected[at] })(store, 'root/'));
        expect({ name, at, listed }).toEqual({ name, at, listed: expected.slice(at + 1) });
      }
    }
  });

  it('lists a bucket without prefix, where keys sort below and above the folders', async () => {
    const keys = [...layouts['boundary keys'](), ...BOUNDARY_KEYS, '!first', '\u{10ffff}last'];
    const { store } = memoryStore(keys);
    expect(await keysOf(parallelLister({ concurrency: 8, pageSize: 3 })(store, ''))).toEqual(await keysOf(sequentialLister(store, '')));
  });

  it('keeps every key of a skewed root within a small overhead of requests', async () => {
    // GIVEN 20,000 keys, mostly in one folder, listed 100 per page (200 pages sequentially)
    const r = random(4);
    const keys = Array.from({ length: 20_000 }, (_, i) => `root/${i % 20 === 0 ? `t${i % 7}` : 'data/aws'}/m-${hex(r() * 2 ** 32)}/raw`);
    const memory = memoryStore(keys);

    // WHEN it is listed in parallel
    const listed = await keysOf(parallelLister({ concurrency: 16, pageSize: 100 })(memory.store, 'root/'));

    // THEN it is complete, and what was read past slice ends and probed stays a fraction of the listing
    expect(listed).toEqual([...new Set(keys)].sort(compareKeys));
    expect(memory.counts.keysReturned).toBeLessThan(listed.length * 1.5);
    expect(memory.counts.lists + memory.counts.probes).toBeLessThan(2 * Math.ceil(listed.length / 100) + 20);
  });

  it('fans a big folder of folders out in few rounds one after another', async () => {
    // GIVEN 24,000 keys in 6 sub-folders each of 8 folders of data/ (the first holding half), beside small folders; 100 keys a page
    const r = random(5);
    const keys: string[] = [];
    for (let i = 0; i < 24_000; i++) keys.push(`root/data/c${i % 2 ? 0 : i % 8}/t${Math.floor(i / 8) % 6}/m-${hex(r() * 2 ** 32)}/raw`);
    for (let i = 0; i < 1_000; i++) keys.push(`root/${['audit', 'logs', 'workflow-runs'][i % 3]}/f${i % 10}/${hex(r() * 2 ** 32)}.json`);
    const memory = memoryStore(keys, { latencyMs: 5 });

    // WHEN it is listed with 16 requests at once (250 pages: at least 16 rounds)
    const listed = await keysOf(parallelLister({ concurrency: 16, pageSize: 100 })(memory.store, 'root/'));

    // THEN it is complete, and the requests that had to follow one another are not many more than that
    // (33 here; 82 when the half of data/ in its first folder stayed one slice until late)
    expect(listed).toEqual([...new Set(keys)].sort(compareKeys));
    expect(memory.counts.depth).toBeLessThanOrEqual(40);
  });

  it('cuts a wide folder left to one slice at the end of the listing into pieces, without a probe', async () => {
    // GIVEN 16 folders of 300 keys, the last with a sub-folder of 1,200 hash-named folders of 1 to 3 keys; 100 keys a page
    const r = random(6);
    const keys: string[] = [];
    for (let f = 0; f < 16; f++) for (let i = 0; i < 300; i++) keys.push(`root/f${hex(f, 2)}/k-${hex(r() * 2 ** 32)}.json`);
    for (let i = 0; i < 1200; i++) {
      const id = hex(r() * 2 ** 48, 12);
      for (let v = 1; v <= 1 + (i % 3); v++) keys.push(`root/f0f/wide/w-${id}/${v}/raw`);
    }
    const memory = memoryStore(keys, { latencyMs: 5 });

    // WHEN it is listed with 16 requests at once
    const listed = await keysOf(parallelLister({ concurrency: 16, pageSize: 100 })(memory.store, 'root/'));

    // THEN it is complete, and the wide folder's rest did not take a round trip a page
    expect(listed).toEqual([...new Set(keys)].sort(compareKeys));
    // (listed by one slice, a page a round trip, that rest alone would take more)
    expect(memory.counts.depth).toBeLessThanOrEqual(18);
  });

  it('stops listing when the consumer stops early', async () => {
    const memory = memoryStore(layouts['a flat folder of counters']());
    for await (const page of parallelLister({ concurrency: 8, pageSize: 10 })(memory.store, 'root/')) {
      expect(page.objects.length).toBeGreaterThan(0);
      break;
    }
    const made = memory.counts.lists + memory.counts.probes;
    await sleep(20);
    expect(memory.counts.lists + memory.counts.probes).toBe(made);
    expect(made).toBeLessThan(40);
  });

  it('fails the listing when a request fails, after its requests in flight settle', async () => {
    const memory = memoryStore(layouts['a swamp-like datastore'](), { failAfter: 12 });
    await expect(keysOf(parallelLister({ concurrency: 4, pageSize: 20 })(memory.store, 'root/'))).rejects.toThrow(
      'injected listing failure',
    );
  });

  it('refuses a concurrency or page size it cannot use, naming it', () => {
    expect(() => parallelLister({ concurrency: 16, hintedConcurrency: 8 })).toThrow(
      /once hinted .*no smaller than the concurrency \(16\), got 8/,
    );
    expect(() => parallelLister({ concurrency: 0 })).toThrow(/concurrency/);
    expect(() => parallelLister({ concurrency: 2.5 })).toThrow(/concurrency/);
    expect(() => parallelLister({ pageSize: 1001 })).toThrow(/page size/);
  });
});

describe('parallelLister with a hint', () => {
  /** The keys of `keys` under `root/`, relative to it, as an index of that root holds them. */
  const hintOf = (keys: readonly string[]): ListingHint => {
    const rel = keys.filter((k) => k.startsWith('root/')).map((k) => k.slice('root/'.length));
    return { keys: rel, count: rel.length };
  };

  /** A hint given once the consumer has taken its first page, as a heal's index read lands mid-listing. */
  async function keysWithLateHint(lister: ReturnType<typeof parallelLister>, store: S3Store, hint: ListingHint): Promise<string[]> {
    let give: (h: ListingHint) => void = () => undefined;
    const late = new Promise<ListingHint>((resolve) => {
      give = resolve;
    });
    const keys: string[] = [];
    for await (const page of lister(store, 'root/', late)) {
      for (const object of page.objects) keys.push(object.key);
      give(hint);
    }
    return keys;
  }

  for (const [name, layout] of Object.entries(layouts)) {
    it(`lists exactly the sequential listing, in order, with a true hint given at once or late: ${name}`, async () => {
      const keys = layout();
      const { store } = memoryStore(keys);
      const expected = await keysOf(sequentialLister(store, 'root/'));
      for (const [concurrency, pageSize] of [
        [1, 1000],
        [4, 7],
        [16, 50],
      ] as const) {
        const lister = parallelLister({ concurrency, pageSize });
        expect(await keysOf(lister(store, 'root/', Promise.resolve(hintOf(keys))))).toEqual(expected);
        expect(await keysWithLateHint(lister, store, hintOf(keys))).toEqual(expected);
      }
    });
  }

  it('lists every key once and in order when the hint is wrong: keys added and removed since, all in one slice', async () => {
    // GIVEN an index of 6,000 hash-named keys, and a root where, since, 2,000 keys were added between two of
    // them and the 1,500 that followed were removed
    const r = random(8);
    const indexed = Array.from({ length: 6000 }, () => `root/data/m-${hex(r() * 2 ** 32)}/raw`).sort(compareKeys);
    const added = Array.from({ length: 2000 }, (_, i) => `${indexed[3000]}-new/${hex(i, 4)}`);
    const now = [...indexed.slice(0, 3001), ...added, ...indexed.slice(4500)];
    const memory = memoryStore(now);
    const expected = [...now].sort(compareKeys);

    for (const [concurrency, pageSize] of [
      [4, 7],
      [16, 100],
      [64, 13],
    ] as const) {
      // WHEN it is listed with the index's keys as the hint, at once or once a page is in
      const lister = parallelLister({ concurrency, pageSize });
      // THEN every key comes back once, in S3's order, and no removed key comes back
      expect(await keysOf(lister(memory.store, 'root/', Promise.resolve(hintOf(indexed))))).toEqual(expected);
      expect(await keysWithLateHint(lister, memory.store, hintOf(indexed))).toEqual(expected);
    }
  });

  it('lists every key once and in order with an empty, absurd or failed hint', async () => {
    const keys = [...layouts['a swamp-like datastore'](), ...layouts['boundary keys']()];
    const { store } = memoryStore(keys);
    const expected = await keysOf(sequentialLister(store, 'root/'));
    const absurd: ListingHint[] = [
      { keys: [], count: 0 },
      { keys: [], count: Number.NaN },
      { keys: ['', '/', '\uffff', '\u{10ffff}', 'root/', '../x', 'zz', 'zz'], count: -5 },
      { keys: Array.from({ length: 5000 }, (_, i) => `elsewhere/${i}`), count: Number.POSITIVE_INFINITY },
      { keys: ['data/only-one'], count: 1e12 },
    ];
    for (const [concurrency, pageSize] of [
      [4, 7],
      [16, 50],
    ] as const) {
      const lister = parallelLister({ concurrency, pageSize });
      for (const hint of absurd) {
        expect(await keysOf(lister(store, 'root/', Promise.resolve(hint)))).toEqual(expected);
        expect(await keysWithLateHint(lister, store, hint)).toEqual(expected);
      }
      expect(await keysOf(lister(store, 'root/', Promise.resolve(undefined)))).toEqual(expected);
      expect(await keysOf(lister(store, 'root/', Promise.reject(new Error('the index did not parse'))))).toEqual(expected);
    }
  });

  it('lists a big flat folder in fewer requests one after another with a true hint than without', async () => {
    // GIVEN 20,000 hash-named keys in one folder, 100 keys a page (200 pages), 16 requests at once, 64 once hinted (the default)
    const r = random(9);
    const keys = Array.from({ length: 20_000 }, () => `root/obj/${hex(r() * 2 ** 32)}${hex(r() * 2 ** 32)}`);
    const blind = memoryStore(keys, { latencyMs: 5 });
    const hinted = memoryStore(keys, { latencyMs: 5 });
    const narrow = memoryStore(keys, { latencyMs: 5 });
    const lister = parallelLister({ concurrency: 16, pageSize: 100 });

    // WHEN it is listed blind, with its keys as the hint from the start, and so hinted with no more slots than blind
    const blindKeys = await keysOf(lister(blind.store, 'root/'));
    const hintedKeys = await keysOf(lister(hinted.store, 'root/', Promise.resolve(hintOf(keys))));
    const narrowLister = parallelLister({ concurrency: 16, hintedConcurrency: 16, pageSize: 100 });
    const narrowKeys = await keysOf(narrowLister(narrow.store, 'root/', Promise.resolve(hintOf(keys))));

    // THEN all are complete, and a hinted listing is about as deep as its pages over its requests in flight
    const expected = [...new Set(keys)].sort(compareKeys);
    expect(blindKeys).toEqual(expected);
    expect(hintedKeys).toEqual(expected);
    expect(narrowKeys).toEqual(expected);
    expect(hinted.counts.depth).toBeLessThan(blind.counts.depth);
    expect(blind.counts.mostAtOnce).toBeLessThanOrEqual(16);
    // (as many at once as slices of whole pages need, the fewest pages each that 64 slots allow)
    expect(hinted.counts.mostAtOnce).toBeGreaterThan(32);
    expect(hinted.counts.mostAtOnce).toBeLessThanOrEqual(64);
    expect(hinted.counts.depth).toBeLessThanOrEqual(200 / 64 + 4);
    expect(hinted.counts.probes).toBe(1);
    expect(narrow.counts.mostAtOnce).toBe(16);
    expect(narrow.counts.depth).toBeLessThanOrEqual(200 / 16 + 4);
    expect(narrow.counts.depth).toBeGreaterThan(hinted.counts.depth);
  });

  /**
   * Lists a swamp-like root of 4,000 keys, 100 keys a page, `latencyMs` a request, with its index's keys as
   * a hint that lands when `after` calls back, once the first probe (a folder page) is answered, as an index
   * read sent with the listing does; returns the keys listed and the probes sent.
   */
  async function listWithHintAfterProbe(
    latencyMs: number,
    after: (land: () => void) => void,
  ): Promise<{ listed: string[]; probes: number; expected: string[] }> {
    const keys = layouts['a swamp-like datastore']();
    const memory = memoryStore(keys, { latencyMs });
    let give: (hint: ListingHint) => void = () => undefined;
    const landing = new Promise<ListingHint>((resolve) => {
      give = resolve;
    });
    const store = Object.create(memory.store) as S3Store;
    store.listPages = (options) => {
      const pages = memory.store.listPages(options);
      if (!options.delimiter) return pages;
      return (async function* () {
        for await (const page of pages) {
          after(() => give(hintOf(keys)));
          yield page;
        }
      })();
    };
    const listed = await keysOf(parallelLister({ concurrency: 16, pageSize: 100 })(store, 'root/', landing));
    return { listed, probes: memory.counts.probes, expected: await keysOf(sequentialLister(memoryStore(keys).store, 'root/')) };
  }

  it('waits a little for a hint on its way rather than cut blind a round before it lands', async () => {
    // GIVEN 40 ms a request, and the hint landing just after the first probe is answered
    // WHEN the root is listed with that hint
    const { listed, probes, expected } = await listWithHintAfterProbe(40, (land) => setImmediate(land));

    // THEN every key comes back once and in order, and no slice was cut blind: the first probe was the only one
    expect(listed).toEqual(expected);
    expect(probes).toBe(1);
  });

  it('waits for a hint landing most of a round trip after the first probe: it still cuts before a blind round would', async () => {
    // GIVEN 200 ms a request, and the hint landing 120 ms after the first probe is answered
    // WHEN the root is listed with that hint
    const { listed, probes, expected } = await listWithHintAfterProbe(200, (land) => setTimeout(land, 120));

    // THEN every key comes back once and in order, and no slice was cut blind
    expect(listed).toEqual(expected);
    expect(probes).toBe(1);
  });

  it('cuts by a true hint into slices of whole pages: few requests beyond the pages, none deeper', async () => {
    // GIVEN 10,000 hash-named keys in one folder, 100 keys a page (100 pages: 3 and a bit per slot), 32 requests at once once hinted
    const r = random(10);
    const keys = Array.from({ length: 10_000 }, () => `root/obj/${hex(r() * 2 ** 32)}${hex(r() * 2 ** 32)}`);
    const hinted = memoryStore(keys, { latencyMs: 5 });

    // WHEN it is listed with its keys as the hint from the start
    const lister = parallelLister({ concurrency: 16, hintedConcurrency: 32, pageSize: 100 });
    const listed = await keysOf(lister(hinted.store, 'root/', Promise.resolve(hintOf(keys))));

    // THEN every key comes back once and in order, in about a request per page, as deep as 32 equal slices would go
    expect(listed).toEqual([...new Set(keys)].sort(compareKeys));
    expect(hinted.counts.lists).toBeLessThanOrEqual(112);
    expect(hinted.counts.keysReturned).toBeLessThanOrEqual(11_200);
    expect(hinted.counts.depth).toBeLessThanOrEqual(6);
  });
});

describe('parallelLister against moto', () => {
  let store: S3Store;
  const keys: string[] = [];

  beforeAll(async () => {
    // GIVEN a skewed root: one folder with most keys, tiny folders, objects at the top between
    // folders, keys around folder boundaries and unicode, and a neighbour root sharing its prefix
    store = await testStore({ bucketPrefix: 'parallel-list' });
    for (let i = 0; i < 180; i++) keys.push(`swamp/data/aws/ec2/ec2-${hex(i * 2654435761, 8)}/${1 + (i % 2)}/raw`);
    for (const tiny of ['audit/2026-05-01', 'files', 'logs/wf', 'outputs/aws/x/y', 'telemetry']) keys.push(`swamp/${tiny}/one.json`);
    for (const k of BOUNDARY_KEYS) keys.push(`swamp/${k}`);
    keys.push('swamp/.datastore-sync-state.json', 'swamp/_catalog.db', 'swamp/ns1/.namespace.json', 'swamp/ns1/data/a/b/c/raw');
    const objects: Record<string, string> = { 'swampy/outside': 'x', 'other/key': 'x' };
    for (const key of keys) objects[key] = `body of ${key}`;
    await putObjects(store, objects, 16);
  });

  it('lists exactly what a sequential listing does, in the same order', async () => {
    const expected = await keysOf(sequentialLister(store, 'swamp/'));
    expect(expected).toHaveLength(keys.length);
    for (const [concurrency, pageSize] of [
      [16, 1000],
      [16, 9],
      [5, 4],
    ] as const) {
      expect(await keysOf(parallelLister({ concurrency, pageSize })(store, 'swamp/'))).toEqual(expected);
    }
  });

  it('gives listScopes the same scopes, sizes and times as a sequential listing', async () => {
    const sequential = await listScopes(store, 'swamp/', sequentialLister);
    const parallel = await listScopes(store, 'swamp/', parallelLister({ concurrency: 8, pageSize: 6 }));
    expect([...parallel.scopes.keys()].sort()).toEqual([...sequential.scopes.keys()].sort());
    for (const [scope, objects] of sequential.scopes) expect([...parallel.scopes.get(scope)!.values()]).toEqual([...objects.values()]);
    expect(parallel.objectsSeen).toBe(sequential.objectsSeen);
  });

  it('is what healRoot lists with by default, publishing the index a sequential listing gives', async () => {
    // GIVEN what a sequential listing says the root's own index must hold
    const root = { bucket: store.bucket, prefix: 'swamp' };
    const listing = await listScopes(store, 'swamp/', sequentialLister);
    // (keys clients refuse, such as `a//double`, are never indexed)
    const expected = summarize(listing.scopes.get('')).filter((row) => !isRefusedKey(row.key));

    // WHEN the root is repaired with the default lister
    const healer = connectStore(store.bucket);
    await healRoot(healer, root, { mode: 'repair' });

    // THEN its index holds exactly that, and the listing sent a probe beside its first page (a sequential one never does);
    // a root this small fits in that page, so it is not cut into slices
    expect(summarize(await readIndex(store, 'swamp/.datastore-index.json'))).toEqual(expected);
    expect(healer.requests.ListObjectsV2).toBeGreaterThan(1);
  });
});

describe('parallelLister window', () => {
  /** 40 folders of 100 keys: 400 pages of 10. */
  const windowRoot = (): string[] => {
    const all: string[] = [];
    for (let f = 0; f < 40; f++) for (let i = 0; i < 100; i++) all.push(`root/f-${hex(f, 2)}/k-${hex(i, 4)}`);
    return all;
  };

  /** Folders of keys, listed in pages of 10 by 8 requests at once for a consumer that takes its time. */
  async function aheadOf(window: number): Promise<{ keys: string[]; expected: string[]; maxAheadPages: number }> {
    const all = windowRoot();
    const { store, counts } = memoryStore(all);
    const pace = memoryStore(['one']).store;
    const keys: string[] = [];
    let maxAheadPages = 0;
    for await (const page of parallelLister({ concurrency: 8, pageSize: 10, window })(store, 'root/')) {
      for (const object of page.objects) keys.push(object.key);
      maxAheadPages = Math.max(maxAheadPages, (counts.keysReturned - keys.length) / 10);
      // A slow consumer: each page waits for its own answer of the store (0 to 2 ms).
      for await (const _ of pace.listPages({ prefix: 'one' })) break;
    }
    return { keys, expected: [...all].sort(compareKeys), maxAheadPages };
  }

  it('holds at most about a window of pages ahead of a slow consumer, and still merges every key in order', async () => {
    const { keys, expected, maxAheadPages } = await aheadOf(4);
    const unbounded = await aheadOf(100_000);
    expect(keys).toEqual(expected);
    expect(unbounded.keys).toEqual(expected);
    // Of the root's 400 pages: a window and what slices read past their ends, where without it nearly all.
    expect(maxAheadPages).toBeLessThan(100);
    expect(unbounded.maxAheadPages).toBeGreaterThan(200);
  });

  it('ends at once when the consumer stops while slices wait for the window', async () => {
    const all = windowRoot();
    const { store } = memoryStore(all);
    const taken: string[] = [];
    const lister = parallelLister({ concurrency: 8, pageSize: 10, window: 2 })(store, 'root/');
    // The window fills while the consumer takes a few pages; stopping must not wait for a wake-up that never comes.
    for await (const page of lister) {
      taken.push(...page.objects.map((o) => o.key));
      if (taken.length < 50) continue;
      // Every request answered meanwhile: each slice now waits for the window, with nothing in flight.
      await sleep(30);
      break;
    }
    expect(taken).toEqual([...all].sort(compareKeys).slice(0, 50));
  });

  it('keeps a windowed listing parallel for a consumer that keeps up: its requests follow one another no deeper than without a window', async () => {
    const all = windowRoot();
    const depthOf = async (window: number): Promise<number> => {
      const { store, counts } = memoryStore(all, { latencyMs: 1 });
      expect(await keysOf(parallelLister({ concurrency: 8, pageSize: 10, window })(store, 'root/'))).toEqual([...all].sort(compareKeys));
      return counts.depth;
    };
    const unbounded = await depthOf(100_000);
    const windowed = await depthOf(16);
    // Of the root's 400 pages, one after another would be 400 deep.
    expect(windowed).toBeLessThan(Math.max(2 * unbounded, 100));
  });

  it('cuts a wide folder of hash-named sub-folders for a windowed listing, though a probe sees only the start of it', async () => {
    // 3,000 ids of 12 hex digits under one folder, each a folder of versions, beside two small folders: a
    // probe's page of 10 sub-folders covers 2 of the folder's 600 pages.
    const next = random(7);
    const all = ['root/a/x', 'root/z/y'];
    for (let i = 0; i < 3000; i++) {
      const id = Math.floor(((i + next()) / 3000) * 2 ** 48);
      for (const v of [1, 2]) all.push(`root/data/m/m-${hex(id, 12)}/${v}/raw`);
    }
    const { store, counts } = memoryStore(all, { latencyMs: 1 });
    expect(await keysOf(parallelLister({ concurrency: 8, pageSize: 10, window: 16 })(store, 'root/'))).toEqual([...all].sort(compareKeys));
    // Page after page would be about 600 deep.
    expect(counts.depth).toBeLessThan(200);
  });
});
