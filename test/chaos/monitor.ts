/**
 * The invariant checked while a chaos run runs (and drains): an entry a client published never vanishes
 * from its root's truth, not even for a moment. Client fields found replaced are logged with the
 * indexer's last writes (the final checks count them).
 */
import { SHARD_META_KEY } from '../../lambda/lib/names';
import { sleep } from '../../support/sleep';
import { readTruth } from './clients';
import { type Cast, type ChaosRun, LAYOUT_OF, ROOTS } from './setup';

/** A running check; `stop()` ends it after its current round. */
export interface Monitor {
  stop(): Promise<void>;
}

/** Reads each root's truth every 250 ms and reports every published entry it no longer holds. */
export function startMonitor(run: ChaosRun, cast: Cast): Monitor {
  const finished = { on: false };
  const fieldLoss = new Set<string>();
  const loop = (async () => {
    while (!finished.on) {
      for (const root of ROOTS) await checkRoot(run, cast, root, fieldLoss);
      await sleep(250);
    }
  })();
  return {
    stop: async () => {
      finished.on = true;
      await loop;
    },
  };
}

/** One look at `root`: entries published before the read must be in it, as the client wrote them. */
async function checkRoot(run: ChaosRun, cast: Cast, root: string, fieldLoss: Set<string>): Promise<void> {
  const { report, log, requests } = run;
  const { published } = cast;
  const started = Date.now();
  const due = [...published.values()].filter((p) => p.root === root && p.at < started);
  let truth: Awaited<ReturnType<typeof readTruth>>;
  try {
    truth = await readTruth(run.direct, `${root}/`, LAYOUT_OF[root]);
  } catch {
    return;
  }
  if (truth.problem) {
    report.vanished.push(`${root}: ${truth.problem}`);
    return;
  }
  if (LAYOUT_OF[root] !== 'monolith') for (const p of await listedPartitions(run, root)) cast.listedPartitions.get(root)?.add(p);
  for (const p of due) {
    report.entriesChecked++;
    const e = truth.entries.get(p.rel);
    if (!e && published.get(`${root}/${p.rel}`) === p) {
      report.vanished.push(`${root}/${p.rel} (${LAYOUT_OF[root]}) missing at ${new Date().toISOString()}`);
    }
    if (e && e.size === p.entry.size && e.sha256 !== p.entry.sha256 && published.get(`${root}/${p.rel}`) === p && !fieldLoss.has(p.rel)) {
      fieldLoss.add(p.rel);
      log(
        `client fields of ${root}/${p.rel} gone at ${new Date().toISOString()}: ${JSON.stringify(e)} (client wrote ${JSON.stringify(p.entry)}); last indexer writes:\n    ${requests
          .filter((r) => r.write)
          .slice(-8)
          .map((r) => r.line)
          .join('\n    ')}`,
      );
    }
  }
}

/** The partitions `root`'s manifest lists now (none when it is absent or does not parse). */
export async function listedPartitions(run: ChaosRun, root: string): Promise<string[]> {
  const meta = await run.direct.get(`${root}/${SHARD_META_KEY}`).catch(() => undefined);
  if (!meta) return [];
  try {
    const partitions = (JSON.parse(meta.body.toString('utf8')) as { partitions?: unknown }).partitions;
    return Array.isArray(partitions) ? partitions.filter((p): p is string => typeof p === 'string') : [];
  } catch {
    return [];
  }
}
