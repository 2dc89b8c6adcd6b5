/**
 * Synthetic listings for the benchmark: pages of objects shaped like a swamp datastore, made on the fly
 * so that measuring the index build measures the library, not the generator.
 */
import type { Lister } from '../lambda/lib/list';
import type { ListPage } from '../lambda/lib/s3-types';
import { isoTime } from '../lambda/lib/list-xml';

const TYPES = ['aws/ec2', 'aws/iam-role', 'aws/s3', 'cloudflare/zone', 'gcp/compute', 'github/repo', 'k8s/deployment', 'k8s/pod'];
const WORKFLOWS = ['backup-verify', 'cost-report', 'drift-check', 'nightly-sync', 'patch-hosts', 'rotate-keys'];
const T0 = Date.UTC(2026, 4, 1, 12);

const hex = (n: number, width: number): string => n.toString(16).padStart(width, '0');

/**
 * The `i`-th of `count` synthetic relative keys, in S3 order as `i` grows: 70 % `data/<type>/<model>-<id>/<v>/raw`,
 * then 10 % `logs/<workflow>/run-<id>.log`, then 20 % `workflow-runs/<workflow>/run-<id>.json`.
 */
export function syntheticKey(i: number, count: number): string {
  const logs = Math.floor(count * 0.7);
  const runs = Math.floor(count * 0.8);
  const [start, end] = i < logs ? [0, logs] : i < runs ? [logs, runs] : [runs, count];
  const j = i - start;
  const n = end - start;
  if (i < logs) {
    const type = TYPES[Math.floor((j * TYPES.length) / n)];
    // Three versions of each object, side by side; ids grow with j, as a sorted listing shows them.
    return `data/${type}/${type.split('/')[1]}-${hex(Math.floor(j / 3) * 97 + 0x10000000, 12)}/${1 + (j % 3)}/raw`;
  }
  const workflow = WORKFLOWS[Math.floor((j * WORKFLOWS.length) / n)];
  return i < runs
    ? `logs/${workflow}/run-${hex(j * 131 + 0x10000000, 12)}.log`
    : `workflow-runs/${workflow}/run-${hex(j * 131 + 0x10000000, 12)}.json`;
}

/** A lister that yields `count` synthetic objects under `prefix`, 1,000 per page, as S3 would send them. */
export function syntheticLister(count: number, pageSize = 1000): Lister {
  return async function* (_store, prefix): AsyncGenerator<ListPage> {
    for (let start = 0; start < count; start += pageSize) {
      const objects: ListPage['objects'] = [];
      for (let i = start; i < Math.min(count, start + pageSize); i++) {
        objects.push({
          // A fresh string, as a parsed answer gives, not a slice of something bigger.
          key: Buffer.from(prefix + syntheticKey(i, count)).toString('latin1'),
          size: 64 + ((i * 7919) % 65536),
          // Seconds spread over 30 days: about one object in three shares its second (and, as read, its string) with another.
          lastModified: isoTime(new Date(T0 - Math.floor((i * 2.5) % 2_592_000) * 1000)),
          etag: ((i * 40503) >>> 0).toString(16).padStart(8, '0').repeat(4),
        });
      }
      yield { objects, prefixes: [], truncated: start + pageSize < count };
    }
  };
}
