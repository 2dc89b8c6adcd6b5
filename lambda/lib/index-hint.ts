/** The listing hint of a heal: the keys of the index it reads anyway, given to a listing begun before the read. */
import type { LiveIndex } from './layouts/types';
import type { ListingHint } from './parallel-hint';

/** A hint promised to a listing now and given once the index is read (or given as none). */
export class PendingHint {
  readonly promise: Promise<ListingHint | undefined>;
  private give: (hint: ListingHint | undefined) => void = () => undefined;

  constructor() {
    this.promise = new Promise((resolve) => {
      this.give = resolve;
    });
  }

  /** Gives the keys of the index `live` resolves to, or none when it cannot be read. */
  from(live: Promise<LiveIndex>): void {
    live.then(
      (read) => this.give(indexHint(read)),
      () => this.give(undefined),
    );
  }

  /** Gives no hint: the listing splits as it would without one. Later calls change nothing. */
  none(): void {
    this.give(undefined);
  }
}

/** The hint an index read gives: its keys when it was read whole, none when it is not trusted (unreadable or held). */
export function indexHint(live: LiveIndex): ListingHint | undefined {
  if (live.state !== 'valid' || live.hold) return undefined;
  const { entries } = live.index;
  return { keys: { [Symbol.iterator]: () => entries.keys() }, count: entries.size };
}
