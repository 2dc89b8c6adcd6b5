/**
 * The confirmation of what a listing found in doubt. A listing is no snapshot: an object written or deleted
 * after it passed the key makes the index look wrong where it may be right, so S3 is asked again
 * (HeadObject) before a doubtful finding is acted on.
 */
import { mapLimit } from './concurrency';
import type { S3Store } from './s3';

/** Findings in doubt, keyed relative to the scope's base. */
export interface Doubtful {
  /** Keys whose object the listing may have seen wrongly there or gone: is there one now? */
  readonly keys: readonly string[];
  /** Keys whose object may be of this size now, whatever the listing saw: is it? */
  readonly sizes: ReadonlyMap<string, number>;
}

/** What S3 said of `Doubtful`. */
export interface Confirmed {
  /** The `keys` S3 holds an object at. */
  readonly there: ReadonlySet<string>;
  /** The keys of `sizes` S3 holds an object of that size at. */
  readonly sized: ReadonlySet<string>;
}

/** Asks S3 (HeadObject, `concurrency` at a time) which of the doubtful findings under `base` it holds now. */
export async function confirmDoubtful(store: S3Store, base: string, doubtful: Doubtful, concurrency: number): Promise<Confirmed> {
  const there = new Set<string>();
  const sized = new Set<string>();
  const asks: [key: string, size?: number][] = [...doubtful.keys.map((key): [string] => [key]), ...doubtful.sizes];
  await mapLimit(asks, concurrency, async ([key, size]) => {
    const head = await store.head(base + key);
    if (size === undefined) {
      if (head) there.add(key);
    } else if (head?.size === size) sized.add(key);
  });
  return { there, sized };
}
