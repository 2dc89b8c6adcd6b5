/** The datastore locks one program holds, so that an interrupted command can release them before it exits. */

/** A lock as the registry knows it: something to release. */
export interface Releasable {
  release(): Promise<void>;
}

/** The locks held, and the takes and releases still in flight, of one program (by default the process: `processLocks`). */
export class HeldLocks {
  readonly held = new Set<Releasable>();
  /**
   * Takes and releases still in flight: a take whose write S3 has already applied holds the lock although it
   * is not yet in `held`, and a release under way is no longer there; an interrupted command waits for both.
   */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Set while the program is releasing its locks to exit: a take that lands then is released at once. */
  closing = false;
  /**
   * Each lock's last release by this program, by `s3://bucket/key`, and when the run of holds it ended
   * began (holds taken back each within a client's turn of the last): a take soon after may leave clients a turn first.
   */
  readonly released = new Map<string, { readonly at: number; readonly streakFrom: number }>();

  /** Follows `work` (a take or a release) until it settles. */
  track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    const done = (): void => void this.inFlight.delete(work);
    work.then(done, done);
    return work;
  }

  /** Releases every lock held, waiting for takes and releases in flight, at most `timeoutMs`; returns how many were released. */
  async releaseAll(timeoutMs: number): Promise<number> {
    this.closing = true;
    let released = 0;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    const drain = async (): Promise<void> => {
      while (this.held.size > 0 || this.inFlight.size > 0) {
        const locks = [...this.held];
        released += locks.length;
        await Promise.allSettled([...locks.map((lock) => lock.release()), ...this.inFlight]);
      }
    };
    await Promise.race([drain(), bound]);
    clearTimeout(timer);
    this.closing = false;
    return released;
  }
}

/** The locks of this process: what `releaseHeldLocks` releases. */
export const processLocks = new HeldLocks();
