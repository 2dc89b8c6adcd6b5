/** Small tools for concurrent work: a bounded map, a pause, and a turn of the event loop. */
/** Runs `work` over `items` with at most `limit` calls in flight; rejects on the first failure. */
export async function mapLimit<T, R>(items: Iterable<T>, limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const list = [...items];
  const results = new Array<R>(list.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < list.length) {
      const i = next++;
      results[i] = await work(list[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, list.length)) }, worker));
  return results;
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves once the event loop has run what is due: requests already asked for go out before the work that follows. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
