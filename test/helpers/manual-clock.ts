/** A lock clock the test drives: time moves only when told, and the lock's heartbeats run as it passes. */
import type { LockClock } from '../../lambda/lib/lock-clock';

interface Beat {
  readonly every: number;
  next: number;
  readonly beat: () => Promise<void>;
  stopped: boolean;
}

/** Virtual time for a lock: `sleep` passes at once, `advance` runs every heartbeat due on the way, each awaited. */
export class ManualClock implements LockClock {
  private at: number;
  private readonly beats: Beat[] = [];

  constructor(start = Date.now()) {
    this.at = start;
  }

  now(): number {
    return this.at;
  }

  async sleep(ms: number): Promise<void> {
    this.at += ms;
  }

  every(ms: number, beat: () => Promise<void>): () => void {
    const entry: Beat = { every: ms, next: this.at + ms, beat, stopped: false };
    this.beats.push(entry);
    return () => {
      entry.stopped = true;
    };
  }

  /** Moves time on by `ms`, running each beat as its time comes, in order. */
  async advance(ms: number): Promise<void> {
    const end = this.at + ms;
    for (;;) {
      const due = this.beats.filter((b) => !b.stopped && b.next <= end).sort((a, b) => a.next - b.next)[0];
      if (!due) break;
      this.at = due.next;
      due.next += due.every;
      await due.beat();
    }
    this.at = end;
  }
}
