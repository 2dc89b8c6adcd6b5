/** The time a datastore lock runs on: the system's, or one a caller drives (a test, a simulation). */
import { sleep } from './concurrency';

/** What the lock asks of time: the instant, pauses, and a repeating beat. */
export interface LockClock {
  /** Milliseconds since the epoch, as `Date.now()`. */
  now(): number;
  /** Resolves after `ms` milliseconds. */
  sleep(ms: number): Promise<void>;
  /** Calls `beat` every `ms` milliseconds until the returned function is called; the beat never keeps the process alive. */
  every(ms: number, beat: () => Promise<void>): () => void;
}

/** The system's clock. */
export const systemClock: LockClock = {
  now: () => Date.now(),
  sleep,
  every(ms, beat) {
    const timer = setInterval(() => void beat(), ms);
    timer.unref();
    return () => clearInterval(timer);
  },
};
