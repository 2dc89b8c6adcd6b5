/** What a person at a terminal sees while the command works: a status line, then a progress bar; nothing when stderr is not a TTY. */
import { Presets, SingleBar } from 'cli-progress';

/** Live feedback on stderr, shown only when stderr is a terminal; notes are always written. */
export class Progress {
  private bar: SingleBar | undefined;
  private statusShown = false;
  private statusText = '';
  private listedShownAt = 0;

  constructor(
    private readonly out: NodeJS.WriteStream = process.stderr,
    /** @default true when `out` is a TTY */
    readonly live = out.isTTY === true,
  ) {}

  /** Shows a one-line status (e.g. "Healing …") until the next output replaces it; the download bar, once shown, keeps the line. */
  status(text: string): void {
    this.statusText = text;
    this.listedShownAt = 0;
    if (!this.live || this.bar) return;
    this.clearStatus();
    this.out.write(text);
    this.statusShown = true;
  }

  /** Adds the objects listed so far to the status line, at most ten times a second. */
  listed(objects: number, now = Date.now()): void {
    if (!this.live || this.bar || now - this.listedShownAt < 100) return;
    this.listedShownAt = now;
    this.clearStatus();
    this.out.write(`${this.statusText} ${objects.toLocaleString('en-US')} ${objects === 1 ? 'object' : 'objects'} listed`);
    this.statusShown = true;
  }

  /** Moves the download bar to `done` of `total` files, starting it on first use. */
  update(done: number, total: number): void {
    if (!this.live) return;
    if (!this.bar) {
      this.clearStatus();
      this.bar = new SingleBar(
        {
          stream: this.out,
          format: 'Pulling {bar} {value}/{total} files | {eta_formatted} left',
          clearOnComplete: true,
          hideCursor: true,
          // The time left from the rate over the last 200 files, not 10: downloads finish in bursts of --concurrency.
          etaBuffer: 200,
        },
        Presets.shades_classic,
      );
      this.bar.start(total, 0);
    } else if (this.bar.getTotal() !== total) {
      this.bar.setTotal(total);
    }
    this.bar.update(done);
  }

  /** Writes a line on stderr (TTY or not), keeping the live display out of its way. */
  note(line: string): void {
    const bar = this.bar;
    if (bar) bar.stop();
    this.clearStatus();
    this.out.write(`${line}\n`);
    this.bar = undefined;
  }

  /** Removes the bar or status line. */
  stop(): void {
    this.bar?.stop();
    this.bar = undefined;
    this.clearStatus();
  }

  private clearStatus(): void {
    if (!this.statusShown) return;
    this.out.write('\r\x1b[2K');
    this.statusShown = false;
  }
}
