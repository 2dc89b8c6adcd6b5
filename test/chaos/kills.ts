/** Where the indexer is killed: right after the answer to a chosen S3 step of a publish, or after a random time. */
import { INDEXER_DIR, LOCK_KEY, SHARD_META_KEY } from '../../lambda/lib/names';
import type { FaultProxy, SeenRequest } from './fault-proxy';
import type { ChaosReport } from './report';
import type { Rng } from './rng';

/** Where publish records live, relative to a root. */
const PUBLISHING_DIR = `${INDEXER_DIR}publishing/`;

/** The S3 steps of a publish at which the indexer is killed right after its answer arrived. */
export const CRASH_STEPS = ['lock-taken', 'index-read', 'shard-written', 'manifest-written', 'index-written', 'lock-released'] as const;
export type CrashStep = (typeof CRASH_STEPS)[number];
/** The steps of a publish in the order it takes them, its publish record among them (the Lambda's finish table). */
export const PUBLISH_STEPS = [
  'index-read',
  'lock-taken',
  'record-written',
  'shard-written',
  'index-written',
  'manifest-written',
  'lock-released',
] as const;
export type PublishStep = (typeof PUBLISH_STEPS)[number];

/** The publish step a request the proxy answered completes, if any. */
export function stepOf(r: SeenRequest): PublishStep | undefined {
  const record = r.key.startsWith(PUBLISHING_DIR) || r.key.includes(`/${PUBLISHING_DIR}`);
  if (record) return r.method === 'PUT' && r.status < 300 ? 'record-written' : undefined;
  const last = r.key.slice(r.key.lastIndexOf('/') + 1);
  if (last === LOCK_KEY) return r.method === 'PUT' && r.status < 300 ? 'lock-taken' : r.method === 'DELETE' ? 'lock-released' : undefined;
  if (r.key.endsWith(SHARD_META_KEY))
    return r.method === 'PUT' && r.status < 300 ? 'manifest-written' : r.method === 'GET' ? 'index-read' : undefined;
  if (r.key.includes('_index/') && r.method === 'PUT' && r.status < 300) return 'shard-written';
  if (last === '.datastore-index.json')
    return r.method === 'PUT' && r.status < 300 ? 'index-written' : r.method === 'GET' ? 'index-read' : undefined;
  return undefined;
}

/** Arms kills of the indexer's processes during a run, counting them in the report and noting when each happened. */
export class Killer {
  /** When each kill happened (ms since the epoch). */
  readonly times: number[] = [];
  /** The crash step the next kill at a step waits for: the steps in turn, from a seeded start. */
  private stepTurn: number;

  constructor(
    private readonly rng: Rng,
    private readonly enabled: boolean,
    private readonly quiet: { readonly on: boolean },
    private readonly report: ChaosReport,
  ) {
    this.stepTurn = rng.int(CRASH_STEPS.length);
  }

  /** Arms a kill of `victim`: at a chosen S3 step (seen through its proxy) or after a random time. Returns the disarm. */
  arm(proxy: FaultProxy, victim: () => void, who: string): () => void {
    if (!this.enabled || this.quiet.on || !this.rng.chance(0.35)) return () => undefined;
    if (this.rng.chance(0.6)) {
      const step = CRASH_STEPS[this.stepTurn++ % CRASH_STEPS.length];
      proxy.onAnswered = (r) => {
        if (stepOf(r) === step) {
          proxy.onAnswered = undefined;
          this.count(`${who}@${step}`);
          victim();
        }
      };
      return () => (proxy.onAnswered = undefined);
    }
    const timer = setTimeout(() => {
      this.count(`${who}@random`);
      victim();
    }, 100 + this.rng.int(3000));
    return () => clearTimeout(timer);
  }

  private count(what: string): void {
    this.times.push(Date.now());
    this.report.kills[what] = (this.report.kills[what] ?? 0) + 1;
  }
}
